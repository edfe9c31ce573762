//! `senju-lockbench`: runs senju's lock benchmarks and prints Markdown tables.
//!
//! Without `--full` it runs the short showcase that `make run` shows (read-only and 90/10
//! with a 100 ns critical section, the exclusive table at 100 ns, the reader flood with 4 and
//! 8 readers, release and reacquire); `--full` runs the lab's whole matrix; `--quick` cuts
//! every duration for smoke runs. `summarize REPORT.json` re-renders a saved run with the
//! target checks.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use senju_bench::flood::FloodParams;
use senju_bench::handoff::HandoffParams;
use senju_bench::throughput::ThroughputParams;
use senju_bench::{Plan, Report, markdown, peers, report};

#[derive(Parser, Debug)]
#[command(
    name = "senju-lockbench",
    version,
    about = "Benchmarks senju's locks against std, parking_lot, spin, pthread and a Tkrzw-style spin lock"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a saved JSON report as Markdown, with the PASS/FAIL target checks.
    Summarize {
        /// The file written by `--json`.
        report: PathBuf,
        /// Add per-thread tables under each throughput table.
        #[arg(long)]
        detail: bool,
    },
    /// List the peers (lock names that `--peers` filters on).
    Peers,
    /// Print the round trip of a cache line between two CPUs, once per interval: the
    /// machine's mode over time (on the project's VM it jumps between about 50-100 and
    /// 400-500 ns).
    Probe {
        /// How many probes.
        #[arg(long, default_value_t = 30)]
        count: usize,
        /// Time between two probes, ms.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Run the lab's whole matrix: mixes 100,90,50,0 % read × critical sections 0,100,2000 ns,
    /// reader flood with 2,4,8 readers for 1 s, release-and-reacquire.
    #[arg(long)]
    full: bool,
    /// Cut every duration (throughput and hand-off cells 50 ms, flood 150 ms) for smoke runs.
    #[arg(long)]
    quick: bool,
    /// Scenarios to run.
    #[arg(long, value_delimiter = ',', default_value = "throughput,flood,handoff")]
    scenarios: Vec<Scenario>,
    /// Thread counts for the throughput matrix [default: 1,2,4,8,16].
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Read shares in percent [default: 100,90; with --full 100,90,50,0].
    #[arg(long, value_delimiter = ',')]
    mix: Option<Vec<u32>>,
    /// Critical sections of the reader-writer table, ns [default: 100; with --full 0,100,2000].
    #[arg(long, value_delimiter = ',')]
    cs_ns: Option<Vec<u64>>,
    /// Critical sections of the exclusive (mutex) table, ns [default: as --cs-ns].
    #[arg(long, value_delimiter = ',')]
    exclusive_cs_ns: Option<Vec<u64>>,
    /// Work outside the lock after every operation, ns.
    #[arg(long, default_value_t = 50)]
    gap_ns: u64,
    /// Reader counts for the flood [default: 4,8; with --full 2,4,8].
    #[arg(long, value_delimiter = ',')]
    readers: Option<Vec<usize>>,
    /// Thread counts for release-and-reacquire [default: the --threads values ≥ 2].
    #[arg(long, value_delimiter = ',')]
    handoff_threads: Option<Vec<usize>>,
    /// Work under the lock in release-and-reacquire, ns.
    #[arg(long, default_value_t = 1500)]
    handoff_cs_ns: u64,
    /// Release-and-reacquire: how long the threads run before counting starts, ms
    /// [default: 50; with --quick 10].
    #[arg(long)]
    handoff_warmup_ms: Option<u64>,
    /// Duration of every run, ms, overriding each scenario's own default (throughput and
    /// hand-off 200 ms, flood 500 ms; with --full flood 1000 ms).
    #[arg(long)]
    duration_ms: Option<u64>,
    /// Duration of each flood run, ms (overrides --duration-ms for the flood).
    #[arg(long)]
    flood_ms: Option<u64>,
    /// Repeat everything this many times; figures are medians across rounds.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Keep only peers whose name contains one of these (case-insensitive).
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// Write the full report (every round of every cell) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the Markdown tables here too.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Add per-thread tables under each throughput table.
    #[arg(long)]
    detail: bool,
    /// Leave out the PASS/FAIL target checks.
    #[arg(long)]
    no_checks: bool,
    /// Free text stored with the results (e.g. the commit).
    #[arg(long)]
    note: Option<String>,
    /// Print a line per run on stderr even when it is not a terminal.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Throughput,
    Flood,
    Handoff,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Summarize { report, detail }) => summarize(&report, detail),
        Some(Command::Peers) => {
            for p in peers::rw_peers() {
                println!("rwlock  {}", p.name);
            }
            for p in peers::mutex_peers() {
                println!("mutex   {}", p.name);
            }
            Ok(())
        }
        Some(Command::Probe { count, interval_ms }) => probe(count, interval_ms),
        None => run(&cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("senju-lockbench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn probe(count: usize, interval_ms: u64) -> Result<(), String> {
    let start = std::time::Instant::now();
    println!("| seconds | round trip, ns |\n|---:|---:|");
    for i in 0..count {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(interval_ms));
        }
        let ns = senju_bench::transfer::line_round_trip_ns()
            .ok_or("cannot pin two threads to two CPUs (fewer than two CPUs?)")?;
        println!("| {:.1} | {ns:.0} |", start.elapsed().as_secs_f64());
    }
    Ok(())
}

fn summarize(path: &PathBuf, detail: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let report: Report = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a senju-lockbench JSON report: {e}", path.display()))?;
    print!("{}", markdown::render(&report, markdown::Options { detail, checks: true }));
    Ok(())
}

fn plan(args: &RunArgs) -> Result<Plan, String> {
    if args.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let full = ThroughputParams::default();
    let threads = args.threads.clone().unwrap_or(full.threads.clone());
    let mix = args.mix.clone().unwrap_or(if args.full {
        full.read_percents.clone()
    } else {
        vec![100, 90]
    });
    if let Some(bad) = mix.iter().find(|&&m| m > 100) {
        return Err(format!("--mix {bad}: a read share is a percentage, 0 to 100"));
    }
    let cs_ns =
        args.cs_ns.clone().unwrap_or(if args.full { full.cs_ns.clone() } else { vec![100] });
    let exclusive_cs_ns = args.exclusive_cs_ns.clone().unwrap_or(cs_ns.clone());
    let short = |normal: u64, quick: u64| {
        args.duration_ms.unwrap_or(if args.quick { quick } else { normal })
    };
    let flood_default = FloodParams::default();
    let flood_ms = args
        .flood_ms
        .unwrap_or_else(|| short(if args.full { flood_default.duration_ms } else { 500 }, 150));
    let handoff_threads = args
        .handoff_threads
        .clone()
        .unwrap_or_else(|| threads.iter().copied().filter(|&t| t >= 2).collect());
    let has = |s| args.scenarios.contains(&s);
    let rw_peers = peers::select(&peers::rw_peers(), |p| p.name, &args.peers);
    let mutex_peers = peers::select(&peers::mutex_peers(), |p| p.name, &args.peers);
    if rw_peers.is_empty() && mutex_peers.is_empty() {
        return Err(format!(
            "--peers {:?} matches no lock; `senju-lockbench peers` lists them",
            args.peers
        ));
    }
    if threads.contains(&0)
        || handoff_threads.contains(&0)
        || args.readers.as_ref().is_some_and(|r| r.contains(&0))
    {
        return Err("thread and reader counts must be at least 1".into());
    }
    Ok(Plan {
        throughput: has(Scenario::Throughput).then(|| ThroughputParams {
            threads,
            read_percents: mix,
            cs_ns,
            exclusive_cs_ns,
            gap_ns: args.gap_ns,
            duration_ms: short(full.duration_ms, 50),
            rounds: args.rounds,
        }),
        flood: has(Scenario::Flood).then(|| FloodParams {
            readers: args.readers.clone().unwrap_or(if args.full {
                flood_default.readers.clone()
            } else {
                vec![4, 8]
            }),
            duration_ms: flood_ms,
            rounds: args.rounds,
            ..flood_default
        }),
        handoff: (has(Scenario::Handoff) && !handoff_threads.is_empty()).then(|| HandoffParams {
            threads: handoff_threads,
            cs_ns: args.handoff_cs_ns,
            duration_ms: short(HandoffParams::default().duration_ms, 50),
            warmup_ms: args.handoff_warmup_ms.unwrap_or(if args.quick {
                10
            } else {
                HandoffParams::default().warmup_ms
            }),
            rounds: args.rounds,
        }),
        rw_peers,
        mutex_peers,
        note: args.note.clone(),
    })
}

fn run(args: &RunArgs) -> Result<(), String> {
    let plan = plan(args)?;
    let live = std::io::stderr().is_terminal();
    let verbose = args.verbose;
    let mut progress = |line: &str| {
        if verbose {
            eprintln!("{line}");
        } else if live {
            // One status line, rewritten in place.
            eprint!("\r\x1b[2K{line}");
            let _ = std::io::stderr().flush();
        }
    };
    let report = report::run(&plan, &mut progress);
    if live && !verbose {
        eprint!("\r\x1b[2K");
    }
    let text = markdown::render(
        &report,
        markdown::Options { detail: args.detail, checks: !args.no_checks },
    );
    print!("{text}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| format!("cannot encode the report: {e}"))?;
        std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
