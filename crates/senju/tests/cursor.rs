//! The owned cursor: every key once, resumable across threads, weakly consistent under
//! concurrent writes.

mod common;

use std::collections::BTreeSet;

use senju::{Db, StorageError};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn yields_every_key_exactly_once_in_chunks() {
    let db = Db::builder().shards(16).memory().unwrap();
    for i in 0..5000 {
        db.set(&key(i), &i.to_le_bytes()).unwrap();
    }
    for max in [1, 7, 1000, 100_000] {
        let mut c = db.cursor();
        let mut seen = BTreeSet::new();
        loop {
            let chunk = c.next_pairs(&db, max).unwrap();
            if chunk.is_empty() {
                break;
            }
            assert!(chunk.len() <= max);
            for (k, v) in chunk {
                let i = u32::from_le_bytes(v.try_into().unwrap());
                assert_eq!(k, key(i));
                assert!(seen.insert(i), "key {i} yielded twice");
            }
        }
        assert!(c.is_done());
        assert_eq!(seen.len(), 5000);
        let mut c = db.cursor();
        let mut keys = BTreeSet::new();
        loop {
            let chunk = c.next_keys(&db, max).unwrap();
            if chunk.is_empty() {
                break;
            }
            assert!(chunk.len() <= max);
            keys.extend(chunk);
        }
        assert_eq!(keys.len(), 5000);
    }
    let empty = Db::memory().unwrap();
    assert!(empty.cursor().next_pairs(&empty, 10).unwrap().is_empty());
}

/// A byte budget ends a chunk once its pairs reach it (one pair may pass it), and never
/// yields an empty chunk before the end: every key still comes once.
#[test]
fn a_byte_budget_bounds_each_chunk() {
    let db = Db::builder().shards(4).memory().unwrap();
    // 40 keys of 9 bytes with values of 1,000 to 4,900 bytes.
    let len = |i: u32| 1000 + 100 * i as usize;
    for i in 0..40 {
        db.set(&key(i), &vec![i as u8; len(i)]).unwrap();
    }
    for budget in [1, 2500, 10_000] {
        let mut c = db.cursor();
        let (mut seen, mut chunks) = (BTreeSet::new(), 0);
        loop {
            let chunk = c.next_pairs_within(&db, 1000, budget).unwrap();
            if chunk.is_empty() {
                break;
            }
            chunks += 1;
            let bytes = |p: &[(Vec<u8>, Vec<u8>)]| p.iter().map(|(k, v)| k.len() + v.len()).sum();
            // Below the budget before its last pair, whatever the pairs' sizes.
            let before_last: usize = bytes(&chunk[..chunk.len() - 1]);
            assert!(before_last < budget, "budget {budget}: {before_last} bytes before the last");
            for (k, v) in chunk {
                let i = u32::from(v[0]);
                assert_eq!((k, v.len()), (key(i), len(i)));
                assert!(seen.insert(i), "key {i} yielded twice");
            }
        }
        assert_eq!(seen.len(), 40, "budget {budget}");
        if budget == 1 {
            assert_eq!(chunks, 40, "a budget of one byte: one pair a chunk");
        }
    }
}

#[test]
#[should_panic(expected = "different database")]
fn refuses_another_database() {
    let a = Db::memory().unwrap();
    let b = Db::memory().unwrap();
    let _ = a.cursor().next_keys(&b, 10);
}

#[test]
fn moves_between_threads_and_survives_concurrent_writes() {
    let db = std::sync::Arc::new(Db::builder().shards(8).memory().unwrap());
    for i in 0..4000 {
        db.set(&key(i), b"stable").unwrap();
    }
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for round in 0..20u32 {
                for i in 4000..4500 {
                    db.set(&key(i), &round.to_le_bytes()).unwrap();
                }
                for i in 4000..4500 {
                    db.remove(&key(i)).unwrap();
                }
            }
        })
    };
    let mut cursor = db.cursor();
    let mut seen = BTreeSet::new();
    loop {
        // Each chunk is read on a fresh thread: the cursor holds nothing thread-bound.
        let db2 = db.clone();
        let (c, chunk) = std::thread::spawn(move || {
            let chunk = cursor.next_pairs(&db2, 50).unwrap();
            (cursor, chunk)
        })
        .join()
        .unwrap();
        cursor = c;
        if chunk.is_empty() {
            break;
        }
        for (k, _) in chunk {
            assert!(seen.insert(k.clone()), "{} yielded twice", String::from_utf8_lossy(&k));
        }
    }
    writer.join().unwrap();
    for i in 0..4000 {
        assert!(seen.contains(&key(i)), "stable key {i} missed");
    }
}

#[test]
fn closed_database_stops_the_scan() {
    let db = Db::builder().shards(4).memory().unwrap();
    for i in 0..100 {
        db.set(&key(i), b"v").unwrap();
    }
    let mut c = db.cursor();
    db.close().unwrap();
    assert!(matches!(c.next_keys(&db, 10), Err(StorageError::Closed)));
}
