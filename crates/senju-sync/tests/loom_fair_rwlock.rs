//! Loom models of `RawFairRwLock` with two or three threads: mutual exclusion (checked both by
//! occupancy and by loom's causality check on an `UnsafeCell`, which also catches orderings
//! too weak to publish the data), no lost wake-up (loom reports a deadlock when a parked thread
//! is never woken), and the writer-intent rule.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom
//! cargo test -p senju-sync --release --test loom_fair_rwlock`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use senju_sync::{Park, RawFairRwLock};

/// `Park` parks at the first failed check. Under loom a spin would be a yield, after which
/// the model always lets the other threads run first; parking at once makes every wait go
/// through the park/wake handshake that these models exist to check.
struct Shared {
    lock: RawFairRwLock<Park>,
    data: UnsafeCell<u32>,
}

// SAFETY: `data` is only touched through `read`/`write` below, whose callers hold the lock in
// the matching mode; loom checks that claim in every explored execution.
unsafe impl Sync for Shared {}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Self { lock: RawFairRwLock::new(), data: UnsafeCell::new(0) })
    }

    /// Reads the data; the caller holds a shared, upgradable or exclusive lock.
    fn read(&self) -> u32 {
        // SAFETY: the caller holds the lock, so no writer runs (loom verifies it).
        self.data.with(|p| unsafe { *p })
    }

    /// Adds one; the caller holds the exclusive lock.
    fn write(&self) {
        // SAFETY: the caller holds the exclusive lock (loom verifies it).
        self.data.with_mut(|p| unsafe { *p += 1 })
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

fn reader(s: &Shared) -> u32 {
    s.lock.lock_shared();
    let v = s.read();
    // SAFETY: shared hold taken above.
    unsafe { s.lock.unlock_shared() };
    v
}

fn writer(s: &Shared) {
    s.lock.lock_exclusive();
    s.write();
    // SAFETY: exclusive hold taken above.
    unsafe { s.lock.unlock_exclusive() };
}

fn upgrader(s: &Shared) {
    s.lock.lock_upgradable();
    let _ = s.read();
    // SAFETY: upgradable hold taken above.
    unsafe { s.lock.upgrade() };
    s.write();
    // SAFETY: exclusive hold from the upgrade.
    unsafe { s.lock.unlock_exclusive() };
}

/// With an upgradable hold: writes if `try_upgrade` succeeds, then releases whatever is held.
fn try_upgrade_then_release(s: &Shared) {
    // SAFETY: the caller holds an upgradable lock.
    if unsafe { s.lock.try_upgrade() } {
        s.write();
        // SAFETY: exclusive hold from the upgrade.
        unsafe { s.lock.unlock_exclusive() };
    } else {
        // SAFETY: the upgradable hold is unchanged by a failed try.
        unsafe { s.lock.unlock_upgradable() };
    }
}

/// The lock is free again: every try succeeds and leaves nothing behind.
fn assert_free(s: &Shared) {
    assert!(!s.lock.is_locked());
    assert_eq!(s.lock.queued_writers(), 0);
    assert!(s.lock.try_lock_exclusive());
    // SAFETY: exclusive hold taken just above.
    unsafe { s.lock.unlock_exclusive() };
}

#[test]
fn reader_and_writer_exclude() {
    model(|| {
        let s = Shared::new();
        let w = {
            let s = s.clone();
            thread::spawn(move || writer(&s))
        };
        let seen = reader(&s);
        w.join().unwrap();
        assert!(seen <= 1);
        assert_eq!(reader(&s), 1);
        assert_free(&s);
    });
}

#[test]
fn writers_exclude_each_other() {
    model(|| {
        let s = Shared::new();
        let w = {
            let s = s.clone();
            thread::spawn(move || writer(&s))
        };
        writer(&s);
        w.join().unwrap();
        assert_eq!(reader(&s), 2);
        assert_free(&s);
    });
}

#[test]
fn upgrade_excludes_readers() {
    model(|| {
        let s = Shared::new();
        let u = {
            let s = s.clone();
            thread::spawn(move || upgrader(&s))
        };
        let seen = reader(&s);
        u.join().unwrap();
        assert!(seen <= 1);
        assert_free(&s);
    });
}

#[test]
fn upgrader_and_writer_take_turns() {
    model(|| {
        let s = Shared::new();
        let u = {
            let s = s.clone();
            thread::spawn(move || upgrader(&s))
        };
        writer(&s);
        u.join().unwrap();
        assert_eq!(reader(&s), 2);
        assert_free(&s);
    });
}

/// An upgradable reader upgrades, downgrades to upgradable and upgrades again while a reader
/// queues: the second write phase must not look like the first to that reader (the phase id
/// toggles per write phase), or the reader and the upgrader wait for each other forever.
#[test]
fn second_upgrade_does_not_strand_a_queued_reader() {
    model(|| {
        let s = Shared::new();
        let u = {
            let s = s.clone();
            thread::spawn(move || {
                s.lock.lock_upgradable();
                // SAFETY: upgradable hold taken above.
                unsafe { s.lock.upgrade() };
                s.write();
                // SAFETY: exclusive hold from the upgrade.
                unsafe { s.lock.downgrade_to_upgradable() };
                // SAFETY: upgradable hold from the downgrade.
                unsafe { s.lock.upgrade() };
                s.write();
                // SAFETY: exclusive hold from the second upgrade.
                unsafe { s.lock.unlock_exclusive() };
            })
        };
        let seen = reader(&s);
        u.join().unwrap();
        assert!(seen <= 2);
        assert_eq!(reader(&s), 2);
        assert_free(&s);
    });
}

/// A reader holds the lock; a writer arrives; a second reader that saw the writer's mark
/// before it called `lock_shared` must not enter before the writer has written.
#[test]
fn reader_after_writer_intent_waits() {
    model(|| {
        let s = Shared::new();
        s.lock.lock_shared();
        let w = {
            let s = s.clone();
            thread::spawn(move || writer(&s))
        };
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                let after_mark = s.lock.is_writer_waiting();
                let seen = reader(&s);
                if after_mark {
                    assert_eq!(seen, 1, "a reader that came after the writer's mark went first");
                }
            })
        };
        // SAFETY: shared hold taken above.
        unsafe { s.lock.unlock_shared() };
        w.join().unwrap();
        r.join().unwrap();
        assert_free(&s);
    });
}

/// Downgrades publish the write and admit readers; the turn passes on.
#[test]
fn downgrades_admit_readers_and_pass_the_turn() {
    model(|| {
        let s = Shared::new();
        let d = {
            let s = s.clone();
            thread::spawn(move || {
                s.lock.lock_exclusive();
                s.write();
                // SAFETY: exclusive hold taken above.
                unsafe { s.lock.downgrade() };
                assert!(s.read() >= 1);
                // SAFETY: shared hold from the downgrade.
                unsafe { s.lock.unlock_shared() };
            })
        };
        s.lock.lock_upgradable();
        let seen = s.read();
        // SAFETY: upgradable hold taken above.
        unsafe { s.lock.downgrade_upgradable() };
        assert_eq!(s.read(), seen);
        // SAFETY: shared hold from the downgrade.
        unsafe { s.lock.unlock_shared() };
        d.join().unwrap();
        assert_eq!(reader(&s), 1);
        assert_free(&s);
    });
}

/// Three writers: two wait for the turn behind the first (the turn's `RawMutex` wakes, hands
/// off or frees it), and the readers' and writers' words must end free.
#[test]
fn three_writers_in_line() {
    model(|| {
        let s = Shared::new();
        let ws: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || writer(&s))
            })
            .collect();
        writer(&s);
        for w in ws {
            w.join().unwrap();
        }
        assert_eq!(reader(&s), 3);
        assert_free(&s);
    });
}

/// `try_lock_exclusive` beside a reader: it must fail while the reader is inside, and its
/// failure gives back a turn that a blocking writer may already be parked behind.
#[test]
fn try_write_beside_a_reader() {
    model(|| {
        let s = Shared::new();
        s.lock.lock_shared();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                if s.lock.try_lock_exclusive() {
                    s.write();
                    // SAFETY: exclusive hold taken above.
                    unsafe { s.lock.unlock_exclusive() };
                }
            })
        };
        let w = {
            let s = s.clone();
            thread::spawn(move || writer(&s))
        };
        let _ = s.read();
        // SAFETY: shared hold taken above.
        unsafe { s.lock.unlock_shared() };
        t.join().unwrap();
        w.join().unwrap();
        assert!(reader(&s) >= 1);
        assert_free(&s);
    });
}

/// `try_upgrade` beside a reader and a queued writer: it either succeeds with no reader
/// inside or changes nothing.
#[test]
fn try_upgrade_beside_a_reader() {
    model(|| {
        let s = Shared::new();
        s.lock.lock_upgradable();
        let r = {
            let s = s.clone();
            thread::spawn(move || reader(&s))
        };
        let w = {
            let s = s.clone();
            thread::spawn(move || writer(&s))
        };
        try_upgrade_then_release(&s);
        r.join().unwrap();
        w.join().unwrap();
        assert!(reader(&s) >= 1);
        assert_free(&s);
    });
}

/// A failed `try_lock_exclusive` gives back a turn that a blocking writer may already be
/// parked behind: it must wake that writer. `try_upgrade` either succeeds or changes nothing.
#[test]
fn failed_tries_leave_no_trace() {
    model(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                if s.lock.try_lock_exclusive() {
                    s.write();
                    // SAFETY: exclusive hold taken above.
                    unsafe { s.lock.unlock_exclusive() };
                }
            })
        };
        let w = {
            let s = s.clone();
            thread::spawn(move || writer(&s))
        };
        if s.lock.try_lock_upgradable() {
            try_upgrade_then_release(&s);
        }
        t.join().unwrap();
        w.join().unwrap();
        assert!(reader(&s) >= 1);
        assert_free(&s);
    });
}
