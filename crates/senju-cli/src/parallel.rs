//! `senju perf parallel`: the workload of `tkrzw_dbm_perf parallel`.
//!
//! One database (a file emptied first, or in memory), one timed phase. Thread `id` draws
//! everything from one generator seeded `seed + id`; iteration `i` uses key number
//! `i * threads + id` (`--random_key`: uniform in `[0, iter * threads)`), reduced modulo
//! `--keys` when given, printed `%08d`. The value is `size` bytes of the digit `id % 10`
//! (`--random_value`: a length uniform in `[0, size]`). Each operation is chosen by fresh
//! draws, as Tkrzw chooses it:
//!
//! | draw                       | operation                                  | share |
//! |----------------------------|--------------------------------------------|-------|
//! | `r % 5 == 0`               | compare-and-exchange (see [`CasValue`])    | 20 %  |
//! | else `r % 5 == 0`          | remove                                     | 16 %  |
//! | else `r % 2 == 0`          | set                                        | 32 %  |
//! | else                       | get without copying the value (`contains`) | 32 %  |
//!
//! With `--rebuild`, one "master" thread checks every 100 iterations whether the database
//! should be rebuilt (Tkrzw's `ShouldBeRebuilt`; here: more dead bytes than live ones) and,
//! if so, rebuilds it and passes the master role to the next thread.
//!
//! The clock runs from before the threads start until after the final `sync(Soft)` and, with
//! `--validate`, the record check. QPS = iterations × threads / elapsed seconds.
//!
//! `--validate` checks the structure Tkrzw's `ValidateRecords` checks, in senju's terms:
//! every record the cursor yields is a key this run can write with a value this run can
//! write, a lookup of that key finds the same value, and the cursor yields `len()` records,
//! each once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use senju::Db;

use crate::args::PerfArgs;
use crate::progress::Progress;
use crate::report::{
    key_into, key_number, print_done, print_header, rss, run_workers, sync_and_report,
};
use crate::rng::Rng;

/// One side of Tkrzw's `CompareExchange(key, expected, desired)` in the parallel workload,
/// each drawn with probability 1/3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CasValue {
    /// The empty string: expected, the value must be empty; desired, it becomes empty.
    Empty,
    /// Tkrzw's `ANY_DATA`: expected, any value (the record exists); desired, no change.
    Any,
    /// Tkrzw's null: expected, the record is absent; desired, it is removed.
    Absent,
}

impl CasValue {
    fn draw(rng: &mut Rng) -> CasValue {
        match rng.below(3) {
            0 => CasValue::Empty,
            1 => CasValue::Any,
            _ => CasValue::Absent,
        }
    }
}

/// Tkrzw's compare-and-exchange with `expected` and `desired`, through senju's API; returns
/// whether it succeeded (which the workload, like Tkrzw's, does not need).
fn compare_exchange(
    db: &Db,
    key: &[u8],
    expected: CasValue,
    desired: CasValue,
) -> senju::Result<bool> {
    use CasValue::{Absent, Any, Empty};
    match (expected, desired) {
        // "No change" on success: only the comparison is left, a read.
        (Empty, Any) => Ok(db.get_with(key, <[u8]>::is_empty)? == Some(true)),
        (Any, Any) => db.contains(key),
        (Absent, Any) => Ok(!db.contains(key)?),
        // Any existing value becomes empty: an atomic read-modify-write.
        (Any, Empty) => Ok(db.update(key, |old| old.map(|_| Vec::new()))?.is_some()),
        // Any existing value is removed: exactly `remove`.
        (Any, Absent) => db.remove(key),
        (Empty, Empty) => db.compare_and_set(key, Some(b""), Some(b"")),
        (Empty, Absent) => db.compare_and_set(key, Some(b""), None),
        (Absent, Empty) => db.compare_and_set(key, None, Some(b"")),
        (Absent, Absent) => db.compare_and_set(key, None, None),
    }
}

/// Runs the workload and prints Tkrzw's lines.
pub(crate) fn run(a: &PerfArgs) -> Result<(), String> {
    let base_rss = rss();
    let (path, _temporary) = a.file_path();
    let db = a.open(&path, true)?;
    print_header("Doing", a);
    let progress = Progress::new("Doing", a.iter);
    let t0 = Instant::now();
    let master = AtomicU64::new(0);
    let result =
        run_workers(a.threads, |id| worker(a, &db, id, &master, (id == 0).then_some(&progress)));
    progress.finish();
    result?;
    sync_and_report(&db)?;
    if a.validate {
        let tv = Instant::now();
        validate(a, &db)?;
        outln!("Validating records: ... done (elapsed={:.6})", tv.elapsed().as_secs_f64());
    }
    let elapsed = t0.elapsed().as_secs_f64();
    print_done("Done", &db, elapsed, a.iter * a.threads, base_rss)?;
    db.close().map_err(|e| e.to_string())?;
    Ok(())
}

/// Tkrzw's `ShouldBeRebuilt`, in senju's terms: more bytes of dead records than live ones.
fn should_be_rebuilt(db: &Db) -> senju::Result<bool> {
    let s = db.stats()?;
    Ok(s.dead_bytes > s.live_bytes)
}

fn worker(
    a: &PerfArgs,
    db: &Db,
    id: u64,
    master: &AtomicU64,
    progress: Option<&Progress>,
) -> Result<(), String> {
    let total = a.iter * a.threads;
    let mut rng = Rng::new(a.seed + id);
    let value = vec![b'0' + (id % 10) as u8; a.size];
    let mut key = Vec::with_capacity(16);
    let tick = (a.iter / 1000).max(1);
    let fail = |what: &str, e: senju::StorageError| format!("{what} failed: {e}");
    for i in 0..a.iter {
        let mut n = if a.random_key { rng.below(total) } else { i * a.threads + id };
        if a.keys > 0 {
            n %= a.keys;
        }
        key_into(&mut key, n);
        let len = if a.random_value { rng.below(a.size as u64 + 1) as usize } else { a.size };
        // Relaxed: the role is a hint; two threads rebuilding at once would only wait.
        if a.rebuild
            && i % 100 == 0
            && master.load(Ordering::Relaxed) == id
            && should_be_rebuilt(db).map_err(|e| fail("ShouldBeRebuilt", e))?
        {
            db.rebuild().map_err(|e| fail("Rebuild", e))?;
            master.store((id + 1) % a.threads, Ordering::Relaxed);
        }
        if rng.one_in(5) {
            let expected = CasValue::draw(&mut rng);
            let desired = CasValue::draw(&mut rng);
            compare_exchange(db, &key, expected, desired)
                .map_err(|e| fail("CompareExchange", e))?;
        } else if rng.one_in(5) {
            db.remove(&key).map_err(|e| fail("Remove", e))?;
        } else if rng.one_in(2) {
            db.set(&key, &value[..len]).map_err(|e| fail("Set", e))?;
        } else {
            db.contains(&key).map_err(|e| fail("Get", e))?;
        }
        if !a.sleep.is_zero() {
            std::thread::sleep(a.sleep);
        }
        if let Some(p) = progress.filter(|_| (i + 1) % tick == 0) {
            p.tick(i + 1);
        }
    }
    Ok(())
}

/// Whether `v` is a value this workload can write: at most `size` bytes, all one digit.
fn is_parallel_value(v: &[u8], size: usize) -> bool {
    v.len() <= size && v.first().is_none_or(|&d| d.is_ascii_digit() && v.iter().all(|&b| b == d))
}

/// The record check of `--validate` (see the module documentation).
fn validate(a: &PerfArgs, db: &Db) -> Result<(), String> {
    let key_limit = if a.keys > 0 { a.keys.min(a.iter * a.threads) } else { a.iter * a.threads };
    let mut seen = HashSet::new();
    for item in db.iter() {
        let (k, v) = item.map_err(|e| format!("validation: iteration failed: {e}"))?;
        let shown = String::from_utf8_lossy(&k);
        let n = key_number(&k)
            .filter(|&n| n < key_limit)
            .ok_or_else(|| format!("validation failed: unexpected key {shown:?}"))?;
        if !is_parallel_value(&v, a.size) {
            return Err(format!(
                "validation failed: key {shown} has a value this workload never writes: {:?}",
                String::from_utf8_lossy(&v)
            ));
        }
        if !seen.insert(n) {
            return Err(format!("validation failed: the cursor yielded key {shown} twice"));
        }
        let got = db.get(&k).map_err(|e| format!("validation: get failed: {e}"))?;
        if got.as_deref() != Some(&v[..]) {
            return Err(format!(
                "validation failed: key {shown}: the cursor read {:?}, a lookup reads {:?}",
                String::from_utf8_lossy(&v),
                got.map(|g| String::from_utf8_lossy(&g).into_owned())
            ));
        }
    }
    if seen.len() as u64 != db.len() {
        return Err(format!(
            "validation failed: the cursor yielded {} records but len() is {}",
            seen.len(),
            db.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_exchange_follows_tkrzw_semantics() {
        use CasValue::{Absent, Any, Empty};
        let db = Db::memory().unwrap();
        let k = b"00000001";
        // Absent key: only "expected absent" succeeds.
        assert!(!compare_exchange(&db, k, Any, Empty).unwrap());
        assert!(!compare_exchange(&db, k, Empty, Absent).unwrap());
        assert!(compare_exchange(&db, k, Absent, Any).unwrap());
        assert!(compare_exchange(&db, k, Absent, Empty).unwrap());
        assert_eq!(db.get(k).unwrap(), Some(Vec::new()));
        // Empty value: "expected empty" and "expected any" succeed.
        assert!(compare_exchange(&db, k, Empty, Any).unwrap());
        assert!(!compare_exchange(&db, k, Absent, Absent).unwrap());
        db.set(k, b"77").unwrap();
        assert!(!compare_exchange(&db, k, Empty, Empty).unwrap());
        assert!(compare_exchange(&db, k, Any, Empty).unwrap());
        assert_eq!(db.get(k).unwrap(), Some(Vec::new()));
        assert!(compare_exchange(&db, k, Empty, Absent).unwrap());
        assert_eq!(db.get(k).unwrap(), None);
    }

    #[test]
    fn parallel_values_are_runs_of_one_digit() {
        assert!(is_parallel_value(b"", 8));
        assert!(is_parallel_value(b"3333", 8));
        assert!(!is_parallel_value(b"3334", 8));
        assert!(!is_parallel_value(b"333333333", 8));
        assert!(!is_parallel_value(b"aa", 8));
    }
}
