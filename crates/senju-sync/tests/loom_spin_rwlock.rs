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

/// `model` with at most `bound` preemptions whatever `LOOM_MAX_PREEMPTIONS` says: the bias
/// models loop on revocations and explode past 2 (`biased_readers_and_a_writer` took over 20
/// CPU-minutes at 3, 33 s at 2).
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound);
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

/// Two writers and a reader; with `bias`, the lock is biased before the threads start, so the
/// reader may enter through its thread's record while a writer revokes the bias.
fn two_writers_one_reader<R: Relax + 'static>(bias: bool) {
    let body = move || {
        let s = shared::<R>();
        if bias {
            assert!(s.lock.bias_now());
        }
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
    };
    if bias { model_bounded(2, body) } else { model(body) }
}

#[test]
fn exclusion_and_wakeups_adaptive() {
    two_writers_one_reader::<Adaptive>(false);
}

#[test]
fn exclusion_and_wakeups_park() {
    two_writers_one_reader::<Park>(false);
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

/// The bias is on before the threads start: a reader enters through its thread's record while
/// a writer revokes the bias and a second writer competes. Exclusion (loom's `UnsafeCell`
/// checks every access), no lost wake-up, and the writer sees what it must.
#[test]
fn biased_reader_and_revoking_writers() {
    two_writers_one_reader::<Adaptive>(true);
}

/// Two readers meet under the bias (under loom one meeting re-arms it) while a writer comes
/// and goes: the writer never shares the lock with either reader.
#[test]
fn biased_readers_and_a_writer() {
    model_bounded(2, || {
        let s = shared::<Adaptive>();
        assert!(s.lock.bias_now());
        let w = {
            let s = s.clone();
            thread::spawn(move || write(&s))
        };
        let r = {
            let s = s.clone();
            thread::spawn(move || read(&s))
        };
        let mine = read(&s);
        let theirs = r.join().unwrap();
        w.join().unwrap();
        assert!(mine <= 1 && theirs <= 1);
        assert_eq!(read(&s), 1);
        assert!(!s.lock.is_locked());
    });
}

/// A biased reader holds the lock; `try_lock_exclusive` must fail without letting a later
/// writer in beside the reader.
#[test]
fn try_lock_exclusive_beside_a_biased_reader() {
    model_bounded(2, || {
        let s = shared::<Adaptive>();
        assert!(s.lock.bias_now());
        s.lock.lock_shared();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                if s.lock.try_lock_exclusive() {
                    // SAFETY: exclusive lock held.
                    s.data.with_mut(|d| unsafe { *d += 1 });
                    // SAFETY: taken above.
                    unsafe { s.lock.unlock_exclusive() };
                }
                write(&s);
            })
        };
        // SAFETY: shared lock held.
        let v = s.data.with(|d| unsafe { *d });
        assert_eq!(v, 0);
        // SAFETY: taken before the thread started.
        unsafe { s.lock.unlock_shared() };
        t.join().unwrap();
        assert!(!s.lock.is_locked());
    });
}
