//! Batches: `get_many`, `set_many`, `remove_many`. Every key is routed (and checked) first;
//! reads then prefetch in two stages under one pin, writes go shard by shard under one hold
//! of each shard's lock (`docs/design.md` §3.3, labs 0013 and 0021).

use super::{Db, check_value, copy_out};
use crate::epoch::Reading;
use crate::error::Result;
use crate::shard::ShardWriter;
use crate::table;

/// How many entries ahead of the one being applied a batch prefetches index slots; in
/// `get_many`, how many keys ahead it prefetches the records that the slots name.
const PREFETCH_AHEAD: usize = 4;

/// How many keys ahead of the one being read `get_many` prefetches index slots (the first
/// stage; the records follow at [`PREFETCH_AHEAD`], when the slots have arrived).
const READ_AHEAD: usize = 2 * PREFETCH_AHEAD;

/// Whether `get_many` still prefetches records (the second stage of its prefetch): a record
/// is worth asking for when the key is present, and a batch of absent keys would pay the
/// look at their slots for nothing. So each slot with the key's tag adds 2 to a budget (at
/// most [`RecordPrefetch::MAX`]), each look that finds none takes 1, and the batch stops
/// looking once the budget is spent: after 8 keys of a batch of absent keys, never while
/// a third of the keys or more are found.
struct RecordPrefetch {
    budget: u32,
}

impl RecordPrefetch {
    const MAX: u32 = 16;

    fn new() -> Self {
        Self { budget: 8 }
    }

    /// Runs `look` (a `prefetch_record`, true if it found the key's tag) while the budget
    /// lasts.
    #[inline]
    fn ask(&mut self, look: impl FnOnce() -> bool) {
        if self.budget == 0 {
            return;
        }
        self.budget = if look() { (self.budget + 2).min(Self::MAX) } else { self.budget - 1 };
    }
}

/// Applies `op` to one shard's entries, prefetching the home slots of the entries a few
/// places ahead so that their cache misses overlap the work on the current one. (Records
/// are not prefetched as `get_many` does: an overwrite or removal reads its key's record,
/// but asking for it cost in-order removals 11% and gained random ones 7%, lab 0021.)
fn run_group(
    w: &mut ShardWriter<'_>,
    group: &[Planned],
    op: &mut impl FnMut(&mut ShardWriter<'_>, &Planned) -> Result<()>,
) -> Result<()> {
    for p in group.iter().take(PREFETCH_AHEAD) {
        w.prefetch(p.hash);
    }
    for (i, p) in group.iter().enumerate() {
        if let Some(ahead) = group.get(i + PREFETCH_AHEAD) {
            w.prefetch(ahead.hash);
        }
        op(w, p)?;
    }
    Ok(())
}

/// One entry of a batch, routed: its shard, its position in the batch, its key's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Planned {
    shard: u32,
    index: usize,
    hash: u64,
}

/// Orders a plan by shard, each shard's entries in `index` order. `plan` must be in `index`
/// order (as [`Db::plan`] makes it): a counting sort, which keeps that order within a shard,
/// takes two passes where a comparison sort took about a tenth of a small batch's time
/// (profile of 1000-pair batches). With many more shards than entries the counts would cost
/// more than they save, and a comparison sort runs instead.
fn sort_by_shard(plan: &mut Vec<Planned>, shards: usize) {
    debug_assert!(plan.windows(2).all(|w| w[0].index < w[1].index));
    if plan.len() < 16 || shards > 4 * plan.len() {
        plan.sort_unstable_by_key(|p| (p.shard, p.index));
        return;
    }
    // `next[s]`: where the next entry of shard `s` goes.
    let mut next = vec![0usize; shards];
    for p in plan.iter() {
        next[p.shard as usize] += 1;
    }
    let mut at = 0;
    for n in &mut next {
        (*n, at) = (at, at + *n);
    }
    let mut sorted = plan.clone();
    for p in plan.iter() {
        let slot = &mut next[p.shard as usize];
        sorted[*slot] = *p;
        *slot += 1;
    }
    *plan = sorted;
}

impl Db {
    /// The values of `keys`, in order (each lookup is separately atomic).
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        let mut failed = None;
        self.get_many_with(keys, |_, v| match v.map(copy_out).transpose() {
            Ok(v) => out.push(v),
            Err(e) => _ = failed.get_or_insert(e),
        })?;
        failed.map_or(Ok(out), Err)
    }

    /// Calls `f(i, value)` for each key `keys[i]`, in order, with a borrowed view of its
    /// value (`None`: absent); each lookup is separately atomic. Every key is checked first,
    /// so a key that is too long fails the call before `f` runs.
    ///
    /// Faster than a loop of [`get_with`](Db::get_with): the index slots of the keys a few
    /// places ahead are prefetched, and then the records they name, so the cache misses of
    /// several lookups overlap instead of following each other. The views stay valid until `f` returns, as with `get_with`; a
    /// long `f` delays the reuse of freed space (one pin is held for the whole call).
    pub fn get_many_with<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        mut f: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        // A loop, not `collect::<Result<Vec<_>>>()`: that loses the length and grows the
        // vector from four items by doubling (two reallocations for ten keys).
        let mut routed = Vec::with_capacity(keys.len());
        for k in keys {
            routed.push(self.route(k.as_ref())?);
        }
        let ctx = &self.core.ctx;
        // Two stages: the slot of the key `READ_AHEAD` places ahead, then the record of the
        // key `PREFETCH_AHEAD` places ahead, whose slot was asked for that many keys ago
        // (`asked` remembers where, by the key's place modulo `READ_AHEAD`).
        let mut asked = [(0, table::Asked::default()); READ_AHEAD];
        for (i, &(hash, shard)) in routed.iter().enumerate().take(READ_AHEAD) {
            asked[i] = shard.prefetch_slot(ctx, hash);
        }
        // The pin keeps every record's space from being reused until `f` returns, and the
        // tables that are current after it while their slots are read.
        let _pin = self.pin_open()?;
        let _reading = Reading::mark();
        let mut records = RecordPrefetch::new();
        // The first keys' records at once: each look waits for its slot, in parallel.
        for (i, &(h, s)) in routed.iter().enumerate().take(PREFETCH_AHEAD) {
            records.ask(|| s.prefetch_record(ctx, asked[i], h));
        }
        for (i, (&(hash, shard), key)) in routed.iter().zip(keys).enumerate() {
            if let Some(&(h, s)) = routed.get(i + PREFETCH_AHEAD) {
                let at = asked[(i + PREFETCH_AHEAD) % READ_AHEAD];
                records.ask(|| s.prefetch_record(ctx, at, h));
            }
            if let Some(&(h, s)) = routed.get(i + READ_AHEAD) {
                asked[i % READ_AHEAD] = s.prefetch_slot(ctx, h);
            }
            f(i, shard.get(ctx, hash, key.as_ref())?.map(|r| r.value));
        }
        Ok(())
    }

    /// Sets every pair (each set is separately atomic).
    ///
    /// Every key and value is checked first, so a key or value that is too large fails the
    /// call before anything is written. The pairs are then applied shard by shard, each
    /// shard's pairs in their order under one hold of its lock, so of two pairs with the same
    /// key the later one wins. Shards that no other thread is writing to go first; the others
    /// wait until the end, so one busy shard (another writer, or an index growing) does not
    /// hold up the rest of the batch. Another thread may see the pairs appear in any order.
    /// On a storage error (disk full, closed) the pairs applied before it stay set.
    pub fn set_many<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, pairs: &[(K, V)]) -> Result<()> {
        if let [(k, v)] = pairs {
            return self.set(k.as_ref(), v.as_ref());
        }
        let plan =
            self.plan(pairs.iter().map(|(k, _)| k), |i| check_value(pairs[i].1.as_ref().len()))?;
        self.by_shard(plan, |w, p| {
            let (k, v) = &pairs[p.index];
            w.set(p.hash, k.as_ref(), v.as_ref())
        })
    }

    /// Routes every key of a batch into a plan, checking each key, then `check(i)` for entry
    /// `i`, then that the handle may write: an invalid entry fails before anything is written.
    fn plan<K: AsRef<[u8]>>(
        &self,
        keys: impl ExactSizeIterator<Item = K>,
        mut check: impl FnMut(usize) -> Result<()>,
    ) -> Result<Vec<Planned>> {
        let mut plan = Vec::with_capacity(keys.len());
        for (index, k) in keys.enumerate() {
            let (hash, shard) = self.route_index(k.as_ref())?;
            check(index)?;
            plan.push(Planned { shard, index, hash });
        }
        self.writable()?;
        Ok(plan)
    }

    /// Runs `op` for every planned entry under its shard's writer lock, one hold per shard,
    /// entries of a shard in their `index` order; free shards first, busy ones at the end.
    fn by_shard(
        &self,
        mut plan: Vec<Planned>,
        mut op: impl FnMut(&mut ShardWriter<'_>, &Planned) -> Result<()>,
    ) -> Result<()> {
        sort_by_shard(&mut plan, self.core.shards.len());
        let mut busy = Vec::new();
        for group in plan.chunk_by(|a, b| a.shard == b.shard) {
            let shard = &self.core.shards[group[0].shard as usize];
            match shard.try_writer(&self.core.ctx)? {
                Some(mut w) => run_group(&mut w, group, &mut op)?,
                None => busy.push(group),
            }
        }
        for group in busy {
            let mut w = self.core.shards[group[0].shard as usize].writer(&self.core.ctx)?;
            run_group(&mut w, group, &mut op)?;
        }
        Ok(())
    }

    /// Removes every key; returns how many removals found their key present (a key given
    /// twice counts once). Keys are checked first and applied shard by shard, busy shards
    /// last, as in [`set_many`](Db::set_many).
    pub fn remove_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<u64> {
        if let [k] = keys {
            return self.remove(k.as_ref()).map(u64::from);
        }
        let plan = self.plan(keys.iter(), |_| Ok(()))?;
        let mut removed = 0;
        self.by_shard(plan, |w, p| {
            let key = keys[p.index].as_ref();
            let found = w.probe(p.hash, key)?;
            removed += u64::from(w.delete(found, key)?);
            Ok(())
        })?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of `finds` (one per key: whether its slot had the key's tag) `get_many` looks
    /// at for the key's record.
    fn looks(finds: impl IntoIterator<Item = bool>) -> usize {
        let mut records = RecordPrefetch::new();
        let mut looked = 0;
        for found in finds {
            records.ask(|| {
                looked += 1;
                found
            });
        }
        looked
    }

    #[test]
    fn record_prefetch_stops_for_absent_keys_and_keeps_on_for_present_keys() {
        // A batch of absent keys stops looking after 8 keys.
        assert_eq!(looks([false; 1000]), 8);
        // Keys all present, or one in three: every key is looked at.
        assert_eq!(looks([true; 1000]), 1000);
        assert_eq!(looks((0..999).map(|i| i % 3 == 0)), 999);
        // Present keys after a long run of absent ones are not looked at any more.
        assert_eq!(looks((0..100).map(|i| i >= 50)), 8);
        // Fewer than one in three found: the budget runs out.
        assert!(looks((0..1000).map(|i| i % 4 == 0)) < 1000);
    }

    /// The counting sort of a batch's plan orders it as the comparison sort does, for every
    /// size around its cut-over and for few and many shards.
    #[test]
    fn sort_by_shard_orders_as_a_comparison_sort() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for shards in [1usize, 2, 16, 128, 4096, 65536] {
            for len in [0usize, 1, 2, 15, 16, 17, 100, 1000, 5000] {
                let plan: Vec<Planned> = (0..len)
                    .map(|index| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        Planned { shard: (x % shards as u64) as u32, index, hash: x }
                    })
                    .collect();
                let mut want = plan.clone();
                want.sort_unstable_by_key(|p| (p.shard, p.index));
                let mut got = plan;
                sort_by_shard(&mut got, shards);
                assert_eq!(got, want, "{len} entries over {shards} shards");
            }
        }
    }
}
