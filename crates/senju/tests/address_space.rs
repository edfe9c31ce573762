//! A process that may not reserve the default 256 GiB of address space (`ulimit -v`, here
//! `RLIMIT_AS`; valgrind has the same effect) still opens databases with the default options,
//! with a smaller limit that `Db::max_size` reports and `StorageError::Full` names; a
//! `max_size` asked for explicitly that the process cannot have fails the open with
//! `OpenError::AddressSpace`, saying what to do.
//!
//! This file holds one test: the limit applies to the whole process.
#![cfg(target_os = "linux")]

mod common;

use common::{TempDir, set_soft_limit};
use senju::{Db, OpenError, StorageError};

/// The address-space limit: far below the default reservation, far above what the test
/// binary itself needs.
const LIMIT: u64 = 8 << 30;

#[test]
fn the_default_limit_shrinks_to_the_address_space_and_an_explicit_one_fails_clearly() {
    let dir = TempDir::new("address-space");
    let path = dir.file("as.sj");
    set_soft_limit(libc::RLIMIT_AS, LIMIT);

    // The default: opens, with a limit the process could reserve.
    let db = Db::builder().shards(4).open(&path).unwrap();
    let max = db.max_size();
    assert!((1 << 30..LIMIT).contains(&max), "max_size {max}");
    for i in 0..1000u32 {
        db.set(&i.to_le_bytes(), &[7; 100]).unwrap();
    }
    db.close().unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.len(), 1000);
    assert_eq!(db.get(&999u32.to_le_bytes()).unwrap().as_deref(), Some(&[7u8; 100][..]));
    drop(db);
    let mem = Db::memory().unwrap();
    assert!(mem.max_size() < LIMIT);
    mem.set(b"k", b"v").unwrap();

    // An explicit size the process cannot reserve: a clear error naming the size and the
    // way out, and the file is left as it was.
    let want = 64u64 << 30;
    let Err(e) = Db::builder().max_size(want).open(&path) else {
        panic!("a {want}-byte reservation should not fit under a {LIMIT}-byte limit");
    };
    match &e {
        OpenError::AddressSpace { requested, .. } => assert_eq!(*requested, want),
        other => panic!("expected AddressSpace, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains(&want.to_string()) && msg.contains("ulimit -v"), "{msg}");
    assert_eq!(Db::open(&path).unwrap().len(), 1000);

    // An explicit size that fits is reserved exactly, and writes past it fail with `Full`
    // naming that size, keeping what was written before.
    let small = dir.file("small.sj");
    let db = Db::builder().shards(1).max_size(4 << 20).open(&small).unwrap();
    assert_eq!(db.max_size(), 4 << 20);
    let mut written = 0u32;
    let err = loop {
        match db.set(&written.to_le_bytes(), &[1; 60_000]) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 100, "4 MiB should not hold 100 values of 60 kB");
    };
    match err {
        StorageError::Full { limit, .. } => assert_eq!(limit, 4 << 20),
        other => panic!("expected Full, got {other:?}"),
    }
    assert_eq!(db.len(), u64::from(written));
}
