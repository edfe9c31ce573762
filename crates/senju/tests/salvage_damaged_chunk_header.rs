//! Regression: one damaged byte in a record chunk's header hid the whole chunk from `check`
//! and `salvage`. The walk skips a page whose header fails its checksum, so the chunk's
//! records were never read: `salvage` of a crash copy (400 records, one shard, synced) with
//! a reserved header byte flipped kept 326 records and reported no damage at all, and with
//! a magic byte flipped (`SJCK` -> `SJCJ`) `check` even called the file healthy, since it
//! only looked for the magic between chunks. Now `check` reports every page between chunks
//! that starts with the magic or holds an intact record where a chunk's first record goes
//! (and, in a cleanly closed file, any byte there that is not zero), and `salvage` reads the
//! records of such a chunk by their checksums: a header damaged in one byte is repaired, so
//! the chunk replays at its place in the shard's log; records whose place is lost replay
//! before every chunk of their shard.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::TempDir;
use senju::{Db, Durability};

/// Record chunks (magic `SJCK`, kind 1) of a file, by offset.
fn record_chunks(bytes: &[u8]) -> Vec<usize> {
    (0..bytes.len() - 8)
        .step_by(4096)
        .filter(|&o| &bytes[o..o + 4] == b"SJCK" && bytes[o + 4] == 1)
        .collect()
}

/// Every record of a database, sorted.
fn contents(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::builder().read_only(true).open(path).unwrap();
    db.iter().map(Result::unwrap).collect()
}

/// What a crash right after a hard sync leaves on disk: the synced file, not marked clean.
fn crash_copy(db: &Db, path: &Path, copy: &Path) {
    db.sync(Durability::Hard).unwrap();
    std::fs::copy(path, copy).unwrap();
}

/// The reviewer's case: 400 records in one shard, one byte of the second record chunk's
/// header damaged, at `byte` (3: the magic; 6: a reserved byte).
fn one_byte_in_the_second_header(byte: usize) {
    let dir = TempDir::new("hdr-one");
    let (path, crashed, out) = (dir.file("db.sj"), dir.file("crashed.sj"), dir.file("out.sj"));
    let db = Db::builder().shards(1).auto_rebuild(None).open(&path).unwrap();
    let mut want = BTreeMap::new();
    for k in 0..400u32 {
        db.set(&k.to_le_bytes(), &[9u8; 100]).unwrap();
        want.insert(k.to_le_bytes().to_vec(), vec![9u8; 100]);
    }
    crash_copy(&db, &path, &crashed);
    drop(db);
    let mut bytes = std::fs::read(&crashed).unwrap();
    let chunks = record_chunks(&bytes);
    assert!(chunks.len() >= 3, "{chunks:?}");
    let victim = chunks[1];
    bytes[victim + byte] ^= 0x01;
    std::fs::write(&crashed, &bytes).unwrap();

    let r = senju::check(&crashed).unwrap();
    assert!(!r.is_ok(), "byte {byte}: check passed a damaged chunk header");
    let first = r.first_damage().unwrap();
    assert_eq!(first.offset, victim as u64, "{first}");
    assert!(first.what.contains("chunk header"), "{first}");

    let s = senju::salvage(&crashed, &out).unwrap();
    assert_eq!(s.records, 400, "byte {byte}: {s:?}");
    assert_eq!(s.damaged_regions, 1, "byte {byte}: {s:?}");
    assert_eq!(s.damage[0].offset, (victim + byte) as u64, "{s:?}");
    assert!(s.damage[0].what.contains("repaired"), "{s:?}");
    assert_eq!(contents(&out), want);
    assert!(senju::check(&out).unwrap().is_ok());
}

#[test]
fn a_flipped_reserved_header_byte_loses_no_record() {
    one_byte_in_the_second_header(6);
}

#[test]
fn a_flipped_magic_byte_is_reported_and_loses_no_record() {
    one_byte_in_the_second_header(3);
}

/// Every byte of the header, each flipped alone (the checksum's and the sequence number's
/// included): check names the chunk, salvage repairs the header and keeps every record.
#[test]
fn any_one_damaged_header_byte_loses_no_record() {
    for byte in 0..48 {
        one_byte_in_the_second_header(byte);
    }
}

/// The same in a file closed cleanly: check names the chunk, and only it (the shard's index,
/// whose entries point into the chunk, is not compared with a replay that misses it), and
/// salvage keeps every record the directory counted.
#[test]
fn a_damaged_header_in_a_clean_file_loses_no_record() {
    let dir = TempDir::new("hdr-clean");
    let (path, out) = (dir.file("db.sj"), dir.file("out.sj"));
    let db = Db::builder().shards(2).auto_rebuild(None).open(&path).unwrap();
    let mut want = BTreeMap::new();
    for k in 0..600u32 {
        db.set(&k.to_le_bytes(), &[3u8; 80]).unwrap();
        want.insert(k.to_le_bytes().to_vec(), vec![3u8; 80]);
    }
    db.close().unwrap();
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    let victim = record_chunks(&bytes)[2];
    bytes[victim] = b'X';
    std::fs::write(&path, &bytes).unwrap();

    let r = senju::check(&path).unwrap();
    assert_eq!(r.damage_count, 1, "{:?}", r.damage);
    assert_eq!(r.first_damage().map(|d| d.offset), Some(victim as u64), "{:?}", r.damage);
    let s = senju::salvage(&path, &out).unwrap();
    assert_eq!((s.records, s.expected_records), (600, Some(600)), "{s:?}");
    assert_eq!(contents(&out), want);
}

/// Keys written three times over many chunks, some removed (a `KILLED` mark on their newest
/// record) and the shard cleared once: with several headers damaged in one byte each (magic,
/// reserved, checksum, sequence number), salvage still replays every chunk at its place, so
/// the newest value of every key wins and no removed or cleared key comes back.
#[test]
fn overwrites_across_damaged_chunks_keep_their_order() {
    let dir = TempDir::new("hdr-order");
    let (path, crashed, out) = (dir.file("db.sj"), dir.file("crashed.sj"), dir.file("out.sj"));
    let db = Db::builder().shards(2).auto_rebuild(None).open(&path).unwrap();
    let mut want = BTreeMap::new();
    let put = |db: &Db, want: &mut BTreeMap<_, _>, k: u32, v: Vec<u8>| {
        db.set(format!("key{k:04}").as_bytes(), &v).unwrap();
        want.insert(format!("key{k:04}").into_bytes(), v);
    };
    for k in 0..300 {
        put(&db, &mut want, k, b"doomed".to_vec());
    }
    db.clear().unwrap();
    want.clear();
    for round in 0..3u8 {
        for k in 0..300 {
            put(&db, &mut want, k, vec![round; 60 + (k % 50) as usize]);
        }
    }
    for k in (0..300).step_by(7) {
        db.remove(format!("key{k:04}").as_bytes()).unwrap();
        want.remove(format!("key{k:04}").as_bytes());
    }
    crash_copy(&db, &path, &crashed);
    drop(db);
    let mut bytes = std::fs::read(&crashed).unwrap();
    let chunks = record_chunks(&bytes);
    assert!(chunks.len() >= 8, "{chunks:?}");
    // Magic, reserved, checksum and sequence number, in chunks spread over the file.
    let hits = [(chunks[0], 0), (chunks[2], 5), (chunks[4], 13), (chunks[6], 24)];
    for &(c, byte) in &hits {
        bytes[c + byte] ^= 0x10;
    }
    std::fs::write(&crashed, &bytes).unwrap();

    let r = senju::check(&crashed).unwrap();
    let at: Vec<u64> = r.damage.iter().map(|d| d.offset).collect();
    assert_eq!(at, hits.iter().map(|h| h.0 as u64).collect::<Vec<_>>(), "{:?}", r.damage);

    let s = senju::salvage(&crashed, &out).unwrap();
    assert_eq!(s.damaged_regions, hits.len() as u64, "{s:?}");
    assert_eq!(s.records, want.len() as u64, "{s:?}");
    assert_eq!(contents(&out), want);
}

/// A header damaged beyond repair (its first 8 bytes zeroed): its records are still read,
/// and, their place in the log lost, they replay before the shard's other chunks, so a key
/// overwritten in an intact later chunk keeps its newest value.
#[test]
fn records_of_an_unrepairable_header_do_not_override_known_ones() {
    let dir = TempDir::new("hdr-lost");
    let (path, crashed, out) = (dir.file("db.sj"), dir.file("crashed.sj"), dir.file("out.sj"));
    let db = Db::builder().shards(1).auto_rebuild(None).open(&path).unwrap();
    let mut want = BTreeMap::new();
    for k in 0..400u32 {
        db.set(&k.to_le_bytes(), &[1u8; 100]).unwrap();
    }
    // Newer values for the first 50 keys, in the last chunks.
    for k in 0..50u32 {
        db.set(&k.to_le_bytes(), &[2u8; 100]).unwrap();
    }
    for k in 0..400u32 {
        want.insert(k.to_le_bytes().to_vec(), vec![if k < 50 { 2 } else { 1 }; 100]);
    }
    crash_copy(&db, &path, &crashed);
    drop(db);
    let mut bytes = std::fs::read(&crashed).unwrap();
    let chunks = record_chunks(&bytes);
    // The first chunk holds the first values of the first keys.
    bytes[chunks[0]..chunks[0] + 8].fill(0);
    std::fs::write(&crashed, &bytes).unwrap();

    let r = senju::check(&crashed).unwrap();
    assert_eq!(r.first_damage().map(|d| d.offset), Some(chunks[0] as u64), "{:?}", r.damage);
    let s = senju::salvage(&crashed, &out).unwrap();
    assert_eq!(s.records, 400, "{s:?}");
    assert!(s.damage[0].what.contains("unreadable"), "{s:?}");
    assert_eq!(contents(&out), want);
}

/// A file through many rebuilds (by hand and automatic), removals, clears, reopens and a
/// crash: `check` finds nothing between its chunks to report (no false positive from the
/// free space that rebuilds and retired tables leave), and salvage finds no damage.
#[test]
fn rebuilt_files_check_clean() {
    let dir = TempDir::new("hdr-rebuilds");
    let path = dir.file("db.sj");
    let value = |round: u32, k: u32| vec![(round + k) as u8; 20 + ((k * 7 + round) % 300) as usize];
    let mut want = BTreeMap::new();
    for reopen in 0..4u32 {
        let db = Db::builder().shards(4).auto_rebuild(Some(64 << 10)).open(&path).unwrap();
        for round in 0..6u32 {
            for k in 0..2000u32 {
                let key = format!("key{k:05}").into_bytes();
                if (k + round) % 11 == 0 {
                    db.remove(&key).unwrap();
                    want.remove(&key);
                } else {
                    let v = value(round + 10 * reopen, k);
                    db.set(&key, &v).unwrap();
                    want.insert(key, v);
                }
            }
            if round % 2 == 1 {
                db.rebuild().unwrap();
            }
        }
        if reopen == 2 {
            // A crash copy, then carry on from it.
            let crashed = dir.file("crashed.sj");
            db.sync(Durability::Hard).unwrap();
            std::fs::copy(&path, &crashed).unwrap();
            let r = senju::check(&crashed).unwrap();
            assert!(r.is_ok(), "crash copy: {:?}", r.damage);
            drop(db);
            std::fs::rename(&crashed, &path).unwrap();
            continue;
        }
        db.close().unwrap();
        drop(db);
        let r = senju::check(&path).unwrap();
        assert!(r.is_ok(), "after reopen {reopen}: {:?}", r.damage);
        assert_eq!(r.records, want.len() as u64);
    }
    let out = dir.file("out.sj");
    let s = senju::salvage(&path, &out).unwrap();
    assert_eq!((s.damaged_regions, s.records), (0, want.len() as u64), "{s:?}");
    assert_eq!(contents(&out), want);
}

/// Pages outside every chunk that are not all zeros (chunks found by their magic and
/// skipped by their length field; the test files have no damage).
fn nonzero_free_pages(bytes: &[u8]) -> usize {
    let data_start = u64::from_le_bytes(bytes[24..32].try_into().unwrap()) as usize;
    let (mut p, mut n) = (data_start, 0);
    while p + 4096 <= bytes.len() {
        if &bytes[p..p + 4] == b"SJCK" {
            p += (u64::from_le_bytes(bytes[p + 16..p + 24].try_into().unwrap()) as usize).max(4096);
            continue;
        }
        n += usize::from(bytes[p..p + 4096].iter().any(|&b| b != 0));
        p += 4096;
    }
    n
}

/// Retired index tables join the free space unpunched, and a record chunk that takes part
/// of one leaves the rest of its old slots there. In a crash copy those bytes are free space
/// that no sync or close zeroed: not damage, and no records for salvage to find. (When the
/// automatic rebuilds free the tables depends on timing: copies are taken until one has
/// such bytes.)
#[test]
fn stale_index_slots_in_a_crash_copy_are_not_damage() {
    let dir = TempDir::new("hdr-stale");
    let (path, crashed, out) = (dir.file("db.sj"), dir.file("crashed.sj"), dir.file("out.sj"));
    let db = Db::builder().shards(4).auto_rebuild(Some(64 << 10)).open(&path).unwrap();
    let mut stale_copies = 0;
    for batch in 0..12u32 {
        for i in batch * 10_000..(batch + 1) * 10_000 {
            db.set(format!("{i:08}").as_bytes(), &i.to_le_bytes()).unwrap();
        }
        crash_copy(&db, &path, &crashed);
        let stale = nonzero_free_pages(&std::fs::read(&crashed).unwrap());
        let r = senju::check(&crashed).unwrap();
        assert!(r.is_ok(), "batch {batch}, {stale} stale pages: {:?}", r.damage);
        if stale > 0 {
            stale_copies += 1;
            let s = senju::salvage(&crashed, &out).unwrap();
            let n = u64::from(batch + 1) * 10_000;
            assert_eq!((s.records, s.damaged_regions), (n, 0), "batch {batch}: {s:?}");
            if stale_copies == 3 {
                break;
            }
        }
    }
    assert!(stale_copies > 0, "no copy had stale bytes in its free space");
}
