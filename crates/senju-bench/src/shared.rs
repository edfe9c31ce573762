//! Spin versus blocking shared locks on a database workload (founding document `001`).
//!
//! Tkrzw's author replaced `std::shared_mutex` with a spin shared lock and
//! `tkrzw_dbm_perf sequence --threads 4` on a hash database went from 1.60M to 2.07M QPS on
//! Linux (0.92M to 3.03M on macOS). The hot lock there is a shared lock that every operation
//! takes on the whole database, next to a lock per hash bucket. This module rebuilds that
//! shape: a hash table whose every operation takes the table lock shared and then its
//! bucket's lock (shared to get, exclusive to set), generic over one lock family, so the same
//! code runs with senju's spin and fair locks, `std::sync::RwLock`, glibc's rwlock and the
//! Tkrzw-style spin lock.
//!
//! A "short" critical section is the bucket lookup itself; a "long" one adds calibrated busy
//! work under the bucket lock, as a record that takes time to process would. Every set bumps
//! its bucket's write counter under the exclusive lock; the counters must add up to the sets
//! the threads made (lost writes are reported as violations, always 0 for a correct lock).
//!
//! ```
//! use senju_bench::shared::{SharedParams, bucket_table, shared_peers};
//! use senju_bench::work::Calibration;
//!
//! let params = SharedParams { threads: vec![2], cs_ns: vec![0], duration_ms: 5, rounds: 1, ..SharedParams::default() };
//! let report = bucket_table(&params, &shared_peers(), &Calibration::measure(), &mut |_| {});
//! assert!(report.rows.iter().all(|r| r.violations == 0 && r.ops_per_sec.median > 0.0));
//! ```

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::peers::BenchRwLock;
use crate::pthread::{DefaultKind, PthreadRwLock};
use crate::rounds::{Padded, rotated};
use crate::stats::{Spread, fairness};
use crate::tkrzw_spin::TkrzwSpinRwLock;
use crate::work::{Calibration, Rng, spin};

/// A lock type constructor: the table lock and the bucket locks are the same kind of lock
/// over different data.
pub trait LockFamily: 'static {
    /// The lock over a `T`.
    type Lock<T: Send + Sync + 'static>: BenchRwLock<T>;
}

/// senju's [`senju_sync::SpinRwLock`].
#[derive(Debug)]
pub enum SpinFamily {}
impl LockFamily for SpinFamily {
    type Lock<T: Send + Sync + 'static> = senju_sync::SpinRwLock<T>;
}

/// senju's [`senju_sync::FairRwLock`].
#[derive(Debug)]
pub enum FairFamily {}
impl LockFamily for FairFamily {
    type Lock<T: Send + Sync + 'static> = senju_sync::FairRwLock<T>;
}

/// [`std::sync::RwLock`].
#[derive(Debug)]
pub enum StdFamily {}
impl LockFamily for StdFamily {
    type Lock<T: Send + Sync + 'static> = std::sync::RwLock<T>;
}

/// glibc's `pthread_rwlock_t`, default kind.
#[derive(Debug)]
pub enum PthreadFamily {}
impl LockFamily for PthreadFamily {
    type Lock<T: Send + Sync + 'static> = PthreadRwLock<DefaultKind, T>;
}

/// The Tkrzw-style single-counter spin lock ([`TkrzwSpinRwLock`]).
#[derive(Debug)]
pub enum TkrzwFamily {}
impl LockFamily for TkrzwFamily {
    type Lock<T: Send + Sync + 'static> = TkrzwSpinRwLock<T>;
}

/// A lock family in this benchmark, with its run function monomorphized for it.
#[derive(Clone, Copy)]
pub struct SharedPeer {
    /// The name shown in tables and JSON.
    pub name: &'static str,
    /// Whether this is one of senju's locks.
    pub senju: bool,
    /// Whether waiters spin (and yield) rather than sleep in the kernel.
    pub spins: bool,
    run: fn(&SharedSpec) -> SharedRun,
}

impl SharedPeer {
    /// The peer for lock family `F`.
    pub fn of<F: LockFamily>(name: &'static str, senju: bool, spins: bool) -> Self {
        Self { name, senju, spins, run: run_once::<F> }
    }
}

impl core::fmt::Debug for SharedPeer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedPeer").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The locks of `senju lab shared`: senju's two, std's, glibc's and the Tkrzw-style spin lock.
pub fn shared_peers() -> Vec<SharedPeer> {
    vec![
        SharedPeer::of::<SpinFamily>(crate::peers::SENJU_SPIN_RWLOCK, true, true),
        SharedPeer::of::<FairFamily>(crate::peers::SENJU_FAIR_RWLOCK, true, false),
        SharedPeer::of::<StdFamily>("std::RwLock", false, false),
        SharedPeer::of::<PthreadFamily>(crate::peers::PTHREAD_RWLOCK_DEFAULT, false, false),
        SharedPeer::of::<TkrzwFamily>(crate::peers::TKRZW_SPIN, false, true),
    ]
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedParams {
    /// Thread counts to try.
    pub threads: Vec<usize>,
    /// Extra work under the bucket lock, in nanoseconds: 0 is the short critical section.
    pub cs_ns: Vec<u64>,
    /// Share of operations that are gets (the rest are sets), in percent.
    pub get_percent: u32,
    /// Hash buckets (each with its own lock).
    pub buckets: usize,
    /// Records preloaded per bucket (the key space is `buckets × records_per_bucket`).
    pub records_per_bucket: usize,
    /// How long each run lasts, in milliseconds.
    pub duration_ms: u64,
    /// How many times every (lock, threads, critical section) cell runs.
    pub rounds: usize,
}

impl Default for SharedParams {
    /// Threads {1, 2, 4, 8, 16}; short (0 ns) and long (2 µs) sections; 50% gets like the
    /// set and get phases of `tkrzw_dbm_perf sequence`; 1024 buckets of 8 records; 200 ms per
    /// run; 3 rounds.
    fn default() -> Self {
        Self {
            threads: vec![1, 2, 4, 8, 16],
            cs_ns: vec![0, 2000],
            get_percent: 50,
            buckets: 1024,
            records_per_bucket: 8,
            duration_ms: 200,
            rounds: 3,
        }
    }
}

/// One run as the worker function sees it.
#[derive(Debug, Clone)]
pub struct SharedSpec {
    /// Threads.
    pub threads: usize,
    /// Busy-loop turns under the bucket lock.
    pub cs_turns: u64,
    /// See [`SharedParams::get_percent`].
    pub get_percent: u32,
    /// See [`SharedParams::buckets`].
    pub buckets: usize,
    /// See [`SharedParams::records_per_bucket`].
    pub records_per_bucket: usize,
    /// How long the run lasts.
    pub duration: Duration,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedRun {
    /// Wall time from the start signal to the stop signal, in nanoseconds.
    pub elapsed_ns: u64,
    /// Operations (gets and sets) completed by each thread.
    pub per_thread_ops: Vec<u64>,
    /// Gets that missed a preloaded key plus lost sets: 0 for a correct lock.
    pub violations: u64,
}

impl SharedRun {
    /// Operations per second, all threads together.
    pub fn ops_per_sec(&self) -> f64 {
        self.per_thread_ops.iter().sum::<u64>() as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }
}

/// One lock × threads × critical section, over all rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedRow {
    /// The lock's name.
    pub peer: String,
    /// Whether the lock is one of senju's.
    pub senju: bool,
    /// Whether its waiters spin.
    pub spins: bool,
    /// Threads.
    pub threads: usize,
    /// Extra work under the bucket lock, in nanoseconds.
    pub cs_ns: u64,
    /// One run per round.
    pub runs: Vec<SharedRun>,
    /// Operations per second across rounds.
    pub ops_per_sec: Spread,
    /// Min/max of per-thread operations across rounds.
    pub fairness: Spread,
    /// Violations over all rounds (must be 0).
    pub violations: u64,
}

/// The whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedReport {
    /// What was run.
    pub params: SharedParams,
    /// One row per lock × threads × critical section.
    pub rows: Vec<SharedRow>,
}

/// Runs the bucket-table benchmark for every peer, thread count and critical section, peers
/// alternating within each cell and their order rotated from cell to cell.
pub fn bucket_table(
    params: &SharedParams,
    peers: &[SharedPeer],
    calibration: &Calibration,
    progress: &mut dyn FnMut(&str),
) -> SharedReport {
    let cells: Vec<(usize, u64)> =
        params.cs_ns.iter().flat_map(|&cs| params.threads.iter().map(move |&t| (t, cs))).collect();
    let mut runs: Vec<Vec<Vec<SharedRun>>> = vec![vec![Vec::new(); cells.len()]; peers.len()];
    let order: Vec<usize> = (0..peers.len()).collect();
    for round in 0..params.rounds.max(1) {
        for (ci, &(threads, cs_ns)) in cells.iter().enumerate() {
            for p in rotated(&order, round + ci) {
                progress(&format!(
                    "shared round {}/{} T={threads} cs={cs_ns}ns {}",
                    round + 1,
                    params.rounds.max(1),
                    peers[p].name
                ));
                let spec = SharedSpec {
                    threads,
                    cs_turns: calibration.turns(cs_ns),
                    get_percent: params.get_percent,
                    buckets: params.buckets.max(1),
                    records_per_bucket: params.records_per_bucket.max(1),
                    duration: Duration::from_millis(params.duration_ms),
                };
                runs[p][ci].push((peers[p].run)(&spec));
            }
        }
    }
    let mut rows = Vec::new();
    for (p, peer) in peers.iter().enumerate() {
        for (ci, &(threads, cs_ns)) in cells.iter().enumerate() {
            let runs = std::mem::take(&mut runs[p][ci]);
            rows.push(SharedRow {
                peer: peer.name.to_string(),
                senju: peer.senju,
                spins: peer.spins,
                threads,
                cs_ns,
                ops_per_sec: Spread::of(runs.iter().map(SharedRun::ops_per_sec)),
                fairness: Spread::of(runs.iter().map(|r| fairness(&r.per_thread_ops))),
                violations: runs.iter().map(|r| r.violations).sum(),
                runs,
            });
        }
    }
    SharedReport { params: params.clone(), rows }
}

/// One hash bucket: its records and how many sets it has seen.
#[derive(Debug, Default)]
struct Bucket {
    records: Vec<(u64, u64)>,
    sets: u64,
}

/// The table: one lock over the whole table (taken shared by every operation, as a database
/// object's lock is) and one lock per bucket.
struct Table<F: LockFamily> {
    whole: Padded<F::Lock<()>>,
    buckets: Box<[Padded<F::Lock<Bucket>>]>,
}

/// A 64-bit mix (the finalizer of SplitMix64), so that neighbouring keys land in unrelated
/// buckets.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl<F: LockFamily> Table<F> {
    fn new(buckets: usize, per_bucket: usize) -> Self {
        let mut contents: Vec<Bucket> = (0..buckets).map(|_| Bucket::default()).collect();
        for key in 0..(buckets * per_bucket) as u64 {
            contents[(mix(key) % buckets as u64) as usize].records.push((key, key));
        }
        Self {
            whole: Padded(F::Lock::new(())),
            buckets: contents.into_iter().map(|b| Padded(F::Lock::new(b))).collect(),
        }
    }

    fn bucket(&self, key: u64) -> &F::Lock<Bucket> {
        &self.buckets[(mix(key) % self.buckets.len() as u64) as usize].0
    }

    /// Looks `key` up; returns whether it was found.
    fn get(&self, key: u64, turns: u64) -> bool {
        self.whole.0.read(|_| {
            self.bucket(key).read(|b| {
                let found = b.records.iter().find(|r| r.0 == key).map(|r| r.1);
                std::hint::black_box(spin(turns, found.unwrap_or(0)));
                found.is_some()
            })
        })
    }

    /// Stores `value` under `key` (an existing key: the key space is preloaded).
    fn set(&self, key: u64, value: u64, turns: u64) -> bool {
        self.whole.0.read(|_| {
            self.bucket(key).write(|b| {
                let seed = spin(turns, value);
                b.sets += 1;
                match b.records.iter_mut().find(|r| r.0 == key) {
                    Some(r) => {
                        r.1 = std::hint::black_box(seed) | value;
                        true
                    }
                    None => false,
                }
            })
        })
    }
}

/// Runs the bucket table once with lock family `F`.
fn run_once<F: LockFamily>(spec: &SharedSpec) -> SharedRun {
    let table = Table::<F>::new(spec.buckets, spec.records_per_bucket);
    let keys = (spec.buckets * spec.records_per_bucket) as u64;
    let stop = Padded(AtomicBool::new(false));
    let start = Barrier::new(spec.threads + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..spec.threads)
            .map(|i| {
                let (table, stop, start) = (&table, &stop.0, &start);
                s.spawn(move || {
                    let mut rng = Rng::new(i as u64 + 1);
                    let (mut ops, mut sets, mut misses) = (0u64, 0u64, 0u64);
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        let key = mix((i as u64) << 48 | ops) % keys;
                        let found = if rng.percent() < spec.get_percent {
                            table.get(key, spec.cs_turns)
                        } else {
                            sets += 1;
                            table.set(key, ops, spec.cs_turns)
                        };
                        misses += u64::from(!found);
                        ops += 1;
                    }
                    (ops, sets, misses)
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        std::thread::sleep(spec.duration);
        stop.0.store(true, Ordering::Relaxed);
        let elapsed_ns = t0.elapsed().as_nanos() as u64;
        let results: Vec<(u64, u64, u64)> =
            workers.into_iter().map(|w| w.join().expect("shared worker panicked")).collect();
        let sets: u64 = results.iter().map(|r| r.1).sum();
        let counted: u64 = table.buckets.iter().map(|b| b.0.read(|b| b.sets)).sum();
        let misses: u64 = results.iter().map(|r| r.2).sum();
        SharedRun {
            elapsed_ns,
            per_thread_ops: results.iter().map(|r| r.0).collect(),
            violations: misses + sets.abs_diff(counted),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_keeps_every_set() {
        let params = SharedParams {
            threads: vec![3],
            cs_ns: vec![0, 100],
            duration_ms: 5,
            rounds: 2,
            ..SharedParams::default()
        };
        let peers = shared_peers();
        let report = bucket_table(&params, &peers, &Calibration { ns_per_turn: 1.0 }, &mut |_| {});
        assert_eq!(report.rows.len(), peers.len() * 2);
        for row in &report.rows {
            assert_eq!(row.violations, 0, "{}", row.peer);
            assert_eq!(row.runs.len(), 2);
            assert!(row.runs.iter().all(|r| r.per_thread_ops.len() == 3));
        }
    }

    #[test]
    fn keys_spread_over_buckets() {
        let t = Table::<StdFamily>::new(16, 8);
        let sizes: Vec<usize> =
            t.buckets.iter().map(|b| BenchRwLock::read(&b.0, |b| b.records.len())).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 128);
        assert!(sizes.iter().all(|&n| n > 0));
    }
}
