//! senju (千手, "a thousand hands"): an embedded key-value database for multi-threaded
//! programs. Keys and values are byte strings; the store is a hash table in one memory-mapped
//! file ([`Db::open`]) or in anonymous memory ([`Db::memory`]), with the same engine and
//! format in both.
//!
//! ```
//! # let dir = std::env::temp_dir().join(format!("senju-doc-root-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! use senju::{Db, Durability};
//!
//! let db = Db::open(dir.join("example.sj"))?;
//! db.set(b"apple", b"red")?;
//! assert_eq!(db.get(b"apple")?, Some(b"red".to_vec()));
//! assert!(!db.add(b"apple", b"green")?); // add only sets absent keys
//! db.append(b"apple", b" and round")?;
//! assert_eq!(db.get_with(b"apple", |v| v.len())?, Some(13)); // zero-copy read
//! db.sync(Durability::Hard)?; // everything so far survives a power loss
//! db.close()?;
//!
//! let db = Db::open(dir.join("example.sj"))?; // reopen: the data is there
//! assert_eq!(db.get(b"apple")?, Some(b"red and round".to_vec()));
//! # drop(db); std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), senju::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - **Threads.** Every method takes `&self` and [`Db`] is `Send + Sync`. Operations on one
//!   key are linearizable. A read takes no lock and writes no shared memory; a write locks
//!   only the key's shard (one of [`Builder::shards`], 128 by default). A writable database
//!   starts one helper thread (`senju-prefault`) the first time it grows, which faults in
//!   fresh file space ahead of the writers, and another (`senju-rebuild`) the first time a
//!   shard's dead records outweigh its live ones (see [`Builder::auto_rebuild`]);
//!   [`Db::close`] (or dropping the `Db`) stops both.
//! - **Durability.** A write is in the operating system's page cache when it returns, so it
//!   survives a crash of the process. [`Db::sync`] with [`Durability::Hard`] makes every
//!   earlier write survive a power loss too.
//! - **Crash safety.** Every record carries a checksum and a record is never overwritten
//!   while it is live, so a crash cannot tear it. Opening a file that was not closed cleanly
//!   rebuilds the index from the records, in time linear in the file size; every record
//!   synced before the crash is there and no torn record is ever returned. Records written
//!   after the last sync may be lost.
//! - **One writer process.** Opening takes an advisory lock (`flock`); a second opener gets
//!   [`OpenError::Locked`] naming the holder's pid. A handle belongs to the process that
//!   opened it: in a child made by `fork` every call fails with [`StorageError::Forked`], and
//!   closing or dropping the handle there leaves the file, its lock and the parent alone.
//! - **Limits.** Keys up to [`MAX_KEY_LEN`] (1 MiB), values up to [`MAX_VALUE_LEN`] (1 GiB);
//!   larger inputs fail with [`StorageError::TooLarge`]. A file up to 8 TiB (set the limit
//!   with [`Builder::max_size`]). The index lives in the file, so data larger than memory
//!   works.
//!
//! The file format and the protocols are drawn in `docs/design.md`, section 3.

mod auto;
mod builder;
mod check;
mod db;
mod epoch;
mod error;
mod file_lock;
mod fork;
mod format;
mod free_space;
mod gaps;
mod iter;
mod recovery;
mod region;
mod salvage;
mod shard;
mod table;

pub use builder::Builder;
pub use check::{CheckReport, Damage, check, check_with_progress};
pub use db::{Db, Durability, Stats, check_pair};
pub use error::{Error, OpenError, Result, StorageError};
pub use format::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use iter::{Cursor, Iter};
pub use salvage::{SalvageReport, salvage, salvage_with_progress};

/// Fault injection and observation for tests (`tests/rebuild_crash.rs`, `tests/no_punch.rs`,
/// `tests/power_cut.rs`). Not part of the API.
#[doc(hidden)]
pub mod testing {
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// What [`on_hard_sync`] installs.
    pub type SyncObserver = Box<dyn FnMut(bool) + Send>;

    /// The observers, by file (device and inode number).
    static OBSERVERS: Mutex<Vec<((u64, u64), SyncObserver)>> = Mutex::new(Vec::new());
    /// Whether any observer is installed (syncs skip the look-up otherwise).
    static OBSERVED: AtomicBool = AtomicBool::new(false);

    /// Runs `f` around each hard sync of the file at `path` (`fdatasync` or `fsync`, by any
    /// thread), until replaced (`None` removes it): `f(false)` just before the sync starts
    /// (before the count of started syncs moves, which is what recycling and rebuilds judge
    /// by), `f(true)` once it has completed, when every byte the file held at `f(false)` is
    /// on the disk. Calls never overlap (a lock is held around them, so `f` must not sync
    /// any file). `tests/power_cut.rs` copies the file at both, to build the states a power
    /// cut could leave.
    pub fn on_hard_sync(path: &Path, f: Option<SyncObserver>) -> std::io::Result<()> {
        let meta = std::fs::metadata(path)?;
        let id = (meta.dev(), meta.ino());
        let mut all = OBSERVERS.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|(file, _)| *file != id);
        if let Some(f) = f {
            all.push((id, f));
        }
        OBSERVED.store(!all.is_empty(), Ordering::SeqCst);
        Ok(())
    }

    /// Called by the region before (`done` false) and after (`done` true) each hard sync of
    /// `file`.
    pub(crate) fn hard_sync(file: &File, done: bool) {
        if !OBSERVED.load(Ordering::Relaxed) {
            return;
        }
        let Ok(meta) = file.metadata() else { return };
        let id = (meta.dev(), meta.ino());
        let mut all = OBSERVERS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, f)) = all.iter_mut().find(|(file, _)| *file == id) {
            f(done);
        }
    }

    /// When set, a rebuild aborts the process right after it zeroed the old chunks that no
    /// sync had promised, before anything is synced or committed: the state a crash there
    /// leaves.
    pub static ABORT_AFTER_EARLY_ZERO: AtomicBool = AtomicBool::new(false);

    /// When set, punching a hole fails as on a file system that cannot (`EOPNOTSUPP`):
    /// `close` then leaves free space as it was.
    pub static NO_PUNCH: AtomicBool = AtomicBool::new(false);
}

/// The integration tests' helpers (`TempDir`), for unit tests too.
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod test_common;

#[cfg(test)]
mod tests {
    #[test]
    fn db_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::Db>();
    }
}
