//! The file's free space: page-aligned extents inside the file that no chunk uses, shared by
//! every shard.
//!
//! Space comes back here from three places: index tables retired by growth or `clear` (after
//! their grace period), record chunks freed by a rebuild (after they were punched and the
//! zeros synced), and the gaps, voided chunks and stale tables found while opening. New
//! chunks (record chunks and tables of any shard) take from here before they take fresh space
//! at the end of the file.
//!
//! Why one map for all shards, not one per shard: keys spread evenly, so all shards grow
//! their tables at about the same time, each to 1.31 times its old table, and a shard's old
//! table is too small for its own next one. Kept per shard, the old tables were refilled only
//! by that shard's records, more slowly than growth freed them: 10M records left 90 MB of
//! holes in a 409 MB file (lab 0010). Shared and coalesced, one shard's old table joins its
//! neighbours' into space for the next shard's new table, and records fill the rest.
//!
//! Adjacent extents are merged, so the map stays small (about a hundred extents while a
//! database of 10M records grows). It is behind one lock, taken once per new chunk (every
//! 4-32 KiB of records) or retired table, never per record; a writer that finds the lock taken
//! does not wait but takes fresh space at the end of the file instead.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use senju_sync::Mutex;

/// Free extents: offset → length, no two touching (merged on insert).
#[derive(Default)]
pub(crate) struct FreeSpace {
    extents: Mutex<BTreeMap<u64, u64>>,
    /// Bytes in `extents`; read without the lock to skip it when there is nothing to take.
    bytes: AtomicU64,
}

impl FreeSpace {
    /// Adds the extent `off..off + len` (page-aligned, not already free).
    pub(crate) fn add(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut m = self.extents.lock();
        let (mut start, mut end) = (off, off + len);
        if let Some((&o, &l)) = m.range(..off).next_back()
            && o + l == off
        {
            m.remove(&o);
            start = o;
        }
        if let Some(l) = m.remove(&end) {
            end += l;
        }
        debug_assert!(m.range(start..end).next().is_none(), "extent {off}+{len} freed twice");
        m.insert(start, end - start);
        // Relaxed: a hint for `take_between`; the map itself is read under the lock.
        self.bytes.fetch_add(len, Ordering::Relaxed);
    }

    /// Takes, from the first (lowest) extent of at least `need` bytes, `want` bytes or the
    /// whole extent if it is shorter (`need <= want`); returns the offset and the length
    /// taken. `None` if no extent is long enough, or if another thread holds the map (the
    /// caller then takes fresh space at the end of the file instead of waiting).
    pub(crate) fn take_between(&self, need: u64, want: u64) -> Option<(u64, u64)> {
        debug_assert!(need <= want);
        // Relaxed: only a hint; an extent added meanwhile is found by a later call.
        if self.bytes.load(Ordering::Relaxed) < need {
            return None;
        }
        let mut m = self.extents.try_lock()?;
        let (&off, &l) = m.iter().find(|&(_, &l)| l >= need)?;
        let got = l.min(want);
        m.remove(&off);
        if got < l {
            m.insert(off + got, l - got);
        }
        self.bytes.fetch_sub(got, Ordering::Relaxed);
        Some((off, got))
    }

    /// If the last free extent ends at `end`, removes it and returns where it starts (the file
    /// may be cut there); otherwise returns `end`.
    pub(crate) fn trim_tail(&self, end: u64) -> u64 {
        let mut m = self.extents.lock();
        match m.iter().next_back() {
            Some((&o, &l)) if o + l == end => {
                m.remove(&o);
                self.bytes.fetch_sub(l, Ordering::Relaxed);
                o
            }
            _ => end,
        }
    }

    /// Every free extent, lowest first (for `close`, which punches them).
    pub(crate) fn extents(&self) -> Vec<(u64, u64)> {
        self.extents.lock().iter().map(|(&o, &l)| (o, l)).collect()
    }

    /// Free bytes (a momentary value, for `stats`).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    #[test]
    fn neighbours_merge_in_any_order() {
        let f = FreeSpace::default();
        f.add(10 * P, P);
        f.add(12 * P, 2 * P);
        assert_eq!(f.extents(), [(10 * P, P), (12 * P, 2 * P)]);
        f.add(11 * P, P);
        assert_eq!(f.extents(), [(10 * P, 4 * P)]);
        f.add(9 * P, P);
        f.add(14 * P, P);
        assert_eq!(f.extents(), [(9 * P, 6 * P)]);
        assert_eq!(f.bytes(), 6 * P);
    }

    #[test]
    fn take_is_first_fit_and_splits() {
        let f = FreeSpace::default();
        f.add(2 * P, P);
        f.add(10 * P, 4 * P);
        f.add(20 * P, 8 * P);
        assert_eq!(f.take_between(2 * P, 2 * P), Some((10 * P, 2 * P)));
        assert_eq!(f.extents(), [(2 * P, P), (12 * P, 2 * P), (20 * P, 8 * P)]);
        assert_eq!(f.take_between(3 * P, 3 * P), Some((20 * P, 3 * P)));
        assert_eq!(f.take_between(8 * P, 8 * P), None);
        assert_eq!(f.bytes(), P + 2 * P + 5 * P);
    }

    #[test]
    fn take_between_takes_a_short_extent_whole() {
        let f = FreeSpace::default();
        f.add(4 * P, P);
        f.add(8 * P, 3 * P);
        // A chunk wanting 8 pages takes the first extent of at least 2 pages, all 3 of it.
        assert_eq!(f.take_between(2 * P, 8 * P), Some((8 * P, 3 * P)));
        assert_eq!(f.take_between(P, 8 * P), Some((4 * P, P)));
        assert_eq!(f.take_between(P, P), None);
        assert_eq!(f.bytes(), 0);
    }

    #[test]
    fn a_held_map_is_not_waited_for() {
        let f = FreeSpace::default();
        f.add(P, P);
        let held = f.extents.lock();
        assert_eq!(f.take_between(P, P), None);
        drop(held);
        assert_eq!(f.take_between(P, P), Some((P, P)));
    }

    #[test]
    fn the_tail_is_trimmed_only_when_free_up_to_the_end() {
        let f = FreeSpace::default();
        f.add(4 * P, 2 * P);
        assert_eq!(f.trim_tail(10 * P), 10 * P);
        f.add(8 * P, 2 * P);
        assert_eq!(f.trim_tail(10 * P), 8 * P);
        assert_eq!(f.extents(), [(4 * P, 2 * P)]);
    }
}
