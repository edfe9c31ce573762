//! Table growth while other threads read and write the same shard: readers that meet a table
//! swap retry, writers wait for the growing writer, nothing is lost, and `close` racing the
//! writers leaves a clean file with every acknowledged set. One shard, so that every thread
//! meets every growth. (Lab 0012 also ran these against a growth copied without the lock.)

mod common;

use std::collections::HashMap;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::TempDir;
use senju::{Db, StorageError};

const STABLE: u64 = 2_000;
const WRITERS: u64 = 4;
const OPS: u64 = 30_000;

fn stable_key(i: u64) -> Vec<u8> {
    format!("stable-{i}").into_bytes()
}

/// Writers insert, overwrite and remove their own keys while readers check that keys no one
/// changes are always found; afterwards the store holds exactly what each writer's model says.
fn churn(db: &Db) -> Vec<HashMap<Vec<u8>, Vec<u8>>> {
    for i in 0..STABLE {
        db.set(&stable_key(i), &i.to_le_bytes()).unwrap();
    }
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let start = Barrier::new((WRITERS + 2) as usize);
    let models = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (done, reads, start) = (&done, &reads, &start);
                s.spawn(move || {
                    start.wait();
                    let mut i = r;
                    while !done.load(Ordering::Relaxed) {
                        let k = i % STABLE;
                        let got = db.get(&stable_key(k)).unwrap();
                        assert_eq!(got, Some(k.to_le_bytes().to_vec()), "stable key {k} lost");
                        i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let mut model = HashMap::new();
                    for i in 0..OPS {
                        let key = format!("w{t}-{}", (i * 7919) % 9_000).into_bytes();
                        if i % 5 == 4 {
                            let was = model.remove(&key).is_some();
                            assert_eq!(db.remove(&key).unwrap(), was);
                        } else {
                            let value = format!("{t}:{i}").into_bytes();
                            db.set(&key, &value).unwrap();
                            model.insert(key, value);
                        }
                    }
                    model
                })
            })
            .collect();
        let models: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        models
    });
    assert!(reads.load(Ordering::Relaxed) > 0);
    verify(db, &models);
    models
}

fn verify(db: &Db, models: &[HashMap<Vec<u8>, Vec<u8>>]) {
    for i in 0..STABLE {
        assert_eq!(db.get(&stable_key(i)).unwrap(), Some(i.to_le_bytes().to_vec()));
    }
    for (t, model) in models.iter().enumerate() {
        for n in 0..9_000 {
            let key = format!("w{t}-{n}").into_bytes();
            assert_eq!(db.get(&key).unwrap().as_ref(), model.get(&key), "key w{t}-{n}");
        }
    }
    let total = STABLE + models.iter().map(|m| m.len() as u64).sum::<u64>();
    assert_eq!(db.len(), total);
    assert_eq!(db.iter().count() as u64, total);
}

#[test]
fn growth_with_concurrent_writers_loses_nothing_in_memory() {
    let db = Db::builder().shards(1).auto_rebuild(None).memory().unwrap();
    churn(&db);
}

#[test]
fn growth_with_concurrent_writers_loses_nothing_on_file() {
    let dir = TempDir::new("growth");
    let path = dir.file("g.sj");
    let db = Db::builder().shards(1).auto_rebuild(None).open(&path).unwrap();
    let models = churn(&db);
    db.close().unwrap();
    let report = senju::check(&path).unwrap();
    assert!(report.is_ok(), "{report:?}");
    let db = Db::open(&path).unwrap();
    verify(&db, &models);
}

/// `close` while writers grow the table: every set that returned `Ok` is in the reopened
/// file, and the file checks clean.
#[test]
fn close_during_growth() {
    let dir = TempDir::new("growth-close");
    for round in 0..20u64 {
        let path = dir.file(&format!("c{round}.sj"));
        let db = Db::builder().shards(1).open(&path).unwrap();
        let stored = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let (db, stored) = (&db, &stored);
                s.spawn(move || {
                    for i in 0.. {
                        match db.set(format!("{t}-{i}").as_bytes(), b"v") {
                            Ok(()) => stored.fetch_add(1, Ordering::Relaxed),
                            Err(StorageError::Closed) => return,
                            Err(e) => panic!("set failed: {e}"),
                        };
                    }
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(1 + round % 7));
            db.close().unwrap();
        });
        let report = senju::check(&path).unwrap();
        assert!(report.is_ok(), "round {round}: {report:?}");
        let db = Db::open(&path).unwrap();
        assert_eq!(db.len(), stored.load(Ordering::Relaxed), "round {round}");
    }
}
