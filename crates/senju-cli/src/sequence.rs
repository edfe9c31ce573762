//! `senju perf sequence`: the workload of `tkrzw_dbm_perf sequence`.
//!
//! Phases: set (the file is truncated first), get, iterate, remove; each reopens the file
//! (the in-memory engine keeps one database). Thread `id` handles iteration `i` with key
//! number `i * threads + id` (interleaved, not range-partitioned), printed `%08d`; with
//! `--random_key` the number is uniform in `[0, iter * threads)`. Values are `size` bytes cut
//! from a per-thread pattern buffer at offset `(i * (i + 1)) mod 2039`, as Tkrzw does. The
//! clock starts before the threads are spawned and stops after they are joined and, for set
//! and remove, after the final `sync(Soft)` (Tkrzw's `Synchronize(false)`).
//! QPS = iterations × threads / elapsed seconds; `mem` is the growth of the resident set.
//! With `--batch N` (senju's own flag) each thread sends its operations N at a time through
//! `set_many`, `get_many` and `remove_many`, in the same order and with the same values.
//!
//! Every phase draws the same keys (and the set phase's value lengths) from generators seeded
//! the same way, so each can tell what the others did. A get of a missing key is an error.
//! `--validate`, as Tkrzw's, ends the set and remove phases (after the sync, inside the timed
//! region) with a `Validating records` line: after setting, every key holds the last value
//! one of its writers set and the database holds nothing else; after removing, no removed
//! key is left. With it the get phase also compares every value whose writer is known (with
//! sequential keys each key is set once; a random key may be set again, by any thread, so
//! its value is checked after setting instead). A mismatch names the key and fails the run.

use std::time::Instant;

use senju::Db;

use crate::args::{Engine, PerfArgs};
use crate::progress::Progress;
use crate::report::{key_into, print_done, print_header, rss, run_workers, sync_and_report};
use crate::rng::Rng;

const PATTERN_CYCLE: usize = 2039;

/// Tkrzw's value pattern: byte k is `'a' + (id + k) % (odd k ? 26 : 9)`.
fn pattern(id: u64, size: usize) -> Vec<u8> {
    (0..size + PATTERN_CYCLE)
        .map(|k| b'a' + ((id as usize + k) % if k % 2 == 1 { 26 } else { 9 }) as u8)
        .collect()
}

fn pattern_offset(i: u64) -> usize {
    ((i as u32).wrapping_mul((i as u32).wrapping_add(1)) as usize) % PATTERN_CYCLE
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Set,
    Get,
    Iterate,
    Remove,
}

impl Phase {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Phase::Set => ("Setting", "Setting done"),
            Phase::Get => ("Getting", "Getting done"),
            Phase::Iterate => ("Iterating", "Iterating done"),
            Phase::Remove => ("Removing", "Removing done"),
        }
    }
}

/// Runs the phases the flags ask for.
pub(crate) fn run(a: &PerfArgs) -> Result<(), String> {
    let base_rss = rss();
    let (path, _temporary) = a.file_path();
    let mut phases = Vec::new();
    if a.set {
        phases.push(Phase::Set);
    }
    if a.get {
        phases.push(Phase::Get);
    }
    if a.set && a.get && a.remove {
        phases.push(Phase::Iterate);
    }
    if a.remove {
        phases.push(Phase::Remove);
    }
    let memory = match a.engine {
        Engine::Memory => Some(a.open(&path, false)?),
        Engine::File => None,
    };
    for phase in phases {
        let opened;
        let db = match &memory {
            Some(db) => db,
            None => {
                opened = a.open(&path, phase == Phase::Set)?;
                &opened
            }
        };
        run_phase(a, db, phase, base_rss)?;
        if memory.is_none() {
            db.close().map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn run_phase(a: &PerfArgs, db: &Db, phase: Phase, base_rss: u64) -> Result<(), String> {
    let (start_name, done_name) = phase.names();
    print_header(start_name, a);
    let progress = Progress::new(start_name, a.iter);
    let t0 = Instant::now();
    let result = if phase == Phase::Iterate {
        iterate(db)
    } else {
        run_workers(a.threads, |id| {
            let progress = (id == 0).then_some(&progress);
            if a.batch > 1 {
                batched_worker(a, db, phase, id, progress)
            } else {
                worker(a, db, phase, id, progress)
            }
        })
    };
    progress.finish();
    result?;
    if matches!(phase, Phase::Set | Phase::Remove) {
        sync_and_report(db)?;
        if a.validate {
            let ts = Instant::now();
            validate(a, db, phase).map_err(|e| {
                format!("validating records after {}: {e}", start_name.to_lowercase())
            })?;
            outln!("Validating records: ... done (elapsed={:.6})", ts.elapsed().as_secs_f64());
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let ops = if phase == Phase::Iterate { db.len() } else { a.iter * a.threads };
    print_done(done_name, db, elapsed, ops, base_rss)
}

fn iterate(db: &Db) -> Result<(), String> {
    let mut n = 0u64;
    for item in db.iter() {
        let (k, _) = item.map_err(|e| e.to_string())?;
        n += k.len() as u64;
    }
    std::hint::black_box(n);
    Ok(())
}

/// The keys and values of thread `id`, iteration by iteration: the same sequence whether the
/// operations go one per call or in batches.
struct Stream {
    random_key: bool,
    random_value: bool,
    /// `--validate`: the get phase draws the set phase's value lengths too.
    validate: bool,
    size: usize,
    threads: u64,
    id: u64,
    total: u64,
    rng: Rng,
    value_rng: Rng,
    buf: Vec<u8>,
}

impl Stream {
    fn new(a: &PerfArgs, id: u64) -> Stream {
        Stream {
            random_key: a.random_key,
            random_value: a.random_value,
            validate: a.validate,
            size: a.size,
            threads: a.threads,
            id,
            total: a.iter * a.threads,
            rng: Rng::new(a.seed + id),
            value_rng: Rng::new(a.seed.wrapping_mul(2) + id + 1),
            buf: pattern(id, a.size),
        }
    }

    /// The key number of iteration `i` (drawn at random with `--random_key`).
    fn key_number(&mut self, i: u64) -> u64 {
        if self.random_key { self.rng.below(self.total) } else { i * self.threads + self.id }
    }

    /// Where the value of iteration `i` lies in `buf`: with `--random_value` a set draws its
    /// length (and a get that validates draws the same one), everything else uses `--size`.
    fn value_range(&mut self, i: u64, phase: Phase) -> std::ops::Range<usize> {
        let draws = phase == Phase::Set || (phase == Phase::Get && self.validate);
        let len = if self.random_value && draws {
            self.value_rng.below(self.size as u64 + 1) as usize
        } else {
            self.size
        };
        let off = pattern_offset(i);
        off..off + len
    }
}

fn worker(
    a: &PerfArgs,
    db: &Db,
    phase: Phase,
    id: u64,
    progress: Option<&Progress>,
) -> Result<(), String> {
    let mut stream = Stream::new(a, id);
    let mut key = Vec::with_capacity(16);
    let tick = (a.iter / 1000).max(1);
    for i in 0..a.iter {
        let n = stream.key_number(i);
        key_into(&mut key, n);
        match phase {
            Phase::Set => {
                let value = stream.value_range(i, phase);
                db.set(&key, &stream.buf[value]).map_err(|e| e.to_string())?;
            }
            Phase::Get => {
                let found = if a.validate && !a.random_key {
                    let range = stream.value_range(i, phase);
                    let want = &stream.buf[range];
                    db.get_with(&key, |v| v == want)
                        .map_err(|e| e.to_string())?
                        .map(|ok| ok.then_some(()).ok_or(format!("wrong value for key {n:08}")))
                        .transpose()?
                        .is_some()
                } else {
                    db.contains(&key).map_err(|e| e.to_string())?
                };
                if !found {
                    return Err(format!("key {n:08} not found"));
                }
            }
            Phase::Remove => {
                db.remove(&key).map_err(|e| e.to_string())?;
            }
            Phase::Iterate => unreachable!("iterate runs in one thread"),
        }
        if let Some(p) = progress.filter(|_| (i + 1) % tick == 0) {
            p.tick(i + 1);
        }
    }
    Ok(())
}

/// [`worker`] with `--batch`: the same keys and values, `a.batch` operations per call.
fn batched_worker(
    a: &PerfArgs,
    db: &Db,
    phase: Phase,
    id: u64,
    progress: Option<&Progress>,
) -> Result<(), String> {
    let mut stream = Stream::new(a, id);
    let tick = (a.iter / 1000).max(1);
    // Key buffers are reused from batch to batch; `values` holds ranges of `stream.buf`.
    let mut keys: Vec<Vec<u8>> = vec![Vec::with_capacity(16); a.batch];
    let mut numbers = Vec::with_capacity(a.batch);
    let mut values = Vec::with_capacity(a.batch);
    let mut i = 0;
    while i < a.iter {
        let n_batch = a.batch.min((a.iter - i) as usize);
        numbers.clear();
        values.clear();
        for (j, key) in keys.iter_mut().take(n_batch).enumerate() {
            let k = i + j as u64;
            let n = stream.key_number(k);
            key_into(key, n);
            numbers.push(n);
            values.push(stream.value_range(k, phase));
        }
        let keys = &keys[..n_batch];
        let buf = &stream.buf;
        match phase {
            Phase::Set => {
                let pairs: Vec<(&[u8], &[u8])> = keys
                    .iter()
                    .zip(&values)
                    .map(|(k, v)| (k.as_slice(), &buf[v.clone()]))
                    .collect();
                db.set_many(&pairs).map_err(|e| e.to_string())?;
            }
            Phase::Get => {
                let found = db.get_many(keys).map_err(|e| e.to_string())?;
                let checked = a.validate && !a.random_key;
                for ((got, &n), v) in found.iter().zip(&numbers).zip(&values) {
                    match got {
                        None => return Err(format!("key {n:08} not found")),
                        Some(got) if checked && got[..] != buf[v.clone()] => {
                            return Err(format!("wrong value for key {n:08}"));
                        }
                        _ => {}
                    }
                }
            }
            Phase::Remove => {
                db.remove_many(keys).map_err(|e| e.to_string())?;
            }
            Phase::Iterate => unreachable!("iterate runs in one thread"),
        }
        let before = i;
        i += n_batch as u64;
        if let Some(p) = progress.filter(|_| before / tick != i / tick) {
            p.tick(i);
        }
    }
    Ok(())
}

/// `--validate` after the set or remove phase: checks the records the phase left.
fn validate(a: &PerfArgs, db: &Db, phase: Phase) -> Result<(), String> {
    match phase {
        Phase::Set if a.random_key => validate_random_set(a, db),
        Phase::Set => {
            run_workers(a.threads, |id| validate_set(a, db, id))?;
            expect_records(db, a.iter * a.threads)
        }
        Phase::Remove => run_workers(a.threads, |id| validate_removed(a, db, id)),
        Phase::Get | Phase::Iterate => unreachable!("the get phase checks as it reads"),
    }
}

/// Whether `key` (number `n`) holds `want`.
fn check_value(
    db: &Db,
    key: &[u8],
    n: u64,
    want: impl FnOnce(&[u8]) -> bool,
) -> Result<(), String> {
    match db.get_with(key, want).map_err(|e| e.to_string())? {
        Some(true) => Ok(()),
        Some(false) => Err(format!("wrong value for key {n:08}")),
        None => Err(format!("key {n:08} not found")),
    }
}

fn expect_records(db: &Db, keys: u64) -> Result<(), String> {
    match db.len() {
        n if n == keys => Ok(()),
        n => Err(format!("the database holds {n} records where {keys} keys were set")),
    }
}

/// Sequential keys, thread `id`: each of its keys was set once, to the value it replays.
fn validate_set(a: &PerfArgs, db: &Db, id: u64) -> Result<(), String> {
    let mut stream = Stream::new(a, id);
    let mut key = Vec::with_capacity(16);
    for i in 0..a.iter {
        let n = stream.key_number(i);
        key_into(&mut key, n);
        let range = stream.value_range(i, Phase::Set);
        let want = &stream.buf[range];
        check_value(db, &key, n, |v| v == want)?;
    }
    Ok(())
}

/// Random keys: a key may be set many times, by several threads, which race; it must hold
/// the last value that one of those threads set for it. Replays every thread's writes into
/// one list (24 bytes per operation) sorted by key, thread and iteration.
fn validate_random_set(a: &PerfArgs, db: &Db) -> Result<(), String> {
    struct Write {
        key: u64,
        i: u64,
        id: u32,
        len: u32,
    }
    let mut writes = Vec::with_capacity(usize::try_from(a.iter * a.threads).unwrap_or(0));
    let mut patterns = Vec::new();
    for id in 0..a.threads {
        let mut stream = Stream::new(a, id);
        for i in 0..a.iter {
            let key = stream.key_number(i);
            let len = stream.value_range(i, Phase::Set).len() as u32;
            writes.push(Write { key, i, id: id as u32, len });
        }
        patterns.push(stream.buf);
    }
    writes.sort_unstable_by_key(|w| (w.key, w.id, w.i));
    let mut key = Vec::with_capacity(16);
    let mut keys = 0;
    for group in writes.chunk_by(|x, y| x.key == y.key) {
        keys += 1;
        key_into(&mut key, group[0].key);
        // The last write of each thread that set the key.
        let mut last = group.chunk_by(|x, y| x.id == y.id).map(|t| &t[t.len() - 1]);
        check_value(db, &key, group[0].key, |v| {
            last.by_ref().any(|w| {
                let off = pattern_offset(w.i);
                v == &patterns[w.id as usize][off..off + w.len as usize]
            })
        })?;
    }
    expect_records(db, keys)
}

/// Thread `id`'s keys are gone (others the database held before may stay, as in Tkrzw).
fn validate_removed(a: &PerfArgs, db: &Db, id: u64) -> Result<(), String> {
    let mut stream = Stream::new(a, id);
    let mut key = Vec::with_capacity(16);
    for i in 0..a.iter {
        let n = stream.key_number(i);
        key_into(&mut key, n);
        if db.contains(&key).map_err(|e| e.to_string())? {
            return Err(format!("key {n:08} is still there"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Workload;

    /// A memory database after the set phase of `flags`.
    fn set(flags: &[&str]) -> (PerfArgs, Db) {
        let a = PerfArgs::parse(Workload::Sequence, flags).unwrap();
        let db = a.open(std::path::Path::new(""), false).unwrap();
        run_workers(a.threads, |id| worker(&a, &db, Phase::Set, id, None)).unwrap();
        (a, db)
    }

    fn key(n: u64) -> Vec<u8> {
        let mut k = Vec::new();
        key_into(&mut k, n);
        k
    }

    #[test]
    fn validation_names_the_key_that_is_wrong() {
        for flags in [&["--random_value"][..], &["--random_key", "--threads", "3"]] {
            let (a, db) =
                set(&[&["--dbm", "memory", "--iter", "500", "--validate"], flags].concat());
            assert_eq!(validate(&a, &db, Phase::Set), Ok(()), "{flags:?}");
            let (k, v) = db.iter().next().unwrap().unwrap();
            let n = crate::report::key_number(&k).unwrap();
            db.set(&k, b"not a value this run writes").unwrap();
            let e = validate(&a, &db, Phase::Set).unwrap_err();
            assert_eq!(e, format!("wrong value for key {n:08}"), "{flags:?}");
            db.remove(&k).unwrap();
            let e = validate(&a, &db, Phase::Set).unwrap_err();
            assert_eq!(e, format!("key {n:08} not found"), "{flags:?}");
            db.set(&k, &v).unwrap();
            db.set(&key(1 << 40), b"extra").unwrap();
            let e = validate(&a, &db, Phase::Set).unwrap_err();
            assert!(e.starts_with("the database holds "), "{flags:?}: {e}");

            run_workers(a.threads, |id| worker(&a, &db, Phase::Remove, id, None)).unwrap();
            assert_eq!(validate(&a, &db, Phase::Remove), Ok(()), "{flags:?}");
            db.set(&k, &v).unwrap();
            let e = validate(&a, &db, Phase::Remove).unwrap_err();
            assert_eq!(e, format!("key {n:08} is still there"), "{flags:?}");
        }
    }
}
