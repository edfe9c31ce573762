//! `senju lab handoff`: founding document `003` (Ruby 1.9.3's GVL). Every thread releases
//! the lock and takes it again at once while the others wait: does each get its share, and
//! how many times can the others pass one waiting thread?

use senju_bench::chart::{Chart, Panel, Series};
use senju_bench::handoff::{HandoffParams, release_and_reacquire};
use senju_bench::peers::{MutexPeer, mutex_peers};
use senju_bench::work::Calibration;

use super::table::{Table, spread};
use super::{Common, Outcome, progress, to_value};

/// The locks of the issue: std, parking_lot (and its FairMutex), pthread, senju.
const PEERS: [&str; 5] =
    ["senju::Mutex", "parking_lot::Mutex", "parking_lot::FairMutex", "std::Mutex", "pthread_mutex"];

pub(crate) fn run(c: &Common) -> Result<Outcome, String> {
    let params = HandoffParams {
        threads: c.threads_or(&[2, 4, 8], &[2, 4, 8, 16], &[2, 4, 8, 16]),
        cs_ns: 1500,
        duration_ms: c.pick(100, 300, 1000),
        warmup_ms: c.pick(20, 50, 50),
        rounds: c.rounds_or(1, 3, 5),
    };
    let peers: Vec<MutexPeer> =
        mutex_peers().into_iter().filter(|p| PEERS.contains(&p.name)).collect();
    let mut progress = progress();
    let report = release_and_reacquire(&params, &peers, &Calibration::measure(), &mut progress);
    let mut out = format!(
        "## Release and re-take\n\nT threads each hold the lock ~{} µs, release it and take it \
         again at once; {} ms counted per run after {} ms of warm-up, {} round(s), locks alternating. Fairness = min/max of \
         per-thread holds (1 = equal shares). Largest bypass = the most holds by other threads \
         between two holds of one thread (in a fair hand-off, T − 1).\n\n",
        params.cs_ns as f64 / 1000.0,
        params.duration_ms,
        params.warmup_ms,
        params.rounds,
    );
    let mut table = Table::new(&[
        "lock",
        ">T",
        ">holds (M/s)",
        ">fairness",
        ">largest bypass",
        "per-thread share (median round)",
    ]);
    for r in &report.rows {
        table.row(vec![
            r.peer.clone(),
            r.threads.to_string(),
            spread(&r.ops_per_sec, |v| format!("{:.2}", v / 1e6)),
            spread(&r.fairness, |v| format!("{v:.2}")),
            r.max_bypass.to_string(),
            r.median_round_shares
                .iter()
                .map(|s| format!("{:.0}%", s * 100.0))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    out += &table.render();
    let violations: u64 = report.rows.iter().map(|r| r.violations).sum();
    out += &format!("\nLost writes: {violations}.\n");
    let series = |f: &dyn Fn(&senju_bench::handoff::HandoffRow) -> f64| -> Vec<Series> {
        peers
            .iter()
            .map(|p| Series {
                name: p.name.to_string(),
                points: report
                    .rows
                    .iter()
                    .filter(|r| r.peer == p.name)
                    .map(|r| (r.threads as f64, f(r)))
                    .collect(),
            })
            .collect()
    };
    let chart = Chart {
        title: "Release and re-take: does every waiting thread get its turn?".into(),
        x_label: "threads".into(),
        panels: vec![
            Panel {
                subtitle: "Fairness".into(),
                y_label: "min/max of per-thread holds (1 = equal)".into(),
                log_y: false,
                series: series(&|r| r.fairness.median),
            },
            Panel {
                subtitle: "Largest bypass".into(),
                y_label: "holds by others while one thread waited".into(),
                log_y: true,
                series: series(&|r| r.max_bypass as f64),
            },
        ],
        y_from_zero: true,
    };
    Ok(Outcome { text: out, results: to_value(&report), chart: Some(chart) })
}
