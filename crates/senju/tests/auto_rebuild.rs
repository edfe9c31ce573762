//! Automatic rebuilds (`Builder::auto_rebuild`): overwritten and removed records are
//! reclaimed in the background, without losing or changing any live record.

mod common;

use std::time::{Duration, Instant};

use common::TempDir;
use senju::{Builder, Db, Stats};

/// How long a test waits for the background thread before calling it stuck. Generous: this
/// is a liveness bound on a loaded machine, not a measurement.
const PATIENCE: Duration = Duration::from_secs(120);

/// Waits until `done(stats)` holds, or fails after [`PATIENCE`].
fn wait_until(db: &Db, what: &str, done: impl Fn(&Stats) -> bool) -> Stats {
    let t0 = Instant::now();
    loop {
        let s = db.stats().unwrap();
        if done(&s) {
            return s;
        }
        assert!(s.auto_rebuild_error.is_none(), "{what}: {:?}", s.auto_rebuild_error);
        assert!(t0.elapsed() < PATIENCE, "{what}: still waiting after {PATIENCE:?}: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn value(round: u32, key: u32, len: usize) -> Vec<u8> {
    let mut v = vec![(round % 251) as u8; len];
    v[..4].copy_from_slice(&key.to_le_bytes());
    v
}

/// A short record written after each overwritten one and never replaced, so that no chunk
/// ever holds dead records only: a rebuild, not recycling (`tests/recycle.rs`), frees them.
fn pin(db: &Db, round: u32, key: u32) {
    db.set(format!("pin {round} {key}").as_bytes(), b"kept").unwrap();
}

/// Overwrites `keys` keys `rounds` times with `len`-byte values, waiting after each round
/// until no shard is over the threshold; returns the file's high-water mark afterwards.
fn churn(db: &Db, keys: u32, rounds: std::ops::Range<u32>, len: usize) -> u64 {
    for round in rounds {
        for k in 0..keys {
            db.set(&k.to_le_bytes(), &value(round, k, len)).unwrap();
            pin(db, round, k);
        }
        // Removed keys are dead records too.
        db.remove(&(keys + round).to_le_bytes()).unwrap();
        db.set(&(keys + round + 1).to_le_bytes(), b"short-lived").unwrap();
        wait_until(db, "dead records reclaimed", |s| s.dead_bytes <= s.live_bytes + (64 << 10));
    }
    db.stats().unwrap().file_bytes
}

fn check(db: &Db, keys: u32, round: u32, len: usize) {
    for k in 0..keys {
        assert_eq!(db.get(&k.to_le_bytes()).unwrap(), Some(value(round, k, len)), "key {k}");
    }
}

/// The file stops growing once the churn is steady: freed space is reused.
fn bounded_file(builder: impl Fn() -> Builder, open: impl Fn(Builder) -> Db) {
    let (keys, len) = (64, 4000);
    let db = open(builder().shards(4).auto_rebuild(Some(64 << 10)));
    let after_10 = churn(&db, keys, 0..10, len);
    let after_60 = churn(&db, keys, 10..60, len);
    let s = db.stats().unwrap();
    eprintln!("after 10 rounds {after_10}, after 60 {after_60}: {s:?}");
    check(&db, keys, 59, len);
    assert!(s.auto_rebuilds >= 5, "{s:?}");
    // 60 rounds wrote about 15 MB; without reuse the file would hold all of it.
    assert!(after_60 <= after_10 + (1 << 20), "the file kept growing: {after_10} -> {after_60}");
    assert!(after_60 < 4 << 20, "{s:?}");
}

#[test]
fn file_database_reuses_the_space_of_dead_records() {
    let dir = TempDir::new("auto-file");
    let path = dir.file("a.sj");
    bounded_file(|| Db::builder().truncate(true), |b| b.open(&path).unwrap());
    // And the file reopens with the last round's values.
    let db = Db::open(&path).unwrap();
    check(&db, 64, 59, 4000);
}

#[test]
fn memory_database_reuses_the_space_of_dead_records() {
    bounded_file(Db::builder, |b| b.memory().unwrap());
}

#[test]
fn turned_off_it_leaves_dead_records_alone() {
    let dir = TempDir::new("auto-off");
    let db = Db::builder().shards(4).auto_rebuild(None).open(dir.file("o.sj")).unwrap();
    for round in 0..20 {
        for k in 0..64u32 {
            // Removed first: a removed record stays (its mark keeps the key's older records
            // dead), so its chunk is never recycled either (`tests/recycle.rs`).
            db.remove(&k.to_le_bytes()).unwrap();
            db.set(&k.to_le_bytes(), &value(round, k, 4000)).unwrap();
        }
    }
    let s = db.stats().unwrap();
    assert_eq!(s.auto_rebuilds, 0);
    assert!(s.dead_bytes > 19 * 64 * 4000, "{s:?}");
    // An explicit rebuild still reclaims them.
    db.rebuild().unwrap();
    assert_eq!(db.stats().unwrap().dead_bytes, 0);
    check(&db, 64, 19, 4000);
}

/// `close` right after a burst of dead records (so a pass is starting or running) stops the
/// thread cleanly and loses nothing; so does dropping the handle.
#[test]
fn close_during_automatic_rebuilds_loses_nothing() {
    let dir = TempDir::new("auto-close");
    let path = dir.file("c.sj");
    for round in 0..40u32 {
        let db = Db::builder().shards(8).auto_rebuild(Some(1)).open(&path).unwrap();
        if round > 0 {
            check(&db, 32, round - 1, 3000);
        }
        for again in 0..3 {
            for k in 0..32u32 {
                let v = if again < 2 { value(round, k, 100) } else { value(round, k, 3000) };
                db.set(&k.to_le_bytes(), &v).unwrap();
            }
        }
        if round % 2 == 0 {
            db.close().unwrap();
        }
        drop(db);
    }
    let db = Db::open(&path).unwrap();
    check(&db, 32, 39, 3000);
    let s = db.stats().unwrap();
    assert_eq!(s.records, 32);
}

/// Readers running through an automatic rebuild always see a whole, current value.
#[test]
fn readers_see_whole_values_during_automatic_rebuilds() {
    let db = Db::builder().shards(4).auto_rebuild(Some(1)).memory().unwrap();
    let keys = 32u32;
    for k in 0..keys {
        db.set(&k.to_le_bytes(), &value(0, k, 2000)).unwrap();
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for k in 0..keys {
                        let v = db.get(&k.to_le_bytes()).unwrap().expect("key vanished");
                        assert_eq!(v.len(), 2000);
                        assert_eq!(&v[..4], &k.to_le_bytes());
                        assert!(v[4..].iter().all(|&b| b == v[4]), "torn value");
                        reads += 1;
                    }
                }
                reads
            });
        }
        for round in 1..300 {
            for k in 0..keys {
                db.set(&k.to_le_bytes(), &value(round, k, 2000)).unwrap();
            }
            // A removed record is never recycled (its mark must stay), so the passes have
            // dead records to reclaim whatever recycling takes (`tests/recycle.rs`).
            let junk = format!("junk {round}").into_bytes();
            db.set(&junk, &[0; 2000]).unwrap();
            db.remove(&junk).unwrap();
        }
        wait_until(&db, "a pass", |s| s.auto_rebuilds > 0);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    check(&db, keys, 299, 2000);
}
