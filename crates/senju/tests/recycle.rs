//! Chunks of large records that were replaced before any sync promised them are reused by
//! their shard (`docs/design.md` §3.5): rewriting large values in place of each other keeps
//! the file near its live data without a rebuild, and never brings an old value back.
//!
//! Everything here is counted (file and stats bytes, values read back), never timed.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::TempDir;
use senju::{Db, Durability};

const BIG: usize = 64 << 10;

/// A value of `len` bytes, every byte `fill`.
fn value(fill: u8, len: usize) -> Vec<u8> {
    vec![fill; len]
}

fn key(i: u64) -> Vec<u8> {
    format!("big{i}").into_bytes()
}

/// A file database without automatic rebuilds (so that only recycling can keep the file
/// small).
fn open(dir: &TempDir, name: &str) -> Db {
    Db::builder().auto_rebuild(None).open(dir.file(name)).unwrap()
}

#[test]
fn rewriting_large_values_reuses_their_chunks() {
    let dir = TempDir::new("recycle-rewrite");
    let db = open(&dir, "r.sj");
    for round in 0..200u64 {
        for k in 0..8 {
            db.set(&key(k), &value((round + k) as u8, BIG)).unwrap();
        }
    }
    let s = db.stats().unwrap();
    // 1,600 values of 64 KiB were written: 105 MB without reuse. Each live one takes a
    // chunk of 17 pages; the replaced ones wait in their shard for the next.
    assert!(s.file_bytes < 8 << 20, "{s:?}");
    assert!(s.dead_bytes < 8 * BIG as u64, "{s:?}");
    for k in 0..8 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value((199 + k) as u8, BIG)));
    }
    db.close().unwrap();
    drop(db);
    let report = senju::check(dir.file("r.sj")).unwrap();
    assert!(report.is_ok() && report.closed_cleanly, "{report:?}");
    assert_eq!(report.records, 8);
    let db = open(&dir, "r.sj");
    for k in 0..8 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value((199 + k) as u8, BIG)));
    }
}

/// Records over half a normal chunk (16 KiB) get chunks of their own too, once a shard's
/// chunks have grown to their full 32 KiB, and are recycled the same way.
#[test]
fn rewriting_values_over_16_kib_reuses_their_chunks() {
    let dir = TempDir::new("recycle-medium");
    let db = Db::builder().shards(1).auto_rebuild(None).open(dir.file("r.sj")).unwrap();
    // Small records first, so that the shard's chunks are at their full size.
    for i in 0..5_000u32 {
        db.set(&i.to_le_bytes(), b"small").unwrap();
    }
    let before = db.stats().unwrap().file_bytes;
    for round in 0..300u64 {
        for k in 0..4 {
            db.set(&key(k), &value((round + k) as u8, 20 << 10)).unwrap();
        }
    }
    let s = db.stats().unwrap();
    // 1,200 values of 20 KiB were written (24 MB); four live ones take 24 KiB each.
    assert!(s.file_bytes - before < 2 << 20, "{before} then {s:?}");
    for k in 0..4 {
        assert_eq!(db.get(&key(k)).unwrap(), Some(value((299 + k) as u8, 20 << 10)));
    }
}

/// What a crash of the process leaves (the page cache) is read back as the latest values:
/// the recycled chunks' old records never replay over the records that replaced them.
#[test]
fn a_copy_taken_while_open_recovers_the_latest_values() {
    let dir = TempDir::new("recycle-copy");
    let db = open(&dir, "r.sj");
    let mut latest = vec![Vec::new(); 12];
    for round in 0..150u64 {
        for (k, slot) in latest.iter_mut().enumerate() {
            // Sizes vary, so that chunks are reused by records shorter than their first.
            let len = 5_000 + ((round as usize * 7919 + k * 104_729) % 70_000);
            let v = value((round * 13 + k as u64) as u8, len);
            db.set(&key(k as u64), &v).unwrap();
            *slot = v;
        }
        if round % 50 == 49 {
            // A sync in between: the chunks begun before it are promised, and stay.
            db.sync(Durability::Hard).unwrap();
        }
        // Small records beside them, in the same shards.
        db.set(format!("small{round}").as_bytes(), b"s").unwrap();
    }
    std::fs::copy(dir.file("r.sj"), dir.file("copy.sj")).unwrap();
    let copy = open(&dir, "copy.sj");
    for (k, v) in latest.iter().enumerate() {
        assert_eq!(copy.get(&key(k as u64)).unwrap().as_ref(), Some(v), "key {k}");
    }
    assert_eq!(copy.len(), 12 + 150);
}

#[test]
fn a_sync_keeps_the_replaced_chunk_for_a_rebuild() {
    let dir = TempDir::new("recycle-sync");
    let db = Db::builder().shards(1).auto_rebuild(None).open(dir.file("r.sj")).unwrap();
    db.set(b"k", &value(1, BIG)).unwrap();
    db.sync(Durability::Hard).unwrap();
    db.set(b"k", &value(2, BIG)).unwrap();
    // The first value was promised by the sync: its chunk stays, dead, until a rebuild.
    let dead = db.stats().unwrap().dead_bytes;
    assert!(dead >= BIG as u64, "dead {dead}");
    // The second was not: replacing it recycles its chunk, and the dead bytes stay.
    db.set(b"k", &value(3, BIG)).unwrap();
    assert_eq!(db.stats().unwrap().dead_bytes, dead);
    assert_eq!(db.get(b"k").unwrap(), Some(value(3, BIG)));
}

#[test]
fn a_removed_large_value_keeps_its_chunk() {
    let dir = TempDir::new("recycle-remove");
    let db = Db::builder().shards(1).auto_rebuild(None).open(dir.file("r.sj")).unwrap();
    db.set(b"k", &value(1, BIG)).unwrap();
    db.set(b"k", &value(2, BIG)).unwrap();
    let before = db.stats().unwrap();
    // The removal marks the record itself; its chunk must stay for replay to see it.
    assert!(db.remove(b"k").unwrap());
    let after = db.stats().unwrap();
    assert!(after.dead_bytes >= before.dead_bytes + BIG as u64, "{before:?} {after:?}");
    std::fs::copy(dir.file("r.sj"), dir.file("copy.sj")).unwrap();
    let copy = Db::builder().shards(1).auto_rebuild(None).open(dir.file("copy.sj")).unwrap();
    assert_eq!(copy.get(b"k").unwrap(), None);
}

/// A small record that fits the rest of a large record's last page joins its chunk; that
/// chunk is then no longer the large record's alone, and is not recycled with it.
#[test]
fn a_chunk_shared_with_small_records_is_not_recycled() {
    let dir = TempDir::new("recycle-shared");
    let db = Db::builder().shards(1).auto_rebuild(None).open(dir.file("r.sj")).unwrap();
    // 65,536 + 17 bytes of record after a 48-byte header: 17 pages, 4,023 bytes to spare.
    db.set(b"k", &value(1, BIG)).unwrap();
    db.set(b"small", b"in the tail").unwrap();
    let before = db.stats().unwrap();
    db.set(b"k", &value(2, BIG)).unwrap();
    let after = db.stats().unwrap();
    assert!(after.dead_bytes >= before.dead_bytes + BIG as u64, "{before:?} {after:?}");
    assert_eq!(db.get(b"small").unwrap().as_deref(), Some(&b"in the tail"[..]));
    db.close().unwrap();
    drop(db);
    let report = senju::check(dir.file("r.sj")).unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.records, 2);
}

/// Readers racing writers that recycle chunks under them see whole values only: a value
/// is `len` bytes all equal to its first, and its length is the one its fill byte encodes.
fn racing_readers(db: Arc<Db>) {
    const KEYS: u64 = 16;
    let len_of = |fill: u8| 4_100 + (usize::from(fill) * 331) % 80_000;
    for k in 0..KEYS {
        db.set(&key(k), &value(0, len_of(0))).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut x = 0x2545_f491_4f6c_dd1d_u64 ^ t;
                for _ in 0..3_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let fill = (x >> 32) as u8;
                    db.set(&key(x % KEYS), &value(fill, len_of(fill))).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2u64)
        .map(|t| {
            let (db, stop, reads) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&reads));
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let k = key(i % KEYS);
                    let ok = db
                        .get_with(&k, |v| v.len() == len_of(v[0]) && v.iter().all(|&b| b == v[0]))
                        .unwrap()
                        .expect("every key stays present");
                    assert!(ok, "a torn or stale value under key {}", i % KEYS);
                    reads.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    let s = db.stats().unwrap();
    // 6,000 values of up to 84 KB were written; the live ones take 16 chunks.
    assert!(s.dead_bytes < 64 << 20, "{s:?}");
}

#[test]
fn readers_racing_recycling_writers_see_whole_values_in_a_file() {
    let dir = TempDir::new("recycle-race");
    racing_readers(Arc::new(open(&dir, "r.sj")));
}

#[test]
fn readers_racing_recycling_writers_see_whole_values_in_memory() {
    racing_readers(Arc::new(Db::memory().unwrap()));
}
