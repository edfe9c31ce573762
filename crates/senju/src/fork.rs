//! A database handle belongs to the process that opened it, not to children made by `fork`.
//!
//! After `fork` the child has a copy of the parent's memory (every handle with its shard
//! locks, bump pointers and free-space map as they were at that instant) but only the thread
//! that called `fork`, and it shares with the parent the file, the map (`MAP_SHARED`) and the
//! advisory lock (`flock` belongs to the open file description, which both now refer to). Two
//! processes appending through their own copies of one shard's state would write over each
//! other's records. A child closing its copy would write a stale directory, punch holes in
//! space the parent has since filled, cut the file to the child's idea of its end (the parent
//! then dies of `SIGBUS` at its next write past that point), release the parent's lock, and
//! wait forever to join helper threads that do not exist in the child. Languages close
//! handles at exit on their own: a Ruby child that returns normally from `fork { }` runs every
//! object's free function, and so does a Python child of `os.fork()` that exits through
//! `sys.exit`.
//!
//! So a handle refuses every call in a child of the process that opened it
//! ([`StorageError::Forked`](crate::StorageError::Forked)), checked before any lock is taken
//! (a lock may have been held by a parent thread at the instant of the fork), and closing or
//! dropping it there touches neither the file, nor the lock, nor the threads. The child can
//! open the database itself once the parent has closed it.
//!
//! Detection: a `pthread_atfork` child handler, registered at the first open, counts forks in
//! a process-wide word; a handle remembers the count at its open and compares on each call
//! (one load of a word that changes only in a child, right after its fork).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::thread::JoinHandle;

/// Forks this process is removed from the process that started the program: incremented in
/// the child, by [`count_fork`], right after each `fork`.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// The `pthread_atfork` child handler. Runs in the child's only thread before `fork` returns;
/// an atomic increment is async-signal-safe.
extern "C" fn count_fork() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// This process's fork count now, to store in a handle being opened. The first call registers
/// the handler; it fails only if that registration does (`ENOMEM`).
pub(crate) fn generation() -> io::Result<u64> {
    static REGISTER: Once = Once::new();
    static FAILED: AtomicU64 = AtomicU64::new(0);
    REGISTER.call_once(|| {
        // SAFETY: registers a handler (a plain function that only increments an atomic);
        // glibc ties the registration to this library, so unloading it removes the handler.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(count_fork)) };
        FAILED.store(rc as u64, Ordering::Relaxed);
    });
    match FAILED.load(Ordering::Relaxed) {
        0 => Ok(FORKS.load(Ordering::Relaxed)),
        rc => Err(io::Error::from_raw_os_error(rc as i32)),
    }
}

/// Whether this process is a child, by `fork`, of the one where `generation` was taken.
#[inline]
pub(crate) fn forked_since(generation: u64) -> bool {
    // Relaxed: the word changes only in the child's own thread before `fork` returns there;
    // threads the child starts later see it through their creation.
    FORKS.load(Ordering::Relaxed) != generation
}

/// Forgets a helper thread's handle without joining it, in a child of `fork`, where the thread
/// does not exist (joining would wait forever). `try_lock`: a parent thread may have held the
/// lock at the fork; then the handle stays (dropping it later only detaches it).
pub(crate) fn forget_thread(handle: &Mutex<Option<JoinHandle<()>>>) {
    if let Ok(mut h) = handle.try_lock() {
        std::mem::forget(h.take());
    }
}
