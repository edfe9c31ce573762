//! `Mutex`: a barging fast path with a count-bounded hand-off.
//!
//! Fairness policy. Any thread may take a free lock at once, even while others wait (barging:
//! the releasing thread usually still has the lock's cache line, so this is where throughput
//! comes from). A thread that finds the lock held first barges for as long as the lock's
//! [`Relax::barge`] waits awake (by default: one look at the lock, a 3 µs pause that leaves the
//! lock's cache line to its owner, a second look, one yield, a third look), taking the lock
//! whenever it sees it free. If that fails it registers in the state word, and from
//! then on the cost is bounded by a count: every release counts one bypass, the acquisition
//! in progress when it registered included. The release that brings the count to `K`
//! (`HANDOFF_AFTER`, 8 by default) does not free the lock: it hands ownership to a waiter that
//! registered before it, so a thread that releases and re-takes the lock in a loop (Ruby
//! 1.9.3's GVL) cannot keep the others out. A registered waiter alone with such a thread
//! therefore owns the lock after at most `K` of the other's acquisitions. With many waiters
//! each hand-off serves one of them (a running one if any runs, else the oldest sleeper), and
//! every hand-off wakes the oldest sleeper so that sleepers take turns. `unlock_fair` hands
//! off at once. A registered waiter waits with [`Relax::relax_queued`] (by default 2 µs of
//! spinning and no yield: a waiter handed the lock while it has yielded the CPU leaves the
//! lock idle) and then parks in the kernel, unless it is the only awake waiter and releases
//! are still being counted towards its hand-off: then it stays awake for another round, so
//! the owner pays no wake-up and the lock does not sit idle while the waiter comes back. A
//! waiter that registered while a hand-off to another waiter was pending does not count that
//! waiter as awake against itself either: it stays awake behind the hand-off, yielding once
//! per round, for up to 32 rounds, because the waiter handed to may still be coming back from
//! a wake-up; parking there made two threads wake each other in turn, with the lock idle
//! through every wake-up.
//!
//! Why barge before registering: registered waiters make every unlock take the slow path and
//! every `K`-th unlock a hand-off, and with more threads than cores the waiter handed to is
//! often not running, so the lock stands still until the scheduler runs it. Registering at
//! the first miss measured 0.2-0.7x `parking_lot::Mutex` at 4-16 threads on 2 cores; barging
//! first measured on par (lab 0001). The price: the bound starts at registration, so a
//! thread descheduled during its barging phase (its yield included) can be bypassed for as
//! long as it is off the CPU.
//!
//! Why hand-offs stay cheap: a hand-off to a waiter that is awake is one CAS that sets
//! `HANDOFF`, no system call; an unlock wakes a sleeper only when no registered waiter is
//! awake, so a contended unlock usually costs one CAS where a futex lock pays a wake call. The
//! fast paths are one CAS each; everything else is in `#[cold]` functions.

use core::marker::PhantomData;

use crate::primitive::park::{park, unpark_one};
use crate::primitive::{
    AtomicU64, Ordering, ParkResult, ParkToken, UnparkResult, UnparkToken, yield_now,
};
use crate::relax::{Adaptive, Relax, Waiter};

/// A thread owns the lock (also while a hand-off to a waiter is pending).
const LOCKED: u64 = 1;
/// The last owner handed the lock to an awake waiter; the first eligible waiter to clear this
/// bit owns the lock (`LOCKED` stays set throughout).
const HANDOFF: u64 = 1 << 1;
/// One release counted against the waiters (bits 2..=11).
const BYPASS_ONE: u64 = 1 << 2;
/// Releases made while waiters were registered, since the last hand-off.
const BYPASS: u64 = ((1 << 10) - 1) << 2;
/// One registered waiter (bits 12..=29).
const WAITER: u64 = 1 << 12;
/// Threads in the slow path of `lock`: spinning, parked, or woken and not yet owners.
const WAITERS: u64 = ((1 << 18) - 1) << 12;
/// One parked waiter (bits 30..=47).
const PARKED_ONE: u64 = 1 << 30;
/// Waiters asleep in the parking-lot queue; changed only with the queue locked.
const PARKED: u64 = ((1 << 18) - 1) << 30;
/// One step of the hand-off epoch (bits 48..=63).
const EPOCH_ONE: u64 = 1 << 48;
/// Counts `HANDOFF`s modulo 2^16, so a waiter that registered while a hand-off was pending
/// can tell that hand-off (not its own to take) from a later one.
const EPOCH: u64 = ((1 << 16) - 1) << 48;

/// How many rounds of its policy a registered waiter stays awake behind a pending
/// hand-off to another waiter before it parks (see `RawMutex::wait`): with `Adaptive`, about
/// 2 µs of spinning and a yield each, longer than the 10-70 µs that a waiter woken from a
/// park took to run again on the 2-vCPU guest of lab 0001. Under loom one round, so the
/// model reaches the park behind a hand-off too.
const BEHIND_ROUNDS: u32 = if cfg!(loom) { 1 } else { 32 };

/// The unpark token of a thread woken to compete again.
const TOKEN_NORMAL: UnparkToken = UnparkToken(0);
/// The unpark token of a thread woken as the owner of the lock.
const TOKEN_HANDOFF: UnparkToken = UnparkToken(1);

/// The raw mutex; use it through [`Mutex`](crate::Mutex).
///
/// `HANDOFF_AFTER` is `K`, the most releases a registered waiter sees before the lock is
/// handed to a waiter (1..=[`MAX_HANDOFF_AFTER`](Self::MAX_HANDOFF_AFTER); 1 hands off at
/// every contended unlock). `R` chooses how a waiter waits ([`Adaptive`] by default).
///
/// # State word
///
/// | bits    | name      | meaning                                                          |
/// |---------|-----------|------------------------------------------------------------------|
/// | 0       | `LOCKED`  | a thread owns the lock, or a hand-off to a waiter is pending     |
/// | 1       | `HANDOFF` | a hand-off to an awake waiter is pending                         |
/// | 2..=11  | `BYPASS`  | releases made while waiters were registered, since the last hand-off |
/// | 12..=29 | `WAITERS` | threads in the slow path of `lock`, awake or parked             |
/// | 30..=47 | `PARKED`  | waiters asleep in the parking lot (changed with its queue locked) |
/// | 48..=63 | `EPOCH`   | number of `HANDOFF`s issued, modulo 2^16                         |
///
/// Awake waiters are `WAITERS - PARKED`. `BYPASS` and `EPOCH` are zero whenever `WAITERS` is,
/// so an uncontended lock moves between `0` and `LOCKED` and both fast paths are one CAS.
///
/// | state                          | `lock`                          | `unlock`                          |
/// |--------------------------------|---------------------------------|-----------------------------------|
/// | `0`                            | CAS to `LOCKED`                 | (not held)                        |
/// | `LOCKED`                       | registers (`WAITERS += 1`), waits | CAS to `0`                      |
/// | free, `WAITERS > 0`            | takes it (barging)              | (not held)                        |
/// | `LOCKED`, `WAITERS > 0`, `BYPASS + 1 < K` | registers, waits     | frees it, `BYPASS += 1`; wakes one sleeper if no waiter is awake |
/// | `LOCKED`, `WAITERS > 0`, `BYPASS + 1 >= K` | registers, waits    | hands off: sets `HANDOFF` if a waiter is awake, else wakes the oldest sleeper as owner |
/// | `LOCKED \| HANDOFF`            | registers, waits; only a waiter registered before the hand-off may take it | (not held) |
pub struct RawMutex<const HANDOFF_AFTER: u32 = 8, R: Relax = Adaptive> {
    state: AtomicU64,
    relax: PhantomData<fn() -> R>,
}

// SAFETY: the lock holds nothing but an atomic word; `PhantomData<fn() -> R>` is Send and
// Sync whatever R is.
unsafe impl<const K: u32, R: Relax> Sync for RawMutex<K, R> {}

impl<const K: u32, R: Relax> Default for RawMutex<K, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const K: u32, R: Relax> core::fmt::Debug for RawMutex<K, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = self.state.load(Ordering::Relaxed);
        f.debug_struct("RawMutex")
            .field("locked", &(s & LOCKED != 0))
            .field("handoff", &(s & HANDOFF != 0))
            .field("bypass", &bypass(s))
            .field("waiters", &waiters(s))
            .field("parked", &parked(s))
            .finish()
    }
}

fn bypass(s: u64) -> u64 {
    (s & BYPASS) / BYPASS_ONE
}

fn waiters(s: u64) -> u64 {
    (s & WAITERS) / WAITER
}

fn parked(s: u64) -> u64 {
    (s & PARKED) / PARKED_ONE
}

/// Whether a waiter may take the lock in state `s`: it is free, or a hand-off is pending that
/// was issued after the waiter registered (`barred` is the epoch of a hand-off that was
/// already pending when it registered).
fn can_take(s: u64, barred: Option<u64>) -> bool {
    s & LOCKED == 0 || (s & HANDOFF != 0 && barred != Some(s & EPOCH))
}

/// The epoch of the hand-off a waiter is still barred from in state `s`, given the one it was
/// barred from: `None` once that hand-off was taken (no hand-off pending, or one of another
/// epoch), and `None` too when the pending one has the same epoch but no other waiter is
/// awake. A hand-off is issued only while some waiter is awake, every waiter awake then
/// registered before it, and such a waiter takes it rather than park, so while it is pending
/// one of them is awake. With none awake, it is a later hand-off whose 16-bit epoch came round
/// again (2^16 hand-offs while this waiter was off the CPU), issued after this waiter
/// registered: its own to take. Kept barred, the waiter would park and leave it pending for
/// good, with every later waiter barred from it too.
fn still_barred(s: u64, barred: Option<u64>) -> Option<u64> {
    let epoch = barred?;
    let taken = s & HANDOFF == 0 || s & EPOCH != epoch;
    let came_round = waiters(s) - parked(s) == 1;
    (!taken && !came_round).then_some(epoch)
}

/// The state after a registered waiter takes the lock from `s` (free or handed off).
fn taken_by_waiter(s: u64) -> u64 {
    let n = ((s | LOCKED) & !HANDOFF) - WAITER;
    // The last waiter leaves: nobody is being bypassed any more, nobody is barred.
    if n & WAITERS == 0 { n & !(BYPASS | EPOCH) } else { n }
}

/// The state after the owner issues a hand-off to an awake waiter: `HANDOFF` set, the count
/// restarted, the epoch advanced.
fn handed_off(s: u64) -> u64 {
    let epoch = (s & EPOCH).wrapping_add(EPOCH_ONE) & EPOCH;
    (s & !(BYPASS | EPOCH)) | HANDOFF | epoch
}

/// The state after the owner frees the lock, counting one more bypass (`WAITERS > 0`).
fn released(s: u64) -> u64 {
    let count = bypass(s) + 1;
    (s & !(LOCKED | BYPASS)) | (count * BYPASS_ONE)
}

impl<const K: u32, R: Relax> RawMutex<K, R> {
    /// The largest `HANDOFF_AFTER` the state word can count to.
    pub const MAX_HANDOFF_AFTER: u32 = (BYPASS / BYPASS_ONE) as u32;

    const VALID_K: () = assert!(
        K >= 1 && K <= Self::MAX_HANDOFF_AFTER,
        "RawMutex: HANDOFF_AFTER must be in 1..=1023"
    );

    /// A new, unlocked mutex.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        let () = Self::VALID_K;
        Self { state: AtomicU64::new(0), relax: PhantomData }
    }

    /// A new, unlocked mutex (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        let () = Self::VALID_K;
        Self { state: AtomicU64::new(0), relax: PhantomData }
    }

    fn key(&self) -> usize {
        &self.state as *const AtomicU64 as usize
    }

    /// Takes the lock, waiting as long as needed.
    #[inline]
    pub fn lock(&self) {
        // Acquire pairs with the Release of the previous owner's unlock.
        if self.state.compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_slow();
        }
    }

    /// Takes the lock if it is free (barging past any waiters, as `lock` does).
    #[inline]
    pub fn try_lock(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & LOCKED != 0 {
                return false;
            }
            // Acquire pairs with the Release of the previous owner's unlock.
            match self.state.compare_exchange_weak(
                s,
                s | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Releases the lock, handing it to a waiter once the oldest waiter has seen `K`
    /// releases.
    ///
    /// # Safety
    ///
    /// The calling context must hold the lock.
    #[inline]
    pub unsafe fn unlock(&self) {
        // Release pairs with the Acquire of the next owner's lock. The CAS fails whenever any
        // waiter is registered; the slow path then counts this release.
        if self.state.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_err() {
            self.unlock_slow(false);
        }
    }

    /// Releases the lock and hands it straight to a waiter if there is one.
    ///
    /// # Safety
    ///
    /// The calling context must hold the lock.
    #[inline]
    pub unsafe fn unlock_fair(&self) {
        // Release: as in `unlock`.
        if self.state.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_err() {
            self.unlock_slow(true);
        }
    }

    /// Whether any thread holds the lock (a momentary snapshot; a pending hand-off counts).
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }

    /// Whether some thread waits for the lock in the slow path (a momentary snapshot, for
    /// tests and diagnostics).
    pub fn has_waiters(&self) -> bool {
        self.state.load(Ordering::Relaxed) & WAITERS != 0
    }

    /// How many threads are registered as waiters, awake or parked (a momentary snapshot;
    /// threads still in their barging phase are not counted).
    pub fn registered_waiters(&self) -> u32 {
        waiters(self.state.load(Ordering::Relaxed)) as u32
    }

    #[cold]
    fn lock_slow(&self) {
        // First the barging phase (see the module documentation): while the policy's
        // `barge` keeps us awake (by default a look, a 3 µs pause, a look, a yield), take the
        // lock whenever it is free. Only then register, and from then on the bound holds.
        let mut relax = Waiter::<R>::new();
        for _ in 0..crate::relax::BARGE_TURNS {
            if self.try_barge() {
                return;
            }
            if !relax.barge() {
                break;
            }
        }
        // Register with one read-modify-write that cannot fail: every release from now on
        // counts against the bound, and a thread looping on the lock cannot delay the
        // registration by changing the word under a CAS. Relaxed: registering publishes no
        // data; unlockers read the count with their own read-modify-writes of this word.
        let s = self.state.fetch_add(WAITER, Ordering::Relaxed);
        if s & WAITERS == WAITERS {
            self.state.fetch_sub(WAITER, Ordering::Relaxed);
            panic!("senju Mutex: too many threads wait on one lock");
        }
        // A hand-off pending now was meant for waiters that came before us.
        let barred = (s & HANDOFF != 0).then_some(s & EPOCH);
        self.wait(barred);
    }

    /// One attempt to take the lock if it is free, past any registered waiters.
    fn try_barge(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        // Acquire pairs with the Release of the previous owner's unlock.
        s & LOCKED == 0
            && self
                .state
                .compare_exchange(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// The registered waiter's loop: take the lock when free or handed to us, relax, park.
    fn wait(&self, mut barred: Option<u64>) {
        let mut relax = Waiter::<R>::new();
        // The count and epoch bits when we last chose to stay awake (none yet).
        let mut last_progress = u64::MAX;
        // Whether the policy waited awake this round (a policy that never does, `Park`, is
        // not kept awake by the rule below).
        let mut relaxed = false;
        // Rounds spent awake behind the hand-off we are barred from (see below).
        let mut behind_rounds = 0;
        loop {
            let s = self.state.load(Ordering::Relaxed);
            // Once the hand-off that was pending when we registered has been taken, every
            // later one was issued after we registered.
            barred = still_barred(s, barred);
            if can_take(s, barred) {
                // Acquire pairs with the Release of the unlock that freed or handed off.
                if self
                    .state
                    .compare_exchange_weak(
                        s,
                        taken_by_waiter(s),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            if relax.relax_queued() {
                relaxed = true;
                continue;
            }
            // Releases are being counted towards our hand-off and no other waiter is awake to
            // take it: keep waiting awake for another round. Parking now would cost the owner
            // a wake-up and leave the lock idle while we come back (half the throughput of
            // two threads with 1.5 µs critical sections). Awake waiters beyond one park.
            //
            // A hand-off we are barred from (`barred`, still pending) goes to a waiter that
            // counts as awake but may still be coming back from a wake-up: it does not count
            // against us, and its pending hand-off is progress about to happen (once taken,
            // releases count towards ours). Parking behind it made two threads alternate
            // between sleeping and waking each other, each wake leaving the lock idle for
            // 10-70 µs (lab 0001, 2026-12-02). Such a round yields first: the waiter it waits
            // for may be queued on this CPU. At most `BEHIND_ROUNDS` of them: `barred` only
            // ever names the hand-off pending at registration, so they come before any other.
            let progress = s & (BYPASS | EPOCH);
            let behind = barred.is_some();
            let awake_others = waiters(s) - parked(s) - 1 - u64::from(behind);
            let stay =
                if behind { behind_rounds < BEHIND_ROUNDS } else { progress != last_progress };
            if relaxed && awake_others == 0 && stay {
                if behind {
                    behind_rounds += 1;
                    yield_now();
                } else {
                    last_progress = progress;
                }
                relax.restart();
                relaxed = false;
                continue;
            }
            let validate = || {
                let mut s = self.state.load(Ordering::Relaxed);
                loop {
                    // With every other waiter asleep, a pending hand-off is ours (see
                    // `still_barred`): checked here, under the queue lock that every parking
                    // waiter takes, so the last of several barred waiters does not park.
                    if can_take(s, still_barred(s, barred)) {
                        return false;
                    }
                    // Relaxed: PARKED is read by unlockers' read-modify-writes of this word,
                    // and the wake itself is ordered by the queue lock.
                    match self.state.compare_exchange_weak(
                        s,
                        s + PARKED_ONE,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return true,
                        Err(now) => s = now,
                    }
                }
            };
            match park(self.key(), validate, ParkToken(0)) {
                ParkResult::Unparked(TOKEN_HANDOFF) => {
                    // The unlocker made us the owner in its callback. Acquire pairs with that
                    // callback's Release read-modify-write (parking_lot_core's own handshake
                    // orders it too; this load makes the pairing explicit).
                    self.state.load(Ordering::Acquire);
                    return;
                }
                // We slept, so the hand-off we were barred from was taken before our wake.
                ParkResult::Unparked(_) => barred = None,
                ParkResult::Invalid | ParkResult::TimedOut => {}
            }
            relax.restart();
            relaxed = false;
        }
    }

    #[cold]
    fn unlock_slow(&self, fair: bool) {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert!(s & LOCKED != 0 && s & HANDOFF == 0, "unlock of a mutex not held");
            let waiting = waiters(s);
            let new = if waiting == 0 {
                s & !LOCKED
            } else {
                let hand_off = fair || bypass(s) + 1 >= u64::from(K);
                if waiting == parked(s) {
                    // Every waiter sleeps: one must be woken whatever we do.
                    self.unlock_waking(hand_off);
                    return;
                }
                if hand_off { handed_off(s) } else { released(s) }
            };
            // Release pairs with the Acquire of the next owner (a barger, or the waiter that
            // clears HANDOFF).
            match self.state.compare_exchange_weak(s, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    if new & HANDOFF != 0 && parked(new) > 0 {
                        // Let the oldest sleeper compete again, so that sleepers take turns
                        // with the waiters that spin (one wake per hand-off, not per unlock).
                        self.wake_one();
                    }
                    return;
                }
                Err(now) => s = now,
            }
        }
    }

    /// Unlocks when every registered waiter sleeps: wakes the oldest sleeper, as owner if
    /// `hand_off`, else to compete for the lock this call frees.
    #[cold]
    fn unlock_waking(&self, hand_off: bool) {
        unpark_one(self.key(), |result: UnparkResult| {
            // With the queue locked PARKED is exact; WAITERS can only grow while we own the
            // lock, BYPASS cannot change.
            let woke = result.unparked_threads != 0;
            let mut s = self.state.load(Ordering::Relaxed);
            loop {
                let new = match (woke, hand_off) {
                    // The woken thread owns the lock from here: it leaves WAITERS and PARKED.
                    (true, true) => {
                        let n = (s & !BYPASS) - WAITER - PARKED_ONE;
                        if n & WAITERS == 0 { n & !EPOCH } else { n }
                    }
                    (true, false) => released(s) - PARKED_ONE,
                    // The queue emptied before we got here (a rotation wake took the last
                    // sleeper), so every waiter is awake: behave as the CAS path would.
                    (false, true) => handed_off(s),
                    (false, false) => released(s),
                };
                // Release pairs with the Acquire of the next owner: the woken thread's load
                // after TOKEN_HANDOFF, a barger's CAS, or the waiter clearing HANDOFF.
                match self.state.compare_exchange_weak(s, new, Ordering::Release, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            }
            if woke && hand_off { TOKEN_HANDOFF } else { TOKEN_NORMAL }
        });
    }

    /// Wakes the oldest sleeper to compete for the lock (it stays a registered waiter).
    #[cold]
    fn wake_one(&self) {
        unpark_one(self.key(), |result: UnparkResult| {
            if result.unparked_threads != 0 {
                // Relaxed: ordered with the sleeper's validate by the queue lock.
                self.state.fetch_sub(PARKED_ONE, Ordering::Relaxed);
            }
            TOKEN_NORMAL
        });
    }
}

#[cfg(not(loom))]
// SAFETY: at most one thread owns the lock: ownership passes only by a successful CAS that
// sets LOCKED on a free word, by a CAS that clears HANDOFF (which only the owner sets, and only
// one waiter can clear), or by TOKEN_HANDOFF (given to one woken thread while LOCKED stays
// set). Every acquisition is an Acquire that reads the Release of the previous owner's unlock.
// The guard carries no state, so unlocking from another thread is fine.
unsafe impl<const K: u32, R: Relax> lock_api::RawMutex for RawMutex<K, R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type Guard = lock_api::GuardSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        Self::lock(self);
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        Self::try_lock(self).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // SAFETY: lock_api hands us the guard of the lock held by the caller.
        unsafe { Self::unlock(self) }
    }

    fn is_locked(&self) -> bool {
        Self::is_locked(self)
    }
}

#[cfg(not(loom))]
// SAFETY: `unlock_fair` releases the lock the caller holds, passing ownership to exactly one
// waiter or freeing the word, as `unlock` does.
unsafe impl<const K: u32, R: Relax> lock_api::RawMutexFair for RawMutex<K, R> {
    #[inline]
    unsafe fn unlock_fair(&self, _guard: Self::Guard) {
        // SAFETY: lock_api hands us the guard of the lock held by the caller.
        unsafe { Self::unlock_fair(self) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Pretends one awake waiter registered (as `lock_slow` would) and returns its barred
    /// epoch.
    fn fake_waiter<const K: u32>(lock: &RawMutex<K>) -> Option<u64> {
        let s = lock.state.fetch_add(WAITER, Ordering::Relaxed);
        (s & HANDOFF != 0).then_some(s & EPOCH)
    }

    /// One attempt of the fake waiter to take the lock, as `wait` makes it.
    fn waiter_takes<const K: u32>(lock: &RawMutex<K>, barred: Option<u64>) -> bool {
        let s = lock.state.load(Ordering::Relaxed);
        can_take(s, barred)
            && lock
                .state
                .compare_exchange(s, taken_by_waiter(s), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    #[test]
    fn fields_do_not_overlap() {
        let fields = [LOCKED, HANDOFF, BYPASS, WAITERS, PARKED, EPOCH];
        let mut all = 0u64;
        for f in fields {
            assert_eq!(all & f, 0);
            all |= f;
        }
        assert_eq!(all, u64::MAX);
        assert_eq!(RawMutex::<8>::MAX_HANDOFF_AFTER, 1023);
    }

    #[test]
    fn uncontended_is_zero_and_locked() {
        let lock = RawMutex::<8>::new();
        assert!(lock.try_lock());
        assert!(!lock.try_lock());
        assert!(lock.is_locked());
        assert_eq!(lock.state.load(Ordering::Relaxed), LOCKED);
        // SAFETY: taken above.
        unsafe { lock.unlock() };
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
        lock.lock();
        // SAFETY: taken above.
        unsafe { lock.unlock_fair() };
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
    }

    fn bypass_bound_is_k<const K: u32>() {
        let lock = RawMutex::<K>::new();
        lock.lock();
        // A waiter registers while the lock is held: this acquisition counts as the first.
        let barred = fake_waiter(&lock);
        assert_eq!(barred, None);
        for i in 1..K {
            // SAFETY: held.
            unsafe { lock.unlock() };
            let s = lock.state.load(Ordering::Relaxed);
            assert_eq!(s & (LOCKED | HANDOFF), 0, "release {i} of {K} must free the lock");
            assert_eq!(bypass(s), u64::from(i));
            // The releasing thread barges back in.
            lock.lock();
        }
        // SAFETY: held.
        unsafe { lock.unlock() };
        let s = lock.state.load(Ordering::Relaxed);
        assert_eq!(s & (LOCKED | HANDOFF), LOCKED | HANDOFF, "release {K} must hand off");
        assert_eq!(bypass(s), 0);
        assert_eq!(s & EPOCH, EPOCH_ONE);
        // The releasing thread cannot take it back; the waiter can.
        assert!(!lock.try_lock());
        assert!(waiter_takes(&lock, barred));
        assert_eq!(lock.state.load(Ordering::Relaxed), LOCKED, "last waiter resets the word");
        // SAFETY: held (by the fake waiter).
        unsafe { lock.unlock() };
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn bypass_bound_default() {
        bypass_bound_is_k::<8>();
    }

    #[test]
    fn bypass_bound_one_and_three() {
        bypass_bound_is_k::<1>();
        bypass_bound_is_k::<3>();
    }

    #[test]
    fn newcomer_cannot_take_a_pending_hand_off() {
        let lock = RawMutex::<8>::new();
        lock.lock();
        let first = fake_waiter(&lock);
        // SAFETY: held.
        unsafe { lock.unlock_fair() };
        let s = lock.state.load(Ordering::Relaxed);
        assert_eq!(s & (LOCKED | HANDOFF), LOCKED | HANDOFF);
        // A thread arriving now registers barred from this hand-off.
        let second = fake_waiter(&lock);
        assert_eq!(second, Some(s & EPOCH));
        assert!(!waiter_takes(&lock, second));
        assert!(waiter_takes(&lock, first));
        // The first waiter owns it; the second is still registered.
        let s = lock.state.load(Ordering::Relaxed);
        assert_eq!(s & (LOCKED | HANDOFF), LOCKED);
        assert_eq!(waiters(s), 1);
        // A later hand-off is the second waiter's to take (the epoch moved on).
        // SAFETY: held.
        unsafe { lock.unlock_fair() };
        assert!(waiter_takes(&lock, second));
        assert_eq!(lock.state.load(Ordering::Relaxed), LOCKED);
        // SAFETY: held.
        unsafe { lock.unlock() };
    }

    #[test]
    fn barging_release_counts_and_unlock_fair_resets() {
        let lock = RawMutex::<8>::new();
        lock.lock();
        let w = fake_waiter(&lock);
        // SAFETY: held.
        unsafe { lock.unlock() };
        assert_eq!(bypass(lock.state.load(Ordering::Relaxed)), 1);
        assert!(lock.try_lock(), "a free lock can be barged into while a waiter waits");
        // SAFETY: held.
        unsafe { lock.unlock_fair() };
        let s = lock.state.load(Ordering::Relaxed);
        assert_eq!(s & (LOCKED | HANDOFF | BYPASS), LOCKED | HANDOFF);
        assert!(waiter_takes(&lock, w));
        // SAFETY: held.
        unsafe { lock.unlock() };
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
    }

    /// A waiter barred from a pending hand-off (it registered while that one was pending)
    /// stays off the CPU while 2^16 hand-offs go by, and the last of them, issued with it as
    /// the only waiter awake, has the same epoch. It is that waiter's to take: before
    /// `still_barred`, it parked instead and the lock stayed handed to nobody for good.
    #[test]
    fn a_hand_off_whose_epoch_came_round_again_is_taken() {
        let lock = RawMutex::<8>::new();
        lock.lock();
        let first = fake_waiter(&lock);
        // SAFETY: held.
        unsafe { lock.unlock_fair() };
        let barred_at = lock.state.load(Ordering::Relaxed) & EPOCH;
        let late = fake_waiter(&lock);
        assert_eq!(late, Some(barred_at));
        assert!(waiter_takes(&lock, first));
        // 2^16 - 1 hand-offs, each to a waiter that registers while the lock is held.
        for _ in 1..1 << 16 {
            let helper = fake_waiter(&lock);
            // SAFETY: held (by the fake waiter that took it last).
            unsafe { lock.unlock_fair() };
            assert!(waiter_takes(&lock, helper));
        }
        // One more, with the barred waiter the only one left: the epoch has come round.
        // SAFETY: held.
        unsafe { lock.unlock_fair() };
        let s = lock.state.load(Ordering::Relaxed);
        assert_eq!(s & (LOCKED | HANDOFF | EPOCH), LOCKED | HANDOFF | barred_at);
        assert_eq!((waiters(s), parked(s)), (1, 0));
        assert!(!can_take(s, late), "the epoch alone cannot tell this hand-off from the old one");
        // The waiter's own loop takes it, on another thread; this one watches the word
        // (counting states, no clock): parking there would leave the hand-off pending. Not a
        // scoped thread, so that a failure here is reported rather than waited on.
        let lock: &'static RawMutex<8> = Box::leak(Box::new(lock));
        let waiter = std::thread::spawn(move || lock.wait(late));
        while !waiter.is_finished() {
            let s = lock.state.load(Ordering::Relaxed);
            assert_eq!(parked(s), 0, "the waiter parked with its hand-off pending: {s:#x}");
            std::thread::yield_now();
        }
        waiter.join().unwrap();
        assert_eq!(lock.state.load(Ordering::Relaxed), LOCKED, "the waiter owns the lock");
        // SAFETY: held (by the waiter).
        unsafe { lock.unlock() };
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
        // SAFETY: the box leaked above; its only other user, the waiter thread, has been
        // joined. (Left leaked on a failure above: Miri then reports the leak too.)
        drop(unsafe { Box::from_raw(std::ptr::from_ref(lock).cast_mut()) });
    }
}
