//! Epoch-based grace periods: when may space that readers could still be looking at (an old
//! index table, a record chunk emptied by `rebuild`) be reused?
//!
//! A reader **pins** before it loads a table word and unpins when it no longer holds a
//! reference into the map (after `get_with`'s closure returns). A pin writes only the
//! reader's own slot: a cache line that belongs to its thread. Each thread leases a slot
//! number (the same in every database) on its first pin and hands it back when it exits;
//! numbers are dealt lowest first, so they stay below the number of live threads. A
//! database's slots come in segments of [`SEGMENT`] lines, the first made with the database
//! and each further one when a thread with a number in it first pins there, so up to
//! [`SLOTS`] live threads each have a slot of their own. Beyond that many, threads share
//! the first segment's slots (so that no database makes every segment for them): they stay
//! correct, but a shared slot's epoch moves on only once none of its threads is pinned, so
//! sharing readers that keep overlapping can hold back reuse for as long as they do.
//! Nothing a reader writes is written by another thread unless it shares the slot.
//!
//! Slot word: bits 16..64 the epoch the slot was pinned at, bits 0..16 how many pins are
//! active on it (nesting, or threads sharing the slot). A slot with count 0 is quiescent.
//! When a pin joins a slot that is already pinned, the slot keeps its older epoch: the epoch
//! stored is never later than that of any active pin, so waiting on it is conservative.
//!
//! A writer that unpublishes space calls [`Epochs::retire`], which advances the global epoch
//! and returns the old value `e`. The space may be reused once [`Epochs::is_safe`]`(e)`:
//! every slot is quiescent or pinned at an epoch after `e`. Argument (all operations on
//! `global`, the slots, the segment pointers and the table words are `SeqCst`): a reader
//! whose pin comes before the writer's unpublishing store in the single total order read
//! `global <= e`, and the store that published its slot's segment (its own, or the one its
//! load of the pointer read, by whichever thread) comes before its pin in that order too;
//! the writer's scan, which comes later, loads that pointer and sees the slot until the
//! reader unpins. A reader whose pin comes after that store loads the table
//! word after it too and so never sees the old space.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use crate::shard::CacheLine;

/// Slot lines per segment (8 KiB of 128-byte lines).
const SEGMENT: usize = 64;
/// Segments per database at most: the first is made with the database, the others when
/// first used.
const SEGMENTS: usize = 64;
/// Slots per database at most: live threads beyond this many share slots.
const SLOTS: usize = SEGMENT * SEGMENTS;
const COUNT_MASK: u64 = 0xffff;

type Segment = [CacheLine<AtomicU64>; SEGMENT];

/// The grace-period state of one database.
pub(crate) struct Epochs {
    global: CacheLine<AtomicU64>,
    /// Slots `0..SEGMENT`, used by the first threads (most programs have no more).
    first: Box<Segment>,
    /// Segment `i` (slots `i * SEGMENT..`), null until a thread with such a slot pins here;
    /// index 0 is unused. Set once (a `SeqCst` CAS), freed with the database.
    more: [AtomicPtr<Segment>; SEGMENTS],
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

/// Slot numbers leased to live threads: number `i` is bit `i % 64` of word `i / 64`. Atomic
/// words, not a lock: a child of `fork` inherits them as they were, and a lock held by a
/// thread of the parent at the fork would stay held in the child for good (its first pin,
/// or the forking thread's exit, would then hang).
static LEASED: [AtomicU64; SLOTS / 64] = [const { AtomicU64::new(0) }; SLOTS / 64];

/// The calling thread's slot number (see [`THREAD_SLOT`]); `% SLOTS` gives the slot.
#[inline]
fn thread_slot() -> usize {
    let v = THREAD_SLOT.try_with(Cell::get).unwrap_or(SLOTS);
    if v != usize::MAX { v } else { lease_slot() }
}

/// Leases the lowest free slot number to the calling thread, or, with every one leased,
/// lets it share one of the first segment's slots (made with every database).
#[cold]
fn lease_slot() -> usize {
    let v = match lease_number() {
        // Touching the returner registers its destructor. A thread already past it (a pin
        // from another thread-local's destructor) hands the number back at once and shares
        // its slot from then on.
        Some(i) if RETURN_SLOT.try_with(|_| ()).is_ok() => i,
        Some(i) => {
            hand_back(i);
            SLOTS + i
        }
        None => {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            SLOTS + NEXT.fetch_add(1, Ordering::Relaxed) % SEGMENT
        }
    };
    let _ = THREAD_SLOT.try_with(|s| s.set(v));
    v
}

/// Takes the lowest number not leased, if any. Relaxed throughout: the numbers only spread
/// threads over slots; correctness never depends on a slot having one thread.
fn lease_number() -> Option<usize> {
    for (w, word) in LEASED.iter().enumerate() {
        let mut leased = word.load(Ordering::Relaxed);
        while leased != u64::MAX {
            let bit = (!leased).trailing_zeros() as usize;
            let taken = leased | 1 << bit;
            match word.compare_exchange_weak(leased, taken, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(w * 64 + bit),
                Err(now) => leased = now,
            }
        }
    }
    None
}

fn hand_back(i: usize) {
    LEASED[i / 64].fetch_and(!(1 << (i % 64)), Ordering::Relaxed);
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
                hand_back(v);
            }
        });
    }
}

fn new_segment() -> Box<Segment> {
    Box::new(std::array::from_fn(|_| CacheLine(AtomicU64::new(0))))
}

impl Epochs {
    pub(crate) fn new() -> Epochs {
        Epochs {
            global: CacheLine(AtomicU64::new(1)),
            first: new_segment(),
            more: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
        }
    }

    /// The slot of thread slot number `v` (see [`THREAD_SLOT`]).
    #[inline]
    fn slot(&self, v: usize) -> &AtomicU64 {
        match self.first.get(v) {
            Some(line) => &line.0,
            None => self.slot_beyond(v % SLOTS),
        }
    }

    /// Slot `i` (below [`SLOTS`]), its segment made if this is its first use here: the path
    /// of threads beyond the first [`SEGMENT`] and of threads that share a slot.
    #[inline(never)]
    fn slot_beyond(&self, i: usize) -> &AtomicU64 {
        let seg = i / SEGMENT;
        let segment = self.made(seg).unwrap_or_else(|| self.make_segment(seg));
        &segment[i % SEGMENT].0
    }

    /// The slot of thread slot number `v` if its segment was made here (a thread never
    /// pinned here has no pin to find, and no segment is made for looking).
    fn made_slot(&self, v: usize) -> Option<&AtomicU64> {
        let i = v % SLOTS;
        self.made(i / SEGMENT).map(|segment| &segment[i % SEGMENT].0)
    }

    /// Segment `seg`, if it was made.
    fn made(&self, seg: usize) -> Option<&Segment> {
        if seg == 0 {
            return Some(&self.first);
        }
        // SeqCst: see the module documentation (pairs with the scan in `is_safe`).
        let p = self.more[seg].load(Ordering::SeqCst);
        // SAFETY: a published segment lives, unchanged, as long as `self`.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Publishes segment `seg` (or returns the one another thread published first).
    #[cold]
    fn make_segment(&self, seg: usize) -> &Segment {
        let new = Box::into_raw(new_segment());
        let null = std::ptr::null_mut();
        let p = match self.more[seg].compare_exchange(null, new, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => new,
            Err(theirs) => {
                // SAFETY: `new` was never published.
                drop(unsafe { Box::from_raw(new) });
                theirs
            }
        };
        // SAFETY: as in `made`.
        unsafe { &*p }
    }

    /// Every slot made so far.
    fn slots(&self) -> impl Iterator<Item = &AtomicU64> {
        (0..SEGMENTS).filter_map(|seg| self.made(seg)).flat_map(|s| s.iter().map(|l| &l.0))
    }

    /// Pins the calling thread until the guard is dropped; `None` if the thread's own slot
    /// holds as many pins as its count can (all of them this thread's: waiting would never
    /// end). On a shared slot it waits for the other threads' pins instead.
    #[inline]
    pub(crate) fn pin(&self) -> Option<Guard<'_>> {
        let v = thread_slot();
        let slot = self.slot(v);
        let mut cur = slot.load(Ordering::Relaxed);
        loop {
            let next = if cur & COUNT_MASK == 0 {
                // SeqCst: see the module documentation (pairs with `retire` and `is_safe`).
                (self.global.load(Ordering::SeqCst) << 16) | 1
            } else if cur & COUNT_MASK == COUNT_MASK {
                if v < SLOTS {
                    return None;
                }
                std::thread::yield_now();
                cur = slot.load(Ordering::Relaxed);
                continue;
            } else {
                cur + 1
            };
            // SeqCst: the pin must precede, in the total order, the table-word load that
            // follows it (see the module documentation).
            match slot.compare_exchange_weak(cur, next, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return Some(Guard { slot }),
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
            && self
                .made_slot(thread_slot())
                .is_some_and(|s| s.load(Ordering::Relaxed) & COUNT_MASK != 0)
    }

    /// Whether no reader can still hold a reference to space retired at epoch `e`.
    pub(crate) fn is_safe(&self, e: u64) -> bool {
        self.slots().all(|s| {
            // SeqCst: pairs with the pin's CAS (module documentation).
            let w = s.load(Ordering::SeqCst);
            w & COUNT_MASK == 0 || w >> 16 > e
        })
    }
}

impl Drop for Epochs {
    fn drop(&mut self) {
        for p in &mut self.more {
            let p = *p.get_mut();
            if !p.is_null() {
                // SAFETY: published by `make_segment` from a `Box`; no guard outlives `self`.
                drop(unsafe { Box::from_raw(p) });
            }
        }
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
    /// hands its number back when it exits (numbers dealt round would give a later thread
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
        for n in 0..4 * SEGMENT {
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

    /// Hundreds of live threads (more than one segment's worth, as a big thread pool has)
    /// each lease a slot of their own, and a pin in a segment made after the database holds
    /// back reuse like one in the first. With one segment of 64 slots, threads beyond 64
    /// shared slots, and two sharing readers whose pins kept overlapping kept their slot at
    /// its first epoch: reuse waited for as long as they did.
    #[test]
    fn hundreds_of_live_threads_pin_slots_of_their_own() {
        use std::sync::atomic::AtomicUsize;
        let n = 3 * SEGMENT + 7;
        let e = Epochs::new();
        let all = std::sync::Barrier::new(n + 1);
        let numbers = std::sync::Mutex::new(Vec::new());
        let chosen = AtomicUsize::new(usize::MAX);
        let (pinned, retired) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        let e_retired = std::thread::scope(|s| {
            for _ in 0..n {
                let (e, all, numbers, chosen) = (&e, &all, &numbers, &chosen);
                let (pinned, retired) = (&pinned, &retired);
                s.spawn(move || {
                    let v = thread_slot();
                    numbers.lock().unwrap().push(v);
                    all.wait(); // every thread alive, with its number
                    all.wait(); // one is chosen
                    if v == chosen.load(Ordering::SeqCst) {
                        let g = e.pin();
                        pinned.wait();
                        retired.wait();
                        drop(g);
                    }
                    all.wait(); // alive until the checks are done
                });
            }
            all.wait();
            let numbers = numbers.lock().unwrap().clone();
            // The highest number held by one thread alone: at least n - 1 if none shares.
            let top = numbers.iter().copied().filter(|&v| v < SLOTS).max().unwrap();
            chosen.store(top, Ordering::SeqCst);
            all.wait();
            pinned.wait();
            let e_retired = e.retire();
            let held_back = !e.is_safe(e_retired);
            retired.wait();
            all.wait();
            // Checked once every thread is free to finish (a failed check inside the scope
            // would leave them waiting at the barrier).
            let mut own: Vec<usize> = numbers.iter().copied().filter(|&v| v < SLOTS).collect();
            assert_eq!(own.len(), n, "threads share slots: {numbers:?}");
            own.sort_unstable();
            own.dedup();
            assert_eq!(own.len(), n, "two live threads leased one number: {numbers:?}");
            assert!(top >= 3 * SEGMENT, "{numbers:?}");
            assert!(held_back, "the pin in slot {top} was missed");
            e_retired
        });
        assert!(e.is_safe(e_retired));
        // Segments are made by pins: the first with the database, and the chosen thread's.
        assert_eq!(e.slots().count(), 2 * SEGMENT);
    }
}
