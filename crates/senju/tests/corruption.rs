//! Damaged files: flipped bytes in the header, the directory, index tables and records,
//! truncations and zero-filled pages. Opening and reading must give a clear error or
//! recovered data, never a panic (and, under Miri-like scrutiny, never undefined behaviour:
//! every offset read from the file is bounds-checked).
//!
//! `SENJU_CORRUPTION_CASES` sets the number of mutated files (default 10,000, as issue 3
//! asks of `make test`); every eighth one is also rebuilt, as `cargo fuzz`'s target does.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::TempDir;
use senju::{Db, Durability};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn keys() -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> {
    (0..300u32)
        .map(|i| (format!("key{i:05}").into_bytes(), vec![(i % 256) as u8; (i % 40) as usize]))
}

/// A closed (clean) file and a crash copy (unclean) of the same data.
fn originals(dir: &TempDir) -> [Vec<u8>; 2] {
    let path = dir.file("orig.sj");
    let db = Db::builder().shards(4).open(&path).unwrap();
    for (k, v) in keys() {
        db.set(&k, &v).unwrap();
    }
    for (k, _) in keys().step_by(5) {
        db.remove(&k).unwrap();
    }
    db.sync(Durability::Soft).unwrap();
    let unclean = std::fs::read(&path).unwrap();
    db.close().unwrap();
    drop(db);
    [std::fs::read(&path).unwrap(), unclean]
}

fn mutate(rng: &mut Rng, file: &mut Vec<u8>) -> String {
    let len = file.len() as u64;
    match rng.below(6) {
        0 => {
            // The header and the directory.
            let at = rng.below(4096 + 4 * 128) as usize;
            let bit = rng.below(8);
            file[at] ^= 1 << bit;
            format!("flip bit {bit} at {at} (header/directory)")
        }
        1 | 2 => {
            let n = 1 + rng.below(4);
            let mut what = String::from("flip");
            for _ in 0..n {
                let at = rng.below(len) as usize;
                file[at] ^= 1 << rng.below(8);
                what += &format!(" {at}");
            }
            what
        }
        3 => {
            let to = rng.below(len) as usize;
            file.truncate(to);
            format!("truncate to {to}")
        }
        4 => {
            let page = rng.below(len.div_ceil(4096)) as usize * 4096;
            let end = (page + 4096).min(file.len());
            file[page..end].fill(0);
            format!("zero page at {page}")
        }
        _ => {
            let at = rng.below(len) as usize;
            let n = (rng.below(64) as usize).min(file.len() - at);
            for b in &mut file[at..at + n] {
                *b = rng.next() as u8;
            }
            format!("randomize {n} bytes at {at}")
        }
    }
}

/// Opens the damaged file and reads everything it can (and, if `rebuild`, rebuilds it).
/// Panics if the engine panics, or if a read returns a value the key never had: damage may
/// cost records (or bring back a removed one), never turn one into a wrong value.
fn exercise(path: &std::path::Path, rebuild: bool) {
    let Ok(db) = Db::open(path) else { return };
    let original: std::collections::HashMap<Vec<u8>, Vec<u8>> = keys().collect();
    let check = |k: &[u8], got: &[u8]| {
        let want = if k == b"new" { &b"value"[..] } else { &original[k][..] };
        assert_eq!(got, want, "wrong value for {}", String::from_utf8_lossy(k));
    };
    for (k, _) in keys() {
        if let Ok(Some(v)) = db.get(&k) {
            check(&k, &v);
        }
    }
    for item in db.iter().take(1000) {
        match item {
            Ok((k, v)) => {
                assert!(original.contains_key(&k), "a key never set: {k:?}");
                check(&k, &v);
            }
            Err(_) => break,
        }
    }
    let _ = db.set(b"new", b"value");
    let _ = db.remove(b"key00003");
    if rebuild {
        let _ = db.rebuild();
    }
    for k in [&b"new"[..], b"key00004"] {
        if let Ok(Some(v)) = db.get(k) {
            check(k, &v);
        }
    }
    let _ = db.close();
}

#[test]
fn mutated_files_give_errors_or_data_never_panics() {
    let cases: u64 =
        std::env::var("SENJU_CORRUPTION_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let dir = TempDir::new("corrupt");
    let originals = originals(&dir);
    let path = dir.file("mutant.sj");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut opened = 0;
    for case in 0..cases {
        let mut file = originals[(case % 2) as usize].clone();
        let what = mutate(&mut rng, &mut file);
        std::fs::write(&path, &file).unwrap();
        if Db::open(&path).is_ok() {
            opened += 1;
        }
        std::fs::write(&path, &file).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| exercise(&path, case % 8 == 0)));
        assert!(
            r.is_ok(),
            "case {case} ({}): panicked after {what}",
            ["clean", "unclean"][(case % 2) as usize]
        );
    }
    // Most single mutations leave a file that opens (recovery or an untouched region).
    assert!(opened > cases / 2, "only {opened} of {cases} mutated files opened");
}

#[test]
fn flipped_record_byte_is_reported_as_corruption() {
    let dir = TempDir::new("corrupt1");
    let path = dir.file("one.sj");
    let db = Db::builder().shards(1).open(&path).unwrap();
    db.set(b"the-key", b"the-value-that-gets-damaged").unwrap();
    db.close().unwrap();
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(9).position(|w| w == b"the-value").unwrap();
    bytes[at + 3] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open(&path).unwrap();
    let e = db.get(b"the-key").unwrap_err();
    assert!(matches!(e, senju::StorageError::Corrupted { .. }), "{e}");
    assert!(e.to_string().contains("corrupted at byte"), "{e}");
}

#[test]
fn crash_with_a_torn_record_drops_only_that_record() {
    let dir = TempDir::new("torn");
    let path = dir.file("t.sj");
    let db = Db::builder().shards(1).open(&path).unwrap();
    db.set(b"first", b"1111").unwrap();
    db.set(b"second", b"2222").unwrap();
    let image = std::fs::read(&path).unwrap(); // what a crash leaves: not closed
    db.close().unwrap();
    drop(db);
    let mut torn = image.clone();
    let at = torn.windows(6).position(|w| w == b"second").unwrap();
    torn[at + 7] ^= 0xff; // inside "2222"
    std::fs::write(&path, &torn).unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.get(b"first").unwrap(), Some(b"1111".to_vec()));
    assert_eq!(db.get(b"second").unwrap(), None);
    assert_eq!(db.len(), 1);
}

/// Recovery must not keep the growth slack of a crashed file: new chunks start right after
/// the last valid one (before this, every crash doubled the file).
#[test]
fn recovery_cuts_the_growth_slack() {
    let dir = TempDir::new("slack");
    let path = dir.file("s.sj");
    let copy = dir.file("copy.sj");
    let db = Db::builder().shards(4).open(&path).unwrap();
    for i in 0..100u32 {
        db.set(&i.to_le_bytes(), b"value").unwrap();
    }
    assert!(std::fs::metadata(&path).unwrap().len() >= 1 << 20, "the map grows in MiB steps");
    std::fs::copy(&path, &copy).unwrap();
    db.close().unwrap();
    let clean_size = std::fs::metadata(&path).unwrap().len();
    let recovered = Db::open(&copy).unwrap();
    assert_eq!(recovered.len(), 100);
    recovered.close().unwrap();
    let size = std::fs::metadata(&copy).unwrap().len();
    assert!(size <= clean_size + 8 * 4096, "recovered file is {size} bytes, clean {clean_size}");
}

/// A clean file whose index is trusted, with a record's value length inflated so that the
/// record seems to run on past the end of the data: `rebuild` must refuse to copy it (its
/// checksum fails) rather than copy it onto itself, since the copy's fresh space starts
/// right where the data ends, inside the bytes the damaged record claims. Found by
/// `cargo fuzz` (`open_mutated`): the copy overlapped its source.
#[test]
fn rebuild_does_not_copy_a_damaged_record_onto_itself() {
    let dir = TempDir::new("overlap");
    let path = dir.file("o.sj");
    let db = Db::builder().shards(1).open(&path).unwrap();
    db.set(b"big", &[b'v'; 3000]).unwrap();
    db.close().unwrap();
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    // The record: first byte, value length 3000 as LEB128 (0xb8 0x17), the key, the value.
    let at = bytes.windows(5).position(|w| w == [0xb8, 0x17, b'b', b'i', b'g']).unwrap();
    bytes[at + 1] = 0x7f; // 16,312 bytes: past the end of the file's data
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open(&path).unwrap();
    let e = db.rebuild().unwrap_err();
    assert!(matches!(e, senju::StorageError::Corrupted { .. }), "{e}");
    assert!(matches!(db.get(b"big"), Err(senju::StorageError::Corrupted { .. })));
}

/// A new one-shard database at `path` holding `n` keys `{prefix}{i:05}`, each with 100 bytes
/// of `fill`; the keys, in order.
fn one_shard(path: &std::path::Path, prefix: &str, n: u32, fill: u8) -> (Db, Vec<Vec<u8>>) {
    let db = Db::builder().shards(1).open(path).unwrap();
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("{prefix}{i:05}").into_bytes()).collect();
    for k in &keys {
        db.set(k, &[fill; 100]).unwrap();
    }
    (db, keys)
}

/// A rebuild that fails midway (here on a damaged record, the last one it reaches) leaves
/// the shard consistent: every key reads as before, and keys removed afterwards stay
/// removed when the file is replayed after a crash. Before, the old table kept naming the
/// original records, so a removal killed the original while the copy, later in replay
/// order, brought the key back.
#[test]
fn a_rebuild_that_fails_midway_keeps_later_removals_through_a_crash() {
    let dir = TempDir::new("halfway");
    let path = dir.file("h.sj");
    let (db, keys) = one_shard(&path, "key", 100, b'v');
    // The last key in the table's order (which the scan and the rebuild both follow).
    let last = db.iter().last().unwrap().unwrap().0;
    db.close().unwrap();
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(last.len()).position(|w| w == last.as_slice()).unwrap();
    bytes[at + last.len() + 10] ^= 0x01; // inside its value
    std::fs::write(&path, &bytes).unwrap();

    let db = Db::open(&path).unwrap();
    let e = db.rebuild().unwrap_err();
    assert!(matches!(e, senju::StorageError::Corrupted { .. }), "{e}");
    let others: Vec<&Vec<u8>> = keys.iter().filter(|k| **k != last).collect();
    for k in &others {
        assert_eq!(db.get(k).unwrap(), Some(vec![b'v'; 100]));
    }
    db.set(b"after", b"the failed rebuild").unwrap();
    for k in &others {
        assert!(db.remove(k).unwrap());
    }
    db.sync(Durability::Hard).unwrap();
    let crashed = std::fs::read(&path).unwrap(); // as a crash would leave it: not closed
    db.close().unwrap();
    drop(db);

    std::fs::write(&path, &crashed).unwrap();
    let db = Db::open(&path).unwrap(); // replays the records
    for k in &others {
        assert_eq!(db.get(k).unwrap(), None, "{} came back", String::from_utf8_lossy(k));
    }
    assert_eq!(db.get(b"after").unwrap(), Some(b"the failed rebuild".to_vec()));
}

/// A cleanly closed file in which the header of a record chunk (not the current one) is
/// damaged. The walk at open sees that chunk's pages as a gap, while the index, trusted in a
/// clean open, still names the records inside it: new writes must not take that space (they
/// did, as free space, and overwrote those records).
#[test]
fn a_damaged_chunk_header_in_a_clean_file_is_not_reused() {
    let dir = TempDir::new("header");
    let path = dir.file("h.sj");
    let (db, keys) = one_shard(&path, "old", 2000, b'o');
    db.close().unwrap();
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    // The directory entry of shard 0 names its current record chunk at bytes 24..32.
    let current = u64::from_le_bytes(bytes[4096 + 24..4096 + 32].try_into().unwrap()) as usize;
    let victim = (8192..bytes.len())
        .step_by(4096)
        .find(|&p| &bytes[p..p + 4] == b"SJCK" && bytes[p + 4] == 1 && p != current)
        .expect("an older record chunk");
    bytes[victim + 40] ^= 0xff; // a reserved byte, covered by the header's checksum
    std::fs::write(&path, &bytes).unwrap();

    let db = Db::open(&path).unwrap();
    for i in 0..2000u32 {
        db.set(format!("new{i:05}").as_bytes(), &[b'n'; 100]).unwrap();
    }
    for k in &keys {
        match db.get(k) {
            Ok(Some(v)) => assert_eq!(v, vec![b'o'; 100]),
            other => panic!("{}: {other:?}", String::from_utf8_lossy(k)),
        }
    }
}

/// `Builder::recovery_progress` hears about a recovery (bytes replayed, rising to the total)
/// and nothing about a clean open.
#[test]
fn recovery_reports_its_progress() {
    use std::sync::{Arc, Mutex};
    let dir = TempDir::new("progress");
    let path = dir.file("p.sj");
    let db = Db::builder().shards(4).open(&path).unwrap();
    for i in 0..20_000u32 {
        db.set(format!("k{i}").as_bytes(), &[7; 50]).unwrap();
    }
    let crashed = std::fs::read(&path).unwrap(); // not closed: needs recovery
    db.close().unwrap();
    drop(db);

    let open = |calls: &Arc<Mutex<Vec<(u64, u64)>>>| {
        let c = Arc::clone(calls);
        Db::builder()
            .recovery_progress(move |done, total| c.lock().unwrap().push((done, total)))
            .open(&path)
            .unwrap()
    };
    let clean = Arc::new(Mutex::new(Vec::new()));
    drop(open(&clean));
    assert!(clean.lock().unwrap().is_empty(), "a clean open reported recovery");

    std::fs::write(&path, &crashed).unwrap();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let db = open(&calls);
    assert_eq!(db.len(), 20_000);
    let calls = calls.lock().unwrap();
    let total = calls[0].1;
    assert!(total > 20_000 * 50, "total {total}");
    assert_eq!(calls[0].0, 0);
    assert_eq!(*calls.last().unwrap(), (total, total));
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0 && w[1].1 == total), "{calls:?}");
    assert!(calls.len() > 2 && calls.len() <= 1002, "{} calls", calls.len());
}
