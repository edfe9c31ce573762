//! `TkrzwSpinRwLock`: the single-counter spin shared lock exactly as Tkrzw's author describes
//! it (founding document `001`), kept as the baseline that `SpinRwLock` must beat on fairness.
//!
//! Fairness policy: none. A reader enters whenever no writer holds the lock, even while a
//! writer waits, so readers that pass the lock hand to hand keep a writer out for as long as
//! they keep coming (the reader-flood scenario shows it). Writers among themselves race. Every
//! waiter, reader or writer, waits by calling `sched_yield` (`std::thread::yield_now`) between
//! attempts, never sleeping in the kernel.
//!
//! This is our own code written from the prose description, not a copy of Tkrzw's source.

use std::sync::atomic::{AtomicU32, Ordering};

/// The count value that means "a writer holds the lock" (`INT32MAX` in the original).
const WRITER: u32 = i32::MAX as u32;

/// The raw lock: one `u32` that counts readers, or holds `WRITER` (`i32::MAX`, plus the
/// increments of readers that tried while the writer held it).
///
/// | value            | meaning                                                        |
/// |------------------|----------------------------------------------------------------|
/// | `0`              | free                                                           |
/// | `1..WRITER`      | that many readers hold the lock                                |
/// | `WRITER`         | a writer holds the lock                                        |
/// | `> WRITER`       | a writer holds it and refused readers have not yet backed out  |
///
/// Writer: CAS `0 → WRITER`, yield and retry on failure; unlock stores `0`.
/// Reader: `fetch_add(1)`; it holds the lock if the old value was `< WRITER`. Otherwise it
/// reads the count and, if it is above `WRITER`, tries once to CAS it back down to `WRITER`,
/// then yields and tries again. Unlock is `fetch_sub(1)`.
#[derive(Debug)]
pub struct RawTkrzwSpinRwLock {
    count: AtomicU32,
}

impl RawTkrzwSpinRwLock {
    /// A new, unlocked lock.
    pub const fn new() -> Self {
        Self { count: AtomicU32::new(0) }
    }

    fn try_lock_exclusive(&self) -> bool {
        // Acquire pairs with the Release of the previous writer's store(0) or the last
        // reader's fetch_sub.
        self.count.compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    fn try_lock_shared(&self) -> bool {
        // Acquire pairs with the Release store(0) of the writer that left last.
        if self.count.fetch_add(1, Ordering::Acquire) < WRITER {
            return true;
        }
        // Refused: a writer holds the lock. Undo the pile-up of refused increments the way the
        // original does, with one CAS back to WRITER; if it fails, the writer has left or
        // another reader did it, and the store(0) of unlock wipes the increments anyway.
        let seen = self.count.load(Ordering::Relaxed);
        if seen > WRITER {
            let _ = self.count.compare_exchange_weak(
                seen,
                WRITER,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        false
    }
}

impl Default for RawTkrzwSpinRwLock {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: a writer enters only by a CAS from 0 (no reader, no writer) and keeps the count at
// WRITER or above until it stores 0; a reader holds the lock only if its increment was made
// on a count below WRITER, which no writer can turn into WRITER until the count is 0 again.
// Acquire on every successful lock pairs with the Release of the unlocks.
unsafe impl lock_api::RawRwLock for RawTkrzwSpinRwLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type SharedGuard = lock_api::GuardSend;
    type ExclusiveGuard = lock_api::GuardSend;

    fn lock_shared(&self) -> Self::SharedGuard {
        while !self.try_lock_shared() {
            std::thread::yield_now();
        }
        lock_api::GuardSend::new()
    }

    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        // A refused fetch_add is not a hold: `try_lock_shared` has already backed out.
        RawTkrzwSpinRwLock::try_lock_shared(self).then(lock_api::GuardSend::new)
    }

    unsafe fn unlock_shared(&self, _guard: Self::SharedGuard) {
        // Release pairs with the Acquire CAS of the next writer.
        self.count.fetch_sub(1, Ordering::Release);
    }

    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        while !RawTkrzwSpinRwLock::try_lock_exclusive(self) {
            std::thread::yield_now();
        }
        lock_api::GuardSend::new()
    }

    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        // The weak CAS may fail spuriously; one retry on a free-looking count keeps `try`
        // from reporting a free lock as taken in the common case.
        (RawTkrzwSpinRwLock::try_lock_exclusive(self)
            || (self.count.load(Ordering::Relaxed) == 0
                && RawTkrzwSpinRwLock::try_lock_exclusive(self)))
        .then(lock_api::GuardSend::new)
    }

    unsafe fn unlock_exclusive(&self, _guard: Self::ExclusiveGuard) {
        // Release pairs with the Acquire of the next reader or writer. Storing 0 also drops
        // the increments of readers refused meanwhile, as in the original.
        self.count.store(0, Ordering::Release);
    }

    fn is_locked(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    fn is_locked_exclusive(&self) -> bool {
        self.count.load(Ordering::Relaxed) >= WRITER
    }
}

/// A reader-writer lock on [`RawTkrzwSpinRwLock`].
pub type TkrzwSpinRwLock<T> = lock_api::RwLock<RawTkrzwSpinRwLock, T>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_and_writer_excludes() {
        let lock = TkrzwSpinRwLock::new(0u32);
        {
            let a = lock.read();
            let b = lock.try_read().expect("a second reader enters");
            assert!(lock.try_write().is_none());
            assert_eq!(*a + *b, 0);
        }
        {
            let mut w = lock.try_write().expect("a free lock is taken");
            *w = 5;
            assert!(lock.try_read().is_none());
        }
        assert_eq!(*lock.read(), 5);
    }
}
