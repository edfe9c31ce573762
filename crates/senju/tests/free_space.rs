//! The file's free space is shared by all shards: tables one shard outgrew hold the next
//! shard's larger table or any shard's records, so a growing database leaves few holes.
//!
//! Before, each shard kept its own free list. All shards grow at about the same time, a
//! shard's old table was too small for its own next one, and only its own records refilled it,
//! more slowly than growth freed tables: 10M records left 90 MB of holes in a 409 MB file
//! (lab 0010); with the shared free space the file is 322 MB.

mod common;

use common::TempDir;
use senju::Db;

fn key(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// A new database file in `dir` holding keys `0..n`, each its own value.
fn filled(dir: &TempDir, n: u64) -> Db {
    let db = Db::open(dir.file("a.sj")).unwrap();
    for i in 0..n {
        db.set(&key(i), &key(i)).unwrap();
    }
    db
}

#[test]
fn a_growing_database_leaves_few_holes() {
    let dir = TempDir::new("free-growth");
    let s = filled(&dir, 400_000).stats().unwrap();
    // Records and slots, plus each shard's current record chunk (at most 32 KiB, part empty).
    let bound = s.live_bytes + s.table_slots * 8 + s.shards * (32 << 10);
    // Measured here: a 15.4 MB file with 0.5 MB free. Per-shard free lists left 18.4 MB with
    // 4.6 MB free (the allocation replayed in lab 0010's model).
    assert!(s.free_bytes * 10 < s.file_bytes, "{s:?}");
    assert!(s.file_bytes < bound, "{s:?}: more than {bound} bytes");
}

#[test]
fn free_space_is_found_again_after_reopening() {
    let dir = TempDir::new("free-reopen");
    let path = dir.file("a.sj");
    let free = {
        let db = Db::open(&path).unwrap();
        for i in 0..100_000u64 {
            db.set(&key(i), &[7; 100]).unwrap();
        }
        // Rewriting everything and rebuilding frees every old record chunk.
        for i in 0..100_000u64 {
            db.set(&key(i), &[8; 100]).unwrap();
        }
        db.rebuild().unwrap();
        let s = db.stats().unwrap();
        assert!(s.free_bytes > 10 << 20, "{s:?}");
        db.close().unwrap();
        s.free_bytes
    };
    let len = std::fs::metadata(&path).unwrap().len();
    // A read-only handle counts the same free space (`senju stats` opens read-only).
    let ro = Db::builder().read_only(true).open(&path).unwrap().stats().unwrap();
    let db = Db::open(&path).unwrap();
    let s = db.stats().unwrap();
    // Closing may cut free space off the end of the file (then the file is shorter than the
    // space handed out before), never anything else.
    assert_eq!(s.file_bytes, len, "{s:?}");
    assert!(s.free_bytes <= free && s.free_bytes > 10 << 20, "{s:?}, {free} before closing");
    assert_eq!(ro.free_bytes, s.free_bytes, "read-only {ro:?}");
    // And it is used again: the same records once more fit without growing the file.
    for i in 0..100_000u64 {
        db.set(&key(i), &[9; 100]).unwrap();
    }
    let after = db.stats().unwrap();
    assert_eq!(after.file_bytes, s.file_bytes, "{after:?} after {s:?}");
    assert_eq!(db.get(&key(5)).unwrap().unwrap(), [9; 100]);
}

/// A rebuild frees the tables it replaced before it returns, even when readers were pinned
/// while it swapped them (a retired table waits out their grace period; it used to wait in
/// its shard's limbo list until that shard's next allocation, not counted as free).
#[test]
fn a_rebuild_frees_the_tables_it_replaced_although_a_reader_was_pinned() {
    use std::sync::mpsc::channel;
    let dir = TempDir::new("free-rebuild-pinned");
    let db = filled(&dir, 50_000);
    let before = db.stats().unwrap();
    let in_use = before.file_bytes - before.free_bytes;
    let (pinned_tx, pinned_rx) = channel();
    let (release_tx, release_rx) = channel::<()>();
    std::thread::scope(|s| {
        let db = &db;
        let reader = s.spawn(move || {
            db.get_with(&key(1), |_| {
                pinned_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
        });
        pinned_rx.recv().unwrap();
        let mut release = Some(release_tx);
        // The reader stays pinned until every shard's table has been swapped.
        db.rebuild_with_progress(|done, total| {
            if done == total {
                release.take().map(|r| r.send(()));
            }
        })
        .unwrap();
        assert!(reader.join().unwrap().unwrap().is_some());
    });
    let after = db.stats().unwrap();
    // Everything that was in use before is dead now: the old record chunks and the old
    // tables (the file header and directory, 20 KiB, are never free).
    assert!(after.free_bytes + (64 << 10) >= in_use, "{after:?}, {in_use} in use before");
}

/// A rebuild whose progress callback panics keeps the old chunks of the shards it had
/// copied: they are dead space that the next rebuild frees. They were dropped from the
/// shards' books, neither used nor free, until the file was opened again.
#[test]
fn a_rebuild_stopped_by_a_panicking_progress_callback_leaves_nothing_behind() {
    let dir = TempDir::new("free-panic");
    let in_use = |panic_at: Option<u64>| {
        let path = dir.file(&format!("{panic_at:?}.sj"));
        let db = Db::builder().shards(4).open(&path).unwrap();
        for v in [7, 8] {
            for i in 0..50_000u64 {
                db.set(&key(i), &[v; 100]).unwrap();
            }
        }
        if let Some(at) = panic_at {
            let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                db.rebuild_with_progress(|done, _| assert!(done < at, "stop")).unwrap();
            }));
            assert!(stopped.is_err());
            assert_eq!(db.len(), 50_000);
            assert_eq!(db.get(&key(0)).unwrap().unwrap(), [8; 100]);
        }
        db.rebuild().unwrap();
        let s = db.stats().unwrap();
        assert_eq!(s.dead_bytes, 0, "{s:?}");
        db.close().unwrap();
        let db = Db::open(&path).unwrap();
        assert_eq!(db.get(&key(49_999)).unwrap().unwrap(), [8; 100]);
        s.file_bytes - s.free_bytes
    };
    let clean = in_use(None);
    for at in [1, 3] {
        let stopped = in_use(Some(at));
        // The same live data; the tables may have settled at other places.
        assert!(
            stopped <= clean + (64 << 10),
            "{stopped} bytes in use after a stop at {at}, {clean} without"
        );
    }
}
