//! `senju perf parallel` runs with a few iterations and prints Tkrzw's lines.

mod common;

use common::{run, senju};

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in {line}"))
}

#[test]
fn parallel_on_a_file_with_validation() {
    let dir = std::env::temp_dir().join(format!("senju-cli-parallel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("perf.sj");
    let p = path.to_str().unwrap();
    let out = run(&[
        "perf",
        "parallel",
        "--path",
        p,
        "--iter",
        "3000",
        "--threads",
        "3",
        "--random_key",
        "--validate",
    ]);
    assert!(out.starts_with("Doing: impl=file num_iterations=3000 value_size=8 num_threads=3\n"));
    assert!(out.contains("\nSynchronizing: ... done (elapsed="), "{out}");
    assert!(out.contains("\nValidating records: ... done (elapsed="), "{out}");
    let done = out.lines().find(|l| l.starts_with("Done: ")).expect(&out);
    // Random keys over 9000 numbers with 32 % sets: some records, never more than the keys.
    let records = field(done, "num_records");
    assert!((1..=9000).contains(&records), "{done}");
    assert!(field(done, "qps") > 0 && done.contains(" elapsed_time=") && done.contains(" mem="));
    assert!(out.contains("  file_size=") && out.contains("  num_buckets="));
    // The file is left where --path put it, and a second run empties it first.
    assert!(path.exists());
    let again = run(&["perf", "parallel", "--path", p, "--iter", "10", "--keys", "1"]);
    let done = again.lines().find(|l| l.starts_with("Done: ")).unwrap();
    assert!(field(done, "num_records") <= 1, "{done}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parallel_in_memory_with_sequential_keys_and_random_values() {
    let out = run(&[
        "perf",
        "parallel",
        "--dbm",
        "memory",
        "--iter",
        "2000",
        "--threads",
        "2",
        "--random_value",
        "--size",
        "16",
        "--validate",
    ]);
    assert!(out.starts_with("Doing: impl=memory num_iterations=2000 value_size=16"));
    let done = out.lines().find(|l| l.starts_with("Done: ")).unwrap();
    assert!((1..=4000).contains(&field(done, "num_records")), "{done}");
}

#[test]
fn parallel_rebuilds_when_dead_records_pile_up() {
    // 50 keys overwritten 12,000 times: dead records soon outweigh live ones.
    let out = run(&[
        "perf",
        "parallel",
        "--iter",
        "6000",
        "--threads",
        "2",
        "--random_key",
        "--keys",
        "50",
        "--rebuild",
        "--validate",
    ]);
    let done = out.lines().find(|l| l.starts_with("Done: ")).unwrap();
    assert!(field(done, "num_records") <= 50, "{done}");
}

#[test]
fn parallel_rejects_flags_of_other_workloads() {
    let bad = senju(&["perf", "parallel", "--set_only"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown option: --set_only"));
}

#[test]
fn help_lists_every_workload_with_examples() {
    let out = run(&["perf", "wicked", "--help"]);
    for needle in ["perf sequence", "perf parallel", "perf wicked", "Examples:", "--validate"] {
        assert!(out.contains(needle), "{needle} missing from\n{out}");
    }
}
