//! loom models of `SpinRwLock`: exclusion, no lost wake-up, and the writer-intent rule.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p senju-sync --release --test loom_spin_rwlock`
//! (the Makefile's `loom` target does). Under loom the `Adaptive` policy spins once and then
//! parks, so every model also walks the park and wake paths; loom reports a deadlock if a
//! sleeper is never woken.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use loom::thread;

use senju_sync::{Adaptive, Park, RawSpinRwLock, Relax};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

struct Shared<R: Relax> {
    lock: RawSpinRwLock<R>,
    data: UnsafeCell<u32>,
}

// SAFETY: `data` is only touched under `lock` (written under the exclusive lock, read under a
// shared one), which is exactly what loom's UnsafeCell checks.
unsafe impl<R: Relax> Sync for Shared<R> {}

fn shared<R: Relax>() -> Arc<Shared<R>> {
    Arc::new(Shared { lock: RawSpinRwLock::new(), data: UnsafeCell::new(0) })
}

fn write<R: Relax>(s: &Shared<R>) {
    s.lock.lock_exclusive();
    // SAFETY: exclusive lock held.
    s.data.with_mut(|d| unsafe { *d += 1 });
    // SAFETY: taken above.
    unsafe { s.lock.unlock_exclusive() };
}

fn read<R: Relax>(s: &Shared<R>) -> u32 {
    s.lock.lock_shared();
    // SAFETY: shared lock held; writers are excluded.
    let v = s.data.with(|d| unsafe { *d });
    // SAFETY: taken above.
    unsafe { s.lock.unlock_shared() };
    v
}

fn two_writers_one_reader<R: Relax + 'static>() {
    model(|| {
        let s = shared::<R>();
        let w1 = {
            let s = s.clone();
            thread::spawn(move || write(&s))
        };
        let w2 = {
            let s = s.clone();
            thread::spawn(move || write(&s))
        };
        let seen = read(&s);
        assert!(seen <= 2);
        w1.join().unwrap();
        w2.join().unwrap();
        assert_eq!(read(&s), 2);
        assert!(!s.lock.is_locked());
    });
}

#[test]
fn exclusion_and_wakeups_adaptive() {
    two_writers_one_reader::<Adaptive>();
}

#[test]
fn exclusion_and_wakeups_park() {
    two_writers_one_reader::<Park>();
}

/// A reader holds the lock; a writer arrives and must wait; a second reader that sees the
/// writer's intent must not enter before the writer has been in.
#[test]
fn reader_after_writer_intent_waits_for_the_writer() {
    model(|| {
        let s = shared::<Adaptive>();
        let writer_done = Arc::new(AtomicBool::new(false));
        s.lock.lock_shared();
        let w = {
            let (s, writer_done) = (s.clone(), writer_done.clone());
            thread::spawn(move || {
                s.lock.lock_exclusive();
                writer_done.store(true, SeqCst);
                // SAFETY: taken above.
                unsafe { s.lock.unlock_exclusive() };
            })
        };
        let r = {
            let (s, writer_done) = (s.clone(), writer_done.clone());
            thread::spawn(move || {
                let saw_writer = s.lock.is_writer_waiting();
                s.lock.lock_shared();
                if saw_writer {
                    assert!(writer_done.load(SeqCst), "reader overtook an announced writer");
                }
                // SAFETY: taken above.
                unsafe { s.lock.unlock_shared() };
            })
        };
        // SAFETY: taken before the threads started.
        unsafe { s.lock.unlock_shared() };
        w.join().unwrap();
        r.join().unwrap();
        assert!(!s.lock.is_locked());
    });
}

/// A writer downgrades while a reader and a writer wait: the data it wrote is seen by the
/// reader, and nobody sleeps forever.
#[test]
fn downgrade_wakes_waiters() {
    model(|| {
        let s = shared::<Adaptive>();
        s.lock.lock_exclusive();
        let r = {
            let s = s.clone();
            thread::spawn(move || assert_eq!(read(&s), 1))
        };
        // SAFETY: exclusive lock held.
        s.data.with_mut(|d| unsafe { *d = 1 });
        // SAFETY: exclusive lock held.
        unsafe { s.lock.downgrade() };
        // SAFETY: the downgrade left a shared hold.
        s.data.with(|d| assert_eq!(unsafe { *d }, 1));
        // SAFETY: the downgrade left a shared hold.
        unsafe { s.lock.unlock_shared() };
        r.join().unwrap();
    });
}
