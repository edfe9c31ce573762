//! Scenario 3, release and reacquire: T threads each lock, work about 1.5 µs, unlock and
//! lock again at once, with nothing in between.
//!
//! This is founding document `003`'s GVL case: a barging lock lets the thread that just
//! released it win again before a woken waiter runs, so one thread can keep the lock for long
//! stretches. The result is each thread's share of the operations, min/max fairness, and the
//! largest bypass count: how many holds by other threads happened while one thread waited
//! between two of its own holds (read off the protected write counter, so it is a count,
//! not a time).
//!
//! Counting starts after a warm-up (50 ms by default). The start barrier wakes T threads on
//! however many cores there are; with 16 threads on 2 cores the last ones to get a CPU start
//! milliseconds after the first, and a lock that is perfectly fair from then on would still
//! show that head start as unfairness. Each thread takes its count when it first sees the
//! window open: a thread that is off the CPU at that moment has done nothing since, so its
//! count is the same as if it had looked at once.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::peers::{BenchMutex, MutexPeer};
use crate::rounds::{Padded, rotated};
use crate::stats::{Spread, fairness};
use crate::transfer;
use crate::work::{Calibration, Shared};

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffParams {
    /// Thread counts to try.
    pub threads: Vec<usize>,
    /// Work under the lock, in nanoseconds.
    pub cs_ns: u64,
    /// How long each run counts, in milliseconds.
    pub duration_ms: u64,
    /// How long the threads run before counting starts, in milliseconds (0 in results
    /// written before there was a warm-up).
    #[serde(default)]
    pub warmup_ms: u64,
    /// How many times every (lock, threads) pair runs.
    pub rounds: usize,
}

impl Default for HandoffParams {
    /// Threads {2, 4, 8, 16}, 1.5 µs under the lock, 50 ms of warm-up, then 200 ms counted,
    /// 1 round.
    fn default() -> Self {
        Self { threads: vec![2, 4, 8, 16], cs_ns: 1500, duration_ms: 200, warmup_ms: 50, rounds: 1 }
    }
}

/// One run as the worker function sees it.
#[derive(Debug, Clone)]
pub struct HandoffSpec {
    /// Threads.
    pub threads: usize,
    /// Loop turns under the lock.
    pub cs_turns: u64,
    /// How long the run counts.
    pub duration: Duration,
    /// How long the threads run before counting starts.
    pub warmup: Duration,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffRun {
    /// Wall time from the start of counting to the stop signal, in nanoseconds.
    pub elapsed_ns: u64,
    /// Lock holds completed by each thread while counting.
    pub per_thread_ops: Vec<u64>,
    /// Holds before counting started, all threads together (0 without a warm-up).
    #[serde(default)]
    pub warmup_ops: u64,
    /// Lost writes at the end: 0 for a correct lock.
    pub violations: u64,
    /// The largest number of holds by other threads between two consecutive holds of one
    /// thread, over all threads, for holds that ended while counting (0 in results written
    /// before it was measured).
    #[serde(default)]
    pub max_bypass: u64,
    /// Round trip of a cache line between two CPUs just before this run, ns
    /// ([`crate::transfer`]; `None` where not measured, as in reports written before it was).
    #[serde(default)]
    pub line_round_trip_ns: Option<f64>,
    /// CPU time each thread got while counting, ns (`CLOCK_THREAD_CPUTIME_ID`; thread order
    /// as in `per_thread_ops`; empty in reports written before it was measured). Set beside
    /// the holds it tells a lock that hands out holds unevenly from a scheduler that handed
    /// out CPU time unevenly.
    #[serde(default)]
    pub per_thread_cpu_ns: Vec<u64>,
}

impl HandoffRun {
    /// Lock holds per second, all threads together.
    pub fn ops_per_sec(&self) -> f64 {
        self.per_thread_ops.iter().sum::<u64>() as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }

    /// Each thread's share of all holds (sums to 1; all 0 if nothing ran).
    pub fn shares(&self) -> Vec<f64> {
        let total = self.per_thread_ops.iter().sum::<u64>().max(1) as f64;
        self.per_thread_ops.iter().map(|&n| n as f64 / total).collect()
    }
}

/// One lock with one thread count, over all rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffRow {
    /// The lock's name.
    pub peer: String,
    /// Whether the lock is one of senju's.
    pub senju: bool,
    /// Threads.
    pub threads: usize,
    /// One run per round.
    pub runs: Vec<HandoffRun>,
    /// Total holds per second.
    pub ops_per_sec: Spread,
    /// Min/max of per-thread holds.
    pub fairness: Spread,
    /// Per-thread shares (thread order) of the round whose fairness is the median one.
    pub median_round_shares: Vec<f64>,
    /// Lost writes over all rounds (must be 0).
    pub violations: u64,
    /// The largest bypass count of any round (see [`HandoffRun::max_bypass`]).
    #[serde(default)]
    pub max_bypass: u64,
}

/// The whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffReport {
    /// What was run.
    pub params: HandoffParams,
    /// One row per lock × thread count.
    pub rows: Vec<HandoffRow>,
}

/// Runs release-and-reacquire for every mutex peer and thread count.
pub fn release_and_reacquire(
    params: &HandoffParams,
    peers: &[MutexPeer],
    calibration: &Calibration,
    progress: &mut dyn FnMut(&str),
) -> HandoffReport {
    let mut runs: Vec<Vec<Vec<HandoffRun>>> =
        vec![vec![Vec::new(); params.threads.len()]; peers.len()];
    let order: Vec<usize> = (0..peers.len()).collect();
    for round in 0..params.rounds {
        for (ti, &threads) in params.threads.iter().enumerate() {
            for p in rotated(&order, round + ti) {
                progress(&format!(
                    "handoff round {}/{} T={} {}",
                    round + 1,
                    params.rounds,
                    threads,
                    peers[p].name
                ));
                let spec = HandoffSpec {
                    threads,
                    cs_turns: calibration.turns(params.cs_ns),
                    duration: Duration::from_millis(params.duration_ms),
                    warmup: Duration::from_millis(params.warmup_ms),
                };
                let probe = transfer::line_round_trip_ns();
                let mut run = (peers[p].handoff)(&spec);
                run.line_round_trip_ns = probe;
                runs[p][ti].push(run);
            }
        }
    }
    let mut rows = Vec::new();
    for (p, peer) in peers.iter().enumerate() {
        for (ti, &threads) in params.threads.iter().enumerate() {
            let runs = std::mem::take(&mut runs[p][ti]);
            let mut by_fairness: Vec<&HandoffRun> = runs.iter().collect();
            by_fairness.sort_by(|a, b| {
                fairness(&a.per_thread_ops).total_cmp(&fairness(&b.per_thread_ops))
            });
            let median_round_shares =
                by_fairness.get(by_fairness.len() / 2).map(|r| r.shares()).unwrap_or_default();
            rows.push(HandoffRow {
                peer: peer.name.to_string(),
                senju: peer.senju,
                threads,
                ops_per_sec: Spread::of(runs.iter().map(HandoffRun::ops_per_sec)),
                fairness: Spread::of(runs.iter().map(|r| fairness(&r.per_thread_ops))),
                median_round_shares,
                violations: runs.iter().map(|r| r.violations).sum(),
                max_bypass: runs.iter().map(|r| r.max_bypass).max().unwrap_or(0),
                runs,
            });
        }
    }
    HandoffReport { params: params.clone(), rows }
}

/// Runs release-and-reacquire once for mutex type `M`.
pub(crate) fn run_once<M: BenchMutex<Shared>>(spec: &HandoffSpec) -> HandoffRun {
    const WARMING: u8 = 0;
    const COUNTING: u8 = 1;
    const STOPPED: u8 = 2;
    let lock = Padded(M::new(Shared::default()));
    let first = if spec.warmup.is_zero() { COUNTING } else { WARMING };
    let phase = Padded(AtomicU8::new(first));
    let start = Barrier::new(spec.threads + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..spec.threads)
            .map(|_| {
                let (lock, phase, start) = (&lock.0, &phase.0, &start);
                s.spawn(move || {
                    let (mut ops, mut max_bypass) = (0u64, 0u64);
                    // Holds before this thread saw counting start (None until it has).
                    let mut before: Option<u64> = None;
                    // This thread's CPU time when it saw counting start.
                    let mut cpu_before = 0u64;
                    // The write counter right after this thread's previous hold.
                    let mut last: Option<u64> = None;
                    start.wait();
                    loop {
                        match phase.load(Ordering::Relaxed) {
                            STOPPED => break,
                            COUNTING if before.is_none() => {
                                before = Some(ops);
                                cpu_before = thread_cpu_ns();
                                max_bypass = 0;
                            }
                            _ => {}
                        }
                        let now = lock.lock(|d| {
                            d.write(spec.cs_turns);
                            d.version()
                        });
                        if let Some(last) = last {
                            max_bypass = max_bypass.max(now.saturating_sub(last + 1));
                        }
                        last = Some(now);
                        ops += 1;
                    }
                    // (holds while counting, all holds, largest bypass while counting, CPU
                    // time while counting)
                    let counted = ops - before.unwrap_or(ops);
                    let cpu = if before.is_some() { thread_cpu_ns() - cpu_before } else { 0 };
                    (counted, ops, if before.is_some() { max_bypass } else { 0 }, cpu)
                })
            })
            .collect();
        start.wait();
        if first == WARMING {
            std::thread::sleep(spec.warmup);
            phase.0.store(COUNTING, Ordering::Relaxed);
        }
        let t0 = Instant::now();
        std::thread::sleep(spec.duration);
        phase.0.store(STOPPED, Ordering::Relaxed);
        let elapsed_ns = t0.elapsed().as_nanos() as u64;
        let results: Vec<(u64, u64, u64, u64)> =
            workers.into_iter().map(|w| w.join().expect("handoff worker panicked")).collect();
        let per_thread_ops: Vec<u64> = results.iter().map(|r| r.0).collect();
        let per_thread_cpu_ns: Vec<u64> = results.iter().map(|r| r.3).collect();
        let all_ops: u64 = results.iter().map(|r| r.1).sum();
        let max_bypass = results.iter().map(|r| r.2).max().unwrap_or(0);
        let version = lock.0.lock(|d| d.version());
        let counted: u64 = per_thread_ops.iter().sum();
        let violations = all_ops.abs_diff(version);
        HandoffRun {
            elapsed_ns,
            per_thread_ops,
            warmup_ops: all_ops - counted,
            violations,
            max_bypass,
            line_round_trip_ns: None,
            per_thread_cpu_ns,
        }
    })
}

/// The calling thread's CPU time so far, ns (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_during_the_warm_up_are_not_counted() {
        let spec = HandoffSpec {
            threads: 2,
            cs_turns: 10,
            duration: Duration::from_millis(20),
            warmup: Duration::from_millis(30),
        };
        let run = run_once::<senju_sync::Mutex<Shared>>(&spec);
        // The lock's own counter saw every hold (no violations); thousands of holds fit in
        // 30 ms of warm-up, and none of them is in the per-thread counts.
        assert_eq!(run.violations, 0);
        assert_eq!(run.per_thread_ops.len(), 2);
        assert!(run.warmup_ops > 0, "no hold was left out of the counts");
        assert!(run.per_thread_ops.iter().sum::<u64>() > 0, "nothing counted in the window");
        // A thread that counted holds ran on a CPU while counting, and no thread's CPU time
        // there can pass the window's wall time by more than its last hold.
        assert_eq!(run.per_thread_cpu_ns.len(), 2);
        for (&holds, &cpu) in run.per_thread_ops.iter().zip(&run.per_thread_cpu_ns) {
            assert!(holds == 0 || cpu > 0, "{holds} holds in {cpu} ns of CPU");
            assert!(cpu <= run.elapsed_ns + 5_000_000, "{cpu} ns of CPU in {} ns", run.elapsed_ns);
        }
        let cold =
            run_once::<senju_sync::Mutex<Shared>>(&HandoffSpec { warmup: Duration::ZERO, ..spec });
        assert_eq!((cold.violations, cold.warmup_ops), (0, 0));
        assert!(cold.per_thread_ops.iter().sum::<u64>() > 0);
    }
}
