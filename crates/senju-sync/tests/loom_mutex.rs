//! `RawMutex` under loom: mutual exclusion, no lost wake-up (loom reports a deadlock if a
//! parked thread is never woken), `unlock_fair`, and the hand-off bound with a small `K`.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_mutex`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use senju_sync::RawMutex;

/// A counter that only the lock protects: loom flags any access not ordered by the lock.
struct Guarded<const K: u32> {
    lock: RawMutex<K>,
    value: UnsafeCell<usize>,
    inside: AtomicUsize,
}

// SAFETY: `value` is only touched with `lock` held.
unsafe impl<const K: u32> Sync for Guarded<K> {}

impl<const K: u32> Guarded<K> {
    fn new() -> Self {
        Self { lock: RawMutex::new(), value: UnsafeCell::new(0), inside: AtomicUsize::new(0) }
    }

    /// The critical section: checks exclusion and bumps the counter.
    fn bump(&self) {
        assert_eq!(self.inside.fetch_add(1, Ordering::Relaxed), 0, "two threads inside");
        // SAFETY: the caller holds `lock`.
        self.value.with_mut(|v| unsafe { *v += 1 });
        assert_eq!(self.inside.fetch_sub(1, Ordering::Relaxed), 1, "two threads inside");
    }

    fn locked_bump(&self, fair: bool) {
        self.lock.lock();
        self.bump();
        if fair {
            // SAFETY: taken just above.
            unsafe { self.lock.unlock_fair() };
        } else {
            // SAFETY: taken just above.
            unsafe { self.lock.unlock() };
        }
    }

    fn total(&self) -> usize {
        self.lock.lock();
        // SAFETY: held.
        let v = self.value.with(|v| unsafe { *v });
        // SAFETY: taken just above.
        unsafe { self.lock.unlock() };
        v
    }
}

#[test]
fn three_threads_exclude_each_other() {
    loom::model(|| {
        let g = Arc::new(Guarded::<8>::new());
        let others: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                thread::spawn(move || g.locked_bump(false))
            })
            .collect();
        g.locked_bump(false);
        for t in others {
            t.join().unwrap();
        }
        assert_eq!(g.total(), 3);
        assert!(!g.lock.is_locked());
    });
}

#[test]
fn k_one_hands_off_at_every_contended_unlock() {
    // K = 1: every release seen by a waiter is a hand-off; both threads relock twice, so
    // hand-offs to awake and to parked waiters are both explored.
    loom::model(|| {
        let g = Arc::new(Guarded::<1>::new());
        let other = {
            let g = g.clone();
            thread::spawn(move || {
                g.locked_bump(false);
                g.locked_bump(false);
            })
        };
        g.locked_bump(false);
        g.locked_bump(false);
        other.join().unwrap();
        assert_eq!(g.total(), 4);
    });
}

#[test]
fn unlock_fair_exclusion_and_wake_ups() {
    loom::model(|| {
        let g = Arc::new(Guarded::<8>::new());
        let other = {
            let g = g.clone();
            thread::spawn(move || {
                g.locked_bump(true);
                g.locked_bump(false);
            })
        };
        g.locked_bump(true);
        g.locked_bump(true);
        other.join().unwrap();
        assert_eq!(g.total(), 4);
    });
}

/// A loops on the lock; B takes it once. A counts the acquisitions during which it saw B
/// registered (a subset of the releases the lock counts against B); when B gets in, that
/// count must be at most K.
fn hand_off_bound<const K: u32>(a_rounds: usize) {
    loom::model(move || {
        let lock = Arc::new(RawMutex::<K>::new());
        let seen = Arc::new(AtomicUsize::new(0));
        let a = {
            let (lock, seen) = (lock.clone(), seen.clone());
            thread::spawn(move || {
                for _ in 0..a_rounds {
                    lock.lock();
                    if lock.has_waiters() {
                        seen.fetch_add(1, Ordering::Relaxed);
                    }
                    // SAFETY: taken just above.
                    unsafe { lock.unlock() };
                }
            })
        };
        lock.lock();
        // A cannot change `seen` while B holds the lock.
        let bypassed = seen.load(Ordering::Relaxed);
        assert!(bypassed <= K as usize, "B was bypassed {bypassed} times (K = {K})");
        // SAFETY: taken just above.
        unsafe { lock.unlock() };
        a.join().unwrap();
    });
}

#[test]
fn hand_off_bound_k_1() {
    hand_off_bound::<1>(3);
}

#[test]
fn hand_off_bound_k_2() {
    hand_off_bound::<2>(4);
}
