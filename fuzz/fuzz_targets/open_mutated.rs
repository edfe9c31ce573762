//! Opens mutated senju database files and uses them: reads, iteration, writes, close and a
//! second open (recovery of whatever the first left). Every outcome is fine except a panic,
//! an abort or undefined behaviour (run under the sanitizers `cargo fuzz` enables).
//!
//! Input: byte 0 picks the base file (a cleanly closed database, a crash copy of it, a
//! truncated clean copy, or the rest of the input itself as the whole file); the rest is a
//! list of 6-byte edits `[op, offset u32 LE, value]`: XOR a byte, set a byte, zero the
//! 4096-byte page holding the offset, or cut the file there. Starting from valid files lets
//! the fuzzer get past the header and chunk checksums with a few bytes of input.

#![no_main]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use senju::{Db, Durability};

fn keys() -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> {
    (0..200u32)
        .map(|i| (format!("{i:08}").into_bytes(), vec![b'a' + (i % 26) as u8; (i % 37) as usize]))
}

/// A file name of this process's own.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("senju-fuzz-{}-{name}", std::process::id()))
}

/// `[clean, crash copy]` of one small database (4 shards, sets, overwrites, removes).
fn bases() -> &'static [Vec<u8>; 2] {
    static BASES: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    BASES.get_or_init(|| {
        let path = scratch("base.sj");
        let _ = std::fs::remove_file(&path);
        let db = Db::builder().shards(4).open(&path).expect("create the base file");
        for (k, v) in keys() {
            db.set(&k, &v).expect("set");
        }
        for (k, _) in keys().step_by(3) {
            db.set(&k, b"overwritten").expect("overwrite");
        }
        for (k, _) in keys().step_by(7) {
            db.remove(&k).expect("remove");
        }
        db.sync(Durability::Soft).expect("sync");
        let crash = std::fs::read(&path).expect("read");
        db.close().expect("close");
        drop(db);
        let clean = std::fs::read(&path).expect("read");
        let _ = std::fs::remove_file(&path);
        [clean, crash]
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
    match key {
        b"00000001" if value == b"fuzz" => true,
        b"a new key" => value == [7; 300],
        _ => values
            .get(key)
            .is_some_and(|(v, over)| value == v.as_slice() || (*over && value == b"overwritten")),
    }
}

/// Opens the file at `path` and uses it; errors are expected, panics and values nobody
/// wrote are bugs.
fn exercise(path: &std::path::Path, write: bool) {
    let Ok(db) = Db::open(path) else { return };
    for (k, _) in keys() {
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
    let mut file = match mode % 4 {
        0 => bases()[0].clone(),
        1 => bases()[1].clone(),
        2 => {
            let mut f = bases()[0].clone();
            f.truncate(f.len() / 2);
            f
        }
        _ => rest.to_vec(),
    };
    if mode % 4 != 3 {
        mutate(&mut file, rest);
    }
    let path = scratch("case.sj");
    if std::fs::write(&path, &file).is_err() {
        return;
    }
    exercise(&path, mode & 4 != 0);
    // Whatever the first open left (recovered, rewritten, or untouched) must open again.
    exercise(&path, false);
    let _ = std::fs::remove_file(&path);
});
