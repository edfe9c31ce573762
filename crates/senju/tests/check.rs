//! `senju::check` and `senju::salvage` on healthy files and on files with planted damage: a
//! flipped record byte, a damaged index slot, a damaged header, a zeroed page, a cut file.
//! Check must name the damage (offset and what); salvage must keep every intact record.

mod common;

use std::path::Path;

use common::{Rng, TempDir};
use senju::{Db, Durability, OpenError};

/// 200 records over 4 shards: overwrites and removals included, so replay has work to do.
/// Returns the live records.
fn fill(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let db = Db::builder().shards(4).truncate(true).open(path).unwrap();
    let mut live = Vec::new();
    for i in 0..200u32 {
        let k = format!("key{i:04}").into_bytes();
        db.set(&k, b"first version").unwrap();
        let v = format!("value-{i}-").repeat(1 + (i % 7) as usize).into_bytes();
        db.set(&k, &v).unwrap();
        if i % 10 == 3 {
            db.remove(&k).unwrap();
        } else {
            live.push((k, v));
        }
    }
    db.close().unwrap();
    live
}

fn damage(path: &Path, at: usize, f: impl FnOnce(&mut Vec<u8>, usize)) {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes, at);
    std::fs::write(path, &bytes).unwrap();
}

fn find(path: &Path, needle: &[u8]) -> usize {
    let bytes = std::fs::read(path).unwrap();
    bytes.windows(needle.len()).position(|w| w == needle).expect("needle in file")
}

fn contents(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let db = Db::builder().read_only(true).open(path).unwrap();
    let mut v: Vec<_> = db.iter().map(Result::unwrap).collect();
    v.sort();
    v
}

#[test]
fn healthy_files_pass() {
    let dir = TempDir::new("check-ok");
    let path = dir.file("ok.sj");
    let live = fill(&path);
    let r = senju::check(&path).unwrap();
    assert!(r.is_ok(), "{:?}", r.damage);
    assert!(r.closed_cleanly);
    assert_eq!((r.records, r.shards), (live.len() as u64, 4));
    assert!(r.scanned_records >= 400, "every set and overwrite is a record");

    // After a clear, a rebuild and more writes the file still checks out.
    let db = Db::open(&path).unwrap();
    db.clear().unwrap();
    for (k, v) in &live[..50] {
        db.set(k, v).unwrap();
    }
    db.rebuild().unwrap();
    db.set(b"after rebuild", b"x").unwrap();
    db.close().unwrap();
    drop(db);
    let r = senju::check(&path).unwrap();
    assert!(r.is_ok(), "{:?}", r.damage);
    assert_eq!(r.records, 51);
}

#[test]
fn a_crash_copy_checks_as_recovery_reads_it() {
    let dir = TempDir::new("check-crash");
    let path = dir.file("live.sj");
    let db = Db::builder().shards(4).open(&path).unwrap();
    for i in 0..100u32 {
        db.set(format!("k{i}").as_bytes(), b"v").unwrap();
    }
    db.sync(Durability::Soft).unwrap();
    let copy = dir.file("crash.sj");
    std::fs::write(&copy, std::fs::read(&path).unwrap()).unwrap();
    let r = senju::check(&copy).unwrap();
    assert!(r.is_ok(), "{:?}", r.damage);
    assert!(!r.closed_cleanly);
    assert_eq!(r.records, 100);
    // The original is open for writing: check refuses to read under a writer.
    assert!(matches!(senju::check(&path), Err(OpenError::Locked { .. })));
}

#[test]
fn damage_inside_a_crash_copy_is_damage_and_only_a_cut_tail_is_torn() {
    let dir = TempDir::new("check-crash-damage");
    let path = dir.file("live.sj");
    let db = Db::builder().shards(1).open(&path).unwrap();
    for i in 0..100u32 {
        db.set(format!("k{i:03}").as_bytes(), format!("value number {i:03}").as_bytes()).unwrap();
    }
    db.sync(Durability::Soft).unwrap();
    let copy = dir.file("crash.sj");
    let original = std::fs::read(&path).unwrap();

    // A flipped byte in record 50 of 100: the 49 synced records after it are still there,
    // and recovery would drop them. That is damage, not a write cut short by the crash.
    std::fs::write(&copy, &original).unwrap();
    let at = find(&copy, b"value number 050");
    damage(&copy, at, |b, at| b[at + 2] ^= 0x01);
    let r = senju::check(&copy).unwrap();
    assert!(!r.closed_cleanly);
    assert_eq!(r.torn_chunks, 0);
    assert_eq!(r.damage_count, 1, "{:?}", r.damage);
    let first = r.first_damage().unwrap();
    assert!(first.what.contains("checksum"), "{first}");
    assert!((at as u64 - 8..at as u64).contains(&first.offset), "{first} vs value at {at}");

    // The same flip in the last record, with only zeros after it, is where a writer was
    // when the process died: torn, not damage.
    std::fs::write(&copy, &original).unwrap();
    let at = find(&copy, b"value number 099");
    damage(&copy, at, |b, at| b[at + 2] ^= 0x01);
    let r = senju::check(&copy).unwrap();
    assert!(r.is_ok(), "{:?}", r.damage);
    assert_eq!((r.torn_chunks, r.records), (1, 99));
    drop(db);
}

#[test]
fn a_flipped_record_byte_is_named_and_salvage_keeps_the_rest() {
    let dir = TempDir::new("check-flip");
    let path = dir.file("flip.sj");
    let live = fill(&path);
    let victim = b"value-78-value-78-";
    let at = find(&path, victim);
    damage(&path, at, |b, at| b[at + 3] ^= 0x01);
    let r = senju::check(&path).unwrap();
    assert!(!r.is_ok());
    let first = r.first_damage().unwrap();
    assert!(first.what.contains("checksum"), "{first}");
    // The damaged record starts a few bytes before its value.
    assert!((at as u64 - 16..at as u64).contains(&first.offset), "{first} vs value at {at}");

    let out = dir.file("salvaged.sj");
    let s = senju::salvage(&path, &out).unwrap();
    assert_eq!(s.expected_records, Some(live.len() as u64));
    assert_eq!(s.damaged_regions, 1, "{:?}", s.damage);
    // key0078's newest record is lost; its older record ("first version") is intact and
    // takes its place. Every other record is exactly as it was.
    assert_eq!(s.records, live.len() as u64);
    let mut want = live.clone();
    for (k, v) in &mut want {
        if k == b"key0078" {
            *v = b"first version".to_vec();
        }
    }
    want.sort();
    assert_eq!(contents(&out), want);
    assert!(senju::check(&out).unwrap().is_ok());
}

#[test]
fn a_damaged_index_slot_is_named() {
    let dir = TempDir::new("check-index");
    let path = dir.file("index.sj");
    fill(&path);
    // Find a live slot of some shard's table: read shard 0's directory entry.
    let bytes = std::fs::read(&path).unwrap();
    let table = u64::from_le_bytes(bytes[4096..4104].try_into().unwrap()) as usize;
    assert_ne!(table, 0);
    let slot = (table + 48..bytes.len())
        .step_by(8)
        .find(|&i| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap()) > 1)
        .unwrap();
    damage(&path, slot, |b, at| b[at] ^= 0x08); // the record offset moves by 8 bytes
    let r = senju::check(&path).unwrap();
    let first = r.first_damage().expect("damage found");
    assert!(first.what.contains("index entry") || first.what.contains("missing"), "{first}");
    assert!(r.damage.iter().any(|d| d.offset == slot as u64), "{:?}", r.damage);
}

#[test]
fn header_damage_is_named_and_salvage_uses_the_salt_anyway() {
    let dir = TempDir::new("check-header");
    let path = dir.file("header.sj");
    let live = fill(&path);
    damage(&path, 50, |b, at| b[at] ^= 0xff); // the generation field: checksum breaks
    let r = senju::check(&path).unwrap();
    assert_eq!(r.first_damage().map(|d| d.offset), Some(0));
    assert!(r.first_damage().unwrap().what.contains("header checksum"));
    assert!(Db::open(&path).is_err(), "the engine refuses it too");

    let out = dir.file("salvaged.sj");
    let s = senju::salvage(&path, &out).unwrap();
    assert!(s.header_damaged);
    assert_eq!(s.damaged_regions, 0);
    let mut want = live;
    want.sort();
    assert_eq!(contents(&out), want);
}

#[test]
fn a_damaged_shard_count_in_the_header_is_not_trusted() {
    let dir = TempDir::new("check-header-bits");
    let path = dir.file("bits.sj");
    let live = fill(&path); // 4 shards
    damage(&path, 16, |b, at| b[at] = 9); // shard bits 2 -> 9: the checksum breaks
    let out = dir.file("salvaged.sj");
    let s = senju::salvage(&path, &out).unwrap();
    assert!(s.header_damaged);
    let db = Db::open(&out).unwrap();
    assert_eq!(db.stats().unwrap().shards, 4, "the header's damaged count was taken");
    drop(db);
    let mut want = live;
    want.sort();
    assert_eq!(contents(&out), want);
}

#[test]
fn a_zeroed_page_loses_only_its_records() {
    let dir = TempDir::new("check-zero");
    let path = dir.file("zero.sj");
    let db = Db::builder().shards(1).truncate(true).open(&path).unwrap();
    let value = vec![b'v'; 100];
    for i in 0..2000u32 {
        db.set(format!("key{i:05}").as_bytes(), &value).unwrap();
    }
    db.close().unwrap();
    drop(db);
    let at = find(&path, b"key01000");
    let page = at / 4096 * 4096;
    damage(&path, page, |b, p| b[p..p + 4096].fill(0));
    let r = senju::check(&path).unwrap();
    assert!(!r.is_ok());

    let out = dir.file("salvaged.sj");
    let s = senju::salvage(&path, &out).unwrap();
    // A page holds about 36 of these 113-byte records; the records cut by the page edges
    // are lost with it.
    let lost = 2000 - s.records;
    assert!((30..=40).contains(&lost), "lost {lost}: {s:?}");
    let kept = contents(&out);
    assert!(kept.iter().all(|(k, v)| k.starts_with(b"key") && *v == value));
    assert!(kept.iter().any(|(k, _)| k == b"key01999"), "records after the page survive");
}

#[test]
fn a_cut_file_is_named() {
    let dir = TempDir::new("check-cut");
    let path = dir.file("cut.sj");
    fill(&path);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 4096).unwrap();
    let r = senju::check(&path).unwrap();
    // The report is in file order: when the lost page held a chunk that the directory names,
    // that entry (near the start of the file) is reported before the cut (at the end).
    assert!(!r.is_ok());
    let cut = r.damage.iter().find(|d| d.what.contains("cut short"));
    assert!(cut.is_some_and(|d| d.offset == len - 4096), "the cut is not named: {:?}", r.damage);
}

#[test]
fn unreadable_inputs_are_errors() {
    let dir = TempDir::new("check-errors");
    assert!(matches!(senju::check(dir.file("missing.sj")), Err(OpenError::NotFound { .. })));
    let text = dir.file("text.txt");
    std::fs::write(&text, "hello, this is not a database, not at all, it is text\n").unwrap();
    assert!(matches!(senju::check(&text), Err(OpenError::NotADatabase { .. })));
    assert!(senju::salvage(&text, dir.file("out.sj")).is_err());
    let path = dir.file("same.sj");
    fill(&path);
    assert!(senju::salvage(&path, &path).is_err(), "salvage into itself is refused");
}

/// Random damage anywhere: check and salvage never panic, and a file that check passes
/// reads without error, every record of it (check misses nothing that reading would hit).
#[test]
fn random_damage_never_panics_and_a_passed_file_reads_cleanly() {
    let dir = TempDir::new("check-random");
    let path = dir.file("orig.sj");
    fill(&path);
    let original = std::fs::read(&path).unwrap();
    let (mutant, out) = (dir.file("mutant.sj"), dir.file("out.sj"));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut passed, mut damaged) = (0, 0);
    for case in 0..300 {
        let mut bytes = original.clone();
        let what = match rng.below(3) {
            0 => {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] ^= 1 << rng.below(8);
                format!("flip at {at}")
            }
            1 => {
                let at = rng.below(bytes.len() as u64) as usize;
                let end = (at + 1 + rng.below(200) as usize).min(bytes.len());
                bytes[at..end].fill(0);
                format!("zero {at}..{end}")
            }
            _ => {
                let to = rng.below(bytes.len() as u64) as usize;
                bytes.truncate(to);
                format!("cut at {to}")
            }
        };
        std::fs::write(&mutant, &bytes).unwrap();
        let report = senju::check(&mutant);
        let _ = senju::salvage(&mutant, &out);
        let Ok(report) = report else { continue };
        if !report.is_ok() {
            damaged += 1;
            continue;
        }
        passed += 1;
        let db = Db::builder().read_only(true).open(&mutant);
        let db = db.unwrap_or_else(|e| panic!("case {case} ({what}): passed check, open: {e}"));
        let mut n = 0u64;
        for item in db.iter() {
            item.unwrap_or_else(|e| panic!("case {case} ({what}): passed check, iter: {e}"));
            n += 1;
        }
        assert_eq!(n, report.records, "case {case} ({what})");
        for i in 0..200u32 {
            let k = format!("key{i:04}");
            if let Err(e) = db.get(k.as_bytes()) {
                panic!("case {case} ({what}): passed check, get {k}: {e}");
            }
        }
    }
    assert!(damaged > 0 && passed > 0, "{damaged} damaged, {passed} passed");
}

/// Regression: retired index tables go back to the free space unpunched (below the punch
/// threshold), holding old slots. A record chunk placed there used to keep those bytes after
/// its last record, and `check` reported a clean file as damaged ("malformed record"). Record
/// chunks in reused space are now cleared past their first record.
#[test]
fn record_chunks_in_reused_table_space_read_clean() {
    let dir = TempDir::new("check-reuse");
    let path = dir.file("grown.sj");
    let db = Db::builder().shards(4).open(&path).unwrap();
    // Tables grow many times per shard; their retired space is reused by records.
    for i in 0..60_000u32 {
        db.set(format!("{i:08}").as_bytes(), &i.to_le_bytes()).unwrap();
    }
    db.close().unwrap();
    let report = senju::check(&path).unwrap();
    assert!(report.is_ok(), "clean file reported damaged: {:?}", report.first_damage());
}
