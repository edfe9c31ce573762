//! The cursor returned by [`Db::iter`](crate::Db::iter).

use crate::db::Db;
use crate::error::Result;

/// A weakly consistent cursor over all records, shard by shard (see
/// [`Db::iter`](crate::Db::iter)). Yields owned `(key, value)` pairs.
pub struct Iter<'a> {
    db: &'a Db,
    /// Held while `offsets` is in use: the records they name stay in place.
    pin: Option<crate::epoch::Guard<'a>>,
    next_shard: usize,
    offsets: Vec<u64>,
    pos: usize,
    failed: bool,
}

impl<'a> Iter<'a> {
    pub(crate) fn new(db: &'a Db) -> Iter<'a> {
        Iter { db, pin: None, next_shard: 0, offsets: Vec::new(), pos: 0, failed: false }
    }
}

impl std::fmt::Debug for Iter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iter").field("shard", &self.next_shard).field("pos", &self.pos).finish()
    }
}

impl Iterator for Iter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        while self.pos == self.offsets.len() {
            self.pin = None;
            let shard = self.db.shards().get(self.next_shard)?;
            self.next_shard += 1;
            // Copy the shard's offsets under its lock (a consistent snapshot of that shard);
            // the pin keeps the records in place after the lock is released.
            self.pin = Some(self.db.pin());
            let snapshot = shard.writer(self.db.ctx()).and_then(|w| w.live_offsets());
            match snapshot {
                Ok(v) => {
                    self.offsets = v;
                    self.pos = 0;
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let off = self.offsets[self.pos];
        self.pos += 1;
        let item = self.db.pair_at(off);
        self.failed = item.is_err();
        Some(item)
    }
}
