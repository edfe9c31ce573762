//! `senju lab`: every experiment runs in `--quick` mode and its JSON is checked for sanity:
//! every row present, positive figures, no exclusion violations, the chart written. These
//! tests count; they never judge a time (the lab READMEs do that, on a quiet machine).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// Runs `senju lab ARGS... --json F --svg G` and returns the JSON's `results` and the SVG.
fn lab(args: &[&str]) -> (Value, Option<String>) {
    let dir =
        std::env::temp_dir().join(format!("senju-lab-test-{}-{}", args[0], std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json: PathBuf = dir.join("out.json");
    let svg: PathBuf = dir.join("out.svg");
    // The flags go right after the experiment's name: anything after `--` is not the lab's.
    let out = Command::new(env!("CARGO_BIN_EXE_senju"))
        .arg("lab")
        .arg(args[0])
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .args(&args[1..])
        .output()
        .expect("senju runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "senju lab {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("# senju lab {}", args[0])), "{stdout}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["experiment"], args[0]);
    assert_eq!(doc["mode"], "quick");
    assert!(doc["machine"]["cpus"].as_u64().unwrap() >= 1);
    let chart = std::fs::read_to_string(&svg).ok();
    std::fs::remove_dir_all(&dir).unwrap();
    (doc["results"].clone(), chart)
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn rows<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key].as_array().unwrap_or_else(|| panic!("no {key} array in {v}"))
}

/// Every (a, b) pair of `want` appears among `rows` as (row[ka], row[kb]).
fn assert_grid(rows: &[Value], ka: &str, kb: &str, want_a: &[&str], want_b: &[u64]) {
    for a in want_a {
        for b in want_b {
            assert!(
                rows.iter().any(|r| r[ka] == *a && r[kb].as_u64() == Some(*b)),
                "no row {ka}={a} {kb}={b}"
            );
        }
    }
}

#[test]
fn alloc_measures_every_allocator_and_both_kinds_of_free() {
    let (r, svg) = lab(&["alloc", "--quick", "--threads", "1,2,4"]);
    let cells = rows(&r, "cells");
    for frees in ["local", "cross"] {
        let threads: &[u64] = if frees == "local" { &[1, 2, 4] } else { &[2, 4] };
        let these: Vec<Value> = cells.iter().filter(|c| c["frees"] == frees).cloned().collect();
        assert_grid(&these, "allocator", "threads", &["system", "mimalloc", "jemalloc"], threads);
    }
    assert_eq!(cells.len(), 3 * 5);
    for c in cells {
        assert!(num(&c["seconds"]["median"]) > 0.0 && num(&c["million_pairs_per_sec"]) > 0.0);
        assert!(c["total_pairs"].as_u64().unwrap() > 0);
    }
    assert_eq!(rows(&r, "seed_2012").len(), 4);
    assert!(svg.unwrap().contains("Cross-thread frees"));
}

#[test]
fn rwlock_floods_and_relays_every_lock() {
    let (r, svg) = lab(&["rwlock", "--quick", "--threads", "2,4"]);
    let locks = [
        "senju::SpinRwLock",
        "senju::FairRwLock",
        "parking_lot::RwLock",
        "std::RwLock",
        "spin::RwLock",
        "pthread_rwlock(default)",
        "pthread_rwlock(prefer-reader)",
        "pthread_rwlock(prefer-writer)",
        "pthread_rwlock(writer-nonrec)",
        "tkrzw-spin",
    ];
    let flood = rows(&r["flood"], "rows");
    assert_eq!(flood.len(), locks.len() * 2);
    assert_grid(flood, "peer", "readers", &locks, &[2, 4]);
    for row in flood {
        assert!(["starved", "got_in"].contains(&row["verdict"].as_str().unwrap()));
        for run in rows(row, "runs") {
            assert!(run["reader_ops"].as_u64().unwrap() > 0, "{row}");
            assert_eq!(run["violations"], 0, "{row}");
        }
    }
    let relay = rows(&r["relay"], "rows");
    assert_eq!(relay.len(), locks.len());
    for (row, lock) in relay.iter().zip(locks) {
        assert_eq!(row["peer"], lock);
        assert!(row["run"]["handoffs"].as_u64().unwrap() > 0, "{row}");
        assert_eq!(row["run"]["violations"], 0, "{row}");
        assert!(["lock", "deadline"].contains(&row["let_in"].as_str().unwrap()));
    }
    assert!(svg.unwrap().contains("pthread_rwlock(prefer-writer)"));
}

#[test]
fn handoff_counts_shares_and_bypasses() {
    let (r, svg) = lab(&["handoff", "--quick", "--threads", "2,4"]);
    let locks = [
        "senju::Mutex",
        "parking_lot::Mutex",
        "parking_lot::FairMutex",
        "std::Mutex",
        "pthread_mutex",
    ];
    let all = rows(&r, "rows");
    assert_eq!(all.len(), locks.len() * 2);
    assert_grid(all, "peer", "threads", &locks, &[2, 4]);
    for row in all {
        assert!(num(&row["ops_per_sec"]["median"]) > 0.0, "{row}");
        assert_eq!(row["violations"], 0, "{row}");
        let t = row["threads"].as_u64().unwrap() as usize;
        assert_eq!(rows(row, "median_round_shares").len(), t);
        for run in rows(row, "runs") {
            assert_eq!(rows(run, "per_thread_ops").len(), t);
        }
        assert!(row["max_bypass"].as_u64().is_some());
    }
    assert!(svg.unwrap().contains("Largest bypass"));
}

#[test]
fn shared_runs_every_lock_with_short_and_long_sections() {
    let (r, svg) = lab(&["shared", "--quick", "--threads", "1,2"]);
    let locks = [
        "senju::SpinRwLock",
        "senju::FairRwLock",
        "std::RwLock",
        "pthread_rwlock(default)",
        "tkrzw-spin",
    ];
    let all = rows(&r, "rows");
    assert_eq!(all.len(), locks.len() * 2 * 2);
    for cs in [0, 2000] {
        let these: Vec<Value> = all.iter().filter(|x| x["cs_ns"] == cs).cloned().collect();
        assert_grid(&these, "peer", "threads", &locks, &[1, 2]);
    }
    for row in all {
        assert!(num(&row["ops_per_sec"]["median"]) > 0.0, "{row}");
        assert_eq!(row["violations"], 0, "{row}");
    }
    assert!(svg.unwrap().contains("long (+2 µs) critical section"));
}

#[test]
fn cores_measures_rust_and_lists_every_language() {
    let (r, svg) = lab(&["cores", "--quick", "--threads", "1,2"]);
    let langs = rows(&r, "languages");
    let names: Vec<&str> = langs.iter().map(|l| l["language"].as_str().unwrap()).collect();
    assert_eq!(names, ["python", "ruby", "perl", "java", "go", "node", "rust"]);
    for l in langs {
        match l["outcome"].as_str().unwrap() {
            "measured" => {
                assert!(l["multiplications_per_thread"].as_u64().unwrap() > 0, "{l}");
                let rs = rows(l, "rows");
                assert_eq!(rs.len(), 2, "{l}");
                for row in rs {
                    assert!(num(&row["seconds"]["median"]) > 0.0 && num(&row["speedup"]) > 0.0);
                }
            }
            "skipped" => assert!(!l["reason"].as_str().unwrap().is_empty(), "{l}"),
            other => panic!("outcome {other}"),
        }
    }
    assert_eq!(langs[6]["outcome"], "measured", "Rust always runs");
    assert!(svg.unwrap().contains("ideal on"));
}

#[test]
fn gil_runs_or_skips_each_binding_with_a_reason() {
    // One thread, one peer, one case: the plumbing, not the binding's figures (the
    // bindings' own make targets run their benchmarks).
    let (r, svg) = lab(&[
        "gil",
        "--quick",
        "--threads",
        "1",
        "--",
        "--peers",
        "senju-auto",
        "--cases",
        "batch",
    ]);
    let all = rows(&r, "bindings");
    let names: Vec<&str> = all.iter().map(|b| b["binding"].as_str().unwrap()).collect();
    assert_eq!(names, ["python", "ruby"]);
    for b in all {
        match b["status"].as_str().unwrap() {
            "measured" => assert!(b["results"].is_object(), "{b}"),
            "skipped" => {
                assert!(!b["reason"].as_str().unwrap().is_empty(), "{b}");
                assert!(b["build_command"].as_str().unwrap().starts_with("make "), "{b}");
            }
            other => panic!("status {other}: {b}"),
        }
    }
    assert!(svg.is_none(), "gil draws no chart");
}

#[test]
fn bad_flags_fail_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_senju"))
        .args(["lab", "rwlock", "--quick", "--full"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--full"));
    let out = Command::new(env!("CARGO_BIN_EXE_senju"))
        .args(["lab", "cores", "--quick", "--languages", "cobol"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown language \"cobol\""));
    let out = Command::new(env!("CARGO_BIN_EXE_senju")).args(["lab", "--help"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("senju lab rwlock --quick"));
}
