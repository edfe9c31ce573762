//! `senju`: the command-line tool of the senju database.
//!
//! ```text
//! senju perf sequence [--path P] [--dbm auto|file|memory] [--iter N] [--threads T] [--size S]
//!                     [--buckets N] [--random_key] [--random_value] [--random_seed N]
//!                     [--set_only] [--get_only] [--remove_only] [--validate]
//! ```
//!
//! `perf sequence` runs the workload of `tkrzw_dbm_perf sequence` with the same flags and the
//! same output lines, so the two can be compared line by line.

#![forbid(unsafe_code)]

mod args;
mod sequence;

use std::process::ExitCode;

const USAGE: &str = "\
senju: the command-line tool of the senju database

Usage:
  senju perf sequence [options]
    : Checks setting/getting/removing performance in sequence (as tkrzw_dbm_perf sequence).

Options for perf sequence:
  --path path : The database file (default: a file in the temporary directory).
  --dbm impl : auto or file (the file engine), memory (the in-memory engine). (default: auto)
  --iter num : The number of iterations per thread. (default: 10000)
  --threads num : The number of threads. (default: 1)
  --size num : The size of each record value. (default: 8)
  --buckets num : A capacity hint (expected records); senju's index grows by itself.
  --random_key : Uses random keys rather than sequential ones.
  --random_value : Uses random length values rather than fixed ones.
  --random_seed num : The random seed. (default: 0)
  --set_only : Does only setting.
  --get_only : Does only getting.
  --remove_only : Does only removing.
  --validate : Checks every value read (sequential keys only).
";

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["perf", "sequence", rest @ ..] => {
            args::SequenceArgs::parse(rest).and_then(|a| sequence::run(&a))
        }
        [] | ["help" | "--help" | "-h", ..] => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
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
