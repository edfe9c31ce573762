//! A power cut can leave the header of a retired index table on the disk after record
//! chunks were written into its space: the walk of recovery takes that header as valid and
//! skips the table's whole length, so the chunks inside are not seen (they were written
//! after the last sync: losing them is allowed). Recovery must not leave them there: once a
//! later chunk overwrites the stale header without covering theirs, a second recovery would
//! replay them, newer by sequence number than what the session between wrote and synced.
//!
//! The crash image is built by hand: the file after the sync ("disk") and later ("cache").

mod common;

use std::collections::HashSet;

use common::TempDir;
use senju::{Db, Durability};

const PAGE: usize = 4096;
/// Chunk kinds in a chunk header (`docs/design.md` §3).
const RECORDS: u8 = 1;
const INDEX: u8 = 2;

/// A chunk header found by its magic at a page start (checksum not verified).
#[derive(Debug, Clone, Copy)]
struct Header {
    off: usize,
    kind: u8,
    len: usize,
}

impl Header {
    fn covers(&self, at: usize) -> bool {
        self.off <= at && at < self.off + self.len
    }
}

fn headers(f: &[u8]) -> Vec<Header> {
    (2 * PAGE..f.len().saturating_sub(48))
        .step_by(PAGE)
        .filter(|&p| &f[p..p + 4] == b"SJCK")
        .map(|p| Header {
            off: p,
            kind: f[p + 4],
            len: u64::from_le_bytes(f[p + 16..p + 24].try_into().unwrap()) as usize,
        })
        .collect()
}

/// The keys of the records of the record chunk `h` (1-byte head fields: keys and values
/// here are short).
fn keys_in(f: &[u8], h: &Header) -> Vec<Vec<u8>> {
    let (mut at, mut out) = (h.off + 48, Vec::new());
    while at < h.off + h.len && f[at] != 0 {
        let (klen, vlen) = ((f[at] >> 3) as usize, f[at + 1] as usize);
        out.push(f[at + 2..at + 2 + klen].to_vec());
        at += 2 + klen + vlen + 4;
    }
    out
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// 16 bytes: `i`, then `tag` (which session wrote it).
fn value(tag: u8, i: usize) -> Vec<u8> {
    let mut v = vec![tag; 16];
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

fn open(path: &std::path::Path) -> Db {
    Db::builder().shards(1).auto_rebuild(None).open(path).unwrap()
}

#[test]
fn chunks_hidden_by_a_stale_table_header_never_come_back() {
    let dir = TempDir::new("hidden-chunks");
    let path = dir.file("s.sj");
    let db = open(&path);
    // Keys until a table of more than 10,000 slots (several pages) is retired; then a sync.
    let (mut n, mut slots) = (0, 0);
    loop {
        db.set(&key(n), &value(0, n)).unwrap();
        n += 1;
        let s = db.stats().unwrap().table_slots;
        if s != slots && slots > 10_000 {
            break;
        }
        slots = s;
    }
    db.sync(Durability::Hard).unwrap();
    let disk = std::fs::read(&path).unwrap();
    let tables: Vec<Header> = headers(&disk).into_iter().filter(|h| h.kind == INDEX).collect();
    // Rewrites until a record chunk A covers an old table's header and a record chunk B
    // with records starts further inside the table's extent.
    let mut found = None;
    'rewrite: for _ in 0..20 {
        for j in 0..n {
            db.set(&key(j), &value(1, j)).unwrap();
            if j % 200 != 0 {
                continue;
            }
            let cache = std::fs::read(&path).unwrap();
            let now = headers(&cache);
            for t in &tables {
                let Some(a) = now.iter().find(|h| h.kind == RECORDS && h.covers(t.off)) else {
                    continue;
                };
                let b = now.iter().find(|h| {
                    h.kind == RECORDS
                        && h.off >= a.off + a.len
                        && t.covers(h.off)
                        && keys_in(&cache, h).len() > 50
                });
                if let Some(b) = b {
                    found = Some((*t, *a, *b));
                    break 'rewrite;
                }
            }
        }
    }
    let (t, a, b) = found.expect("no record chunk landed inside an old table");
    let cache = std::fs::read(&path).unwrap();
    std::mem::forget(db); // the power cut
    // Everything written back but the pages of A's header and of the table's header.
    let mut image = cache.clone();
    for p in [a.off, t.off] {
        image[p..p + PAGE].copy_from_slice(&disk[p..p + PAGE]);
    }
    let hidden = keys_in(&cache, &b);
    let first = dir.file("first.sj");
    std::fs::write(&first, &image).unwrap();
    // Recovery 1: every key holds its value at the sync or a later one.
    let db = open(&first);
    for j in 0..n {
        let v = db.get(&key(j)).unwrap().expect("a synced key");
        assert!(v == value(0, j) || v == value(1, j), "key {j} after the first recovery");
    }
    // The next session removes B's keys, rewrites others until a new chunk covers the old
    // table's header and ends before B, and syncs: the removals are promised.
    let hidden_keys: HashSet<Vec<u8>> = hidden.iter().cloned().collect();
    for k in &hidden {
        db.remove(k).unwrap();
    }
    let mut landed = false;
    'session: for _ in 0..20 {
        for j in (0..n).filter(|&j| !hidden_keys.contains(&key(j))) {
            db.set(&key(j), &value(2, j)).unwrap();
            if j % 20 != 0 {
                continue;
            }
            let f = std::fs::read(&first).unwrap();
            if headers(&f).iter().any(|h| h.covers(t.off) && h.off + h.len <= b.off) {
                landed = true;
                break 'session;
            }
        }
    }
    assert!(landed, "no new chunk at the old table's start");
    db.sync(Durability::Hard).unwrap();
    let synced = std::fs::read(&first).unwrap();
    std::mem::forget(db); // a power cut right after the sync: the disk holds it all
    let second = dir.file("second.sj");
    std::fs::write(&second, &synced).unwrap();
    let db = open(&second);
    let back: Vec<_> = hidden.iter().filter(|k| db.get(k).unwrap().is_some()).collect();
    assert!(
        back.is_empty(),
        "{} of {} keys removed before a completed sync came back (B {b:?} hidden by table \
         {t:?}, A {a:?})",
        back.len(),
        hidden.len()
    );
}
