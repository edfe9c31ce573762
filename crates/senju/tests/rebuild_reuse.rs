//! Writes made while a rebuild runs, between a shard's copy and the rebuild's commit, must
//! survive a crash after the commit. With 64 KiB values the copy's first chunk stayed empty
//! and was recycled, and each copy's chunk was recycled once its key was set again; a write
//! that reused one before the commit had its chunk relabelled as older than the copies, so
//! a replay brought the old value back (and `check` found an unreadable chunk header).

mod common;

use common::TempDir;
use senju::{Builder, Durability};

fn big(fill: u8) -> Vec<u8> {
    vec![fill; 64 << 10]
}

#[test]
fn writes_during_a_rebuild_survive_a_crash_after_its_commit() {
    for (i, (first, second)) in [(b"a", b"b"), (b"b", b"a")].into_iter().enumerate() {
        let dir = TempDir::new(&format!("rebuild-reuse-{i}"));
        let path = dir.file("r.sj");
        let db = Builder::new().shards(1).auto_rebuild(None).open(&path).unwrap();
        db.set(b"a", &big(1)).unwrap();
        db.set(b"b", &big(1)).unwrap();
        db.sync(Durability::Hard).unwrap();
        // The progress call comes after the shard's copy, with no lock held, before the
        // rebuild syncs and commits.
        let mut written = false;
        db.rebuild_with_progress(|_, _| {
            if !written {
                db.set(first, &big(2)).unwrap();
                db.set(second, &big(2)).unwrap();
                written = true;
            }
        })
        .unwrap();
        assert!(written);
        db.sync(Durability::Hard).unwrap();
        // What a crash leaves: the file as it is now, opened without the clean close.
        std::fs::copy(&path, dir.file("copy.sj")).unwrap();
        // `check` reads the copy as it is; the open then recovers it.
        let report = senju::check(dir.file("copy.sj")).unwrap();
        assert!(report.is_ok(), "order {i}: {:?}", report.first_damage());
        assert_eq!(report.records, 2, "order {i}");
        let copy = Builder::new().auto_rebuild(None).open(dir.file("copy.sj")).unwrap();
        for key in [b"a", b"b"] {
            let got = copy.get(key).unwrap().map(|v| v[0]);
            assert_eq!(got, Some(2), "key {:?}, order {i}", key);
        }
    }
}
