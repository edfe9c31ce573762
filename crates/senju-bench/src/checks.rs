//! The lock lab's targets (`lab/0001-locks/README.md`), checked against a [`Report`].
//!
//! Every comparison uses the medians across rounds of two locks measured side by side in the
//! same run. A target whose data is missing (a peer filtered out, a thread count not run) is
//! reported as not run rather than passed.

use serde::{Deserialize, Serialize};

use crate::flood::Verdict;
use crate::peers::{
    PARKING_LOT_MUTEX, PARKING_LOT_RWLOCK, PTHREAD_RWLOCK_DEFAULT, SENJU_MUTEX, SENJU_SPIN_RWLOCK,
    TKRZW_SPIN,
};
use crate::report::Report;
use crate::throughput::{Table, ThroughputRow};

/// How a target fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every comparison held.
    Pass,
    /// At least one comparison failed (see the detail).
    Fail,
    /// The report lacks the data the target needs.
    NotRun,
}

/// One target and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The target in words.
    pub target: String,
    /// Its outcome.
    pub status: Status,
    /// The failed comparisons, or what was compared, or what is missing.
    pub detail: String,
}

/// Reader counts at which the flood target is checked.
const FLOOD_READERS: [usize; 2] = [4, 8];

/// Checks every target against `report`.
pub fn check_targets(report: &Report) -> Vec<Check> {
    vec![
        spin_read_only(report),
        mutex_throughput(report),
        mutex_fairness(report),
        scaling(report),
        flood(report),
    ]
}

fn finish(target: &str, compared: usize, failures: Vec<String>, missing: &str) -> Check {
    let (status, detail) = if compared == 0 {
        (Status::NotRun, missing.to_string())
    } else if failures.is_empty() {
        (Status::Pass, format!("{compared} comparisons held"))
    } else {
        (Status::Fail, format!("{} of {compared} failed: {}", failures.len(), failures.join("; ")))
    };
    Check { target: target.to_string(), status, detail }
}

fn rows(report: &Report) -> &[ThroughputRow] {
    report.throughput.as_ref().map_or(&[], |t| &t.rows)
}

/// The row of `peer` that matches `like` in everything but the lock.
fn twin<'a>(
    rows: &'a [ThroughputRow],
    like: &ThroughputRow,
    peer: &str,
) -> Option<&'a ThroughputRow> {
    rows.iter().find(|r| {
        r.peer == peer
            && r.table == like.table
            && r.threads == like.threads
            && r.read_percent == like.read_percent
            && r.cs_ns == like.cs_ns
    })
}

/// Compares every throughput row that `ours` selects with the same cell of `peer`: a row fails
/// when its median is below `factor` times the peer's. Returns (cells compared, failures).
fn against_peer(
    report: &Report,
    ours: impl Fn(&ThroughputRow) -> bool,
    peer: &str,
    factor: f64,
) -> (usize, Vec<String>) {
    let rows = rows(report);
    let (mut compared, mut failures) = (0, Vec::new());
    for row in rows.iter().filter(|r| ours(r)) {
        let Some(theirs) = twin(rows, row, peer) else { continue };
        compared += 1;
        let (a, b) = (row.summary.ops_per_sec.median, theirs.summary.ops_per_sec.median);
        if a < factor * b {
            let times = if factor == 1.0 { String::new() } else { format!("{factor} × ") };
            failures.push(format!(
                "T={} cs={}ns: {:.3} < {times}{:.3} Mops/s",
                row.threads,
                row.cs_ns,
                a / 1e6,
                b / 1e6
            ));
        }
    }
    (compared, failures)
}

fn spin_read_only(report: &Report) -> Check {
    let (compared, failures) = against_peer(
        report,
        |r| r.peer == SENJU_SPIN_RWLOCK && r.table == Table::RwLock && r.read_percent == 100,
        PARKING_LOT_RWLOCK,
        1.0,
    );
    finish(
        "SpinRwLock read-only ≥ parking_lot::RwLock at every thread count",
        compared,
        failures,
        "needs 100%-read throughput cells for senju::SpinRwLock and parking_lot::RwLock",
    )
}

fn mutex_throughput(report: &Report) -> Check {
    let (compared, failures) = against_peer(
        report,
        |r| r.peer == SENJU_MUTEX && r.table == Table::Exclusive,
        PARKING_LOT_MUTEX,
        0.9,
    );
    finish(
        "Mutex ≥ 0.9 × parking_lot::Mutex at every thread count (exclusive table)",
        compared,
        failures,
        "needs exclusive-table cells for senju::Mutex and parking_lot::Mutex",
    )
}

fn mutex_fairness(report: &Report) -> Check {
    let (mut compared, mut failures) = (0, Vec::new());
    if let Some(h) = &report.handoff {
        for r in h.rows.iter().filter(|r| r.peer == SENJU_MUTEX) {
            compared += 1;
            if r.fairness.median < 0.9 {
                failures.push(format!("T={}: fairness {:.2}", r.threads, r.fairness.median));
            }
        }
    }
    finish(
        "Mutex min/max fairness ≥ 0.9 under release-and-reacquire",
        compared,
        failures,
        "needs release-and-reacquire rows for senju::Mutex",
    )
}

fn scaling(report: &Report) -> Check {
    let rows = rows(report);
    let (mut compared, mut failures) = (0, Vec::new());
    for at16 in rows.iter().filter(|r| r.senju && r.threads == 16) {
        let Some(at2) = rows.iter().find(|r| {
            r.peer == at16.peer
                && r.table == at16.table
                && r.threads == 2
                && r.read_percent == at16.read_percent
                && r.cs_ns == at16.cs_ns
        }) else {
            continue;
        };
        compared += 1;
        let (a, b) = (at16.summary.ops_per_sec.median, at2.summary.ops_per_sec.median);
        if a < 0.5 * b {
            failures.push(format!(
                "{} read={}% cs={}ns: T=16 {:.3} < ½ × T=2 {:.3} Mops/s",
                at16.peer,
                at16.read_percent,
                at16.cs_ns,
                a / 1e6,
                b / 1e6
            ));
        }
    }
    finish(
        "No senju lock at 16 threads below half its 2-thread throughput",
        compared,
        failures,
        "needs throughput cells at T=2 and T=16 for senju locks",
    )
}

fn flood(report: &Report) -> Check {
    let target = "Reader flood, 4 and 8 readers: senju's writer gets in; glibc default and tkrzw-spin starve";
    let Some(f) = &report.flood else {
        return finish(target, 0, Vec::new(), "needs the reader flood");
    };
    let (mut compared, mut failures) = (0, Vec::new());
    for readers in FLOOD_READERS {
        let at = |peer: &str| f.rows.iter().find(|r| r.peer == peer && r.readers == readers);
        let (Some(dflt), Some(tkrzw)) = (at(PTHREAD_RWLOCK_DEFAULT), at(TKRZW_SPIN)) else {
            continue;
        };
        let ours: Vec<_> = f.rows.iter().filter(|r| r.senju && r.readers == readers).collect();
        if ours.is_empty() {
            continue;
        }
        for ours in ours {
            compared += 1;
            if ours.verdict == Verdict::Starved {
                failures.push(format!(
                    "R={readers}: {} starved ({:.0} write locks)",
                    ours.peer, ours.acquisitions.median
                ));
            }
        }
        for peer in [dflt, tkrzw] {
            compared += 1;
            if peer.verdict != Verdict::Starved {
                failures.push(format!(
                    "R={readers}: {} was not starved ({:.0} write locks)",
                    peer.peer, peer.acquisitions.median
                ));
            }
        }
    }
    finish(
        target,
        compared,
        failures,
        "needs flood rows with 4 and 8 readers for senju, pthread default and tkrzw-spin",
    )
}
