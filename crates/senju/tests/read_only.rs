//! Read-only opens: shared with other readers, exclusive with writers, no writes, no
//! recovery, and the file is not changed by a byte.

mod common;

use common::TempDir;
use senju::{Db, Durability, OpenError, StorageError};

fn filled(path: &std::path::Path, n: u32) {
    let db = Db::builder().shards(8).open(path).unwrap();
    for i in 0..n {
        db.set(format!("k{i}").as_bytes(), format!("v{i}").as_bytes()).unwrap();
    }
    db.remove(b"k0").unwrap();
    db.close().unwrap();
}

#[test]
fn readers_share_the_file_and_see_everything() {
    let dir = TempDir::new("ro-share");
    let path = dir.file("r.sj");
    filled(&path, 5000);
    let before = std::fs::read(&path).unwrap();
    let a = Db::builder().read_only(true).open(&path).unwrap();
    let b = Db::builder().read_only(true).open(&path).unwrap();
    assert!(a.is_read_only() && b.is_read_only());
    for db in [&a, &b] {
        assert_eq!(db.len(), 4999);
        assert_eq!(db.get(b"k4999").unwrap(), Some(b"v4999".to_vec()));
        assert_eq!(db.get(b"k0").unwrap(), None);
        assert_eq!(db.iter().count(), 4999);
        assert_eq!(db.stats().unwrap().records, 4999);
        db.sync(Durability::Hard).unwrap();
    }
    // A writer is refused while readers have it, and names no pid (readers leave none).
    match Db::open(&path) {
        Err(OpenError::Locked { pid: None, .. }) => {}
        other => panic!("expected Locked without pid, got {other:?}"),
    }
    a.close().unwrap();
    drop(b);
    assert_eq!(std::fs::read(&path).unwrap(), before, "a read-only handle changed the file");
    Db::open(&path).unwrap().close().unwrap();
}

#[test]
fn every_write_is_refused() {
    let dir = TempDir::new("ro-writes");
    let path = dir.file("w.sj");
    filled(&path, 10);
    let db = Db::builder().read_only(true).open(&path).unwrap();
    let ro = |r: Result<(), StorageError>| assert!(matches!(r, Err(StorageError::ReadOnly)));
    ro(db.set(b"k1", b"x"));
    ro(db.add(b"new", b"x").map(drop));
    ro(db.remove(b"k1").map(drop));
    ro(db.compare_and_set(b"k1", Some(b"v1"), Some(b"x")).map(drop));
    ro(db.append(b"k1", b"x"));
    ro(db.update(b"k1", |_| None).map(drop));
    ro(db.set_many(&[(b"a", b"b")]));
    ro(db.remove_many(&[b"k1"]).map(drop));
    ro(db.clear());
    ro(db.rebuild());
    assert!(StorageError::ReadOnly.to_string().contains("read-only"));
    assert_eq!(db.get(b"k1").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(db.len(), 9);
}

/// A closed read-only handle says `Closed` to every call, writes included. Before, `clear`
/// and `rebuild` said `ReadOnly` there (they checked for writing before checking for a
/// close), while `set` and the batches said `Closed`.
#[test]
fn a_closed_read_only_handle_says_closed() {
    let dir = TempDir::new("ro-closed");
    let path = dir.file("c.sj");
    filled(&path, 10);
    let db = Db::builder().read_only(true).open(&path).unwrap();
    db.close().unwrap();
    let closed = |what: &str, r: Result<(), StorageError>| {
        assert!(matches!(r, Err(StorageError::Closed)), "{what}: {r:?}");
    };
    closed("set", db.set(b"k1", b"x"));
    closed("set_many", db.set_many(&[(b"a", b"b"), (b"c", b"d")]));
    closed("clear", db.clear());
    closed("rebuild", db.rebuild());
    closed("stats", db.stats().map(drop));
    closed("get", db.get(b"k1").map(drop));
    closed("sync", db.sync(Durability::Hard));
}

#[test]
fn readers_wait_for_writers_and_need_a_clean_file() {
    let dir = TempDir::new("ro-writer");
    let path = dir.file("x.sj");
    let w = Db::open(&path).unwrap();
    w.set(b"a", b"1").unwrap();
    match Db::builder().read_only(true).open(&path) {
        Err(OpenError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected Locked naming the writer, got {other:?}"),
    }
    // A copy taken while the writer has the file open is not clean: refused, with advice.
    let crash = dir.file("crash.sj");
    std::fs::copy(&path, &crash).unwrap();
    let e = Db::builder().read_only(true).open(&crash).unwrap_err();
    assert!(matches!(e, OpenError::NeedsRecovery { .. }), "{e}");
    assert!(e.to_string().contains("open it once for writing"), "{e}");
    // Opening it for writing recovers it; then read-only works.
    Db::open(&crash).unwrap().close().unwrap();
    let r = Db::builder().read_only(true).open(&crash).unwrap();
    assert_eq!(r.get(b"a").unwrap(), Some(b"1".to_vec()));
    w.close().unwrap();
}

#[test]
fn read_only_open_errors() {
    let dir = TempDir::new("ro-errors");
    let e = Db::builder().read_only(true).open(dir.file("missing.sj")).unwrap_err();
    assert!(matches!(e, OpenError::NotFound { .. }), "{e}");
    // The advice to create it says that only a writable open does (it used to read as if
    // `create(true)` would make this read-only open work).
    assert!(e.to_string().contains("a read-only open never creates a file"), "{e}");
    let path = dir.file("t.sj");
    filled(&path, 1);
    let e = Db::builder().read_only(true).truncate(true).open(&path).unwrap_err();
    assert!(matches!(e, OpenError::InvalidOption { name: "truncate", .. }), "{e}");
    std::fs::write(dir.file("text"), [b'x'; 100]).unwrap();
    let e = Db::builder().read_only(true).open(dir.file("text")).unwrap_err();
    assert!(matches!(e, OpenError::NotADatabase { .. }), "{e}");
}

/// A file closed cleanly and then lengthened by zeros (a copy tool's padding, `truncate -s`)
/// passed `check` and opened for writing, but a read-only open refused it as needing
/// recovery. Every opener now reads it alike: the zeros past the data's end are ignored.
#[test]
fn a_clean_file_with_zeros_after_its_data_opens_read_only() {
    let dir = TempDir::new("ro-tail");
    let path = dir.file("tail.sj");
    filled(&path, 10);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len + 8192).unwrap();
    let report = senju::check(&path).unwrap();
    assert!(report.is_ok() && report.closed_cleanly, "{:?}", report.damage);
    let db = Db::builder().read_only(true).open(&path).unwrap();
    // `filled` removes one of its 10 keys.
    assert_eq!(db.len(), 9);
    assert_eq!(db.iter().count(), 9);
    assert_eq!(db.get(b"k9").unwrap(), Some(b"v9".to_vec()));
}
