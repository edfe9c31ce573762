//! `senju perf sequence --validate` compared values only in the get phase, and only with
//! sequential keys and fixed-size values: `--set_only` and `--remove_only` checked nothing,
//! `--random_key` or `--random_value` turned the check off, and with `--random_key` a key
//! missing in the get phase was ignored. As `tkrzw_dbm_perf` does, the set and remove phases
//! now end with a `Validating records: ... done (elapsed=...)` line (after the sync, inside
//! the timed region): every key the phase set holds a value this run wrote for it (the last
//! one of some thread) and nothing else is in the database, or every key it removed is gone.
//! The get phase replays the same seeded keys and value lengths, so a missing key is an error
//! with any flags and `--validate` compares every value whose writer is known. A mismatch
//! ends the run with status 1 and a line naming the key.

mod common;

use common::{Dir, fails, run};

fn validating_lines(out: &str) -> usize {
    out.lines()
        .filter(|l| l.starts_with("Validating records: ... done (elapsed=") && l.ends_with(')'))
        .count()
}

#[test]
fn set_and_remove_phases_validate_with_any_keys() {
    let d = Dir::new("seq-validate");
    let db = d.file("perf.sj");
    for flags in [
        &[][..],
        &["--random_key"],
        &["--random_value", "--size", "20"],
        &["--random_key", "--random_value", "--threads", "3"],
        &["--random_key", "--threads", "2", "--batch", "7"],
    ] {
        for engine in ["file", "memory"] {
            let mut args = vec!["perf", "sequence", "--iter", "1000", "--validate"];
            args.extend(["--dbm", engine, "--path", &db]);
            args.extend(flags);
            let out = run(&args);
            assert_eq!(validating_lines(&out), 2, "{args:?}:\n{out}");
            let lines: Vec<&str> = out.lines().collect();
            let at = |p: &str| lines.iter().position(|l| l.starts_with(p)).unwrap();
            assert!(
                at("Synchronizing") < at("Validating") && at("Validating") < at("Setting done")
            );
        }
    }
    let out =
        run(&["perf", "sequence", "--iter", "1000", "--path", &db, "--validate", "--set_only"]);
    assert_eq!(validating_lines(&out), 1, "{out}");
    let out =
        run(&["perf", "sequence", "--iter", "500", "--path", &db, "--validate", "--remove_only"]);
    assert_eq!(validating_lines(&out), 1, "{out}");
    assert!(out.contains("Removing done: elapsed_time=") && out.contains(" num_records=500 "));
    let out = run(&["perf", "sequence", "--iter", "1000", "--path", &db]);
    assert_eq!(validating_lines(&out), 0, "validation runs only when asked for:\n{out}");
}

#[test]
fn the_get_phase_finds_every_random_key_and_checks_random_values() {
    let d = Dir::new("seq-get");
    let db = d.file("perf.sj");
    let seq = |extra: &[&'static str]| -> Vec<String> {
        ["perf", "sequence", "--path", &db].iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |args: Vec<String>| run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let fails = |args: Vec<String>, needle: &str| {
        fails(&args.iter().map(String::as_str).collect::<Vec<_>>(), needle)
    };
    run(seq(&["--iter", "1000", "--set_only", "--random_key", "--random_value", "--size", "30"]));
    let get = ["--iter", "1000", "--get_only", "--random_key", "--random_value", "--size", "30"];
    run(seq(&get));
    run(seq(&[&get[..], &["--validate"]].concat()));
    // Sequential keys with random lengths: every value is checked.
    run(seq(&["--iter", "1000", "--set_only", "--random_value", "--size", "30"]));
    run(seq(&["--iter", "1000", "--get_only", "--random_value", "--size", "30", "--validate"]));
    let other_seed = ["--random_value", "--size", "30", "--validate", "--random_seed", "9"];
    fails(
        seq(&[&["--iter", "1000", "--get_only"][..], &other_seed].concat()),
        "wrong value for key",
    );

    // Fewer records than the get phase asks for: a missing random key is an error.
    run(seq(&["--iter", "100", "--set_only"]));
    for batch in ["1", "10"] {
        fails(
            seq(&["--iter", "1000", "--get_only", "--random_key", "--batch", batch]),
            " not found",
        );
    }
}
