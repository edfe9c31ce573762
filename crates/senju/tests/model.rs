//! Property tests: random operation sequences against a `BTreeMap` model, single-threaded
//! (with reopen and crash snapshots in between) and multi-threaded.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{TempDir, value};
use proptest::prelude::*;
use senju::Db;

#[derive(Clone, Debug)]
enum Op {
    Set(u8, Vec<u8>),
    Add(u8, Vec<u8>),
    Remove(u8),
    Cas(u8, Option<Vec<u8>>, Option<Vec<u8>>),
    Append(u8, Vec<u8>),
    Update(u8),
    Get(u8),
    Clear,
    /// Compact every shard (`Db::rebuild`): the contents stay as they are.
    Rebuild,
    /// Rewrite keys `0..keys` with small values `passes` times over: whole chunks of small
    /// records die, and are recycled and reused (`tests/recycle.rs`) among the other
    /// operations.
    Burst(u8, u8),
    /// A hard sync: the chunks begun before it are promised, and their recycling waits for
    /// later syncs.
    Sync,
    /// Close and reopen the file (clean shutdown).
    Reopen,
    /// Copy the file as a crash would leave it (every returned write is in the page cache)
    /// and check that the copy opens with exactly the model's contents.
    CrashCopy,
}

fn key(k: u8) -> Vec<u8> {
    format!("key-{k}").into_bytes()
}

fn key_in(prefix: u8, k: u8) -> Vec<u8> {
    format!("t{prefix}-key-{k}").into_bytes()
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..40;
    prop_oneof![
        8 => (k.clone(), value()).prop_map(|(k, v)| Op::Set(k, v)),
        2 => (k.clone(), value()).prop_map(|(k, v)| Op::Add(k, v)),
        4 => k.clone().prop_map(Op::Remove),
        2 => (k.clone(), proptest::option::of(value()), proptest::option::of(value()))
            .prop_map(|(k, e, n)| Op::Cas(k, e, n)),
        2 => (k.clone(), value()).prop_map(|(k, v)| Op::Append(k, v)),
        2 => k.clone().prop_map(Op::Update),
        4 => k.prop_map(Op::Get),
        1 => Just(Op::Clear),
        1 => (20u8..200, 1u8..40).prop_map(|(passes, keys)| Op::Burst(passes, keys)),
        1 => Just(Op::Rebuild),
        1 => Just(Op::Sync),
        1 => Just(Op::Reopen),
        1 => Just(Op::CrashCopy),
    ]
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    assert_eq!(db.len(), model.len() as u64);
    let mut all: Vec<_> = db.iter().map(Result::unwrap).collect();
    all.sort();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, want);
}

/// Applies a data operation to the database and the model, checking every result. `key_of`
/// names the keys (threads use disjoint prefixes). Returns `false` for `Reopen`/`CrashCopy`,
/// which the caller handles.
fn apply(
    db: &Db,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    op: Op,
    key: impl Fn(u8) -> Vec<u8>,
) -> bool {
    match op {
        Op::Set(k, v) => {
            db.set(&key(k), &v).unwrap();
            model.insert(key(k), v);
        }
        Op::Add(k, v) => {
            let added = db.add(&key(k), &v).unwrap();
            assert_eq!(added, !model.contains_key(&key(k)));
            model.entry(key(k)).or_insert(v);
        }
        Op::Remove(k) => {
            assert_eq!(db.remove(&key(k)).unwrap(), model.remove(&key(k)).is_some());
        }
        Op::Cas(k, e, n) => {
            let ok = model.get(&key(k)) == e.as_ref();
            assert_eq!(db.compare_and_set(&key(k), e.as_deref(), n.as_deref()).unwrap(), ok);
            if ok {
                match n {
                    Some(v) => model.insert(key(k), v),
                    None => model.remove(&key(k)),
                };
            }
        }
        Op::Append(k, v) => {
            db.append(&key(k), &v).unwrap();
            model.entry(key(k)).or_default().extend_from_slice(&v);
        }
        Op::Update(k) => {
            let f = |old: Option<&[u8]>| match old {
                Some(v) if v.len() % 3 == 0 => None,
                Some(v) => Some(v.iter().rev().copied().collect()),
                None => Some(b"fresh".to_vec()),
            };
            let want = f(model.get(&key(k)).map(Vec::as_slice));
            assert_eq!(db.update(&key(k), f).unwrap(), want);
            match want {
                Some(v) => model.insert(key(k), v),
                None => model.remove(&key(k)),
            };
        }
        Op::Get(k) => {
            assert_eq!(db.get(&key(k)).unwrap().as_ref(), model.get(&key(k)));
        }
        Op::Clear => {
            db.clear().unwrap();
            model.clear();
        }
        Op::Burst(passes, keys) => {
            for pass in 0..passes {
                for k in 0..keys {
                    let v = format!("burst {pass} {k}").into_bytes();
                    db.set(&key(k), &v).unwrap();
                    model.insert(key(k), v);
                }
            }
        }
        Op::Rebuild => db.rebuild().unwrap(),
        Op::Sync => db.sync(senju::Durability::Hard).unwrap(),
        Op::Reopen | Op::CrashCopy => return false,
    }
    true
}

fn run(ops: Vec<Op>, shards: u32) {
    let dir = TempDir::new("model");
    let path = dir.file("m.sj");
    let open = || Db::builder().shards(shards).open(&path).unwrap();
    let mut db = open();
    let mut model = BTreeMap::<Vec<u8>, Vec<u8>>::new();
    let mut crashes = 0;
    for op in ops {
        if apply(&db, &mut model, op.clone(), key) {
            continue;
        }
        match op {
            Op::Reopen => {
                db.close().unwrap();
                drop(db);
                db = open();
                check_all(&db, &model);
            }
            Op::CrashCopy => {
                crashes += 1;
                let copy = dir.file(&format!("crash{crashes}.sj"));
                std::fs::copy(&path, &copy).unwrap();
                let recovered = Db::open(&copy).unwrap();
                check_all(&recovered, &model);
                // The recovered copy keeps working and survives its own reopen.
                recovered.set(b"after-crash", b"1").unwrap();
                recovered.close().unwrap();
                drop(recovered);
                let again = Db::open(&copy).unwrap();
                assert_eq!(again.get(b"after-crash").unwrap(), Some(b"1".to_vec()));
                assert_eq!(again.len(), model.len() as u64 + 1);
            }
            _ => unreachable!("apply handles data operations"),
        }
    }
    check_all(&db, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn single_thread_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops, 4);
    }

    #[test]
    fn single_shard_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops, 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Threads run random operation sequences on disjoint key sets of one database (two
    /// shards, so they share shards and tables); each thread's results match its own model,
    /// and the final contents are the union of the models.
    #[test]
    fn threads_on_disjoint_keys_match_models(
        per_thread in proptest::collection::vec(proptest::collection::vec(op(), 1..150), 2..5)
    ) {
        let db = Db::builder().shards(2).memory().unwrap();
        let models: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = per_thread
                .into_iter()
                .enumerate()
                .map(|(t, ops)| {
                    let db = &db;
                    s.spawn(move || {
                        let mut model = BTreeMap::new();
                        for op in ops {
                            if !matches!(op, Op::Clear) {
                                apply(db, &mut model, op, |k| key_in(t as u8, k));
                            }
                        }
                        model
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let all: BTreeMap<_, _> = models.into_iter().flatten().collect();
        check_all(&db, &all);
    }
}

/// Threads on disjoint keys: each thread's keys must end exactly as its own model says.
/// Automatic rebuilds run all along (a 1-byte threshold: whenever a shard's dead records
/// outweigh its live ones).
#[test]
fn threads_on_disjoint_keys_match_their_models() {
    let db = Arc::new(Db::builder().shards(8).auto_rebuild(Some(1)).memory().unwrap());
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut model = BTreeMap::new();
                let mut rng = t as u64 * 7919 + 1;
                for i in 0..20_000u32 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let k = format!("t{t}-{}", rng % 500).into_bytes();
                    match rng % 5 {
                        0 | 1 => {
                            db.set(&k, &i.to_le_bytes()).unwrap();
                            model.insert(k, i.to_le_bytes().to_vec());
                        }
                        2 => assert_eq!(db.remove(&k).unwrap(), model.remove(&k).is_some()),
                        3 => {
                            db.append(&k, b"+").unwrap();
                            model.entry(k).or_default().push(b'+');
                        }
                        _ => assert_eq!(db.get(&k).unwrap().as_ref(), model.get(&k)),
                    }
                }
                model
            })
        })
        .collect();
    let mut all = BTreeMap::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    let mut got: Vec<_> = db.iter().map(Result::unwrap).collect();
    got.sort();
    assert_eq!(got, all.into_iter().collect::<Vec<_>>());
    assert_rebuilt_automatically(&db);
}

/// Waits until the database has done an automatic rebuild pass (so the test exercised one):
/// a liveness bound on a loaded machine, not a measurement.
fn assert_rebuilt_automatically(db: &Db) {
    let t0 = std::time::Instant::now();
    while db.stats().unwrap().auto_rebuilds == 0 {
        assert!(t0.elapsed().as_secs() < 120, "no automatic rebuild: {:?}", db.stats());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Threads on overlapping keys: counters updated with `update` and `compare_and_set` lose no
/// increment, and readers only ever see values some writer wrote, with automatic rebuilds
/// running all along.
#[test]
fn threads_on_overlapping_keys_lose_no_update() {
    let db = Arc::new(Db::builder().shards(2).auto_rebuild(Some(1)).memory().unwrap());
    const KEYS: u64 = 16;
    const PER_THREAD: u64 = 5_000;
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let k = format!("counter-{}", (i * 7 + t) % KEYS).into_bytes();
                    if (i + t) % 2 == 0 {
                        db.update(&k, |old| {
                            let n = old.map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
                            Some((n + 1).to_le_bytes().to_vec())
                        })
                        .unwrap();
                    } else {
                        loop {
                            let old = db.get(&k).unwrap();
                            let n = old
                                .as_deref()
                                .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
                            let new = (n + 1).to_le_bytes();
                            if db.compare_and_set(&k, old.as_deref(), Some(&new)).unwrap() {
                                break;
                            }
                        }
                    }
                    // Churn other keys so tables grow and tombstones appear meanwhile.
                    let junk = format!("junk-{t}-{i}").into_bytes();
                    db.set(&junk, b"x").unwrap();
                    if i % 3 == 0 {
                        db.remove(&junk).unwrap();
                    }
                }
            })
        })
        .collect();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut last = vec![0u64; KEYS as usize];
            for round in 0..2_000 {
                let k = round % KEYS as usize;
                if let Some(v) = db.get(format!("counter-{k}").as_bytes()).unwrap() {
                    let n = u64::from_le_bytes(v.try_into().unwrap());
                    assert!(n >= last[k], "counter {k} went back from {} to {n}", last[k]);
                    last[k] = n;
                }
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    let total: u64 = (0..KEYS)
        .map(|k| {
            let v = db.get(format!("counter-{k}").as_bytes()).unwrap().unwrap();
            u64::from_le_bytes(v.try_into().unwrap())
        })
        .sum();
    assert_eq!(total, 4 * PER_THREAD);
    assert_rebuilt_automatically(&db);
}
