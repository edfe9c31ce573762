//! Renders a [`Report`] as Markdown tables (readable as is on a terminal).

use std::fmt::Write as _;

use crate::checks::{Status, check_targets};
use crate::flood::{FloodReport, Verdict};
use crate::handoff::HandoffReport;
use crate::report::Report;
use crate::stats::{Spread, fairness};
use crate::throughput::{Table, ThroughputReport, ThroughputRow};
use crate::transfer::ProbeSummary;

/// How much to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Add per-thread tables (median, min and max thread rate) under each throughput table.
    pub detail: bool,
    /// Add the PASS/FAIL section for the lab's targets.
    pub checks: bool,
}

/// The report as Markdown.
pub fn render(report: &Report, options: Options) -> String {
    let mut out = String::new();
    let m = &report.machine;
    let _ = writeln!(out, "# senju lock benchmark\n");
    let _ = writeln!(
        out,
        "Machine: {} CPUs, {}, kernel {}. Busy loop: {:.3} ns per turn.",
        m.cpus,
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.kernel.as_deref().unwrap_or("unknown"),
        report.calibration.ns_per_turn
    );
    if let Some(note) = &report.note {
        let _ = writeln!(out, "Note: {note}.");
    }
    let _ = writeln!(
        out,
        "Each figure is the median across rounds; `[a–b]` is the range across rounds (shown \
         when there is more than one). Fairness `f` = slowest thread / fastest thread.\n"
    );
    probes(&mut out, report);
    if let Some(t) = &report.throughput {
        throughput(&mut out, t, options);
    }
    if let Some(f) = &report.flood {
        flood(&mut out, f);
    }
    if let Some(h) = &report.handoff {
        handoff(&mut out, h);
    }
    if options.checks {
        checks(&mut out, report);
    }
    out
}

/// `median` alone, or `median [min–max]` when the rounds differ.
fn spread(s: &Spread, fmt: impl Fn(f64) -> String) -> String {
    if s.min == s.max {
        fmt(s.median)
    } else {
        format!("{} [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max))
    }
}

/// Operations per second in millions, three significant figures or so.
fn mops(ops_per_sec: f64) -> String {
    let m = ops_per_sec / 1e6;
    if m >= 100.0 {
        format!("{m:.0}")
    } else if m >= 10.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.2}")
    }
}

/// Operations per second in thousands.
fn kops(ops_per_sec: f64) -> String {
    format!("{:.0}", ops_per_sec / 1e3)
}

/// A duration in nanoseconds with a unit that fits.
pub fn human_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn ratio(x: f64) -> String {
    format!("{x:.2}")
}

fn throughput(out: &mut String, t: &ThroughputReport, options: Options) {
    let p = &t.params;
    let _ = writeln!(
        out,
        "## Throughput\n\nTotal Mops/s and fairness per thread count; {} ms per cell, {} \
         round(s), {} ns of work outside the lock after every operation.\n",
        p.duration_ms, p.rounds, p.gap_ns
    );
    let mut groups: Vec<(Table, u32, u64)> = Vec::new();
    for r in &t.rows {
        let key = (r.table, r.read_percent, r.cs_ns);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    for (table, read_percent, cs_ns) in groups {
        let rows: Vec<&ThroughputRow> = t
            .rows
            .iter()
            .filter(|r| r.table == table && r.read_percent == read_percent && r.cs_ns == cs_ns)
            .collect();
        let title = match table {
            Table::RwLock => format!(
                "### Reader-writer locks: {read_percent}% read / {}% write, critical section {}",
                100 - read_percent,
                human_ns(cs_ns as f64)
            ),
            Table::Exclusive => {
                format!("### Exclusive (mutexes): critical section {}", human_ns(cs_ns as f64))
            }
        };
        let _ = writeln!(out, "{title}\n");
        let mut threads: Vec<usize> = rows.iter().map(|r| r.threads).collect();
        threads.dedup();
        threads.sort_unstable();
        threads.dedup();
        let mut peers: Vec<&str> = Vec::new();
        for r in &rows {
            if !peers.contains(&r.peer.as_str()) {
                peers.push(&r.peer);
            }
        }
        let _ = write!(out, "| lock |");
        for t in &threads {
            let _ = write!(out, " T={t} |");
        }
        let _ = write!(out, "\n|---|");
        for _ in &threads {
            let _ = write!(out, "---:|");
        }
        out.push('\n');
        for peer in &peers {
            let _ = write!(out, "| {peer} |");
            for t in &threads {
                match rows.iter().find(|r| r.peer == *peer && r.threads == *t) {
                    Some(r) => {
                        let s = &r.summary;
                        let violated =
                            if s.violations > 0 { " **EXCLUSION VIOLATED**" } else { "" };
                        let _ = write!(
                            out,
                            " {} f{}{violated} |",
                            spread(&s.ops_per_sec, mops),
                            ratio(s.fairness.median)
                        );
                    }
                    None => out.push_str(" – |"),
                }
            }
            out.push('\n');
        }
        out.push('\n');
        if options.detail {
            let _ = writeln!(
                out,
                "| lock | T | total Mops/s | thread median kops/s | thread min–max kops/s | fairness |\n|---|---:|---:|---:|---:|---:|"
            );
            for peer in &peers {
                for r in rows.iter().filter(|r| r.peer == *peer) {
                    let s = &r.summary;
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} | {}–{} | {} |",
                        r.peer,
                        r.threads,
                        spread(&s.ops_per_sec, mops),
                        kops(s.thread_median_ops_per_sec.median),
                        kops(s.thread_min_ops_per_sec.median),
                        kops(s.thread_max_ops_per_sec.median),
                        spread(&s.fairness, ratio)
                    );
                }
            }
            out.push('\n');
        }
    }
}

fn flood(out: &mut String, f: &FloodReport) {
    let p = &f.params;
    let ideal = p.ideal_acquisitions();
    let _ = writeln!(
        out,
        "## Reader flood\n\nReaders hold the read lock {} back to back; one writer asks every \
         {} for {} ms ({} round(s)); ideal: {ideal} write locks (fewer when threads outnumber \
         cores: the writer also waits for a CPU). `blocked` is the share of the flood the \
         writer spent inside `write()`; STARVED: no write lock, or blocked at least half the \
         time (median round). `max` counts an attempt still waiting when the flood ended.\n",
        human_ns(p.read_cs_ns as f64),
        human_ns(p.writer_period_us as f64 * 1e3),
        p.duration_ms,
        p.rounds
    );
    let _ = writeln!(
        out,
        "| lock | readers | writer got in | blocked | wait p50 | wait p99 | wait max | reader Mops/s | |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &f.rows {
        let reader_rate = crate::stats::median(
            r.runs.iter().map(|x| x.reader_ops as f64 * 1e3 / p.duration_ms.max(1) as f64),
        );
        let violated: u64 = r.runs.iter().map(|x| x.violations).sum();
        let mark = match r.verdict {
            Verdict::Starved if r.acquisitions.max == 0.0 => "**STARVED** (never)".to_string(),
            Verdict::Starved => "**STARVED**".to_string(),
            Verdict::GotIn => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {mark}{} |",
            r.peer,
            r.readers,
            spread(&r.acquisitions, |x| format!("{x:.0}")),
            spread(&r.blocked_fraction, |x| format!("{:.0}%", x * 100.0)),
            r.wait_p50_ns.map_or("–".into(), human_ns),
            r.wait_p99_ns.map_or("–".into(), human_ns),
            human_ns(r.wait_max_ns as f64),
            mops(reader_rate),
            if violated > 0 { " **EXCLUSION VIOLATED**" } else { "" }
        );
    }
    out.push('\n');
}

fn handoff(out: &mut String, h: &HandoffReport) {
    let p = &h.params;
    let _ = writeln!(
        out,
        "## Release and reacquire\n\nEach thread locks, works {}, unlocks and locks again at \
         once; {} ms counted per run after {} ms of warm-up, {} round(s). Shares are per \
         thread, from the round with the median fairness.\n",
        human_ns(p.cs_ns as f64),
        p.duration_ms,
        p.warmup_ms,
        p.rounds
    );
    let _ = writeln!(
        out,
        "| lock | T | Mops/s | fairness (min/max) | per-thread share |\n|---|---:|---:|---:|---|"
    );
    for r in &h.rows {
        let shares: Vec<String> =
            r.median_round_shares.iter().map(|s| format!("{:.0}%", s * 100.0)).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {}{} | {} |",
            r.peer,
            r.threads,
            spread(&r.ops_per_sec, mops),
            spread(&r.fairness, ratio),
            if r.violations > 0 { " **EXCLUSION VIOLATED**" } else { "" },
            shares.join(" ")
        );
    }
    out.push('\n');
    handoff_rounds(out, h);
}

/// One line on the cross-CPU round trips probed before the runs (none in reports written
/// before the probe existed, or where it could not pin two CPUs).
fn probes(out: &mut String, report: &Report) {
    let throughput = report.throughput.iter().flat_map(|t| &t.rows).flat_map(|r| &r.runs);
    let handoff = report.handoff.iter().flat_map(|h| &h.rows).flat_map(|r| &r.runs);
    let all = throughput.map(|r| r.line_round_trip_ns).chain(handoff.map(|r| r.line_round_trip_ns));
    if let Some(s) = ProbeSummary::of(all) {
        let _ = writeln!(
            out,
            "Cache line round trip between two CPUs, probed before each run: median {:.0} ns \
             [{:.0}–{:.0}]; {} of {} runs found it slower than twice the fastest probe.\n",
            s.round_trip_ns.median, s.round_trip_ns.min, s.round_trip_ns.max, s.slow, s.probed
        );
    }
}

/// Under the release-and-reacquire table: each senju row's rounds as fairness with the
/// cross-CPU round trip probed before it, so a low round can be matched with the machine's
/// mode.
fn handoff_rounds(out: &mut String, h: &HandoffReport) {
    let rows: Vec<_> = h
        .rows
        .iter()
        .filter(|r| r.senju && r.runs.iter().any(|run| run.line_round_trip_ns.is_some()))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Rounds of senju's rows: fairness of the holds (cross-CPU round trip before the run; \
         `cpu`: min/max of the CPU time the threads got while counting, where measured).\n"
    );
    for r in rows {
        let rounds: Vec<String> = r
            .runs
            .iter()
            .map(|run| {
                let mut notes = Vec::new();
                if let Some(ns) = run.line_round_trip_ns {
                    notes.push(format!("{ns:.0} ns"));
                }
                if !run.per_thread_cpu_ns.is_empty() {
                    notes.push(format!("cpu {:.2}", fairness(&run.per_thread_cpu_ns)));
                }
                let holds = fairness(&run.per_thread_ops);
                if notes.is_empty() {
                    format!("{holds:.2}")
                } else {
                    format!("{holds:.2} ({})", notes.join(", "))
                }
            })
            .collect();
        let _ = writeln!(out, "- {} T={}: {}", r.peer, r.threads, rounds.join(", "));
    }
    out.push('\n');
}

fn checks(out: &mut String, report: &Report) {
    let _ = writeln!(out, "## Targets\n\n| target | result | detail |\n|---|---|---|");
    for c in check_targets(report) {
        let status = match c.status {
            Status::Pass => "PASS",
            Status::Fail => "**FAIL**",
            Status::NotRun => "not run",
        };
        let _ = writeln!(out, "| {} | {status} | {} |", c.target, c.detail.replace('|', "/"));
    }
    out.push('\n');
}
