//! `senju perf sequence` runs with a few iterations and prints Tkrzw's lines.

mod common;

use common::{run, senju};

fn done_line<'a>(out: &'a str, phase: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{phase} done: ")))
        .unwrap_or_else(|| panic!("no {phase} line in\n{out}"))
}

#[test]
fn sequence_on_a_file_prints_every_phase() {
    let dir = std::env::temp_dir().join(format!("senju-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("perf.sj");
    let out = run(&[
        "perf",
        "sequence",
        "--path",
        path.to_str().unwrap(),
        "--iter",
        "2000",
        "--threads",
        "3",
        "--buckets",
        "100",
        "--validate",
    ]);
    let set = done_line(&out, "Setting");
    assert!(set.contains("num_records=6000 qps="), "{set}");
    assert!(set.contains(" elapsed_time=") && set.contains(" mem="), "{set}");
    assert!(done_line(&out, "Getting").contains("num_records=6000"));
    assert!(done_line(&out, "Iterating").contains("num_records=6000"));
    assert!(done_line(&out, "Removing").contains("num_records=0 "));
    assert!(out.contains("Setting: impl=file num_iterations=2000 value_size=8 num_threads=3"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sequence_in_memory_with_random_keys_and_values() {
    let out = run(&[
        "perf",
        "sequence",
        "--dbm",
        "memory",
        "--iter",
        "1000",
        "--threads",
        "2",
        "--random_key",
        "--random_value",
        "--size",
        "20",
    ]);
    assert!(out.contains("Setting: impl=memory"));
    assert!(done_line(&out, "Removing").contains("qps="));
}

/// `--batch` runs the same keys and values through the batch calls: every phase finds what
/// the set phase wrote (`--validate` compares every value), and the last, short batch counts.
#[test]
fn batches_run_every_phase_and_validate() {
    let out = run(&[
        "perf",
        "sequence",
        "--dbm",
        "memory",
        "--iter",
        "1003",
        "--threads",
        "2",
        "--batch",
        "100",
        "--validate",
    ]);
    assert!(done_line(&out, "Setting").contains("num_records=2006 "), "{out}");
    assert!(done_line(&out, "Getting").contains("num_records=2006 "), "{out}");
    assert!(done_line(&out, "Removing").contains("num_records=0 "), "{out}");
    let bad = senju(&["perf", "parallel", "--batch", "10"]);
    assert!(!bad.status.success(), "--batch belongs to sequence only");
}

#[test]
fn set_only_runs_one_phase_and_bad_flags_fail() {
    let out = run(&["perf", "sequence", "--dbm", "memory", "--iter", "10", "--set_only"]);
    assert!(out.contains("Setting done: ") && !out.contains("Getting"));
    let bad = senju(&["perf", "sequence", "--bogus"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown option: --bogus"));
}

/// A reader that stops early (`senju perf ... | head -1`) ends the run quietly with the
/// SIGPIPE status, 141, instead of a panic (Rust ignores SIGPIPE, so a plain `println!`
/// panics with "Broken pipe" and exits 101).
#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_senju"))
        .args(["perf", "sequence", "--dbm", "memory", "--iter", "1000000", "--threads", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("Setting: "), "{first}");
    // The reader is dropped here: every later write finds the pipe closed.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
