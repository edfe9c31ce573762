//! `senju lab rwlock`: founding document `000`, part 2. The reader flood (R readers hold the
//! read lock back to back, one writer asks every millisecond) and the reader relay (who lets
//! a waiting writer in), for glibc's rwlock with every kind, std, parking_lot, spin, the
//! Tkrzw-style single-counter spin lock and senju's two reader-writer locks.

use senju_bench::chart::{Chart, Panel, Series};
use senju_bench::flood::{FloodParams, Verdict, reader_flood};
use senju_bench::peers::rwlock_lab_peers;
use senju_bench::relay::{LetIn, RelayParams, reader_relay};
use senju_bench::work::Calibration;
use serde::Serialize;

use super::table::{Table, ns, spread};
use super::{Common, Outcome, progress, to_value};

#[derive(Serialize)]
struct Results {
    flood: senju_bench::flood::FloodReport,
    relay: senju_bench::relay::RelayReport,
}

pub(crate) fn run(c: &Common) -> Result<Outcome, String> {
    let params = FloodParams {
        readers: c.threads_or(&[1, 2, 4, 8], &[1, 2, 4, 8], &[1, 2, 4, 8, 16]),
        read_cs_ns: 2000,
        writer_period_us: 1000,
        duration_ms: c.pick(100, 300, 1000),
        rounds: c.rounds_or(1, 3, 5),
    };
    let relay_params =
        RelayParams { deadline_ms: c.pick(200, 500, 2000), ..RelayParams::default() };
    let peers = rwlock_lab_peers();
    let mut progress = progress();
    let calibration = Calibration::measure();
    let flood = reader_flood(&params, &peers, &calibration, &mut progress);
    let relay = reader_relay(&relay_params, &peers, &mut progress);

    let mut out = format!(
        "## Reader flood\n\nR readers hold the read lock back to back ({} µs each); one writer \
         asks for the write lock every {} ms; {} ms per run, {} round(s), locks alternating. \
         Write locks: got while the readers ran (a writer that never waits would get {}). \
         Waits: median of the rounds' p50/p99, and the longest wait of any round (counting an \
         attempt still open at the end). STARVED: no write lock, or the writer spent at least \
         half the run blocked.\n\n",
        params.read_cs_ns / 1000,
        params.writer_period_us / 1000,
        params.duration_ms,
        params.rounds,
        params.ideal_acquisitions(),
    );
    let mut table = Table::new(&[
        "lock",
        ">R",
        ">write locks",
        ">wait p50",
        ">wait p99",
        ">wait max",
        ">writer blocked",
        ">reads (M/s)",
        "writer",
    ]);
    for r in &flood.rows {
        let secs = params.duration_ms as f64 / 1000.0;
        let reads = r.runs.iter().map(|x| x.reader_ops as f64).sum::<f64>()
            / r.runs.len().max(1) as f64
            / secs
            / 1e6;
        table.row(vec![
            r.peer.clone(),
            r.readers.to_string(),
            spread(&r.acquisitions, |v| format!("{v:.0}")),
            r.wait_p50_ns.map_or("–".into(), ns),
            r.wait_p99_ns.map_or("–".into(), ns),
            ns(r.wait_max_ns as f64),
            format!("{:.0}%", r.blocked_fraction.median * 100.0),
            format!("{reads:.2}"),
            match r.verdict {
                Verdict::Starved => "**STARVED**".into(),
                Verdict::GotIn => "gets in".into(),
            },
        ]);
    }
    out += &table.render();
    let violations: u64 = flood.rows.iter().flat_map(|r| &r.runs).map(|r| r.violations).sum();
    out += &format!("\nExclusion violations (torn reads, lost writes): {violations}.\n\n");

    out += &format!(
        "## Reader relay: who lets the writer in?\n\n{} readers pass the read lock hand to \
         hand, so the reader count never drops to zero on its own; the writer asks for {} \
         write locks. A holder lets go early only when its successor has been stuck for {} ms \
         while the writer waits (the lock held it back). The run ends at {} ms whatever \
         happens: then the readers stop and a writer still waiting gets in late.\n\n",
        relay_params.readers,
        relay_params.writes,
        relay_params.grace_us as f64 / 1000.0,
        relay_params.deadline_ms,
    );
    let mut table =
        Table::new(&["lock", ">write locks", ">hand-offs", ">readers held back", "let in by"]);
    for r in &relay.rows {
        table.row(vec![
            r.peer.clone(),
            format!("{}/{}", r.run.writer_entries, r.run.writes_wanted),
            r.run.handoffs.to_string(),
            r.run.held_back.to_string(),
            match r.let_in {
                LetIn::Lock => "the lock".into(),
                LetIn::Deadline => "**the deadline (STARVED)**".into(),
            },
        ]);
    }
    out += &table.render();

    let series = peers
        .iter()
        .map(|p| {
            let rows: Vec<_> = flood.rows.iter().filter(|r| r.peer == p.name).collect();
            let starved: Vec<String> = rows
                .iter()
                .filter(|r| r.verdict == Verdict::Starved)
                .map(|r| r.readers.to_string())
                .collect();
            let name = if starved.is_empty() {
                p.name.to_string()
            } else {
                format!("{} — STARVED at R={}", p.name, starved.join(","))
            };
            let per_sec = 1000.0 / params.duration_ms as f64;
            Series {
                name,
                points: rows
                    .iter()
                    .map(|r| (r.readers as f64, r.acquisitions.median * per_sec))
                    .collect(),
            }
        })
        .collect();
    Ok(Outcome {
        text: out,
        results: to_value(&Results { flood, relay }),
        chart: Some(Chart {
            title: format!(
                "Reader flood: does a writer asking every {} ms get in?",
                params.writer_period_us / 1000
            ),
            x_label: "readers holding the read lock back to back".into(),
            panels: vec![Panel {
                subtitle: String::new(),
                y_label: "write locks the writer got per second".into(),
                log_y: false,
                series,
            }],
            y_from_zero: true,
        }),
    })
}
