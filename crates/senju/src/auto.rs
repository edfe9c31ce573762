//! Automatic rebuilds: a background thread (`senju-rebuild`) that rebuilds the shards whose
//! dead records outweigh their live ones, so that a database whose keys are overwritten or
//! removed again and again does not grow without bound.
//!
//! A writer notices the threshold when it releases its shard (`ShardWriter`'s `Drop`) and
//! raises [`AutoRebuild::request`]; the thread is started by the database handle on the next
//! write after the first request (it needs the handle's shared core, which a shard cannot
//! reach). Each pass clears the request, then rebuilds, with the same protocol as
//! `Db::rebuild`, every shard over the threshold at that moment.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Instant;

use crate::shard::CacheLine;

/// The trigger and the thread's state, one per database.
#[derive(Debug, Default)]
pub(crate) struct AutoRebuild {
    /// Dead bytes a shard must hold, and at least as many as its live bytes, to be rebuilt;
    /// 0: never (disabled, or a read-only handle).
    shard_min: u64,
    /// Raised by a writer whose shard is over the threshold; cleared at the start of a pass.
    /// Alone on its line: written once per pass, read by writers of every shard.
    wanted: CacheLine<AtomicBool>,
    /// Asks the thread to stop (set by `close`).
    stop: AtomicBool,
    /// The thread, once started: `request` wakes it.
    thread: OnceLock<Thread>,
    handle: Mutex<Option<JoinHandle<()>>>,
    /// Passes that rebuilt at least one shard.
    passes: AtomicU64,
    /// Why the thread gave up, if it did (it stops at its first error).
    error: Mutex<Option<String>>,
}

impl AutoRebuild {
    /// Rebuild a shard once its dead bytes reach `shard_min` and its live bytes (0: never).
    pub(crate) fn new(shard_min: u64) -> AutoRebuild {
        AutoRebuild { shard_min, ..AutoRebuild::default() }
    }

    /// Whether a shard with these byte counts asks for a rebuild.
    #[inline]
    pub(crate) fn wants(&self, dead: u64, live: u64) -> bool {
        self.shard_min != 0 && dead >= self.shard_min && dead >= live
    }

    /// Whether a pass (asked for by some shard) takes a shard with these byte counts along:
    /// from half the threshold, so that shards filling at about the same rate share passes
    /// (each pass syncs the file) instead of asking one after the other.
    pub(crate) fn takes(&self, dead: u64, live: u64) -> bool {
        self.shard_min != 0 && dead >= self.shard_min / 2 && dead >= live / 2
    }

    /// Asks for a pass (cheap when one is already asked for).
    #[inline]
    pub(crate) fn request(&self) {
        // Relaxed: the flag is a hint; a pass reads the shards' counters under their locks.
        if !self.wanted.load(Ordering::Relaxed) {
            self.wanted.store(true, Ordering::Relaxed);
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Whether a pass is asked for and the thread is not running yet (nor stopped).
    #[inline]
    pub(crate) fn needs_start(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
            && self.thread.get().is_none()
            && !self.stop.load(Ordering::Relaxed)
    }

    /// Starts the thread with `spawn` unless it runs already or was stopped. If it cannot be
    /// started, automatic rebuilds stop and `Stats` says why.
    pub(crate) fn start(&self, spawn: impl FnOnce() -> std::io::Result<JoinHandle<()>>) {
        let mut handle = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        if self.thread.get().is_some() || self.stop.load(Ordering::Acquire) {
            return;
        }
        match spawn() {
            Ok(h) => {
                let _ = self.thread.set(h.thread().clone());
                *handle = Some(h);
            }
            Err(e) => self.give_up(format!("could not start the rebuild thread: {e}")),
        }
    }

    /// The thread's loop: a pass whenever one is asked for, until `stop`. `pass` rebuilds
    /// what is over the threshold and returns how many shards it rebuilt; it gets the stop
    /// flag, to check between shards. The loop ends at the first error, keeping its text.
    ///
    /// Passes are paced: after a pass that took `t`, the next starts no sooner than `2 t`
    /// later, so that rebuilding takes at most about a third of the time however fast the
    /// shards fill with dead records. (A pass's hard syncs write back every dirty page of
    /// the file, and each page written back costs the writers a TLB shootdown.)
    pub(crate) fn run(&self, pass: impl Fn(&AtomicBool) -> Result<u64, String>) {
        while !self.stop.load(Ordering::Acquire) {
            // Relaxed: see `request`.
            if !self.wanted.swap(false, Ordering::Relaxed) {
                std::thread::park();
                continue;
            }
            let t0 = Instant::now();
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pass(&self.stop)));
            match done {
                Ok(Ok(0)) => {}
                Ok(Ok(_)) => {
                    self.passes.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(e)) => return self.give_up(e),
                Err(_) => return self.give_up("a rebuild pass panicked".into()),
            }
            // Rest (woken early only to stop).
            let until = t0 + 3 * t0.elapsed();
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                std::thread::park_timeout(left);
            }
        }
    }

    /// Stops automatic rebuilds for good, keeping `why` for `Stats`.
    fn give_up(&self, why: String) {
        self.stop.store(true, Ordering::Release);
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }

    /// Passes done so far, and the error that stopped the thread, if any.
    pub(crate) fn report(&self) -> (u64, Option<String>) {
        let error = self.error.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (self.passes.load(Ordering::Relaxed), error)
    }

    /// Forgets the thread without stopping or joining it, in a child of `fork`
    /// ([`crate::fork::forget_thread`]).
    pub(crate) fn forget_thread(&self) {
        crate::fork::forget_thread(&self.handle);
    }

    /// Stops the thread and waits for it (a pass in progress ends after its current shard
    /// and still commits what it copied). Requests after this start nothing.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            // A panic in a pass is reported like an error (below); nothing to clean here.
            let _ = h.join();
        }
    }
}
