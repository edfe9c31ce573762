//! `senju perf` without `--path` works on a temporary database file that a drop guard
//! removes. A failed write to standard output (`senju perf ... | head -1`, a full disk) ended
//! the program with `std::process::exit`, which runs no destructors, so the file (as large as
//! the run made it) stayed in `$TMPDIR`. The exit path now removes the temporary files first.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::Dir;

fn perf(tmp: &Dir, iter: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_senju"));
    c.args(["perf", "sequence", "--iter", iter]).env("TMPDIR", &tmp.0).stderr(Stdio::piped());
    c
}

#[test]
fn a_closed_pipe_leaves_no_temporary_database() {
    let tmp = Dir::new("perf-pipe");
    let mut child = perf(&tmp, "300000").stdout(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("Setting: "), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(tmp.names(), Vec::<String>::new(), "the temporary database was left behind");
}

#[test]
fn a_failed_write_leaves_no_temporary_database() {
    let tmp = Dir::new("perf-full");
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = perf(&tmp, "1000").stdout(full).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("senju: cannot write to stdout"), "{err}");
    assert_eq!(tmp.names(), Vec::<String>::new(), "the temporary database was left behind");
}
