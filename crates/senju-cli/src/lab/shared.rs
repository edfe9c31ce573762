//! `senju lab shared`: founding document `001`. Spin versus blocking shared locks on a
//! database-shaped workload: a hash table whose every operation takes the table lock shared
//! and its bucket's lock, with each lock kind, at 1 to 16 threads, short and long sections.

use senju_bench::chart::{Chart, Panel, Series};
use senju_bench::shared::{SharedParams, bucket_table, shared_peers};
use senju_bench::work::Calibration;

use super::table::{Table, spread};
use super::{Common, Outcome, progress, to_value};

/// Tkrzw's figures: `tkrzw_dbm_perf sequence` on a hash database with 4 threads,
/// `std::shared_mutex` → spin shared lock (million QPS).
const SEED_LINUX: (f64, f64) = (1.60, 2.07);
const SEED_MACOS: (f64, f64) = (0.92, 3.03);

fn cs_name(cs_ns: u64) -> String {
    if cs_ns == 0 { "short".into() } else { format!("long (+{} µs)", cs_ns as f64 / 1000.0) }
}

pub(crate) fn run(c: &Common) -> Result<Outcome, String> {
    let params = SharedParams {
        threads: c.threads_or(&[1, 2, 4], &[1, 2, 4, 8, 16], &[1, 2, 4, 8, 16]),
        duration_ms: c.pick(60, 200, 1000),
        rounds: c.rounds_or(1, 3, 5),
        ..SharedParams::default()
    };
    let peers = shared_peers();
    let mut progress = progress();
    let report = bucket_table(&params, &peers, &Calibration::measure(), &mut progress);
    let mut out = format!(
        "## Hash table with bucket locks\n\nEvery operation takes the table lock shared, then \
         its bucket's lock (shared for a get, exclusive for a set); {}% gets over {} buckets \
         of {} records; {} ms per run, {} round(s), locks alternating. Short: the lookup \
         alone; long: plus busy work under the bucket lock. Throughput median [min–max]; \
         \"vs std\" = median / std::RwLock's median in the same cell.\n\n",
        params.get_percent,
        params.buckets,
        params.records_per_bucket,
        params.duration_ms,
        params.rounds,
    );
    let mut table =
        Table::new(&["section", ">T", "lock", "waits by", ">Mops/s", ">vs std", ">fairness"]);
    for &cs in &params.cs_ns {
        for &t in &params.threads {
            let std_median = report
                .rows
                .iter()
                .find(|r| r.peer == "std::RwLock" && r.threads == t && r.cs_ns == cs)
                .map(|r| r.ops_per_sec.median);
            for r in report.rows.iter().filter(|r| r.threads == t && r.cs_ns == cs) {
                table.row(vec![
                    cs_name(cs),
                    t.to_string(),
                    r.peer.clone(),
                    if r.spins { "spinning".into() } else { "sleeping".into() },
                    spread(&r.ops_per_sec, |v| format!("{:.2}", v / 1e6)),
                    std_median.map_or("–".into(), |s| {
                        format!("{:.2}×", r.ops_per_sec.median / s.max(1e-9))
                    }),
                    spread(&r.fairness, |v| format!("{v:.2}")),
                ]);
            }
        }
    }
    out += &table.render();
    let violations: u64 = report.rows.iter().map(|r| r.violations).sum();
    out += &format!(
        "\nLost sets and missed keys: {violations}.\n\nFounding document 001 (tkrzw_dbm_perf \
         sequence, 4 threads, std::shared_mutex → spin shared lock): Linux {:.2}M → {:.2}M QPS \
         ({:.2}×), macOS {:.2}M → {:.2}M QPS ({:.2}×).\n",
        SEED_LINUX.0,
        SEED_LINUX.1,
        SEED_LINUX.1 / SEED_LINUX.0,
        SEED_MACOS.0,
        SEED_MACOS.1,
        SEED_MACOS.1 / SEED_MACOS.0,
    );
    let panels = params
        .cs_ns
        .iter()
        .map(|&cs| Panel {
            subtitle: format!("{} critical section", cs_name(cs)),
            y_label: "operations per second (millions)".into(),
            log_y: false,
            series: peers
                .iter()
                .map(|p| Series {
                    name: p.name.to_string(),
                    points: report
                        .rows
                        .iter()
                        .filter(|r| r.peer == p.name && r.cs_ns == cs)
                        .map(|r| (r.threads as f64, r.ops_per_sec.median / 1e6))
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Ok(Outcome {
        text: out,
        results: to_value(&report),
        chart: Some(Chart {
            title: "Spin vs blocking shared locks: hash table with bucket locks".into(),
            x_label: "threads".into(),
            panels,
            y_from_zero: true,
        }),
    })
}
