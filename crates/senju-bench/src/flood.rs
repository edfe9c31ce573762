//! Scenario 2, the reader flood: R readers hold the read lock back to back (about 2 µs each)
//! while one writer asks for the write lock every millisecond.
//!
//! This is founding document `000`'s experiment: with a reader-preferring lock the readers
//! pass the lock hand to hand and the writer never gets in. The writer's attempt cannot be
//! cancelled, so the scenario ends on time another way: at the deadline the readers stop,
//! which frees the lock, and a writer still waiting then gets in late. Such an attempt is not
//! counted as an acquisition; its wait up to the deadline is reported as `pending_wait_ns`.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::peers::{BenchRwLock, RwPeer};
use crate::rounds::{Padded, rotated};
use crate::stats::{Spread, percentile_sorted};
use crate::work::{Calibration, Shared};

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloodParams {
    /// Reader counts to try.
    pub readers: Vec<usize>,
    /// Each reader's critical section, in nanoseconds.
    pub read_cs_ns: u64,
    /// The writer asks this often, in microseconds (a new attempt starts one period after the
    /// previous one started, or at once if that one waited longer).
    pub writer_period_us: u64,
    /// How long each run lasts, in milliseconds.
    pub duration_ms: u64,
    /// How many times every (lock, readers) pair runs.
    pub rounds: usize,
}

impl Default for FloodParams {
    /// Readers {2, 4, 8}, 2 µs reads, a write attempt every 1 ms, 1 s per run, 1 round.
    fn default() -> Self {
        Self {
            readers: vec![2, 4, 8],
            read_cs_ns: 2000,
            writer_period_us: 1000,
            duration_ms: 1000,
            rounds: 1,
        }
    }
}

impl FloodParams {
    /// Write attempts a writer that never waits would make: duration / period.
    pub fn ideal_acquisitions(&self) -> u64 {
        self.duration_ms * 1000 / self.writer_period_us.max(1)
    }
}

/// One run as the worker function sees it.
#[derive(Debug, Clone)]
pub struct FloodSpec {
    /// Reader threads.
    pub readers: usize,
    /// Loop turns inside each read lock.
    pub read_turns: u64,
    /// Time between the starts of two write attempts.
    pub period: Duration,
    /// How long the flood lasts.
    pub duration: Duration,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloodRun {
    /// Write locks the writer got while the readers were still running.
    pub acquisitions: u64,
    /// Median wait of those acquisitions, in nanoseconds.
    pub wait_p50_ns: Option<u64>,
    /// 99th percentile wait, in nanoseconds.
    pub wait_p99_ns: Option<u64>,
    /// Longest completed wait, in nanoseconds.
    pub wait_max_ns: Option<u64>,
    /// For an attempt that got in only after the flood ended (the readers stopped): how long
    /// it waited in all, in nanoseconds.
    pub pending_wait_ns: Option<u64>,
    /// Time the writer spent inside `write()` waiting, completed and pending attempts
    /// together (the pending one counted up to the end of the flood), in nanoseconds.
    pub blocked_ns: u64,
    /// The flood's length, in nanoseconds.
    pub duration_ns: u64,
    /// Read locks taken by all readers together.
    pub reader_ops: u64,
    /// Reads that saw a half-written line plus lost writes: 0 for a correct lock.
    pub violations: u64,
}

impl FloodRun {
    /// The longest time the writer waited, counting an attempt still open at the end.
    pub fn longest_wait_ns(&self) -> u64 {
        self.wait_max_ns.unwrap_or(0).max(self.pending_wait_ns.unwrap_or(0))
    }

    /// The share of the flood the writer spent blocked in `write()` (0 to 1).
    pub fn blocked_fraction(&self) -> f64 {
        (self.blocked_ns as f64 / self.duration_ns.max(1) as f64).min(1.0)
    }
}

/// How the writer fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The writer got write locks and spent less than half the flood blocked.
    GotIn,
    /// No write lock at all, or the writer spent at least half the flood blocked in
    /// `write()`.
    Starved,
}

/// One lock with one reader count, over all rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloodRow {
    /// The lock's name.
    pub peer: String,
    /// Whether the lock is one of senju's.
    pub senju: bool,
    /// Reader threads.
    pub readers: usize,
    /// One run per round.
    pub runs: Vec<FloodRun>,
    /// Acquisitions across rounds.
    pub acquisitions: Spread,
    /// Median of the rounds' p50 waits, in nanoseconds (rounds without acquisitions skipped).
    pub wait_p50_ns: Option<f64>,
    /// Median of the rounds' p99 waits, in nanoseconds.
    pub wait_p99_ns: Option<f64>,
    /// Longest wait in any round, counting attempts still open at the end, in nanoseconds.
    pub wait_max_ns: u64,
    /// Share of the flood the writer spent blocked in `write()`, across rounds.
    pub blocked_fraction: Spread,
    /// Rounds in which the writer got no write lock at all.
    pub rounds_without_acquisition: usize,
    /// Judged on the medians: [`Verdict::Starved`] if the writer got no write lock or was
    /// blocked at least half the time. (The ideal count, [`FloodParams::ideal_acquisitions`],
    /// is not the yardstick: when threads outnumber cores, the writer also waits for a CPU
    /// after each sleep, which is the scheduler's doing, not the lock's.)
    pub verdict: Verdict,
}

/// The whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloodReport {
    /// What was run.
    pub params: FloodParams,
    /// One row per lock × reader count.
    pub rows: Vec<FloodRow>,
}

/// Runs the reader flood for every peer and reader count.
pub fn reader_flood(
    params: &FloodParams,
    peers: &[RwPeer],
    calibration: &Calibration,
    progress: &mut dyn FnMut(&str),
) -> FloodReport {
    let mut runs: Vec<Vec<Vec<FloodRun>>> =
        vec![vec![Vec::new(); params.readers.len()]; peers.len()];
    let order: Vec<usize> = (0..peers.len()).collect();
    for round in 0..params.rounds {
        for (ri, &readers) in params.readers.iter().enumerate() {
            for p in rotated(&order, round + ri) {
                progress(&format!(
                    "flood round {}/{} readers={} {}",
                    round + 1,
                    params.rounds,
                    readers,
                    peers[p].name
                ));
                let spec = FloodSpec {
                    readers,
                    read_turns: calibration.turns(params.read_cs_ns),
                    period: Duration::from_micros(params.writer_period_us),
                    duration: Duration::from_millis(params.duration_ms),
                };
                runs[p][ri].push((peers[p].flood)(&spec));
            }
        }
    }
    let mut rows = Vec::new();
    for (p, peer) in peers.iter().enumerate() {
        for (ri, &readers) in params.readers.iter().enumerate() {
            let runs = std::mem::take(&mut runs[p][ri]);
            let acquisitions = Spread::of(runs.iter().map(|r| r.acquisitions as f64));
            let blocked_fraction = Spread::of(runs.iter().map(FloodRun::blocked_fraction));
            let opt_median = |f: fn(&FloodRun) -> Option<u64>| {
                let v: Vec<f64> = runs.iter().filter_map(f).map(|x| x as f64).collect();
                (!v.is_empty()).then(|| Spread::of(v).median)
            };
            rows.push(FloodRow {
                peer: peer.name.to_string(),
                senju: peer.senju,
                readers,
                wait_p50_ns: opt_median(|r| r.wait_p50_ns),
                wait_p99_ns: opt_median(|r| r.wait_p99_ns),
                wait_max_ns: runs.iter().map(FloodRun::longest_wait_ns).max().unwrap_or(0),
                rounds_without_acquisition: runs.iter().filter(|r| r.acquisitions == 0).count(),
                verdict: if acquisitions.median == 0.0 || blocked_fraction.median >= 0.5 {
                    Verdict::Starved
                } else {
                    Verdict::GotIn
                },
                blocked_fraction,
                acquisitions,
                runs,
            });
        }
    }
    FloodReport { params: params.clone(), rows }
}

/// Runs the flood once for lock type `L`.
pub(crate) fn run_once<L: BenchRwLock<Shared>>(spec: &FloodSpec) -> FloodRun {
    let lock = Padded(L::new(Shared::default()));
    let stop = Padded(AtomicBool::new(false));
    let start = Barrier::new(spec.readers + 2);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..spec.readers)
            .map(|_| {
                let (lock, stop, start) = (&lock.0, &stop.0, &start);
                s.spawn(move || {
                    let (mut ops, mut violations) = (0u64, 0u64);
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        if !lock.read(|d| d.read(spec.read_turns)) {
                            violations += 1;
                        }
                        ops += 1;
                    }
                    (ops, violations)
                })
            })
            .collect();
        let writer = {
            let (lock, stop, start) = (&lock.0, &stop.0, &start);
            s.spawn(move || {
                let mut waits = Vec::new();
                let mut pending = None;
                let mut writes = 0u64;
                start.wait();
                let began = Instant::now();
                let mut blocked = 0u64;
                let mut next = began;
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    let asked = Instant::now();
                    let (got, late) = lock.write(|d| {
                        d.write(0);
                        // Read under the lock: if the flood was already over, the readers
                        // stopped and let us in; that is not an acquisition under the flood.
                        (Instant::now(), stop.load(Ordering::Relaxed))
                    });
                    writes += 1;
                    if late {
                        pending = Some(got.duration_since(asked).as_nanos() as u64);
                        let end = began + spec.duration;
                        blocked += end.saturating_duration_since(asked).as_nanos() as u64;
                        break;
                    }
                    let wait = got.duration_since(asked).as_nanos() as u64;
                    blocked += wait;
                    waits.push(wait);
                    next = asked + spec.period;
                }
                (waits, pending, writes, blocked)
            })
        };
        start.wait();
        std::thread::sleep(spec.duration);
        stop.0.store(true, Ordering::Relaxed);
        let mut reader_ops = 0;
        let mut violations = 0;
        for r in readers {
            let (ops, v) = r.join().expect("flood reader panicked");
            reader_ops += ops;
            violations += v;
        }
        let (mut waits, pending_wait_ns, writes, blocked_ns) =
            writer.join().expect("flood writer panicked");
        violations += writes.abs_diff(lock.0.read(Shared::version));
        waits.sort_unstable();
        FloodRun {
            acquisitions: waits.len() as u64,
            wait_p50_ns: percentile_sorted(&waits, 50.0),
            wait_p99_ns: percentile_sorted(&waits, 99.0),
            wait_max_ns: waits.last().copied(),
            pending_wait_ns,
            blocked_ns,
            duration_ns: spec.duration.as_nanos() as u64,
            reader_ops,
            violations,
        }
    })
}
