//! `senju`: the command-line tool of the senju database.
//!
//! ```text
//! senju perf sequence [common options] [--random_key] [--random_value]
//!                     [--set_only] [--get_only] [--remove_only] [--validate]
//! senju perf parallel [common options] [--random_key] [--random_value] [--keys N]
//!                     [--sleep SECONDS] [--rebuild] [--validate]
//! senju perf wicked   [common options] [--iterator] [--clear] [--rebuild] [--sync]
//!                     [--validate]
//! common options: [--path P] [--dbm auto|file|memory] [--iter N] [--threads T] [--size S]
//!                 [--buckets N] [--random_seed N]
//! ```
//!
//! The `perf` workloads are those of `tkrzw_dbm_perf`, with the same flags and the same
//! output lines, so the two can be compared line by line. Standard output carries only those
//! lines; a progress bar goes to standard error when it is a terminal.

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
mod model;
mod parallel;
mod progress;
mod report;
mod rng;
mod sequence;
mod wicked;

use std::process::ExitCode;

use args::{PerfArgs, Workload};

// The allocator is chosen by measurement: lab/0002-allocators/README.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "\
senju: the command-line tool of the senju database

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
  --random_seed num : The random seed. (default: 0)

Options for the sequence subcommand:
  --random_key : Uses random keys rather than sequential ones.
  --random_value : Uses random length values rather than fixed ones.
  --set_only : Does only setting.
  --get_only : Does only getting.
  --remove_only : Does only removing.
  --validate : Checks every value read (sequential keys only).

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
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let perf = |w: Workload, rest: &[&str], run: fn(&PerfArgs) -> Result<(), String>| {
        PerfArgs::parse(w, rest).and_then(|a| run(&a))
    };
    let result = match argv.as_slice() {
        ["perf", _, .., "--help" | "-h"] | [] | ["help" | "--help" | "-h", ..] => {
            out!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        ["perf", "sequence", rest @ ..] => perf(Workload::Sequence, rest, sequence::run),
        ["perf", "parallel", rest @ ..] => perf(Workload::Parallel, rest, parallel::run),
        ["perf", "wicked", rest @ ..] => perf(Workload::Wicked, rest, wicked::run),
        _ => Err(format!("unknown command: {}\n\n{USAGE}", argv.join(" "))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("senju: {e}");
            ExitCode::FAILURE
        }
    }
}
