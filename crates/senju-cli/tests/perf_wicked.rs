//! `senju perf wicked` runs with a few iterations; `--validate` passes on a correct run and
//! fails loudly (exit status 1, a message naming the key) when the model disagrees.

mod common;

use common::{run, senju};

#[test]
fn wicked_validates_a_file_before_and_after_reopening() {
    let dir = std::env::temp_dir().join(format!("senju-cli-wicked-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wicked.sj");
    let out = run(&[
        "perf",
        "wicked",
        "--path",
        path.to_str().unwrap(),
        "--iter",
        "4000",
        "--threads",
        "4",
        "--iterator",
        "--sync",
        "--rebuild",
        "--validate",
    ]);
    assert!(out.starts_with("Doing: impl=file num_iterations=4000 value_size=8 num_threads=4"));
    assert!(out.contains("\nValidating records: ... done (elapsed="), "{out}");
    assert!(out.contains("\nValidating records after reopening: ... done"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("Done: elapsed_time=")), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wicked_in_memory_with_clear_validates() {
    let out = run(&[
        "perf",
        "wicked",
        "--dbm",
        "memory",
        "--iter",
        "4000",
        "--threads",
        "3",
        "--clear",
        "--rebuild",
        "--iterator",
        "--size",
        "20",
        "--random_seed",
        "5",
        "--validate",
    ]);
    assert!(out.contains("Validating records: ... done"), "{out}");
}

#[test]
fn wicked_with_automatic_rebuilds_validates() {
    // A file in the temporary directory (no --path), so the run also validates after
    // reopening. A threshold of 1 byte: a shard is rebuilt in the background whenever its
    // dead records outweigh its live ones, all through the run.
    let out = run(&[
        "perf",
        "wicked",
        "--iter",
        "6000",
        "--threads",
        "3",
        "--size",
        "200",
        "--auto_rebuild",
        "1",
        "--iterator",
        "--validate",
    ]);
    assert!(out.contains("\nValidating records: ... done"), "{out}");
    assert!(out.contains("\nValidating records after reopening: ... done"), "{out}");
    let passes: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("auto_rebuilds="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(passes > 0, "no automatic rebuild ran: {out}");
}

#[test]
fn validation_fails_loudly_when_the_model_disagrees() {
    let tmp = std::env::temp_dir().join(format!("senju-cli-wicked-fail-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for engine in ["file", "memory"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_senju"))
            .env("TMPDIR", &tmp)
            .args(["perf", "wicked", "--dbm", engine, "--iter", "2000", "--threads", "2"])
            .args(["--validate", "--debug_corrupt_model"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{engine}: {stderr}");
        assert!(stderr.contains("VALIDATION FAILED"), "{engine}: {stderr}");
        assert!(stderr.contains("the model has"), "{engine}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("Done: "));
    }
    // The failed runs removed their temporary database files.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    std::fs::remove_dir(&tmp).unwrap();
}

#[test]
fn the_corruption_flag_needs_validation() {
    let out = senju(&["perf", "wicked", "--iter", "10", "--debug_corrupt_model"]);
    assert!(!out.status.success());
}
