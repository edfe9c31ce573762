//! `SpinRwLock`: Tkrzw's one-word spin shared lock, plus writer intent and bounded waiting.
//!
//! Fairness policy. Writers are preferred: as soon as a writer fails to get the lock it
//! registers in the state word, and from then on no reader that arrives enters before every
//! registered writer has had its turn. This closes the hole of Tkrzw's `SpinSharedMutex` (and
//! glibc's default rwlock), where readers passing the lock hand to hand keep a writer out
//! forever. Writers among themselves are not ordered (a writer that arrives later may barge
//! ahead), and a stream of writers that never stops can keep readers waiting: where both sides
//! need a bound, use [`FairRwLock`](crate::FairRwLock). Waiting goes through the lock's
//! [`Relax`] policy: by default a short spin, a few yields, then a park in the kernel, so the
//! lock holds up when threads outnumber cores.
//!
//! The fast paths are Tkrzw's: a reader is one `fetch_add`, a writer one compare-and-swap from
//! zero; each unlock is one read-modify-write. Everything else is in `#[cold]` functions.
//!
//! Reader bias. When readers keep meeting inside the lock (a reader's `fetch_add` finds another
//! reader in, 1024 times in one thread), the lock turns on its `BIAS` bit, and from then on
//! readers announce themselves in a slot of their own thread's record instead of in the word
//! (`bias.rs`, after BRAVO): reads on different cores then write no shared cache line. The
//! first writer to take the lock clears the bit and waits until no slot names the lock; readers
//! that arrive meanwhile use the word and its writer-intent rule as before. So a read-mostly
//! lock scales with cores, and a lock that is written often pays one revocation (a look at each
//! thread's record) per 1024 meetings of its readers per thread. Because a biased read hold
//! lives in the thread's record, read guards cannot move to another thread (`GuardNoSend`, as
//! `parking_lot`'s).

use core::marker::PhantomData;

use crate::bias;
use crate::primitive::park::{park, unpark_filter};
use crate::primitive::{AtomicU32, FilterOp, Ordering, ParkToken, UnparkToken, nap};
use crate::relax::{Adaptive, Relax, Waiter};

/// One reader in the reader count (bits 0..=20).
const READER: u32 = 1;
/// The reader count field.
const READERS: u32 = (1 << 21) - 1;
/// The top bit of the reader count: a reader that finds it set leaves the fast path and
/// reports the overflow instead of corrupting the writer field above.
const READER_GUARD: u32 = 1 << 20;
/// One registered waiting writer in the writer count (bits 21..=28).
const WAITING_WRITER: u32 = 1 << 21;
/// The count of writers that failed to get the lock and wait for it.
const WAITING_WRITERS: u32 = ((1 << 8) - 1) << 21;
/// Readers may enter through their threads' records instead of `READERS` (see `bias.rs`).
const BIAS: u32 = 1 << 29;
/// Some thread is parked on this lock (set under the parking-lot queue lock).
const PARKED: u32 = 1 << 30;
/// A writer holds the lock.
const WRITER: u32 = 1 << 31;

/// The largest number of readers that may hold the lock at once.
pub const MAX_READERS: u32 = READER_GUARD - 1;

/// The raw one-word reader-writer spin lock; use it through [`SpinRwLock`](crate::SpinRwLock).
///
/// `R` chooses how a waiter waits ([`Adaptive`] by default).
///
/// # State word
///
/// | bits   | name              | meaning                                                   |
/// |--------|-------------------|-----------------------------------------------------------|
/// | 0..=20 | `READERS`         | readers inside, plus readers that are backing out          |
/// | 21..=28| `WAITING_WRITERS` | writers that failed to get the lock and still wait (and a writer that drains biased readers) |
/// | 29     | `BIAS`            | readers may enter through their threads' records           |
/// | 30     | `PARKED`          | at least one thread sleeps in the parking lot on this word |
/// | 31     | `WRITER`          | a writer holds the lock                                    |
///
/// | state (R readers, W waiting writers)  | a new reader        | a new writer           |
/// |---------------------------------------|---------------------|------------------------|
/// | `R=0, W=0`, no `WRITER` (free)        | enters (`fetch_add`)| enters (CAS from 0)    |
/// | `R>0, W=0` (read phase)               | enters              | registers (`W+=1`), waits for `R=0` |
/// | `R>0, W>0` (draining for a writer)    | backs out, waits    | registers, waits       |
/// | `WRITER` set                          | backs out, waits    | registers, waits       |
///
/// A reader's fast path adds to `READERS` before it looks; if it finds `WRITER` or a waiting
/// writer it takes its increment back, so the count may briefly include readers that are
/// leaving. A writer takes the lock with a CAS from a state with `R=0` and no `WRITER`,
/// removing its own registration in the same step.
///
/// With `BIAS` set (never together with `WRITER` or a waiting writer), a new reader enters
/// through its record if, after announcing itself there, it still sees `BIAS` and no writer;
/// otherwise it withdraws and uses `READERS`. Only the CAS that sets `WRITER` clears `BIAS`,
/// and that writer then waits, still registered, until no record names the lock: a lock
/// without `BIAS` and without `WRITER` has no reader in a record. `try_lock_exclusive` that
/// finds such a reader gives `WRITER` back as `BIAS` in one step.
///
/// # Forgotten read guards
///
/// A read guard taken through the bias and then forgotten (`mem::forget`) leaves its
/// thread's slot naming the lock's address. Dropping the lock clears such slots. But if the
/// lock is then moved, or is itself forgotten or leaked without its destructor, the slot
/// stays, and a lock made later at that address (a new value in the same place, in a reused
/// allocation) counts it as a reader for good: that lock's writers wait forever. So do not
/// forget a read guard of a lock that will be moved or forgotten.
pub struct RawSpinRwLock<R: Relax = Adaptive> {
    state: AtomicU32,
    relax: PhantomData<fn() -> R>,
}

// SAFETY: the lock holds nothing but an atomic word; `PhantomData<fn() -> R>` is Send and
// Sync whatever R is.
unsafe impl<R: Relax> Sync for RawSpinRwLock<R> {}

impl<R: Relax> Drop for RawSpinRwLock<R> {
    /// A biased lock may still be named in the record of a thread that forgot a read guard
    /// (`mem::forget`, which `lock_api` allows): those slots are cleared, or a lock made
    /// later at the same address would take them for its own readers and its writers would
    /// wait for them forever. A lock that is not biased has no reader in a record.
    fn drop(&mut self) {
        if self.state.load(Ordering::Relaxed) & BIAS != 0 {
            bias::forget_lock(self.key());
        }
    }
}

impl<R: Relax> Default for RawSpinRwLock<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Relax> core::fmt::Debug for RawSpinRwLock<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = self.state.load(Ordering::Relaxed);
        f.debug_struct("RawSpinRwLock")
            .field("readers", &(s & READERS))
            .field("waiting_writers", &((s & WAITING_WRITERS) / WAITING_WRITER))
            .field("writer", &(s & WRITER != 0))
            .field("parked", &(s & PARKED != 0))
            .finish()
    }
}

impl<R: Relax> RawSpinRwLock<R> {
    /// A new, unlocked lock.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self { state: AtomicU32::new(0), relax: PhantomData }
    }

    /// A new, unlocked lock (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self { state: AtomicU32::new(0), relax: PhantomData }
    }

    fn key(&self) -> usize {
        &self.state as *const AtomicU32 as usize
    }

    /// Takes a shared lock, waiting while a writer holds the lock or waits for it.
    #[inline]
    pub fn lock_shared(&self) {
        if self.state.load(Ordering::Relaxed) & BIAS != 0 && self.lock_shared_biased() {
            return;
        }
        // Acquire pairs with the Release of `unlock_exclusive`/`downgrade`: a reader that
        // enters sees everything the last writer wrote.
        let s = self.state.fetch_add(READER, Ordering::Acquire);
        if s & (WRITER | WAITING_WRITERS | READER_GUARD) != 0 {
            self.lock_shared_slow(s);
        } else if s & READERS != 0 && bias::earn_try() {
            // Another reader was inside: readers meet here often enough to be worth the bias.
            self.try_bias();
        }
    }

    /// Enters through this thread's record while the lock is biased and no writer holds it or
    /// waits for it; false if the reader must use the count.
    #[inline]
    fn lock_shared_biased(&self) -> bool {
        // SeqCst: the load that closes the reader's half of the store-buffer pattern
        // (`bias.rs`); as an Acquire it pairs with the Release of the last writer's unlock,
        // whose release sequence the bias-setting CAS continues.
        bias::enter(self.key(), || {
            self.state.load(Ordering::SeqCst) & (BIAS | WAITING_WRITERS | WRITER) == BIAS
        })
    }

    /// Turns the bias on if no writer holds the lock or waits for it.
    #[cold]
    fn try_bias(&self) {
        let s = self.state.load(Ordering::Relaxed);
        if s & (BIAS | WRITER | WAITING_WRITERS) == 0 {
            // Relaxed: a CAS continues the release sequence of the last unlock (see
            // `lock_shared_biased`). Losing the race costs nothing: the next try comes later.
            let _ = self.state.compare_exchange(s, s | BIAS, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Turns the bias on now if no writer holds the lock or waits for it; returns whether the
    /// lock is biased. For tests: readers turn it on by themselves when they meet.
    #[doc(hidden)]
    pub fn bias_now(&self) -> bool {
        self.try_bias();
        self.is_biased()
    }

    /// Whether readers enter through their own threads' records (a momentary snapshot).
    pub fn is_biased(&self) -> bool {
        self.state.load(Ordering::Relaxed) & BIAS != 0
    }

    /// How many reader records the process has allocated (one per thread that read through a
    /// bias, less those reused after their threads exited). For tests.
    #[doc(hidden)]
    pub fn bias_records() -> usize {
        bias::records()
    }

    /// Takes a shared lock if that needs no waiting.
    #[inline]
    pub fn try_lock_shared(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        if s & BIAS != 0 && self.lock_shared_biased() {
            return true;
        }
        loop {
            if s & (WRITER | WAITING_WRITERS | READER_GUARD) != 0 {
                return false;
            }
            // Acquire: as in `lock_shared`.
            match self.state.compare_exchange_weak(
                s,
                s + READER,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Releases a shared lock.
    ///
    /// # Safety
    ///
    /// The calling context must hold a shared lock on `self`.
    #[inline]
    pub unsafe fn unlock_shared(&self) {
        if !bias::leave(self.key()) {
            self.leave_count();
        }
    }

    /// Takes one reader out of the count.
    #[inline]
    fn leave_count(&self) {
        // Release pairs with the Acquire CAS of the writer that takes the lock once the count
        // reaches zero: it sees everything this reader did.
        let s = self.state.fetch_sub(READER, Ordering::Release);
        if s & (READERS | PARKED) == (READER | PARKED) {
            // The last reader left and somebody sleeps: a writer may be waiting for this.
            self.wake_all();
        }
    }

    #[cold]
    fn lock_shared_slow(&self, seen: u32) {
        // Take back the increment of the fast path; it may be the one a writer waits for.
        self.leave_count();
        assert!(
            seen & READER_GUARD == 0,
            "SpinRwLock: more than {MAX_READERS} readers hold the lock at once"
        );
        let mut relax = Waiter::<R>::new();
        loop {
            if self.try_lock_shared() {
                return;
            }
            if relax.relax() {
                continue;
            }
            self.park_while(|s| s & (WRITER | WAITING_WRITERS) != 0);
            relax.restart();
        }
    }

    /// Takes the exclusive lock, waiting for readers and any writer to leave.
    #[inline]
    pub fn lock_exclusive(&self) {
        // Acquire pairs with the Release of the previous holder's unlock.
        if self.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_exclusive_slow();
        }
    }

    /// Takes the exclusive lock if nobody holds it; does not register as a waiting writer.
    #[inline]
    pub fn try_lock_exclusive(&self) -> bool {
        // The free lock first, as `lock_exclusive` takes it: one read-for-ownership of the
        // line instead of a read and then an upgrade.
        // Acquire pairs with the Release of the previous holder's unlock.
        let Err(mut s) =
            self.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
        else {
            return true;
        };
        loop {
            if s & (WRITER | READERS) != 0 {
                return false;
            }
            // Acquire pairs with the Release of the previous holder's unlock.
            match self.state.compare_exchange_weak(
                s,
                (s | WRITER) & !BIAS,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) if s & BIAS != 0 && bias::any_holder(self.key()) => {
                    // Readers are inside through their records: give the lock back biased,
                    // in one step, so no writer gets in before they are counted out.
                    let s = self.state.fetch_add(BIAS.wrapping_sub(WRITER), Ordering::Release);
                    if s & PARKED != 0 {
                        self.wake_all();
                    }
                    return false;
                }
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    #[cold]
    fn lock_exclusive_slow(&self) {
        // Register: from this moment no newly arriving reader enters before us. If the count
        // is full (hundreds of waiting writers) we wait unregistered, which is still correct.
        let mut registered = false;
        let mut s = self.state.load(Ordering::Relaxed);
        while s & WAITING_WRITERS != WAITING_WRITERS {
            match self.state.compare_exchange_weak(
                s,
                s + WAITING_WRITER,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    registered = true;
                    break;
                }
                Err(now) => s = now,
            }
        }
        let leave = if registered { WAITING_WRITER } else { 0 };
        let mut relax = Waiter::<R>::new();
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & (WRITER | READERS) == 0 {
                // Acquire pairs with the Release of the last unlock (reader or writer). Only
                // this step clears the bias: the writer that clears it counts the readers
                // that entered through their records out before it does anything else, so a
                // lock without the bias has no such readers unless its writer is draining.
                // While it drains it stays registered: it still waits for readers.
                let biased = s & BIAS != 0;
                let new = if biased { (s | WRITER) & !BIAS } else { (s - leave) | WRITER };
                if self
                    .state
                    .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    if biased {
                        self.drain_biased();
                        if leave != 0 {
                            self.state.fetch_sub(leave, Ordering::Relaxed);
                        }
                    }
                    return;
                }
                continue;
            }
            if relax.relax() {
                continue;
            }
            self.park_while(|s| s & (WRITER | READERS) != 0);
            relax.restart();
        }
    }

    /// Waits, holding the lock, until no reader is inside through its thread's record. Such a
    /// reader wakes nobody when it leaves, so this spins and yields as the [`Relax`] policy
    /// says, then sleeps in growing naps (1 µs to 1 ms) between looks.
    #[cold]
    fn drain_biased(&self) {
        let mut relax = Waiter::<R>::new();
        let mut nap_us = 1;
        bias::revoke(self.key(), || {
            if !relax.relax() {
                nap(nap_us);
                nap_us = (nap_us * 2).min(1000);
            }
        });
    }

    /// Releases the exclusive lock.
    ///
    /// # Safety
    ///
    /// The calling context must hold the exclusive lock on `self`.
    #[inline]
    pub unsafe fn unlock_exclusive(&self) {
        // Release pairs with the Acquire of the next reader or writer.
        let s = self.state.fetch_sub(WRITER, Ordering::Release);
        if s & PARKED != 0 {
            self.wake_all();
        }
    }

    /// Turns the exclusive lock into a shared lock without letting any writer in between.
    ///
    /// # Safety
    ///
    /// The calling context must hold the exclusive lock on `self`.
    #[inline]
    pub unsafe fn downgrade(&self) {
        // WRITER is set, so adding READER - WRITER (mod 2^32) clears it and adds one reader in
        // one step. Release pairs with the Acquire of readers that enter after this.
        let s = self.state.fetch_add(READER.wrapping_sub(WRITER), Ordering::Release);
        if s & PARKED != 0 {
            self.wake_all();
        }
    }

    /// Whether any thread holds the lock, shared or exclusive (a momentary snapshot; a reader
    /// backing out of a refused attempt counts for an instant).
    pub fn is_locked(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        s & (WRITER | READERS) != 0 || (s & BIAS != 0 && bias::any_holder(self.key()))
    }

    /// Whether a writer holds the lock (a momentary snapshot).
    pub fn is_locked_exclusive(&self) -> bool {
        self.state.load(Ordering::Relaxed) & WRITER != 0
    }

    /// Whether a writer has announced that it waits, which keeps new readers out
    /// (a momentary snapshot, for tests and diagnostics).
    pub fn is_writer_waiting(&self) -> bool {
        self.state.load(Ordering::Relaxed) & WAITING_WRITERS != 0
    }

    /// Parks the calling thread until the state changes, if `blocked(state)` still holds with
    /// the parking-lot queue locked.
    fn park_while(&self, blocked: impl Fn(u32) -> bool) {
        let validate = || {
            let mut s = self.state.load(Ordering::Relaxed);
            loop {
                if !blocked(s) {
                    return false;
                }
                if s & PARKED != 0 {
                    return true;
                }
                // Relaxed is enough: PARKED is only read by unlockers' read-modify-writes,
                // which are ordered with this one on the same word, and the wake itself is
                // ordered by the queue lock.
                match self.state.compare_exchange_weak(
                    s,
                    s | PARKED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => s = now,
                }
            }
        };
        park(self.key(), validate, ParkToken(0));
    }

    /// Wakes every parked thread; they re-check the state and park again if still blocked.
    #[cold]
    fn wake_all(&self) {
        unpark_filter(
            self.key(),
            |_| FilterOp::Unpark,
            |_| {
                // With the queue locked nobody can be between its check and its enqueue, so
                // clearing PARKED here cannot lose a sleeper: a later sleeper sets it again.
                self.state.fetch_and(!PARKED, Ordering::Relaxed);
                UnparkToken(0)
            },
        );
    }
}

#[cfg(not(loom))]
// SAFETY: readers exclude writers and writers exclude everyone (see the state table); every
// successful lock is an Acquire that reads the Release of the previous unlock. A shared hold
// taken through the bias lives in the taking thread's record, so a read guard must be dropped
// on that thread (`GuardNoSend`); write guards carry no state and may move.
unsafe impl<R: Relax> lock_api::RawRwLock for RawSpinRwLock<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type SharedGuard = lock_api::GuardNoSend;
    type ExclusiveGuard = lock_api::GuardSend;

    #[inline]
    fn lock_shared(&self) -> Self::SharedGuard {
        RawSpinRwLock::lock_shared(self);
        lock_api::GuardNoSend::new()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        RawSpinRwLock::try_lock_shared(self).then(lock_api::GuardNoSend::new)
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: Self::SharedGuard) {
        // SAFETY: lock_api hands us the guard of a shared lock held by the caller.
        unsafe { RawSpinRwLock::unlock_shared(self) }
    }

    #[inline]
    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        RawSpinRwLock::lock_exclusive(self);
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        RawSpinRwLock::try_lock_exclusive(self).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, _guard: Self::ExclusiveGuard) {
        // SAFETY: lock_api hands us the guard of the exclusive lock held by the caller.
        unsafe { RawSpinRwLock::unlock_exclusive(self) }
    }

    fn is_locked(&self) -> bool {
        RawSpinRwLock::is_locked(self)
    }

    fn is_locked_exclusive(&self) -> bool {
        RawSpinRwLock::is_locked_exclusive(self)
    }
}

#[cfg(not(loom))]
// SAFETY: `downgrade` turns the writer's hold into one reader's hold in one atomic step.
unsafe impl<R: Relax> lock_api::RawRwLockDowngrade for RawSpinRwLock<R> {
    #[inline]
    unsafe fn downgrade(&self, _guard: Self::ExclusiveGuard) -> Self::SharedGuard {
        // SAFETY: lock_api hands us the guard of the exclusive lock held by the caller.
        unsafe { RawSpinRwLock::downgrade(self) };
        lock_api::GuardNoSend::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_do_not_overlap() {
        assert_eq!(READERS & WAITING_WRITERS, 0);
        assert_eq!((READERS | WAITING_WRITERS) & (PARKED | WRITER), 0);
        assert_eq!((READERS | WAITING_WRITERS | PARKED | WRITER) & BIAS, 0);
        assert_eq!(READERS | WAITING_WRITERS | BIAS | PARKED | WRITER, u32::MAX);
        assert_eq!(READER_GUARD & READERS, READER_GUARD);
    }

    #[test]
    fn shared_then_exclusive() {
        let lock = RawSpinRwLock::<Adaptive>::new();
        lock.lock_shared();
        assert!(lock.try_lock_shared());
        assert!(!lock.try_lock_exclusive());
        // SAFETY: two shared holds were taken above; this gives back the first.
        unsafe { lock.unlock_shared() };
        // SAFETY: and this the second.
        unsafe { lock.unlock_shared() };
        assert!(lock.try_lock_exclusive());
        assert!(!lock.try_lock_shared());
        // SAFETY: exclusive hold taken above.
        unsafe { lock.downgrade() };
        assert!(lock.try_lock_shared());
        // SAFETY: two shared holds: the downgraded one and the `try_lock_shared` above.
        unsafe { lock.unlock_shared() };
        // SAFETY: see above.
        unsafe { lock.unlock_shared() };
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
    }
}
