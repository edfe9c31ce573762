//! `senju`: the command-line tool of the senju database.
//!
//! ```text
//! senju get|set|remove|count|list|check|rebuild|import|export|stats PATH ...
//! senju completions bash|zsh|fish|elvish|powershell
//! senju perf sequence|parallel|wicked [tkrzw_dbm_perf flags]
//! senju lab EXPERIMENT [flags]
//! ```
//!
//! The everyday commands follow `tkrzw_dbm_util` (`cli.rs` declares them, `ops.rs`,
//! `transfer.rs` and `repair.rs` run them; `codec.rs` holds the binary-safe TSV and JSON
//! Lines formats). Reading commands open the database read-only under a shared lock.
//!
//! The `perf` workloads are those of `tkrzw_dbm_perf`, with the same flags and the same
//! output lines, so the two can be compared line by line. Standard output carries only those
//! lines; a progress bar goes to standard error when it is a terminal.
//!
//! Errors print one line, `senju: ...`, on standard error and exit with a non-zero status.

#![forbid(unsafe_code)]

/// `println!` for stdout that ends the program quietly when the reader went away
/// (see [`report::emit`]).
macro_rules! outln {
    () => { $crate::report::emit(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::report::emit(format_args!($($arg)*), true) };
}

/// `print!` with the same closed-pipe handling as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::report::emit(format_args!($($arg)*), false) };
}

mod args;
mod cli;
mod codec;
mod lab;
mod model;
mod ops;
mod parallel;
mod progress;
mod repair;
mod replace;
mod report;
mod rng;
mod sequence;
mod transfer;
mod wicked;

use std::process::ExitCode;

use args::{PerfArgs, Workload};
use clap::{CommandFactory, Parser};
use cli::{Cli, Command};

// The allocator is chosen by measurement (lab/0002-allocators/README.md): mimalloc, through
// the dispatcher so that `senju lab alloc` can measure the others in child processes of this
// binary (SENJU_ALLOC=system|mimalloc|jemalloc; read once, at the first allocation).
#[global_allocator]
static GLOBAL: senju_bench::alloc::Dispatch =
    senju_bench::alloc::Dispatch::with_default(lab::DEFAULT_ALLOCATOR);

/// The help of `senju perf` (Tkrzw's style, as `tkrzw_dbm_perf --help` prints it).
const PERF_USAGE: &str = "\
senju perf: performance checks of the senju database, as tkrzw_dbm_perf

Usage:
  senju perf sequence [options]
    : Checks setting/getting/removing performance in sequence (as tkrzw_dbm_perf sequence).
  senju perf parallel [options]
    : Checks setting/getting/removing performance in parallel (as tkrzw_dbm_perf parallel).
  senju perf wicked [options]
    : Checks consistency with various operations (as tkrzw_dbm_perf wicked).

Common options:
  --path path : The database file (default: a file in the temporary directory, removed after).
  --dbm impl : auto or file (the file engine), memory (the in-memory engine). (default: auto)
  --iter num : The number of iterations per thread. (default: 10000)
  --threads num : The number of threads. (default: 1)
  --size num : The size of each record value. (default: 8)
  --buckets num : A capacity hint (expected records); senju's index grows by itself.
  --auto_rebuild num : Rebuilds in the background once dead records take num bytes and
    outweigh live ones (the database's default is 64 MiB; off in perf unless given, as
    tkrzw_dbm_perf never rebuilds unless told).
  --random_seed num : The random seed. (default: 0)

Options for the sequence subcommand:
  --random_key : Uses random keys rather than sequential ones.
  --random_value : Uses random length values rather than fixed ones.
  --set_only : Does only setting.
  --get_only : Does only getting.
  --remove_only : Does only removing.
  --validate : Validates records after setting and removing (a `Validating records` line,
    inside the timed region, as Tkrzw's), and compares every value read whose writer is
    known (random keys: checked after setting). Fails naming the key on any mismatch.
  --batch num : Operations per set_many/get_many/remove_many call. (default: 1, single calls)

Options for the parallel subcommand:
  --random_key : Uses random keys rather than sequential ones.
  --random_value : Uses random length values rather than fixed ones.
  --keys num : The number of unique keys (key numbers are reduced modulo it).
  --sleep num : The duration to sleep between iterations, in seconds. (default: 0)
  --rebuild : Rebuilds the database occasionally (when dead records outweigh live ones).
  --validate : Validates records: every record is one this run can write, found by a lookup.

Options for the wicked subcommand (keys and value lengths are always random):
  --iterator : Uses iterators occasionally.
  --clear : Clears the database occasionally.
  --rebuild : Rebuilds the database occasionally.
  --sync : Synchronizes the database occasionally.
  --validate : Keeps a model of every committed write and checks every record against it
    at the end (and after reopening a file); exits with status 1 on any mismatch.

Output: the lines of tkrzw_dbm_perf on standard output, e.g.
  Done: elapsed_time=0.512345 num_records=63212 qps=390356 mem=4976000
QPS = iterations x threads / elapsed seconds; the clock starts before the threads and stops
after the final sync (and the validation). A progress bar is drawn on standard error when it
is a terminal.

Examples:
  senju perf sequence --iter 1000000 --threads 4
  senju perf sequence --path /tmp/casket.sj --iter 250000 --threads 4 --random_key
  senju perf parallel --iter 500000 --threads 2 --random_key
  senju perf parallel --dbm memory --iter 100000 --threads 8 --keys 1000
  senju perf wicked --iter 100000 --threads 4 --iterator --clear --rebuild --sync --validate
";

fn main() -> ExitCode {
    // An interrupt (SIGINT, SIGTERM, SIGHUP) removes this run's temporary and staged files
    // before the process ends, with the status a shell gives a process killed by SIGINT. A
    // database open for writing is left as a crash leaves it: the next writable open
    // recovers it.
    let _ = ctrlc::set_handler(|| {
        eprintln!("senju: interrupted");
        report::exit(130)
    });
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    let result = match cli.command {
        Command::Get { path, key, json } => ops::get(&path, &key, json),
        Command::Set { path, key, value, no_overwrite, append } => {
            ops::set(&path, &key, &value, no_overwrite, append)
        }
        Command::Remove { path, key } => ops::remove(&path, &key),
        Command::Count { path, json } => ops::count(&path, json),
        Command::List { path, prefix, limit, keys, json } => {
            ops::list(&path, prefix.as_deref(), limit, keys, json)
        }
        Command::Stats { path, json } => ops::stats(&path, json),
        Command::Rebuild { path, in_place } => ops::rebuild(&path, in_place),
        Command::Import { path, file, format, truncate } => {
            transfer::import(&path, &file, format, truncate)
        }
        Command::Export { path, file, format, sort, keys } => {
            transfer::export(&path, &file, format, sort, keys)
        }
        Command::Check { path, repair, json } => match repair::check(&path, repair, json) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "senju", &mut script);
            let mut out = std::io::stdout().lock();
            ops::stdout_bytes(&mut out, &script);
            ops::flush(&mut out);
            Ok(())
        }
        Command::Perf { args } => perf(&args),
        Command::Lab { args } => return lab::main(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("senju: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints what clap has to say: help and version as they are, an error on one line.
fn clap_exit(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            out!("{}", e.render());
            ExitCode::SUCCESS
        }
        _ => {
            // clap's first paragraph says what is wrong (a list of missing arguments runs
            // over several lines); a later one may hold a tip. Fold both into one line.
            let text = e.render().to_string();
            let mut paragraphs = text.split("\n\n").map(|p| {
                p.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
            });
            let first = paragraphs.next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(&first);
            let tip = paragraphs.find(|p| p.starts_with("tip:")).map(|t| format!(" ({t})"));
            eprintln!("senju: {first}{}; see `senju --help`", tip.unwrap_or_default());
            ExitCode::from(2)
        }
    }
}

/// `senju perf WORKLOAD FLAGS...`, parsed by hand to keep `tkrzw_dbm_perf`'s spellings.
fn perf(argv: &[String]) -> Result<(), String> {
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let perf = |w: Workload, rest: &[&str], run: fn(&PerfArgs) -> Result<(), String>| {
        PerfArgs::parse(w, rest).and_then(|a| run(&a))
    };
    match argv.as_slice() {
        [.., "--help" | "-h"] | [] | ["help", ..] => {
            out!("{PERF_USAGE}");
            Ok(())
        }
        ["sequence", rest @ ..] => perf(Workload::Sequence, rest, sequence::run),
        ["parallel", rest @ ..] => perf(Workload::Parallel, rest, parallel::run),
        ["wicked", rest @ ..] => perf(Workload::Wicked, rest, wicked::run),
        [other, ..] => Err(format!(
            "unknown perf workload: {other} (sequence, parallel or wicked; see `senju perf --help`)"
        )),
    }
}
