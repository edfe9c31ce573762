//! `senju lab`: the founding experiments, measured on the user's machine.
//!
//! Each experiment is one subcommand (`alloc`, `rwlock`, `handoff`, `shared`, `cores`,
//! `gil`); the measuring code lives in `senju-bench`, this module picks the sizes for
//! `--quick` / default / `--full`, prints the tables (Markdown, so they paste into a README),
//! writes `--json FILE` and draws `--svg FILE`. Every JSON file has the same envelope:
//! the experiment, the mode, the machine, the load average before and after, and the
//! experiment's own `results`.

mod alloc;
mod cores;
mod gil;
mod handoff;
mod rwlock;
mod shared;
mod table;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use senju_bench::chart::Chart;
use senju_bench::report::Machine;
use serde::Serialize;

/// The `senju` binary's allocator when `SENJU_ALLOC` is unset (chosen by lab 0002).
pub(crate) const DEFAULT_ALLOCATOR: senju_bench::alloc::Allocator =
    senju_bench::alloc::Allocator::Mimalloc;

const EXAMPLES: &str = "\
Examples:
  senju lab rwlock --quick                  # does glibc's rwlock starve a writer here?
  senju lab alloc --json alloc.json --svg alloc.svg
  senju lab handoff --threads 2,4,8
  senju lab shared --full --svg shared.svg  # the Tkrzw document's spin-vs-blocking question
  senju lab cores --quick                   # which languages' threads use several cores
  senju lab gil                             # the Python and Ruby bindings' thread benchmarks

Each experiment runs in under a minute by default, in seconds with --quick, and with the
founding documents' sizes with --full. Tables go to standard output; progress to standard
error when it is a terminal. lab/NNNN-*/README.md in the source tree has the results of
the project's machines and how they compare with the founding documents.";

#[derive(Parser, Debug)]
#[command(
    name = "senju lab",
    about = "The founding experiments of senju, measured on this machine",
    after_help = EXAMPLES
)]
struct LabCli {
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(Subcommand, Debug)]
enum Experiment {
    /// malloc(1 KiB)/free pairs with the system allocator, mimalloc and jemalloc, same-thread
    /// and cross-thread frees, beside the 2012 figures.
    Alloc(Common),
    /// The reader flood (R readers back to back, a writer every 1 ms) and the reader relay,
    /// for every glibc rwlock kind, std, parking_lot, spin, a Tkrzw-style spin lock and senju's.
    Rwlock(Common),
    /// Release and re-take at once while others wait (Ruby 1.9.3's GVL case): per-thread
    /// share, fairness and the largest bypass, for std, parking_lot, pthread and senju.
    Handoff(Common),
    /// A hash table with bucket locks under SpinRwLock, FairRwLock, std, pthread and a
    /// Tkrzw-style spin lock: spin versus blocking shared locks, short and long sections.
    Shared(Common),
    /// Threads doing integer multiplications in each language found here and in Rust:
    /// speedup at 1, 2, 4, 8 threads.
    Cores(CoresArgs),
    /// The Python and Ruby bindings' thread benchmarks, when the bindings are built.
    Gil(GilArgs),
    /// One allocator measurement in this process (what `alloc` runs as a child).
    #[command(hide = true)]
    AllocChild(senju_bench::alloc::ChildArgs),
}

/// Flags every experiment takes.
#[derive(Args, Debug, Clone)]
pub(crate) struct Common {
    /// Seconds, not minutes: small sizes and one round (a smoke run).
    #[arg(long, conflicts_with = "full")]
    pub(crate) quick: bool,
    /// The founding documents' sizes and more rounds (minutes).
    #[arg(long)]
    pub(crate) full: bool,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Draw a chart as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) svg: Option<PathBuf>,
    /// Thread counts (readers for rwlock), comma-separated, instead of the mode's.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub(crate) threads: Vec<usize>,
    /// Rounds (every cell runs once per round), instead of the mode's.
    #[arg(long, value_name = "N")]
    pub(crate) rounds: Option<usize>,
}

#[derive(Args, Debug, Clone)]
struct GilArgs {
    #[command(flatten)]
    common: Common,
    /// Arguments after `--` go to both benchmark scripts (e.g. `-- --threads 1,2 --peers
    /// senju-auto,senju-hold`); `--quick` and `--json` are passed by the lab.
    #[arg(last = true, value_name = "SCRIPT ARGS")]
    script_args: Vec<String>,
}

#[derive(Args, Debug, Clone)]
struct CoresArgs {
    #[command(flatten)]
    common: Common,
    /// Languages to try, comma-separated (python, ruby, perl, java, go, node, rust).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    languages: Vec<String>,
}

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Mode {
    Quick,
    Default,
    Full,
}

impl Common {
    pub(crate) fn mode(&self) -> Mode {
        if self.quick {
            Mode::Quick
        } else if self.full {
            Mode::Full
        } else {
            Mode::Default
        }
    }

    /// `--threads` if given (zeros and repeats dropped), else the mode's list.
    pub(crate) fn threads_or(
        &self,
        quick: &[usize],
        default: &[usize],
        full: &[usize],
    ) -> Vec<usize> {
        let mut given: Vec<usize> = Vec::new();
        for &t in &self.threads {
            if t > 0 && !given.contains(&t) {
                given.push(t);
            }
        }
        if !given.is_empty() {
            return given;
        }
        match self.mode() {
            Mode::Quick => quick,
            Mode::Default => default,
            Mode::Full => full,
        }
        .to_vec()
    }

    /// `--rounds` if given, else the mode's count.
    pub(crate) fn rounds_or(&self, quick: usize, default: usize, full: usize) -> usize {
        self.rounds
            .unwrap_or(match self.mode() {
                Mode::Quick => quick,
                Mode::Default => default,
                Mode::Full => full,
            })
            .max(1)
    }

    /// One value per mode.
    pub(crate) fn pick<T>(&self, quick: T, default: T, full: T) -> T {
        match self.mode() {
            Mode::Quick => quick,
            Mode::Default => default,
            Mode::Full => full,
        }
    }
}

/// What an experiment hands back: its tables, its results and its chart.
pub(crate) struct Outcome {
    /// Markdown: headings, notes and tables.
    pub(crate) text: String,
    /// The `results` member of the JSON file.
    pub(crate) results: serde_json::Value,
    /// The chart, if the experiment draws one.
    pub(crate) chart: Option<Chart>,
}

/// The JSON file's envelope.
#[derive(Serialize)]
struct Envelope<'a> {
    experiment: &'a str,
    mode: Mode,
    command: String,
    machine: Machine,
    glibc: Option<String>,
    load_average_before: String,
    load_average_after: String,
    unix_time: u64,
    elapsed_s: f64,
    results: &'a serde_json::Value,
}

/// glibc's version (`getconf GNU_LIBC_VERSION`), if there is one.
pub(crate) fn glibc_version() -> Option<String> {
    let out = std::process::Command::new("getconf").arg("GNU_LIBC_VERSION").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// Progress lines on standard error, only when it is a terminal.
pub(crate) fn progress() -> impl FnMut(&str) {
    let on = std::io::stderr().is_terminal();
    move |line: &str| {
        if on {
            eprintln!("senju lab: {line}");
        }
    }
}

/// A serializable value as JSON (serializing plain data cannot fail).
pub(crate) fn to_value(v: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_else(|e| serde_json::Value::String(e.to_string()))
}

/// The machine line printed above every experiment's tables.
pub(crate) fn machine_line(machine: &Machine, load: &str) -> String {
    format!(
        "{} CPUs ({}), Linux {}, {}; load average {load}",
        machine.cpus,
        machine.cpu_model.as_deref().unwrap_or("unknown CPU"),
        machine.kernel.as_deref().unwrap_or("?"),
        glibc_version().unwrap_or_else(|| "no glibc".into()),
    )
}

fn run(
    name: &str,
    common: &Common,
    f: impl FnOnce() -> Result<Outcome, String>,
) -> Result<(), String> {
    let load_before = senju_bench::report::load_average();
    let t0 = Instant::now();
    let outcome = f()?;
    let elapsed_s = t0.elapsed().as_secs_f64();
    let load_after = senju_bench::report::load_average();
    let machine = Machine::detect();
    let mode = match common.mode() {
        Mode::Quick => " --quick",
        Mode::Default => "",
        Mode::Full => " --full",
    };
    outln!("# senju lab {name}{mode}");
    outln!();
    outln!("{}", machine_line(&machine, &load_before));
    outln!();
    out!("{}", outcome.text);
    if let Some(path) = &common.json {
        let envelope = Envelope {
            experiment: name,
            mode: common.mode(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            machine,
            glibc: glibc_version(),
            load_average_before: load_before,
            load_average_after: load_after,
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            elapsed_s,
            results: &outcome.results,
        };
        let text = serde_json::to_string_pretty(&envelope)
            .map_err(|e| format!("cannot encode the results: {e}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &common.svg {
        match &outcome.chart {
            Some(chart) => chart.write(path)?,
            None => eprintln!(
                "senju lab {name}: no chart for this experiment; {} not written",
                path.display()
            ),
        }
    }
    Ok(())
}

/// Runs `senju lab ARGS...` (`args` excludes the word `lab`).
pub(crate) fn main(args: &[String]) -> ExitCode {
    let argv = std::iter::once("senju lab".to_string()).chain(args.iter().cloned());
    let cli = match LabCli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
            // Best effort: the help or error text goes to the terminal.
            let _ = e.print();
            return code;
        }
    };
    let result = match &cli.experiment {
        Experiment::Alloc(c) => run("alloc", c, || alloc::run(c)),
        Experiment::Rwlock(c) => run("rwlock", c, || rwlock::run(c)),
        Experiment::Handoff(c) => run("handoff", c, || handoff::run(c)),
        Experiment::Shared(c) => run("shared", c, || shared::run(c)),
        Experiment::Cores(a) => run("cores", &a.common, || cores::run(&a.common, &a.languages)),
        Experiment::Gil(a) => run("gil", &a.common, || gil::run(&a.common, &a.script_args)),
        Experiment::AllocChild(a) => alloc::child(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("senju lab: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common(args: &[&str]) -> Common {
        let argv = ["senju lab", "rwlock"].iter().chain(args).copied();
        match LabCli::try_parse_from(argv).unwrap().experiment {
            Experiment::Rwlock(c) => c,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn modes_and_overrides() {
        let c = common(&["--quick"]);
        assert_eq!(c.mode(), Mode::Quick);
        assert_eq!(c.threads_or(&[1], &[2], &[3]), [1]);
        assert_eq!(c.rounds_or(1, 3, 5), 1);
        let c = common(&["--full", "--rounds", "0", "--threads", "2,2,0,4"]);
        assert_eq!(c.mode(), Mode::Full);
        assert_eq!(c.threads_or(&[1], &[2], &[3]), [2, 4]);
        assert_eq!(c.rounds_or(1, 3, 5), 1, "at least one round");
        assert_eq!(common(&[]).pick("q", "d", "f"), "d");
        assert!(LabCli::try_parse_from(["senju lab", "rwlock", "--quick", "--full"]).is_err());
    }
}
