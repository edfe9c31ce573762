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

/// The rest between passes gives way once the database's dead bytes reach this many times
/// the larger of its live bytes and the threshold (see [`AutoRebuild::run`]).
pub(crate) const URGENT: u64 = 16;

/// How often a resting thread looks at the dead bytes (while a pass is asked for).
const URGENT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

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
    /// Rests cut short because the dead data had outgrown the live data (see `run`).
    urgent_starts: AtomicU64,
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

    /// Whether `dead` bytes in all, against `live` in all over `shards` shards, call for a
    /// pass without the rest (see [`run`](Self::run)).
    pub(crate) fn is_urgent(&self, dead: u64, live: u64, shards: u64) -> bool {
        self.shard_min != 0 && dead >= URGENT * live.max(self.shard_min.saturating_mul(shards))
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
    /// the file, and each page written back costs the writers a TLB shootdown.) The pacing
    /// gives way when `urgent` says the dead data has outgrown the live data by
    /// [`URGENT`] times (it is asked every [`URGENT_POLL`] while a pass is wanted): under
    /// churn faster than the passes (64 KiB values rewritten at hundreds of MB/s) the rest
    /// let the file grow to hundreds of times its live data.
    pub(crate) fn run(
        &self,
        pass: impl Fn(&AtomicBool) -> Result<u64, String>,
        urgent: impl Fn() -> bool,
    ) {
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
            // Rest (woken early to stop, or to start an urgent pass).
            let until = t0 + 3 * t0.elapsed();
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                // Relaxed: see `request`.
                if self.wanted.load(Ordering::Relaxed) {
                    if urgent() {
                        self.urgent_starts.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    std::thread::park_timeout(left.min(URGENT_POLL));
                } else {
                    std::thread::park_timeout(left);
                }
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
            // Again: `start` publishes the thread only after spawning it, holding the lock we
            // just took, so the look above may have missed a thread that then parked before
            // it saw `stop`; joined unwoken, it would keep `close` waiting for good.
            h.thread().unpark();
            // A panic in a pass is reported like an error (below); nothing to clean here.
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `stop` racing `start`: the thread is spawned, checks `stop` (not yet set) and parks;
    /// `stop` sets the flag, finds no thread published yet and waits for the lock `start`
    /// holds; then `start` publishes the thread. `stop` must still wake it (before, it
    /// joined a thread that slept for good, and `close` hung). The steps are ordered by
    /// channels and the stop flag, not by time; the failure is a hang of this test.
    #[test]
    fn stop_wakes_a_thread_that_start_published_after_it_looked() {
        let auto = std::sync::Arc::new(AutoRebuild::new(1));
        let (parking_tx, parking_rx) = std::sync::mpsc::channel();
        let mut stopper = None;
        auto.start(|| {
            let a = std::sync::Arc::clone(&auto);
            let h = std::thread::spawn(move || {
                let mut first = true;
                while !a.stop.load(Ordering::Acquire) {
                    if std::mem::take(&mut first) {
                        // Checked `stop` (false); an unpark from here on wakes the park.
                        parking_tx.send(()).unwrap();
                    }
                    std::thread::park();
                }
            });
            parking_rx.recv().unwrap();
            let a = std::sync::Arc::clone(&auto);
            stopper = Some(std::thread::spawn(move || a.stop()));
            while !auto.stop.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            // `stop` has looked for the thread (none yet) or is about to; it cannot take the
            // handle before this returns.
            Ok(h)
        });
        stopper.unwrap().join().unwrap();
        assert!(auto.handle.lock().unwrap().is_none());
    }

    /// Runs `run` for two passes; the first takes 50 ms and asks for another. Returns how
    /// many rests were cut short and how often `urgent` was asked.
    fn two_passes(urgent: bool) -> (u64, u64) {
        let auto = AutoRebuild::new(1);
        auto.wanted.store(true, Ordering::Relaxed);
        let passes = AtomicU64::new(0);
        let asked = AtomicU64::new(0);
        auto.run(
            |stop| {
                if passes.fetch_add(1, Ordering::Relaxed) == 0 {
                    std::thread::sleep(Duration::from_millis(50));
                    auto.request();
                } else {
                    stop.store(true, Ordering::Release);
                }
                Ok(1)
            },
            || {
                asked.fetch_add(1, Ordering::Relaxed);
                urgent
            },
        );
        assert_eq!(passes.load(Ordering::Relaxed), 2);
        (auto.urgent_starts.load(Ordering::Relaxed), asked.load(Ordering::Relaxed))
    }

    #[test]
    fn an_urgent_pass_does_not_wait_out_the_rest() {
        assert_eq!(two_passes(true), (1, 1));
    }

    #[test]
    fn otherwise_the_rest_is_kept() {
        let (cut, asked) = two_passes(false);
        assert_eq!(cut, 0);
        assert!(asked >= 1, "the rest never looked at the dead data");
    }

    #[test]
    fn urgent_is_dead_data_past_a_multiple_of_live_data_or_the_threshold() {
        // A threshold of 64 MiB over 128 shards: 512 KiB per shard.
        let auto = AutoRebuild::new(512 << 10);
        let (mib, shards) = (1u64 << 20, 128);
        assert!(!auto.is_urgent(URGENT * 64 * mib - 1, 16 * mib, shards));
        assert!(auto.is_urgent(URGENT * 64 * mib, 16 * mib, shards));
        assert!(!auto.is_urgent(URGENT * 100 * mib - 1, 100 * mib, shards));
        assert!(auto.is_urgent(URGENT * 100 * mib, 100 * mib, shards));
        assert!(!AutoRebuild::new(0).is_urgent(u64::MAX, 0, shards), "disabled");
    }
}
