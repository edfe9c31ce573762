//! Opens mutated senju database files and uses them: `check`, `salvage` and a read-only open
//! of the damaged file as it is, then reads, iteration, writes, close and a second open
//! (recovery of whatever the first left). Every outcome is fine except a panic, an abort,
//! undefined behaviour (run under the sanitizers `cargo fuzz` enables), a value nobody
//! wrote, and a salvaged file that is itself damaged or unreadable.
//!
//! Input: byte 0 picks the base file (a cleanly closed database, a crash copy of it, a
//! truncated clean copy, the rest of the input itself as the whole file, or a clean or crash
//! copy of a database of large values whose space was reused) and whether the first open
//! writes; the rest is a list of 6-byte edits `[op, offset u32 LE, value]`: XOR a byte, set a
//! byte, zero the 4096-byte page holding the offset, or cut the file there. Starting from
//! valid files lets the fuzzer get past the header and chunk checksums with a few bytes of
//! input.

#![no_main]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use senju::{Db, Durability};

fn keys() -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> {
    (0..200u32)
        .map(|i| (format!("{i:08}").into_bytes(), vec![b'a' + (i % 26) as u8; (i % 37) as usize]))
}

/// Keys `big0`..`big3`, each written with 20 KiB values of generations `0..BIG_GENERATIONS`:
/// values over 16 KiB replaced between two syncs have their space reused.
const BIG_KEYS: u8 = 4;
const BIG_GENERATIONS: u8 = 5;

fn big_key(i: u8) -> Vec<u8> {
    format!("big{i}").into_bytes()
}

fn big_value(i: u8, generation: u8) -> Vec<u8> {
    vec![b'A' + generation; 20_000 + usize::from(i)]
}

/// A file name of this process's own.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("senju-fuzz-{}-{name}", std::process::id()))
}

/// `[clean, crash copy]` of a 4-shard database that `fill` writes: the crash copy is the
/// file after a soft sync with the handle still open, the clean one after `close`.
fn make_bases(name: &str, fill: impl FnOnce(&Db)) -> [Vec<u8>; 2] {
    let path = scratch(name);
    let _ = std::fs::remove_file(&path);
    let db = Db::builder().shards(4).open(&path).expect("create a base file");
    fill(&db);
    db.sync(Durability::Soft).expect("sync");
    let crash = std::fs::read(&path).expect("read");
    db.close().expect("close");
    drop(db);
    let clean = std::fs::read(&path).expect("read");
    let _ = std::fs::remove_file(&path);
    [clean, crash]
}

/// `[clean, crash copy]` of a database of large values, each overwritten between syncs (so
/// the file holds reused and freed space) and one of them removed.
fn big_bases() -> &'static [Vec<u8>; 2] {
    static BASES: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    BASES.get_or_init(|| {
        make_bases("big-base.sj", |db| {
            for generation in 0..BIG_GENERATIONS {
                for i in 0..BIG_KEYS {
                    db.set(&big_key(i), &big_value(i, generation)).expect("set");
                }
                db.sync(Durability::Soft).expect("sync");
            }
            db.remove(&big_key(0)).expect("remove");
            db.set(b"00000003", b"small").expect("set");
        })
    })
}

/// `[clean, crash copy]` of one small database (4 shards, sets, overwrites, removes).
fn bases() -> &'static [Vec<u8>; 2] {
    static BASES: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    BASES.get_or_init(|| {
        make_bases("base.sj", |db| {
            for (k, v) in keys() {
                db.set(&k, &v).expect("set");
            }
            for (k, _) in keys().step_by(3) {
                db.set(&k, b"overwritten").expect("overwrite");
            }
            for (k, _) in keys().step_by(7) {
                db.remove(&k).expect("remove");
            }
        })
    })
}

fn mutate(file: &mut Vec<u8>, edits: &[u8]) {
    for e in edits.chunks_exact(6) {
        if file.is_empty() {
            return;
        }
        let at = u32::from_le_bytes([e[1], e[2], e[3], e[4]]) as usize % file.len();
        match e[0] % 4 {
            0 => file[at] ^= e[5].max(1),
            1 => file[at] = e[5],
            2 => {
                let page = at & !4095;
                let end = (page + 4096).min(file.len());
                file[page..end].fill(0);
            }
            _ => file.truncate(at),
        }
    }
}

/// Whether `value` is one `key` ever had: damage may lose records or bring back an older
/// one, never produce a value nobody wrote.
fn written(key: &[u8], value: &[u8]) -> bool {
    /// Each key's first value, and whether it was overwritten with `b"overwritten"`.
    static VALUES: OnceLock<HashMap<Vec<u8>, (Vec<u8>, bool)>> = OnceLock::new();
    let values =
        VALUES.get_or_init(|| keys().enumerate().map(|(i, (k, v))| (k, (v, i % 3 == 0))).collect());
    if let Some(i) = (0..BIG_KEYS).find(|&i| key == big_key(i)) {
        return (0..BIG_GENERATIONS).any(|g| value == big_value(i, g));
    }
    match key {
        b"00000001" if value == b"fuzz" => true,
        b"00000003" if value == b"small" => true,
        b"a new key" => value == [7; 300],
        _ => values
            .get(key)
            .is_some_and(|(v, over)| value == v.as_slice() || (*over && value == b"overwritten")),
    }
}

/// Every key the bases ever held.
fn all_keys() -> impl Iterator<Item = Vec<u8>> {
    keys().map(|(k, _)| k).chain((0..BIG_KEYS).map(big_key))
}

/// Reads every key and scans the store: errors are expected, values nobody wrote are bugs.
fn read_all(db: &Db) {
    for k in all_keys() {
        if let Ok(Some(v)) = db.get(&k) {
            assert!(written(&k, &v), "a value nobody wrote for {k:?}: {v:?}");
        }
        let _ = db.get_with(&k, |v| v.len());
    }
    let _ = db.len();
    let _ = db.stats();
    for item in db.iter().take(1000) {
        match item {
            Ok((k, v)) => assert!(written(&k, &v), "scanned a pair nobody wrote: {k:?} {v:?}"),
            Err(_) => break,
        }
    }
}

/// What a user does with a file they suspect: `check` it, read it without writing, and
/// `salvage` it. None of these changes the file. Whatever `salvage` writes must be a clean
/// database that `check` passes, opens, and holds only values somebody wrote.
fn inspect(path: &Path) {
    let _ = senju::check(path);
    if let Ok(db) = Db::builder().read_only(true).open(path) {
        read_all(&db);
        let _ = db.close();
    }
    let out = scratch("salvaged.sj");
    if let Ok(report) = senju::salvage(path, &out) {
        let checked = senju::check(&out).expect("check a salvaged file");
        assert!(checked.is_ok() && checked.closed_cleanly, "salvage wrote {checked:?}");
        assert_eq!(checked.records, report.records, "salvage's count and check's differ");
        let db = Db::open(&out).expect("open a salvaged file");
        let mut scanned = 0;
        for item in db.iter() {
            let (k, v) = item.expect("scan a salvaged file");
            assert!(written(&k, &v), "salvage kept a pair nobody wrote: {k:?} {v:?}");
            scanned += 1;
        }
        assert_eq!(scanned, report.records, "salvage's count and the scan differ");
        db.close().expect("close a salvaged file");
    }
    let _ = std::fs::remove_file(&out);
}

/// Opens the file at `path` and uses it; errors are expected, panics and values nobody
/// wrote are bugs.
fn exercise(path: &Path, write: bool) {
    let Ok(db) = Db::open(path) else { return };
    read_all(&db);
    if write {
        let _ = db.set(b"00000001", b"fuzz");
        let _ = db.set(b"a new key", &[7; 300]);
        let _ = db.remove(b"00000002");
        let _ = db.update(b"00000004", |old| old.map(|v| v.to_vec()));
        let _ = db.rebuild();
        if let Ok(Some(v)) = db.get(b"a new key") {
            assert!(written(b"a new key", &v), "a value nobody wrote after a rebuild");
        }
    }
    let _ = db.close();
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut file = match mode % 6 {
        0 => bases()[0].clone(),
        1 => bases()[1].clone(),
        2 => {
            let mut f = bases()[0].clone();
            f.truncate(f.len() / 2);
            f
        }
        3 => rest.to_vec(),
        4 => big_bases()[0].clone(),
        _ => big_bases()[1].clone(),
    };
    if mode % 6 != 3 {
        mutate(&mut file, rest);
    }
    let path = scratch("case.sj");
    if std::fs::write(&path, &file).is_err() {
        return;
    }
    inspect(&path);
    exercise(&path, (mode / 6) % 2 == 1);
    // Whatever the first open left (recovered, rewritten, or untouched) must open again.
    exercise(&path, false);
    let _ = std::fs::remove_file(&path);
});
