//! `close` against readers that hold views into the map on other threads: it waits for
//! them before it releases the file (after which another handle may truncate or rewrite
//! it), an iterator's next item after a close is `Err(Closed)`, and a thread that is itself
//! such a reader gets `Reentrant` instead of waiting for itself.
//!
//! Nothing here is timed: each test checks the order in which things happened.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::TempDir;
use senju::{Builder, Db, StorageError};

fn filled(dir: &TempDir) -> Db {
    let db = Builder::new().shards(4).auto_rebuild(None).open(dir.file("c.sj")).unwrap();
    for k in 0..1000u32 {
        db.set(&k.to_le_bytes(), &[7u8; 64]).unwrap();
    }
    db
}

/// A `get_with` closure running on another thread when `close` is called: `close` returns
/// only after the closure has, and a reopen (which may truncate the file) comes after that.
#[test]
fn close_waits_for_a_get_with_closure_on_another_thread() {
    let dir = TempDir::new("close-get-with");
    let db = filled(&dir);
    let (inside, entered) = mpsc::channel();
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (db, finished) = (&db, &finished);
        s.spawn(move || {
            db.get_with(&1u32.to_le_bytes(), |v| {
                inside.send(()).unwrap();
                // Give `close` every chance to run past us if it did not wait.
                std::thread::sleep(Duration::from_millis(200));
                assert_eq!(v, [7u8; 64], "the view changed under the closure");
                finished.store(true, Ordering::SeqCst);
            })
            .unwrap();
        });
        entered.recv().unwrap();
        db.close().unwrap();
        assert!(finished.load(Ordering::SeqCst), "close returned while a reader held a view");
    });
    // The file is closed cleanly and opens again.
    let again = Builder::new().truncate(true).open(dir.file("c.sj")).unwrap();
    assert_eq!(again.len(), 0);
}

/// An iterator held on another thread between items: `close` waits until its next step,
/// which is `Err(Closed)` and lets go of its pin.
#[test]
fn an_iterator_stops_with_closed_and_lets_close_finish() {
    let dir = TempDir::new("close-iter");
    let db = filled(&dir);
    let (started, iterating) = mpsc::channel();
    let (step, stepped) = mpsc::channel::<()>();
    let closed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (db, closed) = (&db, &closed);
        let reader = s.spawn(move || {
            let mut it = db.iter();
            assert!(it.next().unwrap().is_ok());
            started.send(()).unwrap();
            stepped.recv().unwrap();
            let after = it.next();
            let was_closed = closed.load(Ordering::SeqCst);
            (after.map(|r| r.map(|_| ())), it.next().is_none(), was_closed)
        });
        iterating.recv().unwrap();
        let closer = s.spawn(move || {
            db.close().unwrap();
            closed.store(true, Ordering::SeqCst);
        });
        // Let the close mark the handle closed and reach its wait for the reader, then let
        // the reader step (before the mark, its step would still read).
        let deadline = Instant::now() + Duration::from_secs(60);
        while !db.is_closed() {
            assert!(Instant::now() < deadline, "close never marked the handle closed");
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(!closed.load(Ordering::SeqCst), "close returned while an iterator held a pin");
        step.send(()).unwrap();
        let (after, ended, was_closed) = reader.join().unwrap();
        assert!(matches!(after, Some(Err(StorageError::Closed))), "{after:?}");
        assert!(ended, "an iterator that failed yields nothing more");
        assert!(!was_closed, "close finished before the iterator let go");
        closer.join().unwrap();
    });
}

/// A thread that holds an iterator, or runs inside a `get_with` closure, calling `close`:
/// `Reentrant`, nothing done; once the read is over, `close` works.
#[test]
fn close_by_a_reading_thread_fails_instead_of_waiting_for_itself() {
    let dir = TempDir::new("close-reentrant");
    let db = filled(&dir);
    let mut it = db.iter();
    it.next().unwrap().unwrap();
    assert!(matches!(db.close(), Err(StorageError::Reentrant { call: "close" })));
    assert!(!db.is_closed());
    assert_eq!(it.count(), 999, "the iterator goes on after the refused close");
    let inside = db.get_with(&2u32.to_le_bytes(), |_| db.close()).unwrap().unwrap();
    assert!(matches!(inside, Err(StorageError::Reentrant { .. })), "{inside:?}");
    db.close().unwrap();
    assert!(db.is_closed());
    assert!(matches!(db.get(&1u32.to_le_bytes()), Err(StorageError::Closed)));
    assert!(matches!(db.iter().next(), Some(Err(StorageError::Closed))));
}

/// A thread that holds 65,535 reads at once (live iterators) has filled its pin count: its
/// next read used to spin for good (waiting for pins only it could drop), and now fails
/// with `TooManyReads`; once some are dropped, reads work again.
#[test]
fn a_thread_with_65535_live_iterators_gets_an_error_not_a_hang() {
    let db = Db::memory().unwrap();
    db.set(b"a", b"1").unwrap();
    db.set(b"b", b"2").unwrap();
    let mut live = Vec::new();
    for _ in 0..65_535 {
        let mut it = db.iter();
        // Between two items an iterator holds its read.
        assert!(it.next().unwrap().is_ok());
        live.push(it);
    }
    assert!(matches!(db.get(b"a"), Err(StorageError::TooManyReads)));
    let e = db.iter().next().unwrap().unwrap_err();
    assert!(matches!(e, StorageError::TooManyReads), "{e}");
    // Another thread has its own count.
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..])));
    });
    live.truncate(65_000);
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}
