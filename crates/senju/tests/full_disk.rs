//! On a file system that fills up, a write fails with an error (`ENOSPC`) and the process
//! lives on: acknowledged writes stay readable and survive a reopen. A write into mapped
//! space without blocks behind it would instead kill the process with `SIGBUS`. Two paths
//! led there before: growth on tmpfs, which stayed sparse, and reused space that had been
//! punched (by a rebuild, a close or an open) and was written without being allocated again.
//!
//! The test needs a small file system of its own: it mounts an 8 MiB tmpfs, which takes
//! root (as in CI and on the development machine). Elsewhere it says so on standard error
//! and does nothing. The scenario runs in a child process, so that a `SIGBUS` fails the test
//! instead of ending the harness, and the mount is undone whatever happens.
#![cfg(target_os = "linux")]

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use common::TempDir;
use senju::{Db, StorageError};

/// The child's role, and where the tmpfs is mounted.
const CHILD: &str = "SENJU_FULL_DISK_DIR";

/// An 8 MiB tmpfs mounted at a fresh directory, unmounted on drop.
struct Mount(TempDir);

impl Mount {
    fn new() -> Option<Mount> {
        let dir = TempDir::new("full-disk");
        let target = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
        let opts = CString::new("size=8m").unwrap();
        // SAFETY: plain system call with NUL-terminated strings that outlive it.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        (rc == 0).then_some(Mount(dir))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let target = CString::new(self.0.path().as_os_str().as_bytes()).unwrap();
        // SAFETY: as above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test]
fn a_full_file_system_fails_writes_with_an_error() {
    if let Some(dir) = std::env::var_os(CHILD) {
        scenario(Path::new(&dir));
        return;
    }
    let Some(mount) = Mount::new() else {
        eprintln!("full_disk: cannot mount a tmpfs here (not root?); not run");
        return;
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_full_file_system_fails_writes_with_an_error", "--nocapture"])
        .env(CHILD, mount.0.path())
        .output()
        .unwrap();
    drop(mount);
    assert!(
        out.status.success(),
        "the scenario failed ({:?}, signal {:?}):\n{}{}",
        out.status,
        out.status.signal(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `value` under `prefix` keys from `from` on until a write fails; returns how many
/// succeeded and the error.
fn fill(db: &Db, prefix: &str, from: u32, value: &[u8]) -> (u32, StorageError) {
    let mut n = from;
    loop {
        match db.set(format!("{prefix}{n:06}").as_bytes(), value) {
            Ok(()) => n += 1,
            Err(e) => return (n, e),
        }
        assert!(n < 100_000, "8 MiB never filled up");
    }
}

fn is_enospc(e: &StorageError) -> bool {
    matches!(e, StorageError::Io(io) if io.raw_os_error() == Some(libc::ENOSPC))
}

fn scenario(dir: &Path) {
    let value = vec![0xa5_u8; 3000];

    // 1. Growth: the file cannot grow past the file system.
    let path = dir.join("grow.sj");
    let db = Db::builder().shards(4).auto_rebuild(None).open(&path).unwrap();
    let (n, err) = fill(&db, "g", 0, &value);
    assert!(is_enospc(&err), "growth: not ENOSPC: {err:?}");
    assert!(n > 100, "only {n} records fit");
    for i in 0..n {
        assert_eq!(db.get(format!("g{i:06}").as_bytes()).unwrap().as_deref(), Some(&value[..]));
    }
    // Closing may itself fail for lack of space; the reopen recovers either way.
    let _ = db.close();
    drop(db);
    let db = Db::builder().shards(4).auto_rebuild(None).open(&path).unwrap();
    assert_eq!(db.len(), u64::from(n));
    drop(db);
    std::fs::remove_file(&path).unwrap();

    // 2. Reuse: space freed by a rebuild is punched on tmpfs (it cannot keep blocks), and
    // the file system is then filled by another file, so writing into that space needs
    // blocks that are not there.
    let path = dir.join("reuse.sj");
    let db = Db::builder().shards(4).auto_rebuild(None).open(&path).unwrap();
    for i in 0..1000u32 {
        db.set(format!("r{i:06}").as_bytes(), &value).unwrap();
    }
    for i in (0..1000u32).filter(|i| i % 4 != 0) {
        assert!(db.remove(format!("r{i:06}").as_bytes()).unwrap());
    }
    db.rebuild().unwrap();
    assert!(db.stats().unwrap().free_bytes > 1 << 20, "the rebuild freed too little to test");
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 64 << 10];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    drop(f);
    let (n, err) = fill(&db, "n", 0, &value);
    assert!(is_enospc(&err), "reuse: not ENOSPC: {err:?}");
    for i in (0..1000u32).step_by(4) {
        assert_eq!(db.get(format!("r{i:06}").as_bytes()).unwrap().as_deref(), Some(&value[..]));
    }
    for i in 0..n {
        assert_eq!(db.get(format!("n{i:06}").as_bytes()).unwrap().as_deref(), Some(&value[..]));
    }
    let _ = db.close();
    drop(db);

    // 3. Reopen with the file system still full (the open punches the free space it finds),
    // write until it fails, reopen with room again: everything acknowledged is there.
    let db = Db::builder().shards(4).auto_rebuild(None).open(&path).unwrap();
    assert_eq!(db.len(), 250 + u64::from(n));
    let (m, err) = fill(&db, "m", 0, &value);
    assert!(is_enospc(&err), "after reopen: not ENOSPC: {err:?}");
    let _ = db.close();
    drop(db);
    std::fs::remove_file(&filler).unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.len(), 250 + u64::from(n) + u64::from(m));
    for i in 0..m {
        assert_eq!(db.get(format!("m{i:06}").as_bytes()).unwrap().as_deref(), Some(&value[..]));
    }
    db.close().unwrap();
}
