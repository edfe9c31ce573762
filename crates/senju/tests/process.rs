//! Tests with a real second process: the writer lock, and SIGKILL at random moments.
//!
//! The child is this same test binary, re-run with `--exact child_process` and the role in
//! `SENJU_TEST_CHILD`; without that variable `child_process` does nothing.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::TempDir;
use senju::{Db, Durability, OpenError};

fn spawn_child(role: &str, path: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process", "--nocapture", "--test-threads=1"])
        .env("SENJU_TEST_CHILD", role)
        .env("SENJU_TEST_PATH", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Reads the child's stdout until a line containing `prefix`; returns the line from there
/// (the harness prints `test child_process ... ` before the child's first line).
fn wait_for(lines: &mut impl Iterator<Item = std::io::Result<String>>, prefix: &str) -> String {
    for line in lines {
        let line = line.unwrap();
        if let Some(at) = line.find(prefix) {
            return line[at..].to_string();
        }
    }
    panic!("child exited before printing {prefix}");
}

#[test]
fn child_process() {
    let Ok(role) = std::env::var("SENJU_TEST_CHILD") else { return };
    let path = std::env::var("SENJU_TEST_PATH").unwrap();
    match role.as_str() {
        "hold" => {
            let db = Db::open(&path).unwrap();
            db.set(b"held", b"yes").unwrap();
            println!("LOCKED");
            std::thread::sleep(Duration::from_secs(30));
        }
        "writer" | "rebuilder" | "autorebuilder" | "bigwriter" | "smallwriter" => {
            // Writes keys in rounds; after each round's hard sync, reports the round. The
            // value of key `k` written in round `r` is `r`, so the parent can tell which
            // rounds must be complete. The auto-rebuilder rebuilds in the background as soon
            // as a shard's dead records outweigh its live ones (every round or so). The big
            // writer also rewrites large values three times a round, so that their chunks
            // are recycled and reused (`tests/recycle.rs`) while it may be killed; the small
            // writer rewrites a few small keys hundreds of times a round, so that whole
            // chunks of small records die and are recycled between its syncs.
            let mut builder = Db::builder().shards(if role == "smallwriter" { 2 } else { 16 });
            if role == "autorebuilder" {
                builder = builder.auto_rebuild(Some(1));
            }
            let db = builder.open(&path).unwrap();
            let start: u64 =
                db.get(b"round").unwrap().map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
            for round in start + 1.. {
                if role == "bigwriter" {
                    for j in 0..3 {
                        for b in 0..BIG_KEYS {
                            let value = vec![big_fill(round, j); big_len(round, b, j)];
                            db.set(format!("big{b}").as_bytes(), &value).unwrap();
                        }
                    }
                }
                if role == "smallwriter" {
                    for j in 0..SMALL_PASSES {
                        for i in 0..SMALL_KEYS {
                            db.set(&small_key(i), &small_value(round, j)).unwrap();
                        }
                        if j % 100 == 99 {
                            // Syncs inside the round too: chunks whose records a sync
                            // promised are recycled after the next ones (`Wait::Dead`).
                            db.sync(Durability::Hard).unwrap();
                        }
                    }
                }
                for k in 0..200u32 {
                    let value = vec![(round % 251) as u8; 1 + (k as usize * 13) % 300];
                    db.set(format!("k{k}").as_bytes(), &value).unwrap();
                    if k % 7 == 0 {
                        db.remove(format!("gone{k}").as_bytes()).unwrap();
                        db.set(format!("gone{k}").as_bytes(), b"x").unwrap();
                    }
                }
                db.set(b"round", &round.to_le_bytes()).unwrap();
                db.sync(Durability::Hard).unwrap();
                println!("SYNCED {round}");
                if role == "autorebuilder" {
                    println!("AUTO {}", db.stats().unwrap().auto_rebuilds);
                }
                if role == "rebuilder" {
                    // Kills land anywhere in here: copying, committing, freeing.
                    db.rebuild().unwrap();
                }
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// The big writer's large keys.
const BIG_KEYS: u64 = 6;

/// The length of large key `b`'s value in round `round`, pass `j` (of 3): 4-74 KB, so that
/// recycled chunks are reused by values longer and shorter than their first.
fn big_len(round: u64, b: u64, j: u64) -> usize {
    4_200 + ((round * 31 + b * 7 + j * 3) % 41) as usize * 1_700
}

/// Every byte of the large values of round `round`, pass `j`.
fn big_fill(round: u64, j: u64) -> u8 {
    ((round * 3 + j) % 251) as u8
}

/// Checks that the large keys hold what the big writer had written when it died: every
/// write of rounds up to `round` and a prefix of round `round + 1`'s (passes `j` of keys
/// `b`, in the order `j * BIG_KEYS + b`). A recycled chunk whose old value came back would
/// break the prefix.
fn check_big_keys(db: &Db, round: u64, kill: u32) {
    // The cut: how many of round + 1's writes happened, somewhere in `lo..=hi`.
    let (mut lo, mut hi) = (0, 3 * BIG_KEYS);
    for b in 0..BIG_KEYS {
        let v = db.get(format!("big{b}").as_bytes()).unwrap().expect("big key lost");
        assert!(v.iter().all(|&x| x == v[0]), "kill {kill}: torn big value");
        let found = [(round, 2), (round + 1, 0), (round + 1, 1), (round + 1, 2)]
            .into_iter()
            .find(|&(r, j)| big_fill(r, j) == v[0] && big_len(r, b, j) == v.len());
        match found {
            // Its first write of round + 1 (write `b`) did not happen.
            Some((r, _)) if r == round => hi = hi.min(b),
            // Write `p` happened, this key's next one (`p + BIG_KEYS`) did not.
            Some((_, j)) => {
                let p = j * BIG_KEYS + b;
                lo = lo.max(p + 1);
                hi = hi.min(p + BIG_KEYS);
            }
            None => {
                panic!("kill {kill}: big{b} holds {} bytes of {}, round {round}", v.len(), v[0])
            }
        }
    }
    assert!(lo <= hi, "kill {kill}: the large keys are no prefix of the writes (round {round})");
}

#[test]
fn second_process_gets_locked_with_the_holders_pid() {
    let dir = TempDir::new("lock2");
    let path = dir.file("l.sj");
    let mut child = spawn_child("hold", &path);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    wait_for(&mut lines, "LOCKED");
    let err = Db::open(&path).unwrap_err();
    match &err {
        OpenError::Locked { pid, .. } => assert_eq!(*pid, Some(child.id())),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(err.to_string().contains(&format!("process {}", child.id())), "{err}");
    child.kill().unwrap();
    child.wait().unwrap();
    // The lock dies with its holder; the data it wrote (page cache) is recovered.
    let db = Db::open(&path).unwrap();
    assert_eq!(db.get(b"held").unwrap(), Some(b"yes".to_vec()));
}

/// The small writer's keys, and how many times a round it rewrites each: about 2.5 chunks
/// of small records per shard and round.
const SMALL_KEYS: u64 = 16;
const SMALL_PASSES: u64 = 500;

fn small_key(i: u64) -> Vec<u8> {
    format!("s{i}").into_bytes()
}

/// The value of every small key in round `round`, pass `j`.
fn small_value(round: u64, j: u64) -> Vec<u8> {
    [round.to_le_bytes(), j.to_le_bytes()].concat()
}

/// As [`check_big_keys`] for the small writer's keys: every write of rounds up to `round`
/// and a prefix of round `round + 1`'s (pass `j` of key `i` is write `j * SMALL_KEYS + i`).
/// A recycled chunk whose old records came back would break the prefix.
fn check_small_keys(db: &Db, round: u64, kill: u32) {
    let (mut lo, mut hi) = (0, SMALL_PASSES * SMALL_KEYS);
    for i in 0..SMALL_KEYS {
        let v = db.get(&small_key(i)).unwrap().expect("small key lost");
        assert_eq!(v.len(), 16, "kill {kill}: torn small value");
        let r = u64::from_le_bytes(v[..8].try_into().unwrap());
        let j = u64::from_le_bytes(v[8..].try_into().unwrap());
        if r == round && j == SMALL_PASSES - 1 {
            hi = hi.min(i);
        } else if r == round + 1 && j < SMALL_PASSES {
            let p = j * SMALL_KEYS + i;
            lo = lo.max(p + 1);
            hi = hi.min(p + SMALL_KEYS);
        } else {
            panic!("kill {kill}: s{i} holds pass {j} of round {r}, round {round}");
        }
    }
    assert!(lo <= hi, "kill {kill}: the small keys are no prefix of the writes (round {round})");
}

/// How many SIGKILLs: 30 by default, `SENJU_CRASH_KILLS` for a longer run (e.g. 1000).
fn kills() -> u32 {
    std::env::var("SENJU_CRASH_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(30)
}

#[test]
fn sigkill_at_random_moments_loses_no_synced_round() {
    kill_loop("writer", kills());
}

/// The same while large values are rewritten: their recycled chunks never bring an old value
/// back, nor lose a synced one.
#[test]
fn sigkill_while_large_values_are_rewritten_loses_no_synced_round() {
    kill_loop("bigwriter", kills().div_ceil(2));
}

/// The same while small values are rewritten, so that whole chunks of them are recycled
/// and reused: their old records never come back, nor is a synced one lost. The file must
/// also pass `check` after each reopening.
#[test]
fn sigkill_while_small_values_are_rewritten_loses_no_synced_round() {
    kill_loop("smallwriter", kills().div_ceil(2));
}

/// The same with a `rebuild` after every round: a kill in the middle of a rebuild (copying,
/// committing, freeing the old space) must lose nothing synced either.
#[test]
fn sigkill_during_rebuild_loses_no_synced_round() {
    kill_loop("rebuilder", kills().div_ceil(2));
}

/// The same with automatic rebuilds running in the background all the time: kills land in
/// the middle of them too.
#[test]
fn sigkill_during_automatic_rebuilds_loses_no_synced_round() {
    let passes = kill_loop("autorebuilder", kills().div_ceil(2));
    assert!(passes > 0, "the children never rebuilt automatically: the test tested nothing");
}

/// Runs `kills` children of `role`, killing each at a random moment and checking the file;
/// returns the most automatic rebuild passes a child reported (`AUTO n` lines).
fn kill_loop(role: &str, kills: u32) -> u64 {
    let dir = TempDir::new(role);
    let path = dir.file("c.sj");
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let t0 = std::time::Instant::now();
    let mut auto_passes = 0;
    for kill in 0..kills {
        let mut child = spawn_child(role, &path);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut first: u64 = wait_for(&mut lines, "SYNCED ")[7..].parse().unwrap();
        if role == "autorebuilder" && kill % 2 == 1 {
            // Every other child first finishes an automatic pass, so that the next ones
            // (one per round or so) are in flight when it dies, whatever the machine's pace.
            for line in lines.by_ref().map_while(Result::ok) {
                if let Some(at) = line.find("SYNCED ") {
                    first = line[at + 7..].parse().unwrap();
                } else if let Some(n) = line.strip_prefix("AUTO ").and_then(|n| n.parse().ok()) {
                    auto_passes = auto_passes.max(n);
                    if n > 0 {
                        break;
                    }
                }
            }
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(rng % 20_000));
        child.kill().unwrap();
        // Everything the child printed before dying was synced.
        let mut synced = first;
        for line in lines.map_while(Result::ok) {
            if let Some(at) = line.find("SYNCED ") {
                synced = line[at + 7..].parse().unwrap();
            } else if let Some(n) = line.strip_prefix("AUTO ").and_then(|n| n.parse().ok()) {
                auto_passes = auto_passes.max(n);
            }
        }
        child.wait().unwrap();
        let db = Db::builder().shards(16).open(&path).unwrap();
        let round = u64::from_le_bytes(db.get(b"round").unwrap().unwrap().try_into().unwrap());
        assert!(round >= synced, "kill {kill}: synced round {synced} but found {round}");
        // Every key holds a whole value of the last round or the one in flight.
        for k in 0..200u32 {
            let v = db.get(format!("k{k}").as_bytes()).unwrap().expect("key lost");
            assert_eq!(v.len(), 1 + (k as usize * 13) % 300, "kill {kill}: torn length");
            let r = u64::from(v[0]);
            assert!(v.iter().all(|&b| u64::from(b) == r), "kill {kill}: torn value");
            assert!(r == round % 251 || r == (round + 1) % 251, "kill {kill}: stale round");
        }
        if role == "bigwriter" {
            check_big_keys(&db, round, kill);
        }
        if role == "smallwriter" {
            check_small_keys(&db, round, kill);
        }
        for k in (0..200u32).step_by(7) {
            // Each round removes and re-sets these keys; the round in flight may have been
            // killed between the two.
            let v = db.get(format!("gone{k}").as_bytes()).unwrap();
            assert!(v.is_none() || v.as_deref() == Some(&b"x"[..]), "kill {kill}: {v:?}");
        }
        db.close().unwrap();
        // A clean close after the recovery leaves a file that checks out: in particular the
        // record the child was writing when it died is not left behind as damage.
        let report = senju::check(&path).unwrap();
        assert!(report.is_ok() && report.closed_cleanly, "kill {kill}: {report:?}");
        if std::env::var_os("SENJU_CRASH_VERBOSE").is_some() {
            let size = std::fs::metadata(&path).unwrap().len();
            eprintln!(
                "kill {kill}: synced {synced} found {round} size {size} auto {auto_passes} at {:?}",
                t0.elapsed()
            );
        }
    }
    auto_passes
}
