//! `senju lab alloc`: founding document `000`, part 1. Each cell runs in a child process of
//! this binary (`senju lab alloc-child`) with `SENJU_ALLOC` naming the allocator; the
//! `senju` binary's global allocator is `senju_bench::alloc::Dispatch`, so one binary
//! measures all three. Allocators alternate cell by cell and the order rotates every round.

use std::collections::HashMap;
use std::process::Command;

use senju_bench::alloc::{self, Allocator, ChildArgs, Frees, SEED_2012};
use senju_bench::chart::{Chart, Panel, Series};
use senju_bench::stats::Spread;
use serde::Serialize;

use super::table::{Table, spread};
use super::{Common, Outcome, progress, to_value};

/// Block size, bytes (the document's 1 KiB).
const SIZE: usize = 1024;

/// Runs one cell in this process and prints its result line.
pub(crate) fn child(a: &ChildArgs) -> Result<(), String> {
    outln!("{}", alloc::child_report(super::DEFAULT_ALLOCATOR, a)?);
    Ok(())
}

/// Seconds and peak KiB, one of each per round.
type Rounds = (Vec<f64>, Vec<f64>);

#[derive(Serialize)]
struct Cell {
    allocator: &'static str,
    frees: &'static str,
    threads: usize,
    /// Pairs in the cell: per thread (local) or per producer (cross), times those threads.
    total_pairs: u64,
    seconds: Spread,
    million_pairs_per_sec: f64,
    peak_rss_mib: f64,
}

#[derive(Serialize)]
struct Results {
    pairs_per_thread: u64,
    block_bytes: usize,
    rounds: usize,
    cells: Vec<Cell>,
    seed_2012: Vec<serde_json::Value>,
}

pub(crate) fn run(c: &Common) -> Result<Outcome, String> {
    let threads = c.threads_or(&[1, 2, 4, 8], &[1, 2, 4, 8], &[1, 2, 4, 8]);
    let pairs: u64 = c.pick(20_000, 1_000_000, 1_000_000);
    let rounds = c.rounds_or(1, 3, 7);
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut progress = progress();
    let frees = [Frees::Local, Frees::Cross];
    // (frees, threads, allocator) → (seconds, peak KiB) per round.
    let mut cells: HashMap<(usize, usize, usize), Rounds> = HashMap::new();
    let mut order = 0usize;
    for round in 0..rounds {
        for (fi, &f) in frees.iter().enumerate() {
            for &t in &threads {
                if f == Frees::Cross && t < 2 {
                    continue;
                }
                order += 1;
                for k in 0..Allocator::ALL.len() {
                    let ai = (k + order) % Allocator::ALL.len();
                    let a = Allocator::ALL[ai];
                    progress(&format!(
                        "alloc round {}/{rounds} {} T={t} {}",
                        round + 1,
                        f.name(),
                        a.name()
                    ));
                    let mut cmd = Command::new(&exe);
                    cmd.args(["lab", "alloc-child"]);
                    let r = alloc::measure_in_child(cmd, a, f, t, pairs, SIZE)?;
                    let e = cells.entry((fi, t, ai)).or_default();
                    e.0.push(r.seconds);
                    e.1.push(r.peak_rss_kib);
                }
            }
        }
    }
    let total =
        |f: Frees, t: usize| pairs * if f == Frees::Cross { (t / 2) as u64 } else { t as u64 };
    let mut out = format!(
        "malloc({SIZE})/free pairs: {pairs} per thread (same-thread) or per producer \
         (cross-thread: T/2 producer→consumer pairs); {rounds} round(s), allocators alternating. \
         Cells: median seconds [min–max] · million pairs/s at the median.\n\n"
    );
    let mut json_cells = Vec::new();
    let mut panels = Vec::new();
    for (fi, &f) in frees.iter().enumerate() {
        let title = match f {
            Frees::Local => "Same-thread frees",
            Frees::Cross => "Cross-thread frees",
        };
        out += &format!("## {title}\n\n");
        let mut headers = vec![">threads", ">pairs"];
        headers.extend(Allocator::ALL.iter().map(|a| a.name()));
        let mut table = Table::new(&headers);
        let mut series: Vec<Series> = Allocator::ALL
            .iter()
            .map(|a| Series { name: a.name().to_string(), points: vec![] })
            .collect();
        for &t in &threads {
            let mut row = vec![t.to_string(), total(f, t).to_string()];
            let mut any = false;
            for (ai, a) in Allocator::ALL.iter().enumerate() {
                let Some((secs, kib)) = cells.get(&(fi, t, ai)) else {
                    row.push("–".into());
                    continue;
                };
                any = true;
                let s = Spread::of(secs.iter().copied());
                let rate = total(f, t) as f64 / s.median.max(1e-9) / 1e6;
                row.push(format!("{} · {rate:.1} M/s", spread(&s, |v| format!("{v:.3} s"))));
                series[ai].points.push((t as f64, rate));
                json_cells.push(Cell {
                    allocator: a.name(),
                    frees: f.name(),
                    threads: t,
                    total_pairs: total(f, t),
                    seconds: s,
                    million_pairs_per_sec: rate,
                    peak_rss_mib: Spread::of(kib.iter().copied()).median / 1024.0,
                });
            }
            if any {
                table.row(row);
            }
        }
        out += &table.render();
        out += "\n";
        panels.push(Panel {
            subtitle: title.to_string(),
            y_label: "million malloc/free pairs per second".into(),
            log_y: false,
            series,
        });
    }
    out += "## Beside the 2012 figures (founding document 000)\n\n\
            2012: Core i7 860 (4 cores), glibc 2.15, 1,000,000 pairs in total divided among the \
            threads; million pairs per second = 1 / seconds. Now: same-thread frees, pairs / \
            median seconds.\n\n";
    let mut headers = vec![">threads", ">glibc 2012", ">jemalloc 2012", ">tcmalloc 2012"];
    let now: Vec<String> = Allocator::ALL.iter().map(|a| format!(">{} now", a.name())).collect();
    headers.extend(now.iter().map(String::as_str));
    let mut table = Table::new(&headers);
    for seed in SEED_2012 {
        if !threads.contains(&seed.threads) {
            continue;
        }
        let mut row = vec![
            seed.threads.to_string(),
            format!("{:.2}", 1.0 / seed.glibc),
            format!("{:.2}", 1.0 / seed.jemalloc),
            format!("{:.2}", 1.0 / seed.tcmalloc),
        ];
        for ai in 0..Allocator::ALL.len() {
            row.push(cells.get(&(0, seed.threads, ai)).map_or("–".into(), |(secs, _)| {
                let m = Spread::of(secs.iter().copied()).median;
                format!("{:.1}", total(Frees::Local, seed.threads) as f64 / m.max(1e-9) / 1e6)
            }));
        }
        table.row(row);
    }
    out += &table.render();
    let results = Results {
        pairs_per_thread: pairs,
        block_bytes: SIZE,
        rounds,
        cells: json_cells,
        seed_2012: SEED_2012
            .iter()
            .map(|s| {
                serde_json::json!({
                    "threads": s.threads, "glibc_s": s.glibc,
                    "jemalloc_s": s.jemalloc, "tcmalloc_s": s.tcmalloc
                })
            })
            .collect(),
    };
    Ok(Outcome {
        text: out,
        results: to_value(&results),
        chart: Some(Chart {
            title: format!("malloc({SIZE})/free scaling: {pairs} pairs per thread"),
            x_label: "threads".into(),
            panels,
            y_from_zero: true,
        }),
    })
}
