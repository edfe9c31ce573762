//! A whole benchmark run: which scenarios with which peers, the machine, and the results,
//! in one serializable [`Report`].

use serde::{Deserialize, Serialize};

use crate::flood::{FloodParams, FloodReport, reader_flood};
use crate::handoff::{HandoffParams, HandoffReport, release_and_reacquire};
use crate::peers::{MutexPeer, RwPeer};
use crate::throughput::{ThroughputParams, ThroughputReport, throughput_matrix};
use crate::work::Calibration;

/// What to run; a scenario left `None` is skipped.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The throughput matrix.
    pub throughput: Option<ThroughputParams>,
    /// The reader flood.
    pub flood: Option<FloodParams>,
    /// Release and reacquire.
    pub handoff: Option<HandoffParams>,
    /// Reader-writer lock peers (throughput's rwlock table and the flood).
    pub rw_peers: Vec<RwPeer>,
    /// Mutex peers (throughput's exclusive table and release-and-reacquire).
    pub mutex_peers: Vec<MutexPeer>,
    /// Free text stored with the results (e.g. the commit).
    pub note: Option<String>,
}

/// The 1, 5 and 15 minute load averages as `/proc/loadavg` gives them (empty where it is
/// missing): recorded before and after a run, so a reader can tell a quiet machine from a
/// busy one.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The machine the run was made on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Hardware threads available to this process.
    pub cpus: usize,
    /// The first `model name` of `/proc/cpuinfo`, if readable.
    pub cpu_model: Option<String>,
    /// `/proc/sys/kernel/osrelease`, if readable.
    pub kernel: Option<String>,
}

impl Machine {
    /// Describes this machine.
    pub fn detect() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string());
        Self {
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            cpu_model,
            kernel,
        }
    }
}

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// The plan's note.
    pub note: Option<String>,
    /// The busy-loop calibration every scenario used.
    pub calibration: Calibration,
    /// Scenario 1, if run.
    pub throughput: Option<ThroughputReport>,
    /// Scenario 2, if run.
    pub flood: Option<FloodReport>,
    /// Scenario 3, if run.
    pub handoff: Option<HandoffReport>,
}

/// Calibrates once, then runs the plan's scenarios in order (throughput, flood, handoff);
/// `progress` hears one line per run.
pub fn run(plan: &Plan, progress: &mut dyn FnMut(&str)) -> Report {
    let calibration = Calibration::measure();
    progress(&format!("calibrated: {:.3} ns per loop turn", calibration.ns_per_turn));
    let throughput = plan
        .throughput
        .as_ref()
        .map(|p| throughput_matrix(p, &plan.rw_peers, &plan.mutex_peers, &calibration, progress));
    let flood =
        plan.flood.as_ref().map(|p| reader_flood(p, &plan.rw_peers, &calibration, progress));
    let handoff = plan
        .handoff
        .as_ref()
        .map(|p| release_and_reacquire(p, &plan.mutex_peers, &calibration, progress));
    Report {
        machine: Machine::detect(),
        note: plan.note.clone(),
        calibration,
        throughput,
        flood,
        handoff,
    }
}
