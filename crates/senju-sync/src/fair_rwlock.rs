//! `FairRwLock`: a phase-fair reader-writer lock that parks, with upgradable reads.
//!
//! Fairness policy. Reads and writes alternate in phases (after Brandenburg & Anderson's PF-T).
//! Writers and upgradable readers first take the writers' turn, which is a senju
//! [`RawMutex`] and has its policy: a thread takes a free turn at once, barges
//! while [`Relax::barge`] keeps it awake (by default a 3 µs pause between looks, then one yield),
//! then registers, and once registered it sees at most `K` = 8 other turn holders before the
//! turn is handed to a registered waiter. With the turn, a writer raises a "writer present"
//! mark that every reader arriving from then on respects, and waits only for the readers that
//! arrived before the mark to leave. A reader that finds the mark raised barges the same way,
//! entering whenever it sees no writer present; then it registers by counting itself in the
//! entry counter. When the write phase ends, every registered reader enters at once, even if
//! the next writer has already raised its mark. So a registered reader waits for at most one
//! write phase, a registered writer for a bounded number of turn holders plus at most one read
//! phase each, and nobody starves. An upgradable reader holds the turn but reads alongside
//! plain readers; upgrading needs no other writer to step aside, because none can be between.
//! Waiting goes through the lock's [`Relax`] policy (by default a spin of about two
//! microseconds, a few yields, then a park in the kernel).
//!
//! Why bounded rather than strict order (changed after lab 0001's runs of 2026-11-22): the
//! first version served writers strictly in ticket order and counted a reader in at its
//! arrival. A ticket is served, and a counted reader admitted, whether its thread runs or not;
//! with more threads than cores it often does not (preempted, yielding or asleep), so the lock
//! stood still until the scheduler ran it. With 16 threads on 2 cores that strict lock kept a
//! tenth to a quarter of its 2-thread throughput (90% reads, 100 ns critical sections: 6.15 to
//! 0.65 Mops/s; 50/50, 2 µs: 0.32 to 0.08), where this one keeps most of it (7.95 to 5.78;
//! 0.44 to 0.34). The price is the `Mutex`'s: the bounds start when a thread registers, so a
//! thread descheduled during its barging phase can be passed for as long as it is off the CPU,
//! and writers are not served in arrival order.
//!
//! The reader fast path is one load and one `fetch_add` (plus one `fetch_add` on exit); a
//! writer takes the turn with one CAS and raises its mark with one `fetch_xor`. Everything
//! else is `#[cold]`.

use core::marker::PhantomData;

use crate::mutex::RawMutex;
use crate::primitive::park::{park, unpark_filter};
use crate::primitive::{AtomicU32, FilterOp, Ordering, ParkToken, UnparkToken};
use crate::relax::{Adaptive, Relax, Waiter};

/// `rin`: the phase id; toggled by every writer when its write phase starts, so two
/// consecutive write phases never look alike to a reader that slept through one.
const PHID: u32 = 0x1;
/// `rin`: a writer is present (draining readers or holding the lock); new readers wait.
const PRES: u32 = 0x2;
/// `rin`: the writer bits a waiting reader watches.
const WBITS: u32 = PRES | PHID;
/// `rin`: at least one reader sleeps on `rin` (set in `validate`, cleared when they are woken).
const READERS_PARKED: u32 = 0x4;
/// `rin`/`rout`: one reader in the entry and exit counters (bits 8..=31, modulo 2^24).
const RINC: u32 = 0x100;
/// `rin`/`rout`: the counter field.
const COUNT: u32 = !0xFF;
/// `rout`: the writer that drains readers sleeps on `rout`.
const WRITER_PARKED: u32 = 0x1;
/// `K` of the writers' turn: a registered writer sees at most this many other turn holders
/// before the turn is handed to a registered waiter (the [`RawMutex`] default).
pub const FAIR_RWLOCK_HANDOFF_AFTER: u32 = 8;
/// An entering reader whose new entry count has these bits clear checks that the lock is not
/// close to overflowing its counters (once every 4096 entries).
const HEADROOM_CHECK: u32 = 0xFFF * RINC;

/// The largest number of readers that may hold or wait for a [`RawFairRwLock`] at once (2^23;
/// the counters run modulo 2^24, and half of that is kept as a margin).
pub const MAX_FAIR_READERS: u32 = 1 << 23;

/// The raw phase-fair reader-writer lock; use it through [`FairRwLock`](crate::FairRwLock).
///
/// `R` chooses how a waiter passes the time before it parks ([`Adaptive`] by default).
///
/// # State words
///
/// | word   | bits   | name             | meaning                                               |
/// |--------|--------|------------------|-------------------------------------------------------|
/// | `rin`  | 0      | `PHID`           | phase id, toggled when a write phase starts           |
/// | `rin`  | 1      | `PRES`           | a writer is present: draining readers or holding      |
/// | `rin`  | 2      | `READERS_PARKED` | readers sleep on `rin`                                |
/// | `rin`  | 8..=31 | count            | readers that ever entered or queued (mod 2^24)        |
/// | `rout` | 0      | `WRITER_PARKED`  | the draining writer sleeps on `rout`                  |
/// | `rout` | 8..=31 | count            | readers that ever left (mod 2^24)                     |
/// | `turn` | 0..=63 | (a [`RawMutex`]) | the writers' turn; its state word is in `RawMutex`'s docs |
///
/// `count(rin) - count(rout)` is the number of readers inside or registered behind a writer.
/// The holder of the turn is the only thread that sets `PRES`.
///
/// | state                                   | a new reader                  | a new writer / upgradable reader |
/// |-----------------------------------------|-------------------------------|----------------------------------|
/// | free: turn free, no `PRES`              | enters (`rin += RINC`)        | takes the turn at once           |
/// | read phase, turn free                   | enters                        | takes the turn, raises `PRES`, waits for `count(rout) = count(rin)` as it was |
/// | upgradable reader holds the turn        | enters                        | waits for the turn (`RawMutex` policy) |
/// | `PRES`: writer draining or holding      | barges (enters if it sees `PRES` clear), then registers (`rin += RINC`) and waits until the writer bits change | waits for the turn |
///
/// A reader that registered behind writer bits `w` enters as soon as `rin & WBITS != w`: either the
/// write phase ended (`PRES` cleared) or the next writer already started its phase (`PHID`
/// toggled) — that writer counted the reader among those it waits for, so letting it in is
/// what phase fairness asks. Every "parked" bit is set by a read-modify-write inside `park`'s
/// `validate` (queue locked) on the very word whose change the sleeper awaits, and cleared in
/// an unpark callback (queue locked), so no wake-up falls between a check and a sleep.
pub struct RawFairRwLock<R: Relax = Adaptive> {
    rin: AtomicU32,
    rout: AtomicU32,
    turn: RawMutex<FAIR_RWLOCK_HANDOFF_AFTER, R>,
    relax: PhantomData<fn() -> R>,
}

impl<R: Relax> Default for RawFairRwLock<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Relax> core::fmt::Debug for RawFairRwLock<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let rin = self.rin.load(Ordering::Relaxed);
        f.debug_struct("RawFairRwLock")
            .field("readers", &self.registered_readers())
            .field("writer_present", &(rin & PRES != 0))
            .field("queued_writers", &self.queued_writers())
            .finish()
    }
}

/// The parking key of a word: its address (distinct words, distinct queues).
fn key(word: &AtomicU32) -> usize {
    word as *const AtomicU32 as usize
}

impl<R: Relax> RawFairRwLock<R> {
    /// A new, unlocked lock.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            rin: AtomicU32::new(0),
            rout: AtomicU32::new(0),
            turn: RawMutex::new(),
            relax: PhantomData,
        }
    }

    /// A new, unlocked lock (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            rin: AtomicU32::new(0),
            rout: AtomicU32::new(0),
            turn: RawMutex::new(),
            relax: PhantomData,
        }
    }

    // ----- readers -----

    /// Takes a shared lock; once registered, waits for at most one write phase.
    ///
    /// # Panics
    ///
    /// If about [`MAX_FAIR_READERS`] readers hold or wait for the lock (leaked guards).
    #[inline]
    pub fn lock_shared(&self) {
        // A writer is present: barge before registering (see the module documentation).
        if self.rin.load(Ordering::Relaxed) & PRES != 0 && self.barge_shared() {
            return;
        }
        // Acquire pairs with the Release RMW that ended the last write phase
        // (`end_write_phase`); RMWs on `rin` continue its release sequence.
        let s = self.rin.fetch_add(RINC, Ordering::Acquire);
        if s & PRES != 0 || s.wrapping_add(RINC) & HEADROOM_CHECK == 0 {
            self.lock_shared_slow(s);
        }
    }

    /// The reader's barging phase: while the policy's `barge` keeps us awake, enter whenever
    /// no writer is present. Returns whether we entered; if not, the caller registers.
    #[cold]
    fn barge_shared(&self) -> bool {
        let mut relax = Waiter::<R>::new();
        for _ in 0..crate::relax::BARGE_TURNS {
            if !relax.barge() {
                break;
            }
            if self.try_lock_shared() {
                return true;
            }
        }
        false
    }

    #[cold]
    fn lock_shared_slow(&self, seen: u32) {
        self.check_headroom(seen.wrapping_add(RINC));
        let w = seen & WBITS;
        if w & PRES != 0 {
            // We are counted in `rin`, so the writer after this one (if any) waits for us:
            // the bits can change only to "no writer" or to that writer's toggled phase id.
            // Acquire (in `wait_until`) pairs with the Release of `end_write_phase`.
            self.wait_until(&self.rin, READERS_PARKED, ParkToken(0), |s| s & WBITS != w);
        }
    }

    /// Takes a shared lock if no writer is present; never waits.
    ///
    /// # Panics
    ///
    /// As [`lock_shared`](Self::lock_shared).
    #[inline]
    pub fn try_lock_shared(&self) -> bool {
        let mut s = self.rin.load(Ordering::Relaxed);
        loop {
            if s & PRES != 0 {
                return false;
            }
            // Acquire: as in `lock_shared`.
            match self.rin.compare_exchange_weak(
                s,
                s.wrapping_add(RINC),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        if s.wrapping_add(RINC) & HEADROOM_CHECK == 0 {
            self.check_headroom(s.wrapping_add(RINC));
        }
        true
    }

    /// Releases a shared lock (also a queued reader's registration).
    ///
    /// # Safety
    ///
    /// The calling context must hold a shared lock on `self`.
    #[inline]
    pub unsafe fn unlock_shared(&self) {
        // Release pairs with the Acquire load of the writer waiting for `rout` to reach its
        // target (`wait_until` in `begin_write_phase`/`upgrade`): it sees all this reader did.
        let s = self.rout.fetch_add(RINC, Ordering::Release);
        if s & WRITER_PARKED != 0 {
            self.wake_drained_writer();
        }
    }

    /// Undoes the entry counted by `entered` and panics if the counters are near overflow.
    #[cold]
    fn check_headroom(&self, entered: u32) {
        if entered & HEADROOM_CHECK != 0 {
            return;
        }
        // Acquire pairs with the Release exits, so every entry of a counted exit happens
        // before the `rin` load: the difference never goes below the true count.
        let out = self.rout.load(Ordering::Acquire);
        let inn = self.rin.load(Ordering::Relaxed);
        let readers = (inn & COUNT).wrapping_sub(out & COUNT) / RINC;
        if readers > MAX_FAIR_READERS {
            // SAFETY: our own entry was counted by the caller; giving it back is an exit.
            unsafe { self.unlock_shared() };
            panic!(
                "FairRwLock: more than {MAX_FAIR_READERS} readers hold or wait for the lock \
                 (are read guards being leaked?)"
            );
        }
    }

    // ----- the writers' turn -----

    /// Takes the writers' turn, with the [`RawMutex`] policy: barging, then registered with a
    /// bounded hand-off.
    #[inline]
    fn take_turn(&self) {
        self.turn.lock();
    }

    /// Takes the turn if it is free (barging past registered waiters, as `take_turn` does).
    #[inline]
    fn try_take_turn(&self) -> bool {
        self.turn.try_lock()
    }

    /// Passes the turn on: frees it, or hands it to a registered waiter (at once if `fair`,
    /// else once the `RawMutex` bound is reached).
    #[inline]
    fn release_turn(&self, fair: bool) {
        // Every caller holds the turn (a writer, an upgradable reader, a downgrading writer,
        // or a failed `try_lock_exclusive`).
        if fair {
            // SAFETY: the turn is held (above).
            unsafe { self.turn.unlock_fair() };
        } else {
            // SAFETY: the turn is held (above).
            unsafe { self.turn.unlock() };
        }
    }

    // ----- writers -----

    /// Takes the exclusive lock: waits for the writers' turn (see the module documentation),
    /// then for the readers that registered before this writer's mark.
    #[inline]
    pub fn lock_exclusive(&self) {
        self.take_turn();
        self.begin_write_phase();
    }

    /// Raises `PRES` (toggling `PHID`) and waits for the readers counted so far to leave.
    /// The caller holds the turn.
    #[inline]
    fn begin_write_phase(&self) {
        // Relaxed: the returned count is exact (RMW); what this writer must see of the readers
        // comes through `rout`, of the previous turn holder through the turn's Acquire.
        let r = self.rin.fetch_xor(WBITS, Ordering::Relaxed);
        let target = r & COUNT;
        // Acquire pairs with the Release exits of the readers counted in `target`.
        if self.rout.load(Ordering::Acquire) & COUNT != target {
            self.wait_drained(target);
        }
    }

    #[cold]
    fn wait_drained(&self, target: u32) {
        // Acquire (in `wait_until`) pairs with the readers' Release in `unlock_shared`.
        self.wait_until(&self.rout, WRITER_PARKED, ParkToken(target as usize), |s| {
            s & COUNT == target
        });
    }

    /// Takes the exclusive lock if the writers' turn is free (as `take_turn`, it may pass
    /// registered waiters) and no reader holds the lock; never waits.
    #[inline]
    pub fn try_lock_exclusive(&self) -> bool {
        if !self.try_take_turn() {
            return false;
        }
        // We hold the turn, so `PRES` is clear and nobody else may set it.
        // Acquire pairs with the readers' Release exits.
        let out = self.rout.load(Ordering::Acquire);
        let s = self.rin.load(Ordering::Relaxed);
        // Every exit we read has its entry before our CAS in `rin`'s order, and a reader
        // entering after the CAS sees `PRES`; so equal counts at the CAS mean no reader.
        if s & COUNT == out & COUNT
            && self.rin.compare_exchange(s, s ^ WBITS, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            return true;
        }
        self.release_turn(false);
        false
    }

    /// Releases the exclusive lock.
    ///
    /// # Safety
    ///
    /// The calling context must hold the exclusive lock on `self`.
    #[inline]
    pub unsafe fn unlock_exclusive(&self) {
        self.end_write_phase(0);
        self.release_turn(false);
    }

    /// Releases the exclusive lock and hands the writers' turn straight to a registered
    /// waiter if there is one (readers registered behind this phase enter as always).
    ///
    /// # Safety
    ///
    /// The calling context must hold the exclusive lock on `self`.
    #[inline]
    pub unsafe fn unlock_exclusive_fair(&self) {
        self.end_write_phase(0);
        self.release_turn(true);
    }

    /// Clears `PRES` (keeping `PHID`) and adds `readers` entries in one step, then wakes the
    /// readers that queued behind this phase. The caller holds the turn and `PRES`.
    #[inline]
    fn end_write_phase(&self, readers: u32) {
        // PRES is set, so subtracting it clears it without a borrow. Release pairs with the
        // Acquire of every reader that enters after this (`lock_shared`, `wait_until`).
        let s = self.rin.fetch_add(readers.wrapping_sub(PRES), Ordering::Release);
        if s & READERS_PARKED != 0 {
            self.wake_readers();
        }
    }

    /// Turns the exclusive lock into a shared lock; no writer can enter in between.
    ///
    /// # Safety
    ///
    /// The calling context must hold the exclusive lock on `self`.
    #[inline]
    pub unsafe fn downgrade(&self) {
        self.end_write_phase(RINC);
        self.release_turn(false);
    }

    // ----- upgradable readers -----

    /// Takes an upgradable read lock: the writers' turn (the same policy as the writers),
    /// held as a reader. Plain readers still enter alongside; other writers and upgradable readers wait.
    #[inline]
    pub fn lock_upgradable(&self) {
        self.take_turn();
        self.enter_with_turn();
    }

    /// Counts the turn holder in as a reader; `PRES` is clear while we hold the turn.
    #[inline]
    fn enter_with_turn(&self) {
        // Relaxed: only turn holders write, and each publishes its writes with the Release of
        // its turn unlock, which our `take_turn`/`try_take_turn` acquired.
        let s = self.rin.fetch_add(RINC, Ordering::Relaxed);
        debug_assert_eq!(s & PRES, 0, "PRES set while this thread holds the writer turn");
        if s.wrapping_add(RINC) & HEADROOM_CHECK == 0 {
            // `check_headroom` gives the entry back before it panics; the turn goes back
            // too, or upgradable readers and writers would wait for it forever.
            struct TurnBack<'a, R: Relax>(&'a RawFairRwLock<R>);
            impl<R: Relax> Drop for TurnBack<'_, R> {
                fn drop(&mut self) {
                    self.0.release_turn(false);
                }
            }
            let back = TurnBack(self);
            self.check_headroom(s.wrapping_add(RINC));
            core::mem::forget(back);
        }
    }

    /// Takes an upgradable read lock if the writers' turn is free at this moment (as
    /// `try_lock_exclusive`, it may pass writers and upgradable readers registered for the
    /// turn); never waits.
    #[inline]
    pub fn try_lock_upgradable(&self) -> bool {
        if !self.try_take_turn() {
            return false;
        }
        self.enter_with_turn();
        true
    }

    /// Releases an upgradable read lock.
    ///
    /// # Safety
    ///
    /// The calling context must hold an upgradable read lock on `self`.
    #[inline]
    pub unsafe fn unlock_upgradable(&self) {
        // SAFETY: an upgradable hold includes a shared hold.
        unsafe { self.unlock_shared() };
        self.release_turn(false);
    }

    /// Releases an upgradable read lock and hands the writers' turn straight to a registered
    /// waiter if there is one.
    ///
    /// # Safety
    ///
    /// The calling context must hold an upgradable read lock on `self`.
    #[inline]
    pub unsafe fn unlock_upgradable_fair(&self) {
        // SAFETY: an upgradable hold includes a shared hold.
        unsafe { self.unlock_shared() };
        self.release_turn(true);
    }

    /// Upgrades an upgradable read lock to the exclusive lock, waiting for the other readers
    /// to leave (new readers queue behind it at once).
    ///
    /// # Safety
    ///
    /// The calling context must hold an upgradable read lock on `self`.
    #[inline]
    pub unsafe fn upgrade(&self) {
        // Relaxed: as in `begin_write_phase`.
        let r = self.rin.fetch_xor(WBITS, Ordering::Relaxed);
        let target = r & COUNT;
        // Count our own read hold out. No writer can be draining (we hold the turn), so
        // nobody sleeps on `rout`. Acquire pairs with the other readers' Release exits.
        let out = self.rout.fetch_add(RINC, Ordering::Acquire).wrapping_add(RINC);
        if out & COUNT != target {
            self.wait_drained(target);
        }
    }

    /// Upgrades if no other reader holds the lock; never waits, and on failure leaves the
    /// upgradable read lock as it was.
    ///
    /// # Safety
    ///
    /// The calling context must hold an upgradable read lock on `self`.
    #[inline]
    pub unsafe fn try_upgrade(&self) -> bool {
        // Acquire pairs with the other readers' Release exits.
        let out = self.rout.load(Ordering::Acquire);
        let s = self.rin.load(Ordering::Relaxed);
        // Only our own entry is unmatched: raise PRES and give our entry back in one CAS
        // (the argument of `try_lock_exclusive`).
        s & COUNT == out.wrapping_add(RINC) & COUNT
            && self
                .rin
                .compare_exchange(
                    s,
                    (s ^ WBITS).wrapping_sub(RINC),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Turns an upgradable read lock into a shared lock, passing the turn on.
    ///
    /// # Safety
    ///
    /// The calling context must hold an upgradable read lock on `self`.
    #[inline]
    pub unsafe fn downgrade_upgradable(&self) {
        self.release_turn(false);
    }

    /// Turns the exclusive lock into an upgradable read lock, keeping the turn.
    ///
    /// # Safety
    ///
    /// The calling context must hold the exclusive lock on `self`.
    #[inline]
    pub unsafe fn downgrade_to_upgradable(&self) {
        self.end_write_phase(RINC);
    }

    // ----- diagnostics -----

    /// Whether any thread holds the lock or is queued as a reader behind a writer
    /// (a momentary snapshot).
    pub fn is_locked(&self) -> bool {
        self.registered_readers() != 0 || self.rin.load(Ordering::Relaxed) & PRES != 0
    }

    /// Whether a writer is present: it holds the lock, or it holds the writers' turn and waits
    /// for earlier readers to leave, which already excludes new readers (a momentary snapshot).
    pub fn is_locked_exclusive(&self) -> bool {
        self.rin.load(Ordering::Relaxed) & PRES != 0
    }

    /// Whether a writer has announced its write phase (a momentary snapshot, for tests and
    /// diagnostics). A reader whose `lock_shared` starts after this returned `true` does not
    /// enter before that writer has released the lock. It is also `true` while the writer
    /// holds the lock; writers still queued for their turn do not count.
    pub fn is_writer_waiting(&self) -> bool {
        self.rin.load(Ordering::Relaxed) & PRES != 0
    }

    /// How many writers and upgradable readers hold the writers' turn or are registered for
    /// it; threads still in their barging phase are not counted (a momentary snapshot, for
    /// tests and diagnostics).
    pub fn queued_writers(&self) -> u32 {
        u32::from(self.turn.is_locked()) + self.turn.registered_waiters()
    }

    /// How many readers hold the lock or are queued behind a writer (a momentary snapshot,
    /// for tests and diagnostics; an upgradable reader counts as a reader).
    pub fn registered_readers(&self) -> u32 {
        // `rout` first, and Acquire: every departure counted there had its arrival counted
        // in `rin` before, and the later load of `rin` sees those arrivals (on a weakly
        // ordered CPU, two Relaxed loads could read `rin` first and count departures
        // without their arrivals, a wrapped count).
        let out = self.rout.load(Ordering::Acquire);
        let inn = self.rin.load(Ordering::Relaxed);
        (inn & COUNT).wrapping_sub(out & COUNT) / RINC
    }

    // ----- waiting and waking -----

    /// Waits until `done(word)`: asks the relax policy after each failed check, then parks on
    /// the word's key, setting `parked_bit` in `validate`. The check is an Acquire load; each
    /// caller names the Release it pairs with.
    #[cold]
    fn wait_until(
        &self,
        word: &AtomicU32,
        parked_bit: u32,
        token: ParkToken,
        done: impl Fn(u32) -> bool,
    ) {
        let mut relax = Waiter::<R>::new();
        loop {
            if done(word.load(Ordering::Acquire)) {
                return;
            }
            if relax.relax() {
                continue;
            }
            let validate = || {
                // An RMW reads the latest value, so this check and the unblocking RMW are
                // ordered on one word: either that RMW sees our bit and wakes us (after we are
                // queued, as it takes the queue lock), or we see its effect here. Relaxed: the
                // wake itself is ordered by the queue lock, and we re-check with Acquire.
                let s = word.fetch_or(parked_bit, Ordering::Relaxed);
                if !done(s) {
                    return true;
                }
                if s & parked_bit == 0 {
                    // We set the bit for nothing; nobody else sets it while we hold the
                    // queue lock, so taking it back cannot hide a sleeper.
                    word.fetch_and(!parked_bit, Ordering::Relaxed);
                }
                false
            };
            park(key(word), validate, token);
            relax.restart();
        }
    }

    /// Wakes every reader sleeping on `rin`; they re-check the writer bits.
    #[cold]
    fn wake_readers(&self) {
        unpark_filter(
            key(&self.rin),
            |_| FilterOp::Unpark,
            |_| {
                // Queue locked: every sleeper is being woken, and a later sleeper sets the bit
                // again in its `validate`.
                self.rin.fetch_and(!READERS_PARKED, Ordering::Relaxed);
                UnparkToken(0)
            },
        );
    }

    /// Wakes the writer sleeping on `rout` if the readers it waits for have all left.
    #[cold]
    fn wake_drained_writer(&self) {
        unpark_filter(
            key(&self.rout),
            // The parked token is the writer's target exit count; the load under the queue
            // lock sees at least our own exit.
            |t| {
                if t.0 == (self.rout.load(Ordering::Relaxed) & COUNT) as usize {
                    FilterOp::Unpark
                } else {
                    FilterOp::Skip
                }
            },
            |result| {
                if !result.have_more_threads {
                    self.rout.fetch_and(!WRITER_PARKED, Ordering::Relaxed);
                }
                UnparkToken(0)
            },
        );
    }
}

#[cfg(not(loom))]
// SAFETY: a reader enters only while no writer is present or in a phase that counts it before
// the writer's mark, and a writer enters only once every reader counted before its mark has
// left, after every earlier turn holder (see the state tables). Every entry is an Acquire
// that reads (a release sequence of) the Release of the unlock it follows. Guards carry no
// state, so unlocking from another thread is fine.
unsafe impl<R: Relax> lock_api::RawRwLock for RawFairRwLock<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type SharedGuard = lock_api::GuardSend;
    type ExclusiveGuard = lock_api::GuardSend;

    #[inline]
    fn lock_shared(&self) -> Self::SharedGuard {
        RawFairRwLock::lock_shared(self);
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        RawFairRwLock::try_lock_shared(self).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_shared(&self, _guard: Self::SharedGuard) {
        // SAFETY: lock_api hands us the guard of a shared lock held by the caller.
        unsafe { RawFairRwLock::unlock_shared(self) }
    }

    #[inline]
    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        RawFairRwLock::lock_exclusive(self);
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        RawFairRwLock::try_lock_exclusive(self).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, _guard: Self::ExclusiveGuard) {
        // SAFETY: lock_api hands us the guard of the exclusive lock held by the caller.
        unsafe { RawFairRwLock::unlock_exclusive(self) }
    }

    fn is_locked(&self) -> bool {
        RawFairRwLock::is_locked(self)
    }

    fn is_locked_exclusive(&self) -> bool {
        RawFairRwLock::is_locked_exclusive(self)
    }
}

#[cfg(not(loom))]
// SAFETY: the fair exclusive unlock ends the write phase as the plain one does and hands the
// turn to a registered waiter; a shared unlock has nothing to hand on.
unsafe impl<R: Relax> lock_api::RawRwLockFair for RawFairRwLock<R> {
    #[inline]
    unsafe fn unlock_shared_fair(&self, guard: Self::SharedGuard) {
        // SAFETY: the caller holds the shared lock whose guard this is.
        unsafe { lock_api::RawRwLock::unlock_shared(self, guard) }
    }

    #[inline]
    unsafe fn unlock_exclusive_fair(&self, guard: Self::ExclusiveGuard) {
        let _ = guard;
        // SAFETY: the caller holds the exclusive lock whose guard this is.
        unsafe { RawFairRwLock::unlock_exclusive_fair(self) }
    }
}

#[cfg(not(loom))]
// SAFETY: `downgrade` clears `PRES` and adds one reader in one atomic step while the turn is
// still held, so no writer can enter in between.
unsafe impl<R: Relax> lock_api::RawRwLockDowngrade for RawFairRwLock<R> {
    #[inline]
    unsafe fn downgrade(&self, _guard: Self::ExclusiveGuard) -> Self::SharedGuard {
        // SAFETY: lock_api hands us the guard of the exclusive lock held by the caller.
        unsafe { RawFairRwLock::downgrade(self) };
        lock_api::GuardSend::new()
    }
}

#[cfg(not(loom))]
// SAFETY: an upgradable reader holds the writers' turn, so at most one exists and no writer
// can come between it and its upgrade; it is counted as a reader, so writers wait for it.
unsafe impl<R: Relax> lock_api::RawRwLockUpgrade for RawFairRwLock<R> {
    type UpgradableGuard = lock_api::GuardSend;

    #[inline]
    fn lock_upgradable(&self) -> Self::UpgradableGuard {
        RawFairRwLock::lock_upgradable(self);
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock_upgradable(&self) -> Option<Self::UpgradableGuard> {
        RawFairRwLock::try_lock_upgradable(self).then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock_upgradable(&self, _guard: Self::UpgradableGuard) {
        // SAFETY: lock_api hands us the guard of an upgradable lock held by the caller.
        unsafe { RawFairRwLock::unlock_upgradable(self) }
    }

    #[inline]
    unsafe fn upgrade(&self, _guard: Self::UpgradableGuard) -> Self::ExclusiveGuard {
        // SAFETY: lock_api hands us the guard of an upgradable lock held by the caller.
        unsafe { RawFairRwLock::upgrade(self) };
        lock_api::GuardSend::new()
    }

    #[inline]
    unsafe fn try_upgrade(
        &self,
        guard: Self::UpgradableGuard,
    ) -> Result<Self::ExclusiveGuard, Self::UpgradableGuard> {
        // SAFETY: lock_api hands us the guard of an upgradable lock held by the caller.
        if unsafe { RawFairRwLock::try_upgrade(self) } {
            Ok(lock_api::GuardSend::new())
        } else {
            Err(guard)
        }
    }
}

#[cfg(not(loom))]
// SAFETY: as `unlock_upgradable`, but the turn goes straight to a registered waiter.
unsafe impl<R: Relax> lock_api::RawRwLockUpgradeFair for RawFairRwLock<R> {
    #[inline]
    unsafe fn unlock_upgradable_fair(&self, guard: Self::UpgradableGuard) {
        let _ = guard;
        // SAFETY: the caller holds the upgradable lock whose guard this is.
        unsafe { RawFairRwLock::unlock_upgradable_fair(self) }
    }
}

#[cfg(not(loom))]
// SAFETY: `downgrade_upgradable` keeps the read count and passes the turn on;
// `downgrade_to_upgradable` clears `PRES` and adds one reader in one step, keeping the turn.
unsafe impl<R: Relax> lock_api::RawRwLockUpgradeDowngrade for RawFairRwLock<R> {
    #[inline]
    unsafe fn downgrade_upgradable(&self, _guard: Self::UpgradableGuard) -> Self::SharedGuard {
        // SAFETY: lock_api hands us the guard of an upgradable lock held by the caller.
        unsafe { RawFairRwLock::downgrade_upgradable(self) };
        lock_api::GuardSend::new()
    }

    #[inline]
    unsafe fn downgrade_to_upgradable(
        &self,
        _guard: Self::ExclusiveGuard,
    ) -> Self::UpgradableGuard {
        // SAFETY: lock_api hands us the guard of the exclusive lock held by the caller.
        unsafe { RawFairRwLock::downgrade_to_upgradable(self) };
        lock_api::GuardSend::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    type Lock = RawFairRwLock<Adaptive>;

    /// Free: equal counters, no writer, turn free with nobody registered, no parked bit.
    fn assert_free(lock: &Lock) {
        let (rin, rout) = (lock.rin.load(Ordering::Relaxed), lock.rout.load(Ordering::Relaxed));
        assert_eq!(rin & COUNT, rout & COUNT, "reader counters differ");
        assert_eq!(rin & (PRES | READERS_PARKED), 0);
        assert_eq!(rout & WRITER_PARKED, 0);
        assert!(!lock.turn.is_locked() && !lock.turn.has_waiters(), "turn held or waited for");
        assert!(!lock.is_locked());
    }

    #[test]
    fn bit_fields_do_not_overlap() {
        assert_eq!(WBITS & READERS_PARKED, 0);
        assert_eq!((WBITS | READERS_PARKED) & COUNT, 0);
        assert_eq!(WRITER_PARKED & COUNT, 0);
        assert_eq!(HEADROOM_CHECK & !COUNT, 0);
        assert_eq!(RINC, COUNT & COUNT.wrapping_neg());
    }

    #[test]
    fn readers_share_and_exclude_writers() {
        let lock = Lock::new();
        lock.lock_shared();
        assert!(lock.try_lock_shared());
        assert_eq!(lock.registered_readers(), 2);
        assert!(!lock.try_lock_exclusive());
        // A failed try gave its turn back.
        assert_eq!(lock.queued_writers(), 0);
        assert!(lock.try_lock_upgradable());
        assert!(!lock.try_lock_upgradable());
        assert!(!lock.try_lock_exclusive());
        // SAFETY: upgradable hold taken above.
        unsafe { lock.unlock_upgradable() };
        // SAFETY: two shared holds taken above.
        unsafe { lock.unlock_shared() };
        // SAFETY: as above.
        unsafe { lock.unlock_shared() };
        assert_free(&lock);
    }

    #[test]
    fn writer_excludes_everyone_and_toggles_phase() {
        let lock = Lock::new();
        let phid = lock.rin.load(Ordering::Relaxed) & PHID;
        lock.lock_exclusive();
        assert!(lock.is_locked_exclusive() && lock.is_writer_waiting());
        assert_eq!(lock.rin.load(Ordering::Relaxed) & PHID, phid ^ PHID);
        assert!(!lock.try_lock_shared());
        assert!(!lock.try_lock_exclusive());
        assert!(!lock.try_lock_upgradable());
        assert_eq!(lock.queued_writers(), 1);
        // SAFETY: exclusive hold taken above.
        unsafe { lock.unlock_exclusive() };
        assert_eq!(lock.rin.load(Ordering::Relaxed) & PHID, phid ^ PHID, "PHID kept");
        assert_free(&lock);
        assert!(lock.try_lock_exclusive());
        assert_eq!(lock.rin.load(Ordering::Relaxed) & PHID, phid);
        // SAFETY: exclusive hold taken above.
        unsafe { lock.unlock_exclusive() };
        assert_free(&lock);
    }

    #[test]
    fn downgrades_and_upgrades() {
        let lock = Lock::new();
        lock.lock_exclusive();
        // SAFETY: exclusive hold taken above.
        unsafe { lock.downgrade_to_upgradable() };
        assert!(!lock.is_locked_exclusive());
        assert_eq!(lock.queued_writers(), 1, "the upgradable reader keeps the turn");
        assert!(lock.try_lock_shared());
        // SAFETY: upgradable hold from the downgrade.
        assert!(!unsafe { lock.try_upgrade() }, "another reader is inside");
        // SAFETY: shared hold from `try_lock_shared`.
        unsafe { lock.unlock_shared() };
        // SAFETY: upgradable hold from the downgrade.
        assert!(unsafe { lock.try_upgrade() });
        assert!(lock.is_locked_exclusive());
        assert_eq!(lock.registered_readers(), 0);
        // SAFETY: exclusive hold from the upgrade.
        unsafe { lock.downgrade() };
        assert_eq!(lock.registered_readers(), 1);
        assert_eq!(lock.queued_writers(), 0);
        assert!(lock.try_lock_upgradable());
        // SAFETY: shared hold from the downgrade.
        unsafe { lock.unlock_shared() };
        // SAFETY: upgradable hold from `try_lock_upgradable`.
        unsafe { lock.upgrade() };
        // SAFETY: exclusive hold from the upgrade.
        unsafe { lock.unlock_exclusive() };
        assert_free(&lock);
        lock.lock_upgradable();
        // SAFETY: upgradable hold taken above.
        unsafe { lock.downgrade_upgradable() };
        assert_eq!(lock.queued_writers(), 0);
        // SAFETY: shared hold from the downgrade.
        unsafe { lock.unlock_shared() };
        assert_free(&lock);
    }

    #[test]
    fn counters_wrap_around() {
        let lock = Lock::new();
        // Start every counter just below the wrap point.
        lock.rin.store((COUNT - RINC) | PHID, Ordering::Relaxed);
        lock.rout.store(COUNT - RINC, Ordering::Relaxed);
        for _ in 0..3 {
            lock.lock_shared();
            lock.lock_upgradable();
            // SAFETY: shared hold taken above.
            unsafe { lock.unlock_shared() };
            // SAFETY: upgradable hold taken above.
            unsafe { lock.upgrade() };
            // SAFETY: exclusive hold from the upgrade.
            unsafe { lock.unlock_exclusive() };
            lock.lock_exclusive();
            // SAFETY: exclusive hold taken above.
            unsafe { lock.unlock_exclusive() };
        }
        assert_free(&lock);
    }

    #[test]
    #[cfg_attr(miri, ignore = "loops past the reader limit: too slow under Miri")]
    #[should_panic(expected = "readers hold or wait")]
    fn leaked_readers_panic_before_the_counters_wrap() {
        let lock = Lock::new();
        for _ in 0..=MAX_FAIR_READERS + HEADROOM_CHECK / RINC + 1 {
            lock.lock_shared();
        }
    }
}
