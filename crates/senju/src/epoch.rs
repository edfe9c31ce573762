//! Epoch-based grace periods: when may space that readers could still be looking at (an old
//! index table, a record chunk emptied by `rebuild`) be reused?
//!
//! A reader **pins** before it loads a table word and unpins when it no longer holds a
//! reference into the map (after `get_with`'s closure returns). A pin writes only the
//! reader's own slot: a cache line that belongs to its thread. Each thread leases one of
//! [`SLOTS`] slot numbers (the same in every database) on its first pin and hands it back
//! when it exits, so live threads have slots of their own up to [`SLOTS`] of them; beyond,
//! threads share slots. Threads that share a slot stay correct, but a shared slot's epoch
//! moves on only once none of its threads is pinned, so sharing readers that keep
//! overlapping can hold back reuse for as long as they do. Nothing a reader writes is
//! written by another thread unless it shares the slot.
//!
//! Slot word: bits 16..64 the epoch the slot was pinned at, bits 0..16 how many pins are
//! active on it (nesting, or threads sharing the slot). A slot with count 0 is quiescent.
//! When a pin joins a slot that is already pinned, the slot keeps its older epoch: the epoch
//! stored is never later than that of any active pin, so waiting on it is conservative.
//!
//! A writer that unpublishes space calls [`Epochs::retire`], which advances the global epoch
//! and returns the old value `e`. The space may be reused once [`Epochs::is_safe`]`(e)`:
//! every slot is quiescent or pinned at an epoch after `e`. Argument (all operations on
//! `global`, the slots and the table words are `SeqCst`): a reader whose pin comes before the
//! writer's unpublishing store in the single total order read `global <= e` and is seen by
//! the writer's scan (which comes later) until it unpins; a reader whose pin comes after that
//! store loads the table word after it too and so never sees the old space.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::shard::CacheLine;

/// Slot lines per database.
const SLOTS: usize = 64;
const COUNT_MASK: u64 = 0xffff;

/// The grace-period state of one database.
pub(crate) struct Epochs {
    global: CacheLine<AtomicU64>,
    slots: Box<[CacheLine<AtomicU64>]>,
}

/// An active pin; unpins on drop. May be dropped on another thread (the slot is a counter).
pub(crate) struct Guard<'a> {
    slot: &'a AtomicU64,
}

thread_local! {
    /// This thread's slot number: below [`SLOTS`] if leased (its own), `SLOTS + i` if it
    /// shares slot `i`, `usize::MAX` before its first pin.
    static THREAD_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Hands a leased slot back when the thread exits (registered when it is leased).
    static RETURN_SLOT: ReturnSlot = const { ReturnSlot };
    /// Live [`Reading`] marks of this thread.
    static READING: Cell<u32> = const { Cell::new(0) };
}

/// Marks the calling thread, while it lives, as pinned across the caller's own code: a
/// `get_with` closure running, or an `Iter` between two items. A `rebuild` called then by
/// this thread would wait for its own pin forever; [`Epochs::pinned_here`] lets it refuse
/// instead. Not `Send`, so the thread that marks is the one that unmarks.
pub(crate) struct Reading(PhantomData<*const ()>);

impl Reading {
    pub(crate) fn mark() -> Reading {
        READING.with(|r| r.set(r.get() + 1));
        Reading(PhantomData)
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        READING.with(|r| r.set(r.get() - 1));
    }
}

/// Slot numbers leased to live threads: bit `i` for slot `i`.
static LEASED: AtomicU64 = AtomicU64::new(0);

/// The calling thread's slot number (see [`THREAD_SLOT`]); `% SLOTS` gives the slot.
#[inline]
fn thread_slot() -> usize {
    let v = THREAD_SLOT.try_with(Cell::get).unwrap_or(SLOTS);
    if v != usize::MAX { v } else { lease_slot() }
}

/// Leases the lowest free slot number to the calling thread, or, with every one leased,
/// lets it share one.
#[cold]
fn lease_slot() -> usize {
    // Relaxed throughout: the numbers only spread threads over slots; correctness never
    // depends on a slot having one thread.
    let mut leased = LEASED.load(Ordering::Relaxed);
    let v = loop {
        if leased == u64::MAX {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            break SLOTS + NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
        }
        let i = (!leased).trailing_zeros() as usize;
        let taken = leased | 1 << i;
        match LEASED.compare_exchange_weak(leased, taken, Ordering::Relaxed, Ordering::Relaxed) {
            // Touching the returner registers its destructor; a thread already past it (a
            // pin from another thread-local's destructor) keeps the number for good.
            Ok(_) => break if RETURN_SLOT.try_with(|_| ()).is_ok() { i } else { SLOTS + i },
            Err(now) => leased = now,
        }
    };
    let _ = THREAD_SLOT.try_with(|s| s.set(v));
    v
}

/// Runs at thread exit and hands a leased slot number back. A pin taken later in the
/// thread's exit (another thread-local's destructor) shares the slot from then on.
struct ReturnSlot;

impl Drop for ReturnSlot {
    fn drop(&mut self) {
        let _ = THREAD_SLOT.try_with(|s| {
            let v = s.get();
            if v < SLOTS {
                s.set(SLOTS + v);
                LEASED.fetch_and(!(1 << v), Ordering::Relaxed);
            }
        });
    }
}

impl Epochs {
    pub(crate) fn new() -> Epochs {
        Epochs {
            global: CacheLine(AtomicU64::new(1)),
            slots: (0..SLOTS).map(|_| CacheLine(AtomicU64::new(0))).collect(),
        }
    }

    /// Pins the calling thread until the guard is dropped.
    #[inline]
    pub(crate) fn pin(&self) -> Guard<'_> {
        let slot = &self.slots[thread_slot() % SLOTS].0;
        let mut cur = slot.load(Ordering::Relaxed);
        loop {
            let next = if cur & COUNT_MASK == 0 {
                // SeqCst: see the module documentation (pairs with `retire` and `is_safe`).
                (self.global.load(Ordering::SeqCst) << 16) | 1
            } else if cur & COUNT_MASK == COUNT_MASK {
                std::thread::yield_now();
                cur = slot.load(Ordering::Relaxed);
                continue;
            } else {
                cur + 1
            };
            // SeqCst: the pin must precede, in the total order, the table-word load that
            // follows it (see the module documentation).
            match slot.compare_exchange_weak(cur, next, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return Guard { slot },
                Err(v) => cur = v,
            }
        }
    }

    /// Advances the epoch after the caller unpublished some space; returns the epoch to
    /// wait out with [`Epochs::is_safe`].
    pub(crate) fn retire(&self) -> u64 {
        // SeqCst: ordered after the unpublishing store (module documentation).
        self.global.fetch_add(1, Ordering::SeqCst)
    }

    /// Whether the calling thread holds a [`Reading`] mark while its pin slot here is pinned:
    /// waiting for a grace period would then (almost surely) wait for its own pin. Another
    /// thread that shares the slot and a mark for another database can make this true too,
    /// which only turns a wait into an error.
    pub(crate) fn pinned_here(&self) -> bool {
        READING.with(Cell::get) != 0
            && self.slots[thread_slot() % SLOTS].0.load(Ordering::Relaxed) & COUNT_MASK != 0
    }

    /// Whether no reader can still hold a reference to space retired at epoch `e`.
    pub(crate) fn is_safe(&self, e: u64) -> bool {
        self.slots.iter().all(|s| {
            // SeqCst: pairs with the pin's CAS (module documentation).
            let w = s.load(Ordering::SeqCst);
            w & COUNT_MASK == 0 || w >> 16 > e
        })
    }
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: the reader's loads of the map happen before the reclaimer's scan sees the
        // count drop.
        self.slot.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_readers_hold_back_reuse() {
        let e = Epochs::new();
        let g = e.pin();
        let nested = e.pin();
        let retired = e.retire();
        assert!(!e.is_safe(retired));
        drop(nested);
        assert!(!e.is_safe(retired));
        drop(g);
        assert!(e.is_safe(retired));
        let late = e.pin(); // pinned after the retire: does not hold it back
        assert!(e.is_safe(retired));
        drop(late);
    }

    /// A thread's slot stays its own however many threads come and go beside it: each
    /// hands its number back when it exits (numbers dealt round would give the 64th after it
    /// the same slot).
    #[test]
    fn threads_that_come_and_go_never_share_a_live_threads_slot() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (mine_tx, mine_rx) = std::sync::mpsc::channel();
        let live = std::thread::spawn(move || {
            mine_tx.send(thread_slot()).unwrap();
            rx.recv().unwrap();
        });
        let mine = mine_rx.recv().unwrap();
        assert!(mine < SLOTS);
        for n in 0..4 * SLOTS {
            let v = std::thread::spawn(thread_slot).join().unwrap();
            assert!(v < SLOTS, "thread {n} shares slot {} instead of leasing one", v % SLOTS);
            assert_ne!(v, mine, "thread {n} got the live thread's slot");
        }
        tx.send(()).unwrap();
        live.join().unwrap();
    }

    /// Live threads hold different slots while there are free ones.
    #[test]
    fn live_threads_lease_different_slots() {
        let n = 8;
        let barrier = std::sync::Barrier::new(n);
        let slots: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    s.spawn(|| {
                        let v = thread_slot();
                        barrier.wait(); // all alive at once
                        v
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut leased: Vec<usize> = slots.iter().copied().filter(|&v| v < SLOTS).collect();
        assert_eq!(leased.len(), n, "{slots:?}");
        leased.sort_unstable();
        leased.dedup();
        assert_eq!(leased.len(), n, "two live threads leased one slot: {slots:?}");
    }

    #[test]
    fn only_a_marked_pinned_thread_is_pinned_here() {
        let e = Epochs::new();
        assert!(!e.pinned_here());
        let g = e.pin();
        assert!(!e.pinned_here(), "a pin alone (inside one call) is not the caller's");
        let r = Reading::mark();
        assert!(e.pinned_here());
        drop(g);
        assert!(!e.pinned_here(), "marked but not pinned");
        drop(r);
        let _g = e.pin();
        assert!(!e.pinned_here());
    }
}
