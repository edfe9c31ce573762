//! Scenario 1, the throughput matrix: threads × read/write mix × critical-section length.
//!
//! Each worker loops until told to stop: it draws read or write from its own generator, runs
//! the calibrated critical section under the lock (touching the protected line), then runs a
//! short gap outside the lock. A cell runs for a fixed time; its result is the total rate and
//! every thread's own count, whose min/max is the fairness. Reader-writer locks fill the
//! `rwlock` table; mutexes fill the `exclusive` table (every operation takes the lock alone),
//! where the reader-writer locks' 100%-write column is their counterpart.

use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::peers::{BenchRwLock, MutexPeer, RwPeer};
use crate::rounds::{Padded, rotated};
use crate::stats::{Spread, fairness, median};
use crate::transfer;
use crate::work::{Calibration, Rng, Shared, spin};

/// What to run: the matrix and how long and how often to run each cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputParams {
    /// Thread counts (columns of the tables).
    pub threads: Vec<usize>,
    /// Read shares in percent for the reader-writer table (100 = read-only, 0 = write-only).
    pub read_percents: Vec<u32>,
    /// Critical-section lengths in nanoseconds for the reader-writer table.
    pub cs_ns: Vec<u64>,
    /// Critical-section lengths in nanoseconds for the exclusive (mutex) table; empty skips it.
    pub exclusive_cs_ns: Vec<u64>,
    /// Busy work outside the lock after each operation, in nanoseconds.
    pub gap_ns: u64,
    /// How long each cell runs, in milliseconds.
    pub duration_ms: u64,
    /// How many times the whole matrix runs (peers rotate their order every round).
    pub rounds: usize,
}

impl Default for ThroughputParams {
    /// The full matrix of the lock lab: threads {1,2,4,8,16}, mixes {100, 90, 50, 0} % read,
    /// critical sections {0, 100, 2000} ns in both tables, 50 ns gap, 200 ms per cell, 1 round.
    fn default() -> Self {
        Self {
            threads: vec![1, 2, 4, 8, 16],
            read_percents: vec![100, 90, 50, 0],
            cs_ns: vec![0, 100, 2000],
            exclusive_cs_ns: vec![0, 100, 2000],
            gap_ns: 50,
            duration_ms: 200,
            rounds: 1,
        }
    }
}

/// The two tables of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    /// Reader-writer locks under a read/write mix.
    RwLock,
    /// Mutexes; every operation is exclusive.
    Exclusive,
}

/// One cell as a worker function sees it (loop turns already calibrated).
#[derive(Debug, Clone)]
pub struct CellSpec {
    /// Worker threads.
    pub threads: usize,
    /// Percent of operations that take the read lock.
    pub read_percent: u32,
    /// Loop turns inside the lock.
    pub cs_turns: u64,
    /// Loop turns outside the lock after each operation.
    pub gap_turns: u64,
    /// How long the cell runs.
    pub duration: Duration,
}

/// What one run of one cell measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRun {
    /// Wall time from the start signal to the stop signal, in nanoseconds.
    pub elapsed_ns: u64,
    /// Operations completed by each thread.
    pub per_thread_ops: Vec<u64>,
    /// Operations done under the read lock.
    pub reads: u64,
    /// Operations done under the write lock.
    pub writes: u64,
    /// Reads that saw a half-written line plus writes lost at the end: 0 for a correct lock.
    pub violations: u64,
    /// Round trip of a cache line between two CPUs just before this run, ns
    /// ([`crate::transfer`]; `None` where not measured, as in reports written before it was).
    #[serde(default)]
    pub line_round_trip_ns: Option<f64>,
}

impl CellRun {
    /// Operations per second, all threads together.
    pub fn ops_per_sec(&self) -> f64 {
        self.per_thread_ops.iter().sum::<u64>() as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }

    /// Per-thread rates in operations per second, sorted ascending.
    pub fn per_thread_rates(&self) -> Vec<f64> {
        let mut r: Vec<f64> = self
            .per_thread_ops
            .iter()
            .map(|&n| n as f64 * 1e9 / self.elapsed_ns.max(1) as f64)
            .collect();
        r.sort_by(f64::total_cmp);
        r
    }
}

/// A cell's runs summed up across rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// Total operations per second.
    pub ops_per_sec: Spread,
    /// The median thread's rate (ops/s) in each round.
    pub thread_median_ops_per_sec: Spread,
    /// The slowest thread's rate (ops/s) in each round.
    pub thread_min_ops_per_sec: Spread,
    /// The fastest thread's rate (ops/s) in each round.
    pub thread_max_ops_per_sec: Spread,
    /// Slowest over fastest thread's count in each round (1.0 = perfectly even).
    pub fairness: Spread,
    /// Exclusion violations over all rounds (must be 0).
    pub violations: u64,
}

impl CellSummary {
    /// Sums up `runs` (one per round).
    pub fn of(runs: &[CellRun]) -> Self {
        let rates: Vec<Vec<f64>> = runs.iter().map(CellRun::per_thread_rates).collect();
        Self {
            ops_per_sec: Spread::of(runs.iter().map(CellRun::ops_per_sec)),
            thread_median_ops_per_sec: Spread::of(rates.iter().map(|r| median(r.iter().copied()))),
            thread_min_ops_per_sec: Spread::of(
                rates.iter().map(|r| r.first().copied().unwrap_or(0.0)),
            ),
            thread_max_ops_per_sec: Spread::of(
                rates.iter().map(|r| r.last().copied().unwrap_or(0.0)),
            ),
            fairness: Spread::of(runs.iter().map(|r| fairness(&r.per_thread_ops))),
            violations: runs.iter().map(|r| r.violations).sum(),
        }
    }
}

/// One lock in one cell, over all rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputRow {
    /// Which table the row belongs to.
    pub table: Table,
    /// The lock's name.
    pub peer: String,
    /// Whether the lock is one of senju's.
    pub senju: bool,
    /// Worker threads.
    pub threads: usize,
    /// Percent of operations that read (always 0 in the exclusive table).
    pub read_percent: u32,
    /// Critical section in nanoseconds.
    pub cs_ns: u64,
    /// One run per round.
    pub runs: Vec<CellRun>,
    /// The runs summed up.
    pub summary: CellSummary,
}

/// The whole matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputReport {
    /// What was run.
    pub params: ThroughputParams,
    /// The busy-loop calibration the cells used.
    pub calibration: Calibration,
    /// One row per table × lock × threads × mix × critical section.
    pub rows: Vec<ThroughputRow>,
}

struct Cell {
    table: Table,
    threads: usize,
    read_percent: u32,
    cs_ns: u64,
}

/// Runs the matrix for `rw` and `mutex` peers; `progress` hears one line per cell run.
pub fn throughput_matrix(
    params: &ThroughputParams,
    rw: &[RwPeer],
    mutex: &[MutexPeer],
    calibration: &Calibration,
    progress: &mut dyn FnMut(&str),
) -> ThroughputReport {
    let mut cells = Vec::new();
    for &cs_ns in &params.cs_ns {
        for &read_percent in &params.read_percents {
            for &threads in &params.threads {
                cells.push(Cell { table: Table::RwLock, threads, read_percent, cs_ns });
            }
        }
    }
    for &cs_ns in &params.exclusive_cs_ns {
        for &threads in &params.threads {
            cells.push(Cell { table: Table::Exclusive, threads, read_percent: 0, cs_ns });
        }
    }
    // One runner per lock, in table order: (table, name, senju, cell function).
    type Runner = (Table, &'static str, bool, fn(&CellSpec) -> CellRun);
    let runners: Vec<Runner> = rw
        .iter()
        .map(|p| (Table::RwLock, p.name, p.senju, p.throughput))
        .chain(mutex.iter().map(|p| (Table::Exclusive, p.name, p.senju, p.throughput)))
        .collect();

    let mut rows: Vec<ThroughputRow> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for cell in &cells {
        for r in runners.iter().filter(|r| r.0 == cell.table) {
            index
                .insert((cell.table, r.1, cell.threads, cell.read_percent, cell.cs_ns), rows.len());
            rows.push(ThroughputRow {
                table: cell.table,
                peer: r.1.to_string(),
                senju: r.2,
                threads: cell.threads,
                read_percent: cell.read_percent,
                cs_ns: cell.cs_ns,
                runs: Vec::new(),
                summary: CellSummary::of(&[]),
            });
        }
    }

    for round in 0..params.rounds {
        for (c, cell) in cells.iter().enumerate() {
            let peers: Vec<&Runner> = runners.iter().filter(|r| r.0 == cell.table).collect();
            for r in rotated(&peers, round + c) {
                let spec = CellSpec {
                    threads: cell.threads,
                    read_percent: cell.read_percent,
                    cs_turns: calibration.turns(cell.cs_ns),
                    gap_turns: calibration.turns(params.gap_ns),
                    duration: Duration::from_millis(params.duration_ms),
                };
                progress(&format!(
                    "throughput round {}/{} {:?} T={} read={}% cs={}ns {}",
                    round + 1,
                    params.rounds,
                    cell.table,
                    cell.threads,
                    cell.read_percent,
                    cell.cs_ns,
                    r.1
                ));
                let probe = transfer::line_round_trip_ns();
                let mut run = (r.3)(&spec);
                run.line_round_trip_ns = probe;
                let i = index[&(cell.table, r.1, cell.threads, cell.read_percent, cell.cs_ns)];
                rows[i].runs.push(run);
            }
        }
    }
    for row in &mut rows {
        row.summary = CellSummary::of(&row.runs);
    }
    ThroughputReport { params: params.clone(), calibration: *calibration, rows }
}

/// Runs one cell once for lock type `L`.
pub(crate) fn run_cell<L: BenchRwLock<Shared>>(spec: &CellSpec) -> CellRun {
    let lock = Padded(L::new(Shared::default()));
    let stop = Padded(AtomicBool::new(false));
    let start = Barrier::new(spec.threads + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..spec.threads)
            .map(|i| {
                let (lock, stop, start) = (&lock.0, &stop.0, &start);
                s.spawn(move || {
                    let mut rng = Rng::new(i as u64 + 1);
                    let (mut ops, mut reads, mut violations) = (0u64, 0u64, 0u64);
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        if rng.percent() < spec.read_percent {
                            if !lock.read(|d| d.read(spec.cs_turns)) {
                                violations += 1;
                            }
                            reads += 1;
                        } else {
                            lock.write(|d| d.write(spec.cs_turns));
                        }
                        ops += 1;
                        black_box(spin(spec.gap_turns, ops));
                    }
                    (ops, reads, violations)
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        std::thread::sleep(spec.duration);
        stop.0.store(true, Ordering::Relaxed);
        let elapsed_ns = t0.elapsed().as_nanos() as u64;
        let results: Vec<(u64, u64, u64)> =
            workers.into_iter().map(|w| w.join().expect("benchmark worker panicked")).collect();
        let per_thread_ops: Vec<u64> = results.iter().map(|r| r.0).collect();
        let reads: u64 = results.iter().map(|r| r.1).sum();
        let writes = per_thread_ops.iter().sum::<u64>() - reads;
        let version = lock.0.read(Shared::version);
        let mut violations: u64 = results.iter().map(|r| r.2).sum();
        violations += writes.abs_diff(version);
        CellRun { elapsed_ns, per_thread_ops, reads, writes, violations, line_round_trip_ns: None }
    })
}
