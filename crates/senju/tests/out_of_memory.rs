//! A value that cannot be copied out for want of memory (here the process's address space,
//! `RLIMIT_AS`, has less room left than the value) fails the read with
//! `StorageError::OutOfMemory`, which names the size, instead of aborting the process; the
//! value is intact, and the same reads work once there is room again.
//!
//! This file holds one test: the limit applies to the whole process.
#![cfg(target_os = "linux")]

mod common;

use common::set_soft_limit;
use senju::{Db, StorageError};

/// The value: far larger than the room left under the limit, and larger than the 64 MiB a
/// thread's malloc arena reserves ahead (which a smaller copy could still be cut from).
const SIZE: usize = 96 << 20;

/// The address space the process has mapped now, in bytes.
fn mapped() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() << 10
}

/// Every way to copy the big value out, by name.
fn reads(db: &Db) -> Vec<(&'static str, senju::Result<Vec<u8>>)> {
    let get = db.get(b"big").map(Option::unwrap);
    let many = db.get_many(&[&b"small"[..], b"big"]).map(|mut v| v.pop().unwrap().unwrap());
    let iter =
        db.iter().map(|p| p.map(|(_, v)| v)).find(|v| v.as_ref().map_or(true, |v| v.len() == SIZE));
    let mut cursor = db.cursor();
    let mut pairs = Vec::new();
    let scan = loop {
        match cursor.next_pairs_within(db, 16, 1 << 20) {
            Ok(batch) if batch.is_empty() => break Err("scan ended without the value"),
            Ok(batch) => pairs.extend(batch),
            Err(e) => break Ok(Err(e)),
        }
        if let Some(at) = pairs.iter().position(|(_, v)| v.len() == SIZE) {
            break Ok(Ok(pairs.swap_remove(at).1));
        }
    };
    vec![("get", get), ("get_many", many), ("iter", iter.unwrap()), ("cursor", scan.unwrap())]
}

#[test]
fn a_copy_that_cannot_be_allocated_fails_with_out_of_memory() {
    let db = Db::memory().unwrap();
    db.set(b"big", &vec![7; SIZE]).unwrap();
    db.set(b"small", b"s").unwrap();
    // Whatever the reads make lazily is made before the limit.
    for (name, got) in reads(&db) {
        assert_eq!(got.unwrap().len(), SIZE, "{name}");
    }

    set_soft_limit(libc::RLIMIT_AS, mapped() + (16 << 20));
    let mut failed = reads(&db);
    // `take` removes nothing when its copy fails (the reads below find the value).
    failed.push(("take", db.take(b"big").map(Option::unwrap)));
    set_soft_limit(libc::RLIMIT_AS, u64::MAX);
    for (name, got) in failed {
        match got {
            Err(StorageError::OutOfMemory { needed }) => assert_eq!(needed, SIZE, "{name}"),
            other => panic!("{name}: {:?}", other.map(|v| v.len())),
        }
    }
    let e = StorageError::OutOfMemory { needed: SIZE };
    assert!(e.to_string().contains(&format!("{SIZE} bytes")), "{e}");

    for (name, got) in reads(&db) {
        assert!(got.unwrap() == vec![7; SIZE], "{name}");
    }
}
