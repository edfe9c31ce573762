//! `senju-allocbench`: the allocator experiment of `lab/0002-allocators`.
//!
//! Runs every measurement in a child process of itself with `SENJU_ALLOC` naming the
//! allocator, so one binary compares the system allocator, mimalloc and jemalloc through
//! [`senju_bench::alloc::Dispatch`] (chosen once, before the child's first allocation). The
//! allocators alternate cell by cell and the order rotates every round, so drift on a shared
//! machine falls on all of them alike. Prints Markdown: medians across rounds with the range,
//! and the 2012 table of founding document `000` beside them.

use std::collections::HashMap;
use std::process::{Command, ExitCode};

use clap::{Parser, Subcommand};
use senju_bench::alloc::{self, Allocator, ChildArgs, Dispatch, Frees};
use senju_bench::stats::Spread;

#[global_allocator]
static GLOBAL: Dispatch = Dispatch::with_default(Allocator::System);

#[derive(Parser, Debug)]
#[command(
    name = "senju-allocbench",
    version,
    about = "Compares malloc/free scaling of the system allocator, mimalloc and jemalloc",
    after_help = "Examples:\n  senju-allocbench                      # 5 rounds, 1,2,4,8 threads, 1M pairs per thread\n  senju-allocbench --split --rounds 7   # the 2012 shape: 1M pairs in total\n  senju-allocbench --quick              # a few milliseconds per cell (smoke test)"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Measure one cell with the allocator `SENJU_ALLOC` names (what the parent runs).
    Child(ChildArgs),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Thread counts, comma-separated (cross-thread frees need 2 or more: T/2 pairs).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    threads: Vec<usize>,
    /// Allocations per thread (local) or per producer (cross).
    #[arg(long, default_value_t = 1_000_000)]
    pairs: u64,
    /// Divide `--pairs` among the threads instead (the 2012 document's shape).
    #[arg(long)]
    split: bool,
    /// Block size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// Rounds; every cell runs once per round with every allocator.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Allocators, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "system,mimalloc,jemalloc")]
    allocators: Vec<String>,
    /// Who frees: local, cross, or both (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "local,cross", value_parser = Frees::parse)]
    frees: Vec<Frees>,
    /// 10,000 pairs and one round: a smoke run.
    #[arg(long)]
    quick: bool,
}

fn child(args: &ChildArgs) -> Result<(), String> {
    println!("{}", alloc::child_report(Allocator::System, args)?);
    Ok(())
}

struct Cell {
    seconds: Vec<f64>,
    peak_kib: Vec<f64>,
}

fn measure(
    exe: &std::path::Path,
    a: Allocator,
    frees: Frees,
    t: usize,
    pairs: u64,
    size: usize,
) -> Result<(f64, f64), String> {
    let mut cmd = Command::new(exe);
    cmd.arg("child");
    let r = alloc::measure_in_child(cmd, a, frees, t, pairs, size)?;
    Ok((r.seconds, r.peak_rss_kib))
}

fn fmt_cell(c: &Cell, total_pairs: u64) -> String {
    let s = Spread::of(c.seconds.iter().copied());
    let rate = total_pairs as f64 / s.median / 1e6;
    format!(
        "{:.3} s [{:.3}–{:.3}] · {rate:.1} M/s · {:.0} MiB",
        s.median,
        s.min,
        s.max,
        Spread::of(c.peak_kib.iter().copied()).median / 1024.0
    )
}

fn run(r: &RunArgs) -> Result<(), String> {
    let (pairs, rounds) = if r.quick { (10_000, 1) } else { (r.pairs, r.rounds.max(1)) };
    let allocators: Vec<Allocator> = r
        .allocators
        .iter()
        .map(|n| {
            Allocator::parse(n)
                .ok_or_else(|| format!("unknown allocator {n:?} (system, mimalloc, jemalloc)"))
        })
        .collect::<Result<_, _>>()?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    // Threads that allocate: every thread (local) or the producers (cross).
    let allocating = |f: Frees, t: usize| if f == Frees::Cross { (t / 2) as u64 } else { t as u64 };
    let per = |f: Frees, t: usize| {
        if r.split { (pairs / allocating(f, t).max(1)).max(1) } else { pairs }
    };
    let total = |f: Frees, t: usize| per(f, t) * allocating(f, t);
    let load_before = senju_bench::report::load_average();
    let mut cells: HashMap<(usize, usize, usize), Cell> = HashMap::new();
    let mut order = 0usize;
    for round in 0..rounds {
        for (fi, &f) in r.frees.iter().enumerate() {
            for &t in &r.threads {
                if f == Frees::Cross && t < 2 {
                    continue;
                }
                order += 1;
                for k in 0..allocators.len() {
                    let ai = (k + order) % allocators.len();
                    let (s, kib) = measure(&exe, allocators[ai], f, t, per(f, t), r.size)?;
                    eprintln!(
                        "round {}/{rounds} {} T={t} {}: {s:.3} s",
                        round + 1,
                        f.name(),
                        allocators[ai].name()
                    );
                    let c = cells
                        .entry((fi, t, ai))
                        .or_insert(Cell { seconds: vec![], peak_kib: vec![] });
                    c.seconds.push(s);
                    c.peak_kib.push(kib);
                }
            }
        }
    }
    let load_after = senju_bench::report::load_average();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let glibc = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("# Allocators: malloc({})/free pairs", r.size);
    println!();
    println!(
        "{cpus} CPUs, {glibc}; load average {load_before} before, {load_after} after; {rounds} round(s), allocators alternating cell by cell."
    );
    println!(
        "Each cell: median seconds [min–max across rounds] · million pairs per second at the median · peak RSS of the process."
    );
    for (fi, &f) in r.frees.iter().enumerate() {
        println!();
        match (f, r.split) {
            (Frees::Local, false) => {
                println!("## Same-thread frees: T threads × {pairs} pairs each")
            }
            (Frees::Local, true) => {
                println!("## Same-thread frees: {pairs} pairs in total, divided among T threads")
            }
            (Frees::Cross, false) => {
                println!("## Cross-thread frees: T/2 producer→consumer pairs × {pairs} blocks each")
            }
            (Frees::Cross, true) => println!(
                "## Cross-thread frees: T/2 producer→consumer pairs, {pairs} blocks in total"
            ),
        }
        println!();
        let names: Vec<&str> = allocators.iter().map(|a| a.name()).collect();
        println!("| threads | pairs | {} |", names.join(" | "));
        println!("|---|---|{}", "---|".repeat(names.len()));
        for &t in &r.threads {
            let row: Vec<String> = (0..allocators.len())
                .filter_map(|ai| cells.get(&(fi, t, ai)).map(|c| fmt_cell(c, total(f, t))))
                .collect();
            if !row.is_empty() {
                println!("| {t} | {} | {} |", total(f, t), row.join(" | "));
            }
        }
    }
    if let Some(fi) = r.frees.iter().position(|&f| f == Frees::Local) {
        println!();
        println!(
            "## Beside the 2012 table (founding document 000: 1,000,000 pairs in total divided among the threads, 4-core i7 860, glibc 2.15)"
        );
        println!();
        println!(
            "Million pairs per second (2012: 1,000,000 / seconds; now: pairs / median seconds), 2012 seconds in brackets."
        );
        println!();
        let names: Vec<&str> = allocators.iter().map(|a| a.name()).collect();
        println!(
            "| threads | glibc 2012 | jemalloc 2012 | tcmalloc 2012 | {} |",
            names.iter().map(|n| format!("{n} now")).collect::<Vec<_>>().join(" | ")
        );
        println!("|---|---|---|---|{}", "---|".repeat(names.len()));
        for &t in &r.threads {
            let Some(seed) = alloc::seed_2012(t) else { continue };
            let then = |s: f64| format!("{:.1} [{s:.2} s]", 1.0 / s);
            let now: Vec<String> = (0..allocators.len())
                .map(|ai| {
                    cells.get(&(fi, t, ai)).map_or("–".into(), |c| {
                        format!(
                            "{:.1}",
                            total(Frees::Local, t) as f64
                                / Spread::of(c.seconds.iter().copied()).median
                                / 1e6
                        )
                    })
                })
                .collect();
            println!(
                "| {t} | {} | {} | {} | {} |",
                then(seed.glibc),
                then(seed.jemalloc),
                then(seed.tcmalloc),
                now.join(" | ")
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Sub::Child(args)) => child(&args),
        None => run(&cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("senju-allocbench: {e}");
            ExitCode::FAILURE
        }
    }
}
