//! The only door to atomics, hints and thread parking.
//!
//! Every lock in this crate imports its atomics, its spin and yield hints and its parking calls
//! from here, never from `core` or `std` directly. Under `--cfg loom` this module switches to
//! loom's types and to a model of the parking lot built on loom's mutex and thread parking, so
//! the loom suite checks the very code that ships (crossbeam-utils and tokio do the same).
//!
//! The parking layer follows `parking_lot_core`'s contract, which the real build uses as is:
//! threads park in a queue keyed by an address; `validate` runs with that queue locked, so a
//! state check in `validate` and the enqueue that follows are atomic with respect to every
//! unpark call on the same key, and callbacks of the unpark calls also run with the queue
//! locked. That one property is what rules out lost wake-ups in every lock here.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

pub(crate) use parking_lot_core::{FilterOp, ParkResult, ParkToken, UnparkResult, UnparkToken};

/// A processor hint for one turn of a busy-wait loop. Under loom it yields to the model's
/// scheduler, which loom requires of every spin loop.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Gives the rest of this time slice to the OS scheduler (a hint only; see `relax.rs`).
#[inline]
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Stores `v` into `slot` and then acts as a `SeqCst` fence: the first half of a
/// store-buffer (Dekker) pattern, whose next load must be `SeqCst`. In the real build this is
/// one `SeqCst` swap (on x86 an `xchg`, about half the cost of `mfence`); by the C++20 rules a
/// `SeqCst` read-modify-write followed by a `SeqCst` load pairs with the other side's `SeqCst`
/// fence. loom treats `SeqCst` accesses as `AcqRel` but models `SeqCst` fences, so under
/// loom it is a store and a fence, which the model checks.
///
/// Unlike a fence, the swap orders only `slot`: any other write of this thread that the other
/// side must see through its fence has to be `SeqCst` itself (the push of a new record in
/// `bias::allocate`). Under loom the fence orders such writes whatever their ordering, so the
/// model cannot catch one that is too weak; Miri can (`tests/revoke_missed_a_new_record.rs`).
#[inline]
pub(crate) fn announce(slot: &AtomicUsize, v: usize) {
    #[cfg(not(loom))]
    slot.swap(v, Ordering::SeqCst);
    #[cfg(loom)]
    {
        slot.store(v, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }
}

/// Sleeps about `us` microseconds (under loom: yields to the model's scheduler).
pub(crate) fn nap(us: u64) {
    #[cfg(not(loom))]
    std::thread::sleep(std::time::Duration::from_micros(us));
    #[cfg(loom)]
    {
        let _ = us;
        loom::thread::yield_now();
    }
}

/// The parking lot: sleep in a queue keyed by an address, wake by key.
pub(crate) mod park {
    use super::{FilterOp, ParkResult, ParkToken, UnparkResult, UnparkToken};

    #[cfg(not(loom))]
    pub(crate) use real::*;

    #[cfg(loom)]
    pub(crate) use model::*;

    #[cfg(not(loom))]
    mod real {
        use super::*;

        /// Parks the calling thread on `key` if `validate` returns true.
        ///
        /// `validate` runs with the key's queue locked and must not panic or park.
        #[inline]
        pub(crate) fn park(
            key: usize,
            validate: impl FnOnce() -> bool,
            token: ParkToken,
        ) -> ParkResult {
            // SAFETY: every key passed here is the address of a lock word owned by the caller
            // (or that address plus a small offset inside the same lock), so no other
            // primitive shares the queue; `validate` only touches atomics and cannot unwind;
            // the `before_sleep` and `timed_out` callbacks do nothing.
            unsafe { parking_lot_core::park(key, validate, || {}, |_, _| {}, token, None) }
        }

        /// Wakes the oldest thread parked on `key`; `callback` runs with the queue locked and
        /// chooses the token handed to the woken thread.
        #[inline]
        pub(crate) fn unpark_one(
            key: usize,
            callback: impl FnOnce(UnparkResult) -> UnparkToken,
        ) -> UnparkResult {
            // SAFETY: the key belongs to the caller's lock (see `park`); the callback only
            // touches atomics and cannot unwind.
            unsafe { parking_lot_core::unpark_one(key, callback) }
        }

        /// Wakes the threads parked on `key` that `filter` selects, in queue order;
        /// `callback` runs with the queue locked before any of them wakes.
        #[inline]
        pub(crate) fn unpark_filter(
            key: usize,
            filter: impl FnMut(ParkToken) -> FilterOp,
            callback: impl FnOnce(UnparkResult) -> UnparkToken,
        ) -> UnparkResult {
            // SAFETY: the key belongs to the caller's lock (see `park`); filter and callback
            // only touch atomics and cannot unwind.
            unsafe { parking_lot_core::unpark_filter(key, filter, callback) }
        }
    }

    /// A model of `parking_lot_core` for loom: one global queue behind a loom mutex (the real
    /// lot has one lock per hash bucket, which is a finer split of the same critical sections),
    /// threads sleeping in `loom::thread::park` until their slot holds a token.
    #[cfg(loom)]
    mod model {
        use super::*;
        use loom::sync::atomic::AtomicUsize;
        use loom::sync::{Arc, Mutex};
        use std::sync::atomic::Ordering;

        struct Parked {
            key: usize,
            token: ParkToken,
            thread: loom::thread::Thread,
            /// 0 while parked; the unpark token plus one once woken.
            slot: Arc<AtomicUsize>,
        }

        loom::lazy_static! {
            static ref LOT: Mutex<Vec<Parked>> = Mutex::new(Vec::new());
        }

        pub(crate) fn park(
            key: usize,
            validate: impl FnOnce() -> bool,
            token: ParkToken,
        ) -> ParkResult {
            let slot = Arc::new(AtomicUsize::new(0));
            {
                let mut lot = LOT.lock().unwrap();
                if !validate() {
                    return ParkResult::Invalid;
                }
                lot.push(Parked {
                    key,
                    token,
                    thread: loom::thread::current(),
                    slot: slot.clone(),
                });
            }
            loop {
                let woken = slot.load(Ordering::Acquire);
                if woken != 0 {
                    return ParkResult::Unparked(UnparkToken(woken - 1));
                }
                loom::thread::park();
            }
        }

        fn wake(parked: Parked, token: UnparkToken) {
            parked.slot.store(token.0 + 1, Ordering::Release);
            parked.thread.unpark();
        }

        pub(crate) fn unpark_one(
            key: usize,
            callback: impl FnOnce(UnparkResult) -> UnparkToken,
        ) -> UnparkResult {
            unpark_filter(
                key,
                {
                    let mut first = true;
                    move |_| {
                        if core::mem::take(&mut first) { FilterOp::Unpark } else { FilterOp::Stop }
                    }
                },
                callback,
            )
        }

        pub(crate) fn unpark_filter(
            key: usize,
            mut filter: impl FnMut(ParkToken) -> FilterOp,
            callback: impl FnOnce(UnparkResult) -> UnparkToken,
        ) -> UnparkResult {
            let mut lot = LOT.lock().unwrap();
            let mut chosen = Vec::new();
            let mut i = 0;
            let mut stopped = false;
            while i < lot.len() {
                if lot[i].key != key {
                    i += 1;
                    continue;
                }
                if stopped {
                    break;
                }
                match filter(lot[i].token) {
                    FilterOp::Unpark => chosen.push(lot.remove(i)),
                    FilterOp::Skip => i += 1,
                    FilterOp::Stop => stopped = true,
                }
            }
            let mut result = UnparkResult::default();
            result.unparked_threads = chosen.len();
            result.have_more_threads = lot.iter().any(|p| p.key == key);
            let token = callback(result);
            for parked in chosen {
                wake(parked, token);
            }
            result
        }
    }
}
