//! A rebuild that dies, and a rebuild that outlives its caller's patience: removals and
//! clears must survive a crash between the rebuild's first zeroing and its commit; a
//! rebuild stopped by `close` must leave nothing behind that touches the file afterwards;
//! a rebuild by a thread that is reading must fail instead of waiting for itself.
//!
//! The crash tests re-run this test binary with `--exact child` and the scenario in
//! `SENJU_TEST_CHILD`; the child sets `senju::testing::ABORT_AFTER_EARLY_ZERO`, so its
//! rebuild aborts the process where the old chunks no sync promised have just been zeroed.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::TempDir;
use senju::{Builder, Durability, StorageError};

#[test]
fn child() {
    let Ok(scenario) = std::env::var("SENJU_TEST_CHILD") else { return };
    let path = std::env::var("SENJU_TEST_PATH").unwrap();
    // One shard, so every record below shares its chunks with the others.
    let db = Builder::new().shards(1).auto_rebuild(None).open(&path).unwrap();
    db.set(b"k", b"old").unwrap();
    db.set(b"kept", b"yes").unwrap();
    db.sync(Durability::Hard).unwrap();
    // 20 KB: a chunk of its own, begun after the sync (no sync promised it).
    let big = vec![7u8; 20_000];
    match scenario.as_str() {
        "remove" => {
            // The key's newest record, in that chunk, carries the removal.
            db.set(b"k", &big).unwrap();
            assert!(db.remove(b"k").unwrap());
        }
        "remove-promised" => {
            // The removal marks the record in the promised chunk; the new chunk holds only
            // another key's record.
            db.set(b"other", &big).unwrap();
            assert!(db.remove(b"k").unwrap());
        }
        "clear" => {
            // The clear's record lands in the new chunk; "kept" is set again after it.
            db.set(b"x", &big).unwrap();
            db.clear().unwrap();
            db.set(b"kept", b"again").unwrap();
        }
        other => panic!("unknown scenario {other}"),
    }
    assert_eq!(db.get(b"k").unwrap(), None);
    // The removal returned: it is in the page cache, and a crash of the process keeps it.
    senju::testing::ABORT_AFTER_EARLY_ZERO.store(true, Ordering::Relaxed);
    db.rebuild().unwrap();
    unreachable!("the rebuild aborts the process");
}

/// Runs `scenario` in a child that aborts inside its rebuild; returns the database file.
fn crash_in_rebuild(dir: &TempDir, scenario: &str) -> std::path::PathBuf {
    let path = dir.file("crash.sj");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("SENJU_TEST_CHILD", scenario)
        .env("SENJU_TEST_PATH", &path)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "{scenario}: the child's rebuild should have aborted it");
    path
}

#[test]
fn a_removal_survives_a_crash_between_early_zeroing_and_commit() {
    for scenario in ["remove", "remove-promised"] {
        let dir = TempDir::new("rebuild-crash-remove");
        let path = crash_in_rebuild(&dir, scenario);
        let db = Builder::new().open(&path).unwrap();
        assert_eq!(db.get(b"k").unwrap(), None, "{scenario}: the removed key came back");
        assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"yes"[..]), "{scenario}");
        assert_eq!(db.len(), 1 + u64::from(scenario == "remove-promised"), "{scenario}");
    }
}

#[test]
fn a_clear_survives_a_crash_between_early_zeroing_and_commit() {
    let dir = TempDir::new("rebuild-crash-clear");
    let path = crash_in_rebuild(&dir, "clear");
    let db = Builder::new().open(&path).unwrap();
    assert_eq!(db.get(b"k").unwrap(), None, "a key cleared before the crash came back");
    assert_eq!(db.get(b"x").unwrap(), None);
    assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"again"[..]));
    assert_eq!(db.len(), 1);
}

/// `close` from another thread stops a rebuild that waits for a reader, and returns only
/// once that rebuild has: nothing it does afterwards may touch the file, which a new handle
/// may be using by then. (`close` also waits for the reader, whose next step is then
/// `Err(Closed)`.)
#[test]
fn close_stops_a_waiting_rebuild_before_it_returns() {
    let dir = TempDir::new("rebuild-close");
    let path = dir.file("close.sj");
    let db = Builder::new().shards(1).auto_rebuild(None).open(&path).unwrap();
    let fill = |db: &senju::Db, round: u8| {
        for k in 0..2000u32 {
            db.set(&k.to_le_bytes(), &[round; 100]).unwrap();
        }
    };
    fill(&db, 1);
    db.sync(Durability::Hard).unwrap();
    // Chunks no sync promised: a rebuild would zero them right after its grace period.
    fill(&db, 2);
    let (holding, held) = mpsc::channel();
    let (step, stepped) = mpsc::channel::<()>();
    let rebuilt = AtomicBool::new(false);
    let closed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (db, rebuilt, closed) = (&db, &rebuilt, &closed);
        let reader = s.spawn(move || {
            let mut it = db.iter();
            it.next().unwrap().unwrap();
            holding.send(()).unwrap();
            stepped.recv().unwrap();
            it.next().map(|r| r.map(|_| ()))
        });
        held.recv().unwrap();
        let (copying, copied) = mpsc::channel();
        let rebuild = s.spawn(move || {
            let r = db.rebuild_with_progress(|done, total| {
                if done == total {
                    copying.send(()).unwrap();
                }
            });
            rebuilt.store(true, Ordering::SeqCst);
            r
        });
        // Every shard copied, so the close below cannot stop the rebuild short of its commit
        // (it would fail with `Closed`); then let it reach its wait for the reader (it
        // cannot get past it).
        copied.recv().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(!rebuilt.load(Ordering::SeqCst), "the rebuild did not wait for the reader");
        let closer = s.spawn(move || {
            let r = db.close();
            closed.store(true, Ordering::SeqCst);
            r
        });
        // Stopped in its wait for the reader, after every shard was copied and committed:
        // the rebuild is done (the next open frees the old space), so it reports success.
        let rebuilt_result = rebuild.join().unwrap();
        assert!(rebuilt_result.is_ok(), "{rebuilt_result:?}");
        assert!(!closed.load(Ordering::SeqCst), "close returned while the reader held a pin");
        // The rebuild returns as soon as it sees `close` begin, which may be before `close`
        // marks the handle closed: the reader steps only after that mark, or its step could
        // still read.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !db.is_closed() {
            assert!(Instant::now() < deadline, "close never marked the handle closed");
            std::thread::yield_now();
        }
        assert!(!closed.load(Ordering::SeqCst), "close returned while the reader held a pin");
        step.send(()).unwrap();
        assert!(matches!(reader.join().unwrap(), Some(Err(StorageError::Closed))));
        closer.join().unwrap().unwrap();
        // The file is closed and unlocked: use it through a new handle; nothing of the old
        // handle's rebuild may touch it any more.
        let again = Builder::new().shards(1).auto_rebuild(None).open(&path).unwrap();
        again.rebuild().unwrap();
        for k in 0..2000u32 {
            again.set(&k.to_le_bytes(), &[6u8; 400]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        for k in 0..2000u32 {
            assert_eq!(
                again.get(&k.to_le_bytes()).unwrap().as_deref(),
                Some(&[6u8; 400][..]),
                "key {k} of the reopened database"
            );
        }
        again.close().unwrap();
    });
}

/// A rebuild by a thread that holds an iterator, or from inside a `get_with` or
/// `get_many_with` closure, would wait for that thread's own pin: it fails instead, and
/// works once the read is over.
#[test]
fn a_rebuild_by_a_reading_thread_fails_instead_of_waiting_for_itself() {
    let db = Builder::new().shards(2).auto_rebuild(None).memory().unwrap();
    for i in 0..100u32 {
        db.set(&i.to_le_bytes(), b"v").unwrap();
    }
    let reentrant = |r: senju::Result<()>| matches!(r, Err(StorageError::Reentrant { .. }));
    let mut it = db.iter();
    it.next().unwrap().unwrap();
    assert!(reentrant(db.rebuild()), "rebuild while this thread holds an iterator");
    assert_eq!(it.count(), 99, "the iterator goes on after the refused rebuild");
    assert!(db.get_with(&1u32.to_le_bytes(), |_| reentrant(db.rebuild())).unwrap().unwrap());
    let mut inside = None;
    db.get_many_with(&[1u32.to_le_bytes()], |_, _| inside = Some(reentrant(db.rebuild()))).unwrap();
    assert_eq!(inside, Some(true), "rebuild inside get_many_with");
    // Other calls inside a closure work, and so does a rebuild once the reads are over.
    assert_eq!(db.get_with(&2u32.to_le_bytes(), |_| db.len()).unwrap(), Some(100));
    db.rebuild().unwrap();
    assert_eq!(db.len(), 100);
    // The error says what to do.
    let e = StorageError::Reentrant { call: "rebuild" }.to_string();
    assert!(e.contains("iterator is dropped"), "{e}");
}

/// A write refused because the file would pass its maximum size leaves the room that is
/// left to the writes after it.
#[test]
fn a_refused_large_write_keeps_the_room_left_for_later_writes() {
    let dir = TempDir::new("alloc-full");
    let db = Builder::new()
        .shards(1)
        .max_size(64 << 20)
        .auto_rebuild(None)
        .open(dir.file("f.sj"))
        .unwrap();
    for i in 0..100u32 {
        db.set(&i.to_le_bytes(), b"small").unwrap();
    }
    let e = db.set(b"big", &vec![1u8; 100 << 20]).unwrap_err();
    assert!(matches!(e, StorageError::Full { .. }), "{e:?}");
    // About 2.5 MB more, in a file with some 60 MiB of room left.
    for i in 0..20_000u32 {
        db.set(&(1_000_000 + i).to_le_bytes(), &[2u8; 100])
            .unwrap_or_else(|e| panic!("write {i} after the refused one failed: {e}"));
    }
    db.close().unwrap();
    let len = std::fs::metadata(dir.file("f.sj")).unwrap().len();
    assert!(
        len < 16 << 20,
        "the closed file is {len} bytes: the refused write's room stayed in it"
    );
}
