//! A database whose file cannot grow any more (here `RLIMIT_FSIZE`, which fails the growth as
//! a full disk would, with `EFBIG` instead of `ENOSPC`) fails the write that needed the space
//! with an error, keeps every write acknowledged before it, and reopens with all of them.
//!
//! This file holds one test: the limit applies to the whole process.
#![cfg(target_os = "linux")]

mod common;

use common::{TempDir, set_soft_limit};
use senju::{Db, StorageError};

/// The file size limit: growth doubles the file (1, 2, 4 MiB), so the step from 4 to 8 MiB
/// fails, and only the retry with the smallest step lets the file reach 7 MiB.
const LIMIT: u64 = 7 << 20;

#[test]
fn a_file_that_cannot_grow_fails_the_write_and_keeps_the_rest() {
    // Past the limit the kernel sends SIGXFSZ, which would end the process; ignored, the
    // system call fails with EFBIG instead.
    // SAFETY: installs the predefined "ignore" disposition; no handler code runs.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let dir = TempDir::new("file-limit");
    let path = dir.file("limit.sj");
    set_soft_limit(libc::RLIMIT_FSIZE, LIMIT);
    let db = Db::builder().shards(4).open(&path).unwrap();
    let value = vec![0x5a_u8; 4000];
    let mut written = 0u32;
    let err = loop {
        match db.set(format!("{written:08}").as_bytes(), &value) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 10_000, "7 MiB never filled up");
    };
    assert!(
        matches!(&err, StorageError::Io(e) if e.raw_os_error() == Some(libc::EFBIG)),
        "not the file system's error: {err:?}"
    );
    let bytes = u64::from(written) * 4000;
    assert!(bytes > 5 << 20, "gave up at {bytes} bytes, before the smallest step was tried");
    for i in 0..written {
        let got = db.get(format!("{i:08}").as_bytes()).unwrap();
        assert_eq!(got.as_deref(), Some(&value[..]), "record {i} lost");
    }
    // An overwrite needs new space too: it either lands or leaves the old value.
    let first: &[u8] = match db.set(b"00000000", b"short") {
        Ok(()) => b"short",
        Err(_) => &value,
    };
    assert_eq!(db.get(b"00000000").unwrap().as_deref(), Some(first));
    set_soft_limit(libc::RLIMIT_FSIZE, u64::MAX);
    db.close().unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.len(), u64::from(written));
    assert_eq!(db.get(b"00000000").unwrap().as_deref(), Some(first));
    for i in 1..written {
        let got = db.get(format!("{i:08}").as_bytes()).unwrap();
        assert_eq!(got.as_deref(), Some(&value[..]), "record {i} lost on reopen");
    }
    db.close().unwrap();
}
