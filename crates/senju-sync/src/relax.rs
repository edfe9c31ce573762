//! How a waiter passes the time: spin, yield, park, or a runtime's own hook.
//!
//! A lock that cannot be taken at once asks its [`Relax`] policy after every failed attempt
//! whether to try again ([`Relax::relax`] relaxed and returned `true`) or to stop burning CPU
//! and park in the kernel (`false`). The policy is a type parameter of the raw lock, so it costs
//! nothing on the fast path and a user can plug in their own.
//!
//! Why spinning must be bounded: on a machine with fewer cores than threads the lock holder may
//! be descheduled, and a waiter that spins or calls `sched_yield` in a loop only delays it
//! (`sched_yield` is a hint that CFS and EEVDF are free to ignore). So the default,
//! [`Adaptive`], spins for about two microseconds (measured in time, not in PAUSE instructions,
//! whose cost differs tenfold between CPUs), yields a few times, and then parks.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::{Duration, Instant};

use crate::primitive::{spin_loop, yield_now};

/// The most turns a lock gives [`Relax::barge`], whatever the policy says: a policy that
/// always returns `true` (such as [`Spin`]) would otherwise never queue, and a queued waiter
/// is what the locks' bounds protect.
pub(crate) const BARGE_TURNS: u32 = 256;

/// Runs one call into a waiter's policy (a [`Relax`] method or its `Default`). The waiter
/// may already be registered in the lock's state (a waiting writer, a queued thread, a
/// writers' turn taken), and unwinding could not take that back: the lock would stay
/// wedged. So a policy that panics aborts the process, as a panic while unwinding does.
#[inline]
pub(crate) fn or_abort<T>(f: impl FnOnce() -> T) -> T {
    struct Abort;
    impl Drop for Abort {
        fn drop(&mut self) {
            eprintln!("senju-sync: a Relax policy panicked while a thread waited for a lock");
            std::process::abort();
        }
    }
    let armed = Abort;
    let out = f();
    core::mem::forget(armed);
    out
}

/// A waiter's policy value, every call into which (its methods, its `Default`, and its drop,
/// at the end of a wait or when a fresh value replaces it) goes through [`or_abort`]: a
/// policy whose `Drop` panics must not unwind out of a wait either.
pub(crate) struct Waiter<R: Relax>(Option<R>);

impl<R: Relax> Waiter<R> {
    /// A fresh policy value.
    #[inline]
    pub(crate) fn new() -> Waiter<R> {
        Waiter(Some(or_abort(R::default)))
    }

    #[inline]
    fn policy(&mut self) -> &mut R {
        self.0.as_mut().expect("a waiter's policy is only taken by its drop")
    }

    /// [`Relax::relax`].
    #[inline]
    pub(crate) fn relax(&mut self) -> bool {
        let r = self.policy();
        or_abort(|| r.relax())
    }

    /// [`Relax::barge`].
    #[inline]
    pub(crate) fn barge(&mut self) -> bool {
        let r = self.policy();
        or_abort(|| r.barge())
    }

    /// [`Relax::relax_queued`].
    #[inline]
    pub(crate) fn relax_queued(&mut self) -> bool {
        let r = self.policy();
        or_abort(|| r.relax_queued())
    }

    /// Starts over with a fresh policy value (after a park).
    #[inline]
    pub(crate) fn restart(&mut self) {
        let old = self.0.replace(or_abort(R::default));
        or_abort(|| drop(old));
    }
}

impl<R: Relax> Drop for Waiter<R> {
    #[inline]
    fn drop(&mut self) {
        let r = self.0.take();
        or_abort(|| drop(r));
    }
}

/// A waiting strategy, chosen per lock type (`RawSpinRwLock<Spin>`, ...).
///
/// A fresh value (`Default`) is made for each wait; [`relax`](Relax::relax) is called once per
/// failed attempt to take the lock.
///
/// The methods, `default` and the value's `Drop` must not panic: the waiting thread may
/// already be registered in the lock's state (a waiting writer, a queued thread), which
/// unwinding could not undo, so a panic in them aborts the process.
pub trait Relax: Default {
    /// Waits a little and returns `true` to try the lock again, or returns `false` to ask the
    /// lock to park the thread until the state it waits for changes.
    ///
    /// After a park the lock starts over with a fresh policy value.
    fn relax(&mut self) -> bool;

    /// One turn of a thread that has not queued yet: [`Mutex`](crate::Mutex) (and
    /// [`FairRwLock`](crate::FairRwLock), for its writers' turn and for readers that find a
    /// writer present) lets a thread that finds the lock held take it whenever it sees it free
    /// for as long as this returns `true`, and queues it (then waits with
    /// [`relax_queued`](Relax::relax_queued) on a fresh value) once this returns `false`. The
    /// lock caps the turns, so a policy that always returns `true` still queues. By default
    /// the same as `relax`.
    #[inline]
    fn barge(&mut self) -> bool {
        self.relax()
    }

    /// Waits a little as a queued thread that the lock may be handed to at any moment, as
    /// [`Mutex`](crate::Mutex) does; `false` parks the thread. Yielding here is costly: a
    /// thread that is handed the lock while it is off the CPU leaves the lock idle until the
    /// scheduler runs it again. By default the same as `relax`.
    #[inline]
    fn relax_queued(&mut self) -> bool {
        self.relax()
    }
}

/// The default: spin with exponential backoff for about [`Adaptive::SPIN_FOR`], then yield up
/// to [`Adaptive::YIELDS`] times, then park.
#[derive(Debug, Default)]
pub struct Adaptive {
    started: Option<Instant>,
    spins: u32,
    yields: u32,
}

impl Adaptive {
    /// How long a waiter spins before it starts yielding.
    pub const SPIN_FOR: Duration = Duration::from_micros(2);
    /// How many times a waiter yields before it parks.
    pub const YIELDS: u32 = 3;
    /// How long a thread in its barging phase ([`Relax::barge`]) waits between its first two
    /// looks at the lock, without reading the lock's word meanwhile.
    ///
    /// Every look takes the word's cache line from the owner, whose next lock or unlock then
    /// waits for the line to come back: on the 2-vCPU Intel guest of lab 0001 a round trip
    /// between the cores costs 125-132 ns (median), more than a 100 ns critical section. A
    /// barger that looked every few dozen nanoseconds (the exponential backoff of
    /// [`relax`](Relax::relax)) held two contending threads to 0.60x `parking_lot::Mutex`
    /// with 100 ns sections and 2-16 threads to 0.79-1.0x with empty ones; looking again only
    /// after this pause, 2-16 threads ran 1.07-1.33x and 2.3-3.4x (2026-12-02). The price: a
    /// thread that meets the lock by chance waits the whole pause (with 500 ns of work
    /// between 100 ns holds, about 5% slower than the spin).
    pub const BARGE_GAP: Duration = Duration::from_micros(3);
}

impl Adaptive {
    /// Under loom one turn of the model scheduler stands for a whole spin or yield phase, so
    /// the model explores the park path too: a spin the first time, then "stop".
    fn loom_turn(&mut self) -> bool {
        if self.spins == 0 {
            self.spins = 1;
            spin_loop();
            return true;
        }
        false
    }

    /// Spins one turn if the spin phase ([`Adaptive::SPIN_FOR`]) is still running.
    fn spin_turn(&mut self) -> bool {
        let started = *self.started.get_or_insert_with(Instant::now);
        if started.elapsed() >= Self::SPIN_FOR {
            return false;
        }
        // 2, 4, ... 64 PAUSEs per turn: short turns while the holder is likely to leave soon,
        // fewer clock reads later.
        self.spins = (self.spins + 1).min(6);
        for _ in 0..(1u32 << self.spins) {
            spin_loop();
        }
        true
    }

    /// Spins on `PAUSE` for [`Adaptive::BARGE_GAP`], reading the clock, not the lock, and
    /// returns whether this was the first such pause of this wait.
    fn barge_gap(&mut self) -> bool {
        if self.started.is_some() {
            return false;
        }
        let started = Instant::now();
        self.started = Some(started);
        while started.elapsed() < Self::BARGE_GAP {
            for _ in 0..16 {
                spin_loop();
            }
        }
        true
    }

    /// Yields once if fewer than `most` yields were made.
    fn yield_turn(&mut self, most: u32) -> bool {
        if self.yields >= most {
            return false;
        }
        self.yields += 1;
        yield_now();
        true
    }
}

impl Relax for Adaptive {
    /// Spins, then yields up to [`Adaptive::YIELDS`] times.
    #[inline]
    fn relax(&mut self) -> bool {
        if cfg!(loom) {
            return self.loom_turn();
        }
        self.spin_turn() || self.yield_turn(Self::YIELDS)
    }

    /// Pauses [`Adaptive::BARGE_GAP`] away from the lock's line, then yields once: three
    /// looks at the lock in all (before, between, after), then the thread queues. The yield
    /// lets a holder that was preempted on this CPU run before the thread queues.
    #[inline]
    fn barge(&mut self) -> bool {
        if cfg!(loom) {
            return self.loom_turn();
        }
        self.barge_gap() || self.yield_turn(1)
    }

    /// Spins, never yields (see [`Relax::relax_queued`]).
    #[inline]
    fn relax_queued(&mut self) -> bool {
        if cfg!(loom) {
            return self.loom_turn();
        }
        self.spin_turn()
    }
}

/// Spins forever and never parks: the lowest latency when every waiter has a core of its own,
/// the worst choice when threads outnumber cores.
#[derive(Debug, Default)]
pub struct Spin;

impl Relax for Spin {
    #[inline]
    fn relax(&mut self) -> bool {
        spin_loop();
        true
    }
}

/// Calls `sched_yield` forever and never parks (Tkrzw's `SpinSharedMutex` waits this way).
#[derive(Debug, Default)]
pub struct Yield;

impl Relax for Yield {
    #[inline]
    fn relax(&mut self) -> bool {
        yield_now();
        true
    }
}

/// Parks at the first failed attempt: no spinning at all, for waits known to be long.
#[derive(Debug, Default)]
pub struct Park;

impl Relax for Park {
    #[inline]
    fn relax(&mut self) -> bool {
        false
    }
}

/// A process-wide hook that a language runtime installs with [`set_relax_hook`], such as Go's
/// `runtime.Gosched` or a fiber scheduler's yield; it is called with the number of earlier
/// calls in this wait and returns `true` to retry or `false` to park. It must not panic (a
/// panic aborts the process; see [`Relax`]).
pub type RelaxHook = fn(attempt: u32) -> bool;

static HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Installs the hook that [`Hooked`] calls (replacing any earlier one).
pub fn set_relax_hook(hook: RelaxHook) {
    // Release pairs with the Acquire load in `Hooked::relax`: a waiter that sees the pointer
    // sees a valid function.
    HOOK.store(hook as *mut (), Ordering::Release);
}

/// Removes the hook; [`Hooked`] then behaves as [`Adaptive`].
pub fn clear_relax_hook() {
    HOOK.store(core::ptr::null_mut(), Ordering::Release);
}

/// Calls the hook installed with [`set_relax_hook`]; behaves as [`Adaptive`] while none is set.
#[derive(Debug, Default)]
pub struct Hooked {
    attempt: u32,
    fallback: Adaptive,
}

impl Relax for Hooked {
    #[inline]
    fn relax(&mut self) -> bool {
        // Acquire pairs with the Release store in `set_relax_hook`.
        let hook = HOOK.load(Ordering::Acquire);
        if hook.is_null() {
            return self.fallback.relax();
        }
        // SAFETY: the only non-null values ever stored in HOOK are `RelaxHook` function
        // pointers cast to `*mut ()` by `set_relax_hook`, and fn pointers and data pointers
        // have the same size on every platform Rust supports.
        let hook: RelaxHook = unsafe { core::mem::transmute::<*mut (), RelaxHook>(hook) };
        let attempt = self.attempt;
        self.attempt = self.attempt.saturating_add(1);
        hook(attempt)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri's virtual clock runs 5 µs per basic block: the 2 µs spin phase ends \
                  before its first turn"
    )]
    fn adaptive_ends_in_park() {
        let mut relax = Adaptive::default();
        let mut turns = 0u64;
        while relax.relax() {
            turns += 1;
            assert!(turns < 10_000_000, "Adaptive never asked to park");
        }
        assert!(turns > Adaptive::YIELDS as u64);
    }

    #[test]
    fn adaptive_barges_three_looks_then_queues() {
        // The lock looks once before the first call: after the pause, after the yield, and
        // then the thread queues.
        let mut relax = Adaptive::default();
        assert!(relax.barge(), "the pause away from the lock");
        assert!(relax.barge(), "the yield");
        assert!(!relax.barge(), "then queue");
        assert!(!relax.barge(), "and stay queued");
    }

    #[test]
    fn park_parks_at_once() {
        assert!(!Park.relax());
    }

    #[test]
    fn hook_is_called_with_attempt_numbers() {
        fn hook(attempt: u32) -> bool {
            attempt < 3
        }
        set_relax_hook(hook);
        let mut relax = Hooked::default();
        let mut calls = 0;
        while relax.relax() {
            calls += 1;
        }
        clear_relax_hook();
        assert_eq!(calls, 3);
    }
}
