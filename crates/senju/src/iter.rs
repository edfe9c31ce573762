//! The cursor returned by [`Db::iter`](crate::Db::iter).

use crate::db::Db;
use crate::epoch::Reading;
use crate::error::Result;

/// A weakly consistent cursor over all records, shard by shard (see
/// [`Db::iter`](crate::Db::iter)). Yields owned `(key, value)` pairs.
///
/// It holds an epoch pin between items (the records of the shard it is in stay in place),
/// so it stays on the thread that made it (it is not `Send`), and that thread cannot
/// [`rebuild`](crate::Db::rebuild) or [`close`](crate::Db::close) the database while it
/// holds it (`StorageError::Reentrant`). After a `close` by another thread its next item is
/// `Err(Closed)`. [`Cursor`] has none of these limits.
pub struct Iter<'a> {
    db: &'a Db,
    /// Held while `offsets` is in use: the records they name stay in place. The mark makes
    /// a `rebuild` by this thread fail instead of waiting for this pin.
    pin: Option<(crate::epoch::Guard<'a>, Reading)>,
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
        if self.db.is_closed() {
            // Let go of the pin at once: `close` on another thread waits for it.
            self.pin = None;
            self.failed = true;
            return Some(Err(crate::error::StorageError::Closed));
        }
        while self.pos == self.offsets.len() {
            self.pin = None;
            let shard = self.db.shards().get(self.next_shard)?;
            self.next_shard += 1;
            // Copy the shard's offsets under its lock (a consistent snapshot of that shard);
            // the pin keeps the records in place after the lock is released.
            let snapshot = self.db.pin_open().and_then(|pin| {
                self.pin = Some((pin, Reading::mark()));
                self.db.ctx().region.check_fork()?;
                shard.writer(self.db.ctx())?.live_offsets()
            });
            match snapshot {
                Ok(v) => {
                    self.offsets = v;
                    self.pos = 0;
                }
                Err(e) => {
                    self.pin = None;
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let off = self.offsets[self.pos];
        self.pos += 1;
        let item = self.db.pair_at(off);
        if item.is_err() {
            // Nothing more comes: let go of the pin, which holds back rebuilds and `close`.
            self.pin = None;
            self.failed = true;
        }
        Some(item)
    }
}

/// An owned, resumable scan over all keys, for callers that cannot keep a borrow of the
/// [`Db`] between steps (language bindings that release their interpreter lock per chunk,
/// command-line tools printing page by page). Get one from [`Db::cursor`].
///
/// It borrows nothing, holds no lock and no epoch pin between calls, and is not tied to a
/// thread: it may be moved to another thread between calls. Each shard's keys are copied
/// under that shard's lock when the scan reaches it (memory for one shard's keys at a time);
/// values are read when they are handed out, so they are current at that moment.
///
/// Weakly consistent: a key present for the whole scan is yielded exactly once; a key set or
/// removed during the scan may or may not be. [`next_pairs`](Cursor::next_pairs) skips keys
/// removed since their shard was copied; [`next_keys`](Cursor::next_keys) does not look.
///
/// ```
/// let db = senju::Db::memory()?;
/// for i in 0..1000u32 {
///     db.set(&i.to_be_bytes(), b"v")?;
/// }
/// let mut cursor = db.cursor();
/// let mut seen = 0;
/// loop {
///     let chunk = cursor.next_pairs(&db, 100)?;
///     if chunk.is_empty() {
///         break;
///     }
///     seen += chunk.len();
/// }
/// assert_eq!(seen, 1000);
/// # Ok::<(), senju::Error>(())
/// ```
#[derive(Debug)]
pub struct Cursor {
    /// The salt of the database it scans (a cursor must be used with the `Db` it came from).
    salt: u64,
    next_shard: usize,
    keys: std::collections::VecDeque<Vec<u8>>,
}

impl Cursor {
    pub(crate) fn new(db: &Db) -> Cursor {
        Cursor { salt: db.ctx().salt, next_shard: 0, keys: Default::default() }
    }

    /// Whether the scan has handed out every key (true once the last one is out, or once a
    /// call came back empty).
    pub fn is_done(&self) -> bool {
        self.keys.is_empty() && self.next_shard == usize::MAX
    }

    /// Up to `max` more keys (at least one unless the scan is over: an empty `Vec` means the
    /// end). `db` must be the database the cursor came from.
    ///
    /// # Panics
    ///
    /// If `db` is not the database that made this cursor.
    pub fn next_keys(&mut self, db: &Db, max: usize) -> Result<Vec<Vec<u8>>> {
        self.fill(db)?;
        let n = max.max(1).min(self.keys.len());
        let keys = self.keys.drain(..n).collect();
        self.pass_empty_shards(db);
        Ok(keys)
    }

    /// Up to `max` more `(key, value)` pairs (an empty `Vec` means the end). Keys removed
    /// since their shard was copied are skipped.
    ///
    /// # Panics
    ///
    /// If `db` is not the database that made this cursor.
    pub fn next_pairs(&mut self, db: &Db, max: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.next_pairs_within(db, max, usize::MAX)
    }

    /// Up to `max` more `(key, value)` pairs, as [`next_pairs`](Self::next_pairs), but no
    /// more once the pairs taken hold `max_bytes` of keys and values: memory for a chunk is
    /// bounded by `max_bytes` plus one pair, however large the values (a binding's scan of
    /// values up to 1 GiB each should not copy hundreds at once). At least one pair unless
    /// the scan is over. A call that fails (a value that cannot be copied, say) hands out
    /// nothing, and the next call starts where it started: the scan loses no key.
    ///
    /// # Panics
    ///
    /// If `db` is not the database that made this cursor.
    pub fn next_pairs_within(
        &mut self,
        db: &Db,
        max: usize,
        max_bytes: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let max = max.max(1);
        let mut out = Vec::with_capacity(max.min(1024));
        let mut bytes = 0usize;
        while out.len() < max && bytes < max_bytes {
            if let Err(e) = self.fill(db) {
                self.give_back(out);
                return Err(e);
            }
            let Some(key) = self.keys.front() else { break };
            match db.get(key) {
                Ok(found) => {
                    let key = self.keys.pop_front().expect("looked at above");
                    if let Some(value) = found {
                        bytes = bytes.saturating_add(key.len() + value.len());
                        out.push((key, value));
                    }
                }
                Err(e) => {
                    self.give_back(out);
                    return Err(e);
                }
            }
        }
        self.pass_empty_shards(db);
        Ok(out)
    }

    /// Once every copied key is handed out, moves past the shards that hold no record now
    /// (their count, read without a lock) and marks the scan over if no shard is left, so
    /// that [`is_done`](Self::is_done) says so as soon as the last key is out. A shard passed
    /// here may get records later, as a scan may miss keys set meanwhile; a key present for
    /// the whole scan keeps its shard from being passed.
    fn pass_empty_shards(&mut self, db: &Db) {
        if !self.keys.is_empty() || self.next_shard == usize::MAX {
            return;
        }
        let shards = db.shards();
        while shards.get(self.next_shard).is_some_and(|s| s.len() == 0) {
            self.next_shard += 1;
        }
        if self.next_shard >= shards.len() {
            self.next_shard = usize::MAX;
        }
    }

    /// Puts the keys of `pairs`, taken by a call that then failed, back at the front of the
    /// queue in their order: the next call hands them out again (a failed call hands out
    /// nothing, and the scan loses no key).
    fn give_back(&mut self, pairs: Vec<(Vec<u8>, Vec<u8>)>) {
        for (key, _) in pairs.into_iter().rev() {
            self.keys.push_front(key);
        }
    }

    /// Copies the keys of the next non-empty shard when none are left.
    fn fill(&mut self, db: &Db) -> Result<()> {
        assert_eq!(self.salt, db.ctx().salt, "senju::Cursor used with a different database");
        while self.keys.is_empty() && self.next_shard != usize::MAX {
            let Some(shard) = db.shards().get(self.next_shard) else {
                self.next_shard = usize::MAX;
                break;
            };
            // The pin keeps the records at the copied offsets in place while their keys are
            // read, after the shard lock is released.
            let _pin = db.pin_open()?;
            db.ctx().region.check_fork()?;
            let offsets = shard.writer(db.ctx())?.live_offsets()?;
            // All of the shard's keys or none: after a failed copy (a key that cannot be
            // allocated or read) the next call copies the shard again.
            let keys = offsets.into_iter().map(|off| db.key_at(off)).collect::<Result<_>>()?;
            self.keys = keys;
            self.next_shard += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::{Builder, Db};

    /// A one-shard database of `n` keys, and the offset of the last checksum byte of the
    /// record at place `victim` in the shard's live offsets.
    fn db_with_a_victim(n: u32, victim: usize) -> (Db, u64) {
        let db = Builder::new().shards(1).memory().unwrap();
        for i in 0..n {
            db.set(&i.to_be_bytes(), b"v").unwrap();
        }
        let offsets = db.shards()[0].writer(db.ctx()).unwrap().live_offsets().unwrap();
        let len = crate::table::record_at(&db.ctx().region, offsets[victim]).unwrap().len;
        (db, offsets[victim] + len - 1)
    }

    /// Flips every bit of the byte at `at` (damaging, or repairing, a checksum).
    fn flip(db: &Db, at: u64) {
        db.ctx().region.atomic_u8(at).unwrap().fetch_xor(0xff, Ordering::Relaxed);
    }

    /// Calls `next` until it gives an empty step; asserts that no item came twice and
    /// returns how many came (with `seen`'s first).
    fn drain<T: Ord>(mut seen: Vec<T>, mut next: impl FnMut() -> Vec<T>) -> usize {
        loop {
            let step = next();
            if step.is_empty() {
                break;
            }
            seen.extend(step);
        }
        let n = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(n, seen.len(), "{} handed out twice", n - seen.len());
        n
    }

    /// A cursor whose copy of a shard's keys fails midway (a key that cannot be read: here a
    /// damaged record, repaired afterwards; in use, a copy that cannot be allocated) must not
    /// hand out any of that shard's keys twice. It kept the keys copied before the failure,
    /// handed them out, and then copied the whole shard again: those keys came twice.
    #[test]
    fn a_failed_shard_copy_hands_out_no_key_twice() {
        let (db, sum) = db_with_a_victim(100, 50);
        // The record's last checksum byte, flipped (and later flipped back).
        flip(&db, sum);
        let mut cursor = db.cursor();
        assert!(cursor.next_keys(&db, 1000).is_err(), "the damaged record was read");
        flip(&db, sum);
        assert_eq!(drain(Vec::new(), || cursor.next_keys(&db, 1000).unwrap()), 100);
    }

    /// A `next_pairs` call that fails on a value (one that cannot be copied: here a damaged
    /// record, repaired afterwards; in use, a value too large for the memory left) must leave
    /// the keys it had not handed out to the next call. It had taken them off the queue: the
    /// pairs read before the failure and the failed key were lost to the scan.
    #[test]
    fn a_failed_value_read_loses_no_key() {
        let (db, sum) = db_with_a_victim(100, 50);
        let mut cursor = db.cursor();
        let seen = cursor.next_pairs(&db, 10).unwrap();
        flip(&db, sum);
        assert!(cursor.next_pairs(&db, 1000).is_err(), "the damaged value was read");
        flip(&db, sum);
        let n = drain(seen, || cursor.next_pairs(&db, 1000).unwrap());
        assert_eq!(n, 100, "{} keys lost", 100 - n);
    }

    /// An `Iter` that has stopped on an error (a value that cannot be copied, a damaged
    /// record) lets go of its pin: it yields nothing more, and the pin held back every
    /// rebuild and `close` until it was dropped (here the same thread's `close` failed with
    /// `Reentrant`; on another thread it waited).
    #[test]
    fn an_iterator_stopped_by_an_error_holds_no_pin() {
        let (db, sum) = db_with_a_victim(10, 3);
        flip(&db, sum);
        let mut iter = db.iter();
        assert!(iter.by_ref().any(|item| item.is_err()), "the damaged record was read");
        assert!(iter.next().is_none());
        db.rebuild().expect_err("the damaged record is not copied");
        db.close().unwrap();
        drop(iter);
    }

    /// `is_done` says whether the scan has handed out every key: true once the last key is
    /// out, not only after a further call came back empty (a pager asking it whether to
    /// offer another page offered an empty one). Shards left empty at the end do not count.
    #[test]
    fn is_done_once_the_last_key_is_handed_out() {
        let db = Builder::new().shards(64).memory().unwrap();
        db.set(b"only", b"v").unwrap();
        let mut cursor = db.cursor();
        assert!(!cursor.is_done());
        assert_eq!(cursor.next_keys(&db, 10).unwrap(), [b"only".to_vec()]);
        assert!(cursor.is_done(), "every key was handed out");
        assert!(cursor.next_keys(&db, 10).unwrap().is_empty());
        let mut cursor = db.cursor();
        assert_eq!(cursor.next_pairs(&db, 10).unwrap().len(), 1);
        assert!(cursor.is_done(), "every pair was handed out");
        let empty = Builder::new().shards(4).memory().unwrap();
        let mut cursor = empty.cursor();
        assert!(cursor.next_keys(&empty, 10).unwrap().is_empty());
        assert!(cursor.is_done());
    }
}
