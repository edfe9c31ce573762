//! A handle in a child process made by `fork`: every call fails with `Forked` (before any
//! lock), and dropping the handle there leaves the parent's file, lock and threads alone.
//!
//! Before this was handled, the child's drop closed the parent's database from a stale copy
//! of its state: it cut the file to the child's idea of its end (the parent then died of
//! `SIGBUS` at its next write past that point) and released the parent's lock.
//!
//! One test per file process: `fork` copies only the calling thread, and the test harness
//! runs nothing else here meanwhile.

mod common;

use common::TempDir;
use senju::{Db, Durability, OpenError, StorageError};

/// Forks; the child runs `child` and exits with its code (its handles are dropped first,
/// as a language runtime would at exit); returns the child's exit code.
fn in_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs `child` (Rust code that allocates: glibc's malloc is safe after
    // `fork`) and leaves with `_exit`, never returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(99);
        // SAFETY: ends the child without running the harness's exit path.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child died: status {status:#x}");
    libc::WEXITSTATUS(status)
}

/// Drops this process's copy of `db`, as a language runtime does at exit. Only in a child
/// of `fork` (inside [`in_child`], which leaves with `_exit` right after).
fn drop_in_child(db: &Db) {
    // SAFETY: this is the child, which ends with `_exit` right after: the parent's `db` is
    // never used or dropped in this process again, so this bitwise copy is the only one
    // dropped here.
    drop(unsafe { std::ptr::read(db) });
}

/// A bit for each call on `db` (a handle opened by process `parent`) that did not fail with
/// `Forked { opened_by: parent }`.
fn refused_calls(db: &Db, parent: u32) -> i32 {
    let forked = |r: Result<(), StorageError>| matches!(r, Err(StorageError::Forked { opened_by }) if opened_by == parent);
    let checks: [(&str, bool); 12] = [
        ("get", forked(db.get(b"a1").map(drop))),
        ("contains", forked(db.contains(b"a1").map(drop))),
        ("set", forked(db.set(b"c", b"child"))),
        ("remove", forked(db.remove(b"a1").map(drop))),
        ("set_many", forked(db.set_many(&[(b"c1", b"x"), (b"c2", b"y")]))),
        ("get_many", forked(db.get_many(&[b"a1", b"a2"]).map(drop))),
        ("sync", forked(db.sync(Durability::Hard))),
        ("rebuild", forked(db.rebuild())),
        ("clear", forked(db.clear())),
        ("stats", forked(db.stats().map(drop))),
        ("iter", forked(db.iter().next().expect("an item or an error").map(drop))),
        ("cursor", forked(db.cursor().next_keys(db, 10).map(drop))),
    ];
    let mut bad = 0;
    for (i, (what, ok)) in checks.iter().enumerate() {
        if !ok {
            eprintln!("child: {what} was not refused with Forked");
            bad |= 1 << i;
        }
    }
    bad
}

#[test]
fn a_forked_child_can_neither_use_nor_damage_its_parents_database() {
    let dir = TempDir::new("fork");
    let path = dir.file("f.sj");
    let db = Db::open(&path).unwrap();
    // Few records: the file has not grown yet, so the child's view of its end is near the
    // start.
    for i in 0..1000u32 {
        db.set(format!("a{i}").as_bytes(), &[1; 100]).unwrap();
    }
    let parent = std::process::id();

    // A child that only drops its copy, as a Ruby or Python child does at exit.
    assert_eq!(
        in_child(|| {
            drop_in_child(&db);
            0
        }),
        0
    );
    assert!(matches!(Db::open(&path), Err(OpenError::Locked { .. })), "the lock was released");
    // Far past the child's view of the file's end, growing the file (the prefault thread
    // starts).
    for i in 0..100_000u32 {
        db.set(format!("b{i}").as_bytes(), &[2; 100]).unwrap();
    }

    // The child tries every kind of call, then closes and drops its copy of the handle.
    let code = in_child(|| {
        let mut bad = refused_calls(&db, parent);
        if db.close().is_err() {
            bad |= 1 << 20;
        }
        if !matches!(db.get(b"a1"), Err(StorageError::Closed)) {
            bad |= 1 << 21;
        }
        drop_in_child(&db);
        // A database opened in the child is the child's own.
        let mine = Db::memory().unwrap();
        if mine.set(b"k", b"v").is_err() || mine.get(b"k").ok().flatten().as_deref() != Some(b"v") {
            bad |= 1 << 22;
        }
        bad
    });
    assert_eq!(code, 0, "child's failed checks (bits): {code:#b}");

    assert!(matches!(Db::open(&path), Err(OpenError::Locked { .. })), "the lock was released");
    for i in 100_000..200_000u32 {
        db.set(format!("b{i}").as_bytes(), &[2; 100]).unwrap();
    }
    assert_eq!(db.get(b"a999").unwrap(), Some(vec![1; 100]));
    db.close().unwrap();

    let db = Db::open(&path).unwrap();
    assert_eq!(db.len(), 201_000);
    assert_eq!(db.get(b"a0").unwrap(), Some(vec![1; 100]));
    assert_eq!(db.get(b"b199999").unwrap(), Some(vec![2; 100]));
    assert!(db.get(b"c").unwrap().is_none(), "the child's set reached the file");
    db.close().unwrap();

    // The memory engine: the child's copy refuses too (its locks and threads are copies).
    let mem = Db::memory().unwrap();
    mem.set(b"k", b"v").unwrap();
    assert_eq!(in_child(|| refused_calls(&mem, parent)), 0);
    assert_eq!(mem.get(b"k").unwrap(), Some(b"v".to_vec()));
}
