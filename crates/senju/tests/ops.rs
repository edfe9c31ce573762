//! Every operation of `Db`, on a file and in memory.

mod common;

use common::TempDir;
use senju::{Db, Durability, MAX_KEY_LEN, OpenError, StorageError};

fn each_engine(test: impl Fn(&Db)) {
    let dir = TempDir::new("ops");
    let file = Db::builder().shards(4).open(dir.file("ops.sj")).unwrap();
    test(&file);
    file.close().unwrap();
    test(&Db::builder().shards(4).memory().unwrap());
}

#[test]
fn set_get_contains_remove() {
    each_engine(|db| {
        assert_eq!(db.get(b"a").unwrap(), None);
        db.set(b"a", b"1").unwrap();
        db.set(b"", b"empty key").unwrap();
        db.set(b"b", b"").unwrap();
        assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(db.get(b"").unwrap(), Some(b"empty key".to_vec()));
        assert_eq!(db.get(b"b").unwrap(), Some(vec![]));
        assert!(db.contains(b"b").unwrap());
        db.set(b"a", b"22").unwrap();
        assert_eq!(db.get_with(b"a", |v| v.to_vec()).unwrap(), Some(b"22".to_vec()));
        assert_eq!(db.len(), 3);
        assert!(db.remove(b"a").unwrap());
        assert!(!db.remove(b"a").unwrap());
        assert!(!db.contains(b"a").unwrap());
        assert_eq!(db.len(), 2);
    });
}

#[test]
fn add_cas_append_update() {
    each_engine(|db| {
        assert!(db.add(b"k", b"v").unwrap());
        assert!(!db.add(b"k", b"w").unwrap());
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert!(!db.compare_and_set(b"k", Some(b"x"), Some(b"y")).unwrap());
        assert!(db.compare_and_set(b"k", Some(b"v"), Some(b"y")).unwrap());
        assert!(db.compare_and_set(b"k", Some(b"y"), None).unwrap());
        assert!(!db.contains(b"k").unwrap());
        assert!(db.compare_and_set(b"k", None, Some(b"z")).unwrap());
        db.append(b"k", b",1").unwrap();
        db.append(b"new", b"x").unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"z,1".to_vec()));
        assert_eq!(db.get(b"new").unwrap(), Some(b"x".to_vec()));
        let n = db
            .update(b"n", |old| {
                let v = old.map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
                Some((v + 1).to_le_bytes().to_vec())
            })
            .unwrap();
        assert_eq!(n, Some(1u64.to_le_bytes().to_vec()));
        assert_eq!(db.update(b"n", |_| None).unwrap(), None);
        assert!(!db.contains(b"n").unwrap());
    });
}

#[test]
fn batches_iter_clear_stats() {
    each_engine(|db| {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..500u32)
            .map(|i| (format!("{i:08}").into_bytes(), i.to_le_bytes().to_vec()))
            .collect();
        db.set_many(&pairs).unwrap();
        let got = db.get_many(&[b"00000007".to_vec(), b"nope".to_vec()]).unwrap();
        assert_eq!(got, vec![Some(7u32.to_le_bytes().to_vec()), None]);
        let mut seen: Vec<_> = db.iter().map(Result::unwrap).collect();
        seen.sort();
        assert_eq!(seen, pairs);
        assert_eq!(db.remove_many(&[b"00000001", b"00000002", b"zzzzzzzz"]).unwrap(), 2);
        let s = db.stats().unwrap();
        assert_eq!((s.records, s.shards), (498, 4));
        assert!(s.table_slots >= 498 && s.live_bytes > 0 && s.dead_bytes > 0);
        db.clear().unwrap();
        assert!(db.is_empty());
        assert_eq!(db.iter().count(), 0);
        assert_eq!(db.get(b"00000007").unwrap(), None);
        db.set(b"after", b"clear").unwrap();
        assert_eq!(db.iter().count(), 1);
    });
}

/// `get_many_with` (and `get_many` on top of it) answers every key in the order given,
/// repeated and absent keys included, in grown tables and for batches shorter and
/// longer than its prefetch distance; a key that is too long fails the call before the
/// closure runs.
#[test]
fn get_many_answers_in_order() {
    each_engine(|db| {
        let key = |i: u32| format!("{i:08}").into_bytes();
        for i in (0..5000u32).step_by(2) {
            db.set(&key(i), &i.to_le_bytes()).unwrap();
        }
        for n in [0usize, 1, 3, 4, 5, 17, 1000] {
            let keys: Vec<Vec<u8>> = (0..n as u32).map(|j| key((j * 7919) % 5001)).collect();
            let mut seen = Vec::new();
            db.get_many_with(&keys, |i, v| seen.push((i, v.map(<[u8]>::to_vec)))).unwrap();
            let want: Vec<_> =
                keys.iter().enumerate().map(|(i, k)| (i, db.get(k).unwrap())).collect();
            assert_eq!(seen, want, "{n} keys");
            let plain: Vec<_> = want.into_iter().map(|(_, v)| v).collect();
            assert_eq!(db.get_many(&keys).unwrap(), plain);
        }
        let twice = [key(10), key(11), key(10)];
        let got = db.get_many(&twice).unwrap();
        assert_eq!(got, vec![Some(10u32.to_le_bytes().to_vec()), None, got[0].clone()]);
        let long = vec![b'k'; senju::MAX_KEY_LEN + 1];
        let mut calls = 0;
        let err = db.get_many_with(&[key(0), long], |_, _| calls += 1).unwrap_err();
        assert!(matches!(err, senju::StorageError::TooLarge { what: "key", .. }), "{err}");
        assert_eq!(calls, 0);
    });
}

/// Batches apply shard by shard, not in the order given: the later of two pairs with the
/// same key must still win, an invalid key must fail the call before anything is written, and
/// a key removed twice in one batch counts once.
#[test]
fn batches_keep_order_per_key_and_check_before_writing() {
    each_engine(|db| {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..300u32)
            .map(|i| (format!("{:04}", i % 100).into_bytes(), i.to_le_bytes().to_vec()))
            .collect();
        db.set_many(&pairs).unwrap();
        assert_eq!(db.len(), 100);
        for k in 0..100u32 {
            let got = db.get(format!("{k:04}").as_bytes()).unwrap();
            assert_eq!(got, Some((k + 200).to_le_bytes().to_vec()), "key {k}: not the last pair");
        }

        let long = vec![b'x'; MAX_KEY_LEN + 1];
        let bad: Vec<(&[u8], &[u8])> = vec![(b"new-1", b"v"), (&long, b"v"), (b"new-2", b"v")];
        assert!(matches!(db.set_many(&bad), Err(StorageError::TooLarge { what: "key", .. })));
        assert_eq!(db.get(b"new-1").unwrap(), None, "a pair before the bad key was written");
        assert_eq!(db.len(), 100);
        let bad_keys: Vec<&[u8]> = vec![b"0001", &long];
        assert!(db.remove_many(&bad_keys).is_err());
        assert!(db.contains(b"0001").unwrap(), "a key before the bad one was removed");

        let keys: Vec<&[u8]> = vec![b"0001", b"0002", b"0001", b"absent", b"0002"];
        assert_eq!(db.remove_many(&keys).unwrap(), 2);
        assert_eq!(db.len(), 98);
        db.set_many::<&[u8], &[u8]>(&[]).unwrap();
        assert_eq!(db.remove_many::<&[u8]>(&[]).unwrap(), 0);
    });
}

/// Threads writing batches over the same shards (so some shards are busy when a batch gets to
/// them and wait for the end of it) must land every pair, and concurrent batch removals must
/// count every key exactly once.
#[test]
fn concurrent_batches_land_every_pair() {
    const THREADS: u32 = 4;
    const BATCHES: u32 = 40;
    const PER_BATCH: u32 = 250;
    each_engine(|db| {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for b in 0..BATCHES {
                        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..PER_BATCH)
                            .map(|i| {
                                let n = (b * PER_BATCH + i) * THREADS + t;
                                (format!("{n:08}").into_bytes(), n.to_le_bytes().to_vec())
                            })
                            .collect();
                        db.set_many(&pairs).unwrap();
                    }
                });
            }
        });
        let total = THREADS * BATCHES * PER_BATCH;
        assert_eq!(db.len(), u64::from(total));
        for n in 0..total {
            assert_eq!(
                db.get(format!("{n:08}").as_bytes()).unwrap(),
                Some(n.to_le_bytes().to_vec())
            );
        }
        let removed: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    s.spawn(move || {
                        // Every thread removes every key of its stride and half of the next
                        // thread's, so some keys are removed by two threads at once.
                        let keys: Vec<Vec<u8>> = (0..total)
                            .filter(|n| {
                                n % THREADS == t || (n % THREADS == (t + 1) % THREADS && n % 2 == 0)
                            })
                            .map(|n| format!("{n:08}").into_bytes())
                            .collect();
                        keys.chunks(500).map(|c| db.remove_many(c).unwrap()).sum::<u64>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(removed, u64::from(total), "a key counted twice or not at all");
        assert!(db.is_empty());
        db.clear().unwrap();
    });
}

#[test]
fn tables_grow_with_the_data() {
    let db = Db::builder().shards(1).memory().unwrap();
    for i in 0..100_000u32 {
        db.set(&i.to_le_bytes(), &i.to_be_bytes()).unwrap();
    }
    for i in (0..100_000u32).step_by(2) {
        assert!(db.remove(&i.to_le_bytes()).unwrap());
    }
    for i in 0..100_000u32 {
        let want = (i % 2 == 1).then(|| i.to_be_bytes().to_vec());
        assert_eq!(db.get(&i.to_le_bytes()).unwrap(), want, "key {i}");
    }
    assert_eq!(db.len(), 50_000);
    assert!(db.stats().unwrap().table_slots >= 65_536);
}

/// Index tables replaced by growth are punched and their space reused for record chunks
/// (faulted in at once); small records are assembled on the stack, larger ones piece by
/// piece. Every value must survive, read live, after a clean close and from a crash copy.
#[test]
fn reused_table_space_holds_records_across_reopen_and_crash() {
    let dir = TempDir::new("reuse");
    let path = dir.file("reuse.sj");
    let value = |i: u32| vec![(i % 251) as u8; (i % 97) as usize];
    let db = Db::builder().shards(2).open(&path).unwrap();
    for i in 0..40_000u32 {
        db.set(format!("{i:08}").as_bytes(), &value(i)).unwrap();
    }
    for i in (0..40_000u32).step_by(3) {
        db.set(format!("{i:08}").as_bytes(), b"second").unwrap();
    }
    let want = |i: u32| if i.is_multiple_of(3) { b"second".to_vec() } else { value(i) };
    db.sync(Durability::Hard).unwrap();
    let crash = dir.file("crash.sj");
    std::fs::copy(&path, &crash).unwrap();
    db.close().unwrap();
    drop(db);
    for p in [&path, &crash] {
        let db = Db::open(p).unwrap();
        assert_eq!(db.len(), 40_000);
        for i in 0..40_000u32 {
            assert_eq!(db.get(format!("{i:08}").as_bytes()).unwrap(), Some(want(i)), "key {i}");
        }
    }
}

#[test]
fn large_values_and_limits() {
    each_engine(|db| {
        let big = vec![7u8; 3 << 20];
        db.set(b"big", &big).unwrap();
        db.set(b"small", b"s").unwrap();
        assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&big[..]));
        assert_eq!(db.get(b"small").unwrap(), Some(b"s".to_vec()));
        let long_key = vec![1u8; MAX_KEY_LEN];
        db.set(&long_key, b"ok").unwrap();
        assert_eq!(db.get(&long_key).unwrap(), Some(b"ok".to_vec()));
        let too_long = vec![1u8; MAX_KEY_LEN + 1];
        let e = db.set(&too_long, b"x").unwrap_err();
        assert!(matches!(e, StorageError::TooLarge { what: "key", .. }), "{e}");
        assert!(matches!(db.get(&too_long), Err(StorageError::TooLarge { .. })));
    });
}

#[test]
fn closed_handle_refuses_work() {
    each_engine(|db| {
        db.set(b"a", b"b").unwrap();
    });
    let db = Db::memory().unwrap();
    db.set(b"a", b"b").unwrap();
    db.close().unwrap();
    db.close().unwrap();
    assert!(matches!(db.get(b"a"), Err(StorageError::Closed)));
    assert!(matches!(db.set(b"a", b"c"), Err(StorageError::Closed)));
    assert!(matches!(db.sync(Durability::Soft), Err(StorageError::Closed)));
    assert!(matches!(db.iter().next(), Some(Err(StorageError::Closed))));
}

#[test]
fn reopen_keeps_everything() {
    let dir = TempDir::new("reopen");
    let path = dir.file("p.sj");
    {
        let db = Db::builder().shards(8).open(&path).unwrap();
        for i in 0..5000u32 {
            db.set(format!("key{i}").as_bytes(), format!("value{i}").as_bytes()).unwrap();
        }
        for i in 0..1000u32 {
            db.remove(format!("key{i}").as_bytes()).unwrap();
        }
        db.sync(Durability::Hard).unwrap();
    } // dropped: closes cleanly
    let size = std::fs::metadata(&path).unwrap().len();
    // Options other than `shards` apply; `shards` comes from the file.
    let db = Db::builder().shards(64).open(&path).unwrap();
    assert_eq!(db.stats().unwrap().shards, 8);
    assert_eq!(db.stats().unwrap().file_bytes, size);
    assert_eq!(db.len(), 4000);
    for i in 0..5000u32 {
        let want = (i >= 1000).then(|| format!("value{i}").into_bytes());
        assert_eq!(db.get(format!("key{i}").as_bytes()).unwrap(), want);
    }
    db.set(b"more", b"data").unwrap();
    db.close().unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.len(), 4001);
    assert_eq!(db.get(b"more").unwrap(), Some(b"data".to_vec()));
    drop(db);
    let db = Db::builder().truncate(true).open(&path).unwrap();
    assert!(db.is_empty());
}

/// `read_only` asks for a handle that never writes; an in-memory database starts empty and
/// has nothing to read. `memory()` ignored the option and handed out a writable database
/// (Python's `Db(memory=True, readonly=True)` then said `readonly` while every write
/// worked); it refuses it now, as `read_only` refuses `truncate`.
#[test]
fn a_read_only_memory_database_is_refused() {
    let e = Db::builder().read_only(true).memory().unwrap_err();
    assert!(matches!(e, OpenError::InvalidOption { name: "read_only", .. }), "{e}");
    assert!(e.to_string().contains("in memory"), "{e}");
}

#[test]
fn open_errors_are_clear() {
    let dir = TempDir::new("openerr");
    let e = Db::builder().create(false).open(dir.file("missing.sj")).unwrap_err();
    assert!(matches!(e, OpenError::NotFound { .. }), "{e}");
    // Allowed to create, in a directory that does not exist: the message names the directory
    // (it used to advise `Builder::create(true)`, which was already given).
    let missing_dir = dir.file("no-such-dir");
    let e = Db::open(missing_dir.join("x.sj")).unwrap_err();
    match &e {
        OpenError::Io { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{e}");
            assert!(
                e.to_string().contains(&format!("{} does not exist", missing_dir.display())),
                "{e}"
            );
        }
        other => panic!("expected an I/O error naming the directory, got {other:?}"),
    }
    let e = Db::open("").unwrap_err();
    assert!(e.to_string().contains("the path is empty"), "{e}");
    std::fs::write(
        dir.file("text.txt"),
        b"hello, this is not a database at all....................................",
    )
    .unwrap();
    let e = Db::open(dir.file("text.txt")).unwrap_err();
    assert!(matches!(e, OpenError::NotADatabase { .. }), "{e}");
    let e = Db::builder().shards(3).memory().unwrap_err();
    assert!(matches!(e, OpenError::InvalidOption { name: "shards", .. }), "{e}");
}

#[test]
fn second_open_in_process_is_locked() {
    let dir = TempDir::new("lock1");
    let path = dir.file("l.sj");
    let db = Db::open(&path).unwrap();
    match Db::open(&path) {
        Err(e @ OpenError::Locked { pid, .. }) => {
            assert_eq!(pid, Some(std::process::id()));
            // Not "wait for that process to exit": that process is this one.
            assert!(e.to_string().contains("already open in this process"), "{e}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close().unwrap();
    Db::open(&path).unwrap();
}

#[test]
fn capacity_hint_sizes_the_first_tables() {
    let db = Db::builder().shards(2).capacity_hint(10_000).memory().unwrap();
    db.set(b"a", b"1").unwrap();
    // 5,000 records per shard at most 7/8 full: 5,715 slots, rounded up to whole pages
    // (12 pages less the 48-byte chunk header: 6,138 slots).
    assert_eq!(db.stats().unwrap().table_slots, 6138);
    let plain = Db::builder().shards(2).memory().unwrap();
    plain.set(b"a", b"1").unwrap();
    // One page: (4096 - 48) / 8 slots.
    assert_eq!(plain.stats().unwrap().table_slots, 506);
}

/// `capacity_hint` is split among the file's shards, which an existing file keeps whatever
/// `Builder::shards` says. It was split among the builder's (128 by default), so a 2-shard
/// file reopened with the default builder sized its first tables for 1/64 of the hint.
#[test]
fn a_capacity_hint_is_split_among_the_files_shards_not_the_builders() {
    let dir = TempDir::new("hint-shards");
    let path = dir.file("h.sj");
    Db::builder().shards(2).open(&path).unwrap().close().unwrap();
    let db = Db::builder().capacity_hint(10_000).open(&path).unwrap();
    db.set(b"a", b"1").unwrap();
    // As in `capacity_hint_sizes_the_first_tables`: 5,000 records per shard.
    assert_eq!(db.stats().unwrap().table_slots, 6138);
}

/// `max_size` is the most the file may grow to. A size that is not a whole number of MiB
/// was rounded up to one (the step of the address-space reservation), so the file grew up
/// to a MiB less a page past it and `Db::max_size` reported more than was asked for.
#[test]
fn a_file_never_grows_past_max_size() {
    let dir = TempDir::new("max-size");
    let path = dir.file("m.sj");
    let max = 3_000_000; // 2.86 MiB
    let db = Db::builder().shards(1).max_size(max).open(&path).unwrap();
    assert!(db.max_size() <= max, "max_size() is {}", db.max_size());
    let value = vec![9u8; 100 << 10];
    let mut written = 0u32;
    let e = loop {
        match db.set(&written.to_le_bytes(), &value) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len <= max, "the file grew to {len} bytes");
    };
    assert!(matches!(e, StorageError::Full { limit, .. } if limit <= max), "{e}");
    assert!(written >= 20, "only {written} values fit");
    for i in 0..written {
        assert_eq!(db.get(&i.to_le_bytes()).unwrap().as_deref(), Some(&value[..]));
    }
}

#[test]
fn a_capacity_hint_too_large_for_the_map_is_refused() {
    // 10^12 records: about 9 TB of index tables against the 256 GiB map. It used to give
    // the first shard written a 16 GiB table (and a memory database would fault it in).
    for hint in [1_000_000_000_000, u64::MAX] {
        let e = Db::builder().capacity_hint(hint).memory().unwrap_err();
        assert!(matches!(e, OpenError::InvalidOption { name: "capacity_hint", .. }), "{e}");
        assert!(e.to_string().contains("smaller hint"), "{e}");
    }
    let dir = TempDir::new("hint");
    let e = Db::builder().max_size(1 << 30).capacity_hint(100_000_000).open(dir.file("h.sj"));
    assert!(matches!(e, Err(OpenError::InvalidOption { name: "capacity_hint", .. })));
    // A hint that fits is taken.
    let db = Db::builder().max_size(1 << 30).capacity_hint(1_000_000).open(dir.file("h.sj"));
    db.unwrap().set(b"k", b"v").unwrap();
}

#[test]
fn rebuild_compacts_resizes_and_keeps_everything() {
    let dir = TempDir::new("rebuild");
    let path = dir.file("r.sj");
    let db = Db::builder().shards(4).open(&path).unwrap();
    for i in 0..20_000u32 {
        db.set(&i.to_le_bytes(), &[1u8; 20]).unwrap();
    }
    for i in 0..20_000u32 {
        if i % 2 == 0 {
            db.set(&i.to_le_bytes(), &[2u8; 20]).unwrap();
        }
        if i % 3 == 0 {
            db.remove(&i.to_le_bytes()).unwrap();
        }
    }
    let before = db.stats().unwrap();
    assert!(before.dead_bytes > 0);
    db.rebuild().unwrap();
    let after = db.stats().unwrap();
    assert_eq!(after.dead_bytes, 0);
    assert_eq!(after.records, before.records);
    assert!(after.table_slots < before.table_slots, "{after:?} vs {before:?}");
    // Keys below `overwritten` that survived hold a third value after the reuse step below.
    let check = |db: &Db, overwritten: u32| {
        for i in 0..20_000u32 {
            let v = if i < overwritten {
                3u8
            } else if i % 2 == 0 {
                2
            } else {
                1
            };
            let want = (i % 3 != 0).then(|| vec![v; 20]);
            assert_eq!(db.get(&i.to_le_bytes()).unwrap(), want, "key {i}");
        }
    };
    check(&db, 0);
    // The freed space is reused: overwriting live keys (30-byte records, no new index slots,
    // so no table grows whatever the per-file hash salt) fills space the rebuild freed
    // instead of the end of the file. Each shard got back far more than its share of these.
    let size = after.file_bytes;
    const OVERWRITTEN: u32 = 7_500;
    let mut new_record_bytes = 0u64;
    for i in (0..OVERWRITTEN).filter(|i| i % 3 != 0) {
        db.set(&i.to_le_bytes(), &[3u8; 20]).unwrap();
        new_record_bytes += 30;
    }
    let mid = db.stats().unwrap();
    assert_eq!(mid.table_slots, after.table_slots);
    let grown = mid.file_bytes - size;
    assert!(
        grown < new_record_bytes / 4,
        "file grew by {grown} bytes for {new_record_bytes} bytes of new records: freed space not reused"
    );
    check(&db, OVERWRITTEN);
    // New keys too (these may grow an index table, which takes space of its own).
    for i in 0..5_000u32 {
        db.set(&(i + 1_000_000).to_le_bytes(), &[3u8; 20]).unwrap();
    }
    db.close().unwrap();
    drop(db);
    let db = Db::open(&path).unwrap();
    check(&db, OVERWRITTEN);
    assert_eq!(db.len(), after.records + 5_000);
    db.rebuild().unwrap();
    check(&db, OVERWRITTEN);
}

#[test]
fn rebuild_runs_beside_readers_and_writers() {
    each_engine(|db| {
        for i in 0..4_000u32 {
            db.set(&i.to_le_bytes(), b"base").unwrap();
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..2u32 {
                let (db, stop) = (&*db, &stop);
                s.spawn(move || {
                    let mut round = 0u32;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        for i in (t..4_000).step_by(2) {
                            db.set(&i.to_le_bytes(), &round.to_le_bytes()).unwrap();
                        }
                        round += 1;
                    }
                    // Last round: every key of this writer holds its final value.
                    for i in (t..4_000).step_by(2) {
                        db.set(&i.to_le_bytes(), b"done").unwrap();
                    }
                });
            }
            let (db, stop) = (&*db, &stop);
            s.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for i in 0..4_000u32 {
                        let n = db.get_with(&i.to_le_bytes(), <[u8]>::len).unwrap();
                        assert_eq!(n, Some(4), "key {i}");
                    }
                }
            });
            for _ in 0..5 {
                db.rebuild().unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        for i in 0..4_000u32 {
            assert_eq!(db.get(&i.to_le_bytes()).unwrap(), Some(b"done".to_vec()), "key {i}");
        }
        assert_eq!(db.len(), 4_000);
    });
}

/// A rebuild's `progress` callback that calls `rebuild` or `close` on the same database gets
/// `Reentrant`: both wait for the rebuild in progress, which waits for the callback. Both
/// hung (on the rebuild lock, which the same thread held).
#[test]
fn rebuild_or_close_inside_a_rebuilds_progress_fails_instead_of_hanging() {
    let db = Db::builder().shards(2).memory().unwrap();
    db.set(b"k", b"v").unwrap();
    let mut calls = 0;
    db.rebuild_with_progress(|_, _| {
        calls += 1;
        let e = db.rebuild().unwrap_err();
        assert!(matches!(e, StorageError::Reentrant { call: "rebuild" }), "{e}");
        let e = db.close().unwrap_err();
        assert!(matches!(e, StorageError::Reentrant { call: "close" }), "{e}");
    })
    .unwrap();
    assert_eq!(calls, 2);
    // Another database may be rebuilt (and closed) from inside.
    let other = Db::memory().unwrap();
    db.rebuild_with_progress(|_, _| other.rebuild().unwrap()).unwrap();
    db.rebuild_with_progress(|_, _| other.close().unwrap()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
}

#[test]
fn rebuild_reports_progress_shard_by_shard() {
    each_engine(|db| {
        for i in 0..500u32 {
            db.set(&i.to_le_bytes(), b"old").unwrap();
            db.set(&i.to_le_bytes(), b"new").unwrap();
        }
        let mut seen = Vec::new();
        db.rebuild_with_progress(|done, total| seen.push((done, total))).unwrap();
        assert_eq!(seen, (1..=4).map(|d| (d, 4)).collect::<Vec<_>>());
        assert_eq!(db.len(), 500);
        assert_eq!(db.stats().unwrap().dead_bytes, 0);
        db.clear().unwrap();
    });
}

/// `take` removes a key and returns its value; `take_with` removes only when its function
/// says so (`try_take_with` on a busy shard: `try_writes_report_a_busy_shard`).
#[test]
fn take_removes_and_returns_the_value() {
    each_engine(|db| {
        db.set(b"k", b"v").unwrap();
        db.set(b"big", &[9; 300]).unwrap();
        assert_eq!(db.take(b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(db.take(b"k").unwrap(), None);
        assert_eq!(db.get(b"k").unwrap(), None);
        let small = |v: &[u8]| (v.len() < 100).then_some(v.len());
        assert_eq!(db.take_with(b"big", small).unwrap(), None, "declined");
        assert_eq!(db.get(b"big").unwrap().map(|v| v.len()), Some(300));
        assert_eq!(db.take_with(b"big", |v| Some(v.len())).unwrap(), Some(300));
        assert_eq!(db.len(), 0);
        db.set(b"k", b"1").unwrap();
        assert_eq!(
            db.try_take_with(b"k", |v| Some(v.to_vec())).unwrap(),
            Some(Some(b"1".to_vec()))
        );
        db.clear().unwrap();
    });
}

/// `try_append_below` appends only while the new value stays under its limit, and says how
/// long the value would have been otherwise, writing nothing.
#[test]
fn try_append_below_writes_only_short_values() {
    each_engine(|db| {
        assert_eq!(db.try_append_below(b"k", b"abc", 8).unwrap(), Some(Ok(())));
        assert_eq!(db.try_append_below(b"k", b"defg", 8).unwrap(), Some(Ok(())));
        assert_eq!(db.try_append_below(b"k", b"h", 8).unwrap(), Some(Err(8)));
        assert_eq!(db.get(b"k").unwrap(), Some(b"abcdefg".to_vec()));
        db.append(b"k", b"h").unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"abcdefgh".to_vec()));
        db.clear().unwrap();
    });
}

/// `rebuild_until` stops before the next shard once its flag is set: the shards copied so
/// far are committed (their dead space is gone), the rest keep theirs, no record is lost,
/// and a later rebuild finishes the work.
#[test]
fn a_rebuild_stops_between_shards_when_asked() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    each_engine(|db| {
        for i in 0..500u32 {
            db.set(&i.to_le_bytes(), b"old").unwrap();
            db.set(&i.to_le_bytes(), b"new").unwrap();
        }
        let dead = db.stats().unwrap().dead_bytes;
        let stop = AtomicBool::new(false);
        let mut seen = 0;
        let whole = db
            .rebuild_until(&stop, |done, _| {
                seen = done;
                if done == 2 {
                    stop.store(true, Relaxed);
                }
            })
            .unwrap();
        assert!(!whole);
        assert_eq!(seen, 2, "no shard is copied after the stop");
        let left = db.stats().unwrap().dead_bytes;
        assert!(left > 0 && left < dead, "{left} bytes dead of {dead}");
        assert_eq!(db.len(), 500);
        for i in 0..500u32 {
            assert_eq!(db.get(&i.to_le_bytes()).unwrap(), Some(b"new".to_vec()), "key {i}");
        }
        assert!(db.rebuild_until(&AtomicBool::new(false), |_, _| {}).unwrap());
        assert_eq!(db.stats().unwrap().dead_bytes, 0);
        db.clear().unwrap();
    });
}

/// The `try_` writes do their work when the key's shard is free and report `None`, writing
/// nothing, while another thread holds it (here: an `update` whose function waits).
#[test]
fn try_writes_report_a_busy_shard() {
    each_engine(|db| {
        db.set(b"k", b"1").unwrap();
        let (entered_tx, entered) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            s.spawn(move || {
                db.update(b"k", |old| {
                    entered_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    old.map(|v| [v, b"u"].concat())
                })
                .unwrap();
            });
            entered.recv().unwrap();
            assert_eq!(db.try_set(b"k", b"2").unwrap(), None);
            assert_eq!(db.try_remove(b"k").unwrap(), None);
            assert_eq!(db.try_compare_and_set(b"k", Some(b"1"), Some(b"3")).unwrap(), None);
            assert_eq!(db.try_append(b"k", b"a").unwrap(), None);
            assert_eq!(db.try_append_below(b"k", b"a", 100).unwrap(), None);
            let busy = db.try_take_with(b"k", |_| -> Option<()> { panic!("called while busy") });
            assert_eq!(busy.unwrap(), None);
            let called = std::cell::Cell::new(false);
            let tried = db.try_update(b"k", |_| {
                called.set(true);
                None
            });
            assert_eq!(tried.unwrap(), None);
            assert!(!called.get(), "try_update ran its function on a busy shard");
            // Reads take no lock.
            assert_eq!(db.get(b"k").unwrap(), Some(b"1".to_vec()));
            release.send(()).unwrap();
        });
        assert_eq!(db.get(b"k").unwrap(), Some(b"1u".to_vec()), "the busy writes wrote nothing");
        assert_eq!(db.try_append(b"k", b"a").unwrap(), Some(()));
        assert_eq!(db.try_compare_and_set(b"k", Some(b"1ua"), Some(b"3")).unwrap(), Some(true));
        assert_eq!(db.try_compare_and_set(b"k", Some(b"1"), None).unwrap(), Some(false));
        assert_eq!(
            db.try_update(b"k", |v| v.map(|v| [v, b"!"].concat())).unwrap(),
            Some(Some(b"3!".to_vec()))
        );
        assert_eq!(db.try_set(b"k", b"4").unwrap(), Some(()));
        assert_eq!(db.get(b"k").unwrap(), Some(b"4".to_vec()));
        assert_eq!(db.try_remove(b"k").unwrap(), Some(true));
        assert_eq!(db.try_remove(b"k").unwrap(), Some(false));
    });
}
