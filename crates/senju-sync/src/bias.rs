//! Reader bias for [`RawSpinRwLock`](crate::RawSpinRwLock): readers that do not write the
//! lock's word.
//!
//! The idea is BRAVO's (Dice and Kogan, "BRAVO: Biased Locking for Reader-Writer Locks",
//! USENIX ATC 2019); the code is ours. Every reader of a one-word lock adds to the same word,
//! so readers on different cores pass its cache line back and forth even though they never
//! wait for each other: the line's transfer is the whole cost of an uncontended-in-principle
//! read lock, and it does not shrink with more cores. While a lock is *biased* (a bit in its
//! word), a reader instead writes the lock's address into a slot of a record that belongs to
//! its own thread, then checks that the lock is still biased. Nothing another reader touches
//! is written. A writer that finds the lock biased clears the bit as it takes the lock and
//! then waits until no slot names the lock (the revocation), so writers pay for what readers
//! save; the lock turns the bias back on only after readers have found each other inside it
//! often enough (see `RawSpinRwLock::lock_shared`).
//!
//! The reader's announce-then-check and the writer's clear-then-scan are the two halves of a
//! store-buffer pattern, so each half has a `SeqCst` fence between its write and its read:
//! either the reader sees the bit cleared (and backs out to the word's count), or the writer
//! sees the slot (and waits for it to be emptied). The writer reaches a slot only through the
//! list of records, whose head it loads after its fence, so the push of the reader's record
//! belongs to the reader's half too and is `SeqCst` (see `allocate`).
//!
//! Records are allocated once per thread that takes a biased read lock, linked into one
//! global list that only grows, and handed to a new thread when their thread exits. A writer's
//! revocation reads every record's slots: one cache line per thread that ever used the bias.
//!
//! A slot names a lock by its address. A read guard that is forgotten (`mem::forget`) leaves
//! its slot naming the lock for good: dropping a biased lock clears such slots, so a lock
//! made later at that address does not wait for them. Moving a lock after one of its biased
//! read guards was forgotten (the only way to move a read-locked lock) leaves that hold
//! behind: the moved lock does not count it, as if the guard had been released. Only
//! `unsafe` code can release it later (`force_unlock_read`), and must not then. And the slot
//! still names the old address, which no destructor clears: a lock made there later (or at
//! the address of a lock forgotten without its destructor) counts it as a reader for good,
//! and its writers wait forever (documented on `RawSpinRwLock`).

use core::cell::Cell;
use core::ptr;

use crate::primitive::{AtomicPtr, AtomicUsize, Ordering, announce, fence};

/// Slots per record: how many biased read locks one thread can hold at once. A thread that
/// holds more takes further read locks through the lock word.
pub(crate) const SLOTS: usize = 7;

/// One thread's slots, alone on its pair of cache lines. A slot holds the address of a lock
/// the thread holds through the bias, or 0. Only the owning thread writes its slots.
#[repr(C, align(128))]
pub(crate) struct Record {
    slots: [AtomicUsize; SLOTS],
    /// 1 while a live thread owns the record, 0 once it may be handed to another.
    taken: AtomicUsize,
    /// The next record of the list; set before the record is published, never changed.
    next: *const Record,
}

// SAFETY: the fields are atomics, except `next`, which is written once before the record is
// published (a Release CAS of the list head) and only read after (Acquire loads).
unsafe impl Sync for Record {}
// SAFETY: as above; records are leaked and never freed.
unsafe impl Send for Record {}

#[cfg(not(loom))]
static HEAD: AtomicPtr<Record> = AtomicPtr::new(ptr::null_mut());

#[cfg(loom)]
loom::lazy_static! {
    static ref HEAD: AtomicPtr<Record> = AtomicPtr::new(ptr::null_mut());
}

/// A thread's view: its record (null before first use; [`EXITED`] once the thread is
/// exiting), which of its slots it fills (bit `i` for slot `i`), and its credit towards
/// turning a lock's bias on.
struct Local {
    record: Cell<*const Record>,
    used: Cell<u32>,
    credit: Cell<u32>,
}

/// The record pointer of a thread whose record was handed back while it exits: it uses the
/// lock word only from then on.
const EXITED: *const Record = ptr::dangling();

#[cfg(not(loom))]
std::thread_local! {
    static LOCAL: Local = const {
        Local { record: Cell::new(ptr::null()), used: Cell::new(0), credit: Cell::new(0) }
    };
    /// Hands the thread's record back when the thread exits (registered on first use).
    static RETURN: ReturnRecord = const { ReturnRecord };
}

#[cfg(loom)]
loom::thread_local! {
    static LOCAL: Local =
        Local { record: Cell::new(ptr::null()), used: Cell::new(0), credit: Cell::new(0) };
}

/// Runs at thread exit and hands the thread's record to the next thread that needs one, if
/// no slot is in use (a read guard leaked with `mem::forget` keeps its record taken).
#[cfg(not(loom))]
struct ReturnRecord;

#[cfg(not(loom))]
impl Drop for ReturnRecord {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|l| {
            let r = l.record.get();
            if r.is_null() || r == EXITED || l.used.get() != 0 {
                return;
            }
            l.record.set(EXITED);
            // SAFETY: records are leaked, so the pointer stays valid.
            // Release: the next owner sees our slots' last (zero) stores.
            unsafe { &*r }.taken.store(0, Ordering::Release);
        });
    }
}

/// How many reads that found other readers inside earn a thread one attempt to turn a lock's
/// bias on (see `RawSpinRwLock::lock_shared`). With 64, a lock read 90% and written 10% of
/// the time by two threads with empty critical sections lost 5-15% against no bias at all
/// (each write after a re-bias pays a revocation); with 1024 it lost about 5% (two alternating runs), and a
/// read-only lock still turns biased within microseconds (lab 0001).
pub(crate) const CREDIT_PER_TRY: u32 = if cfg!(loom) { 1 } else { 1024 };

/// Counts one read that found other readers inside; true when the thread has earned a try.
#[inline]
pub(crate) fn earn_try() -> bool {
    LOCAL
        .try_with(|l| {
            let c = l.credit.get() + 1;
            if c >= CREDIT_PER_TRY {
                l.credit.set(0);
                true
            } else {
                l.credit.set(c);
                false
            }
        })
        .unwrap_or(false)
}

/// This thread's record, taking or allocating one on first use; `None` while the thread exits.
#[inline]
fn record(l: &Local) -> Option<&'static Record> {
    let r = l.record.get();
    if r.is_null() || r == EXITED {
        return first_record(l);
    }
    // SAFETY: records are leaked and this thread owns it.
    Some(unsafe { &*r })
}

/// [`record`] the first time (or while the thread exits).
#[cold]
fn first_record(l: &Local) -> Option<&'static Record> {
    if l.record.get() == EXITED {
        return None;
    }
    #[cfg(not(loom))]
    if RETURN.try_with(|_| ()).is_err() {
        return None;
    }
    let r = adopt().unwrap_or_else(allocate);
    l.record.set(r);
    Some(r)
}

/// Every published record, newest first.
fn all_records() -> impl Iterator<Item = &'static Record> {
    // Acquire pairs with the CAS in `allocate` (a release): the records' fields are visible.
    // After a `SeqCst` fence (`revoke`, `any_holder`) the load also returns every record
    // pushed before a reader's announce that precedes the fence (see `allocate`).
    let head = HEAD.load(Ordering::Acquire).cast_const();
    // SAFETY: published records are leaked, never freed, and `next` never changes.
    core::iter::successors(unsafe { head.as_ref() }, |r| unsafe { r.next.as_ref() })
}

/// A record a finished thread handed back, if any.
fn adopt() -> Option<&'static Record> {
    // Acquire pairs with the Release in `ReturnRecord::drop`.
    all_records().find(|r| {
        r.taken.load(Ordering::Relaxed) == 0
            && r.taken.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
    })
}

/// A new record, pushed onto the list.
fn allocate() -> &'static Record {
    let mut head = HEAD.load(Ordering::Acquire);
    loop {
        let r: &'static mut Record = Box::leak(Box::new(Record {
            slots: core::array::from_fn(|_| AtomicUsize::new(0)),
            taken: AtomicUsize::new(1),
            next: head,
        }));
        let p: *mut Record = r;
        // Release: whoever loads the head sees the record's fields. SeqCst: the push belongs
        // to the reader's half of the store-buffer pattern (module comment), because a revoking
        // writer reaches this record only through its load of the head after its `SeqCst`
        // fence. Were that load to return an older head, the fence would precede this push in
        // the `SeqCst` order ([atomics.order]/4.3, which holds only for a `SeqCst` push), the
        // push our announce, and the announce our check of the lock word, which would then see
        // the writer's clear. A Release push is not ordered against the fence at all: the
        // announce is a swap, which orders only its own slot. A record adopted from a finished
        // thread was pushed before its `taken` was handed over, so its push also precedes the
        // adopter's announce. Miri checks this (`tests/revoke_missed_a_new_record.rs`).
        match HEAD.compare_exchange(head, p, Ordering::SeqCst, Ordering::Acquire) {
            Ok(_) => return r,
            Err(now) => {
                // SAFETY: `p` was never published; take it back and retry with the new head.
                drop(unsafe { Box::from_raw(p) });
                head = now;
            }
        }
    }
}

/// Announces a read of the lock at `key` in this thread's record, then asks `still_biased`
/// (which must read the lock word) whether the bias held. Returns true if the reader is in;
/// false if it must use the lock word (no record, no free slot, or the bias is gone).
#[inline(never)]
pub(crate) fn enter(key: usize, still_biased: impl FnOnce() -> bool) -> bool {
    LOCAL
        .try_with(|l| {
            let used = l.used.get();
            let i = (!used).trailing_zeros() as usize;
            if i >= SLOTS {
                return false;
            }
            let Some(r) = record(l) else { return false };
            let slot = &r.slots[i];
            // The reader's half of the store-buffer pattern (see the module comment).
            announce(slot, key);
            if still_biased() {
                l.used.set(used | 1 << i);
                return true;
            }
            // Nobody entered; a revoking writer may proceed as soon as it sees the zero.
            // Release, not Relaxed: a plain store would end the release sequence of this
            // slot's previous `leave`, whose critical section the writer that reads this zero
            // must come after (the announce before it is a swap, not a fence, outside loom).
            slot.store(0, Ordering::Release);
            false
        })
        .unwrap_or(false)
}

/// Leaves a read of the lock at `key` taken through the bias; false if this thread holds none
/// of that lock through its record (the hold is in the lock word). Only the check for "no
/// slot in use" is inlined: every read unlock runs it, and a larger inlined body kept the
/// compiler from inlining read-guard drops (1-2% of a one-thread read in lab 0001).
#[inline]
pub(crate) fn leave(key: usize) -> bool {
    LOCAL.try_with(|l| l.used.get() != 0).unwrap_or(false) && leave_slot(key)
}

/// [`leave`] for a thread with a slot in use.
#[inline(never)]
fn leave_slot(key: usize) -> bool {
    LOCAL
        .try_with(|l| {
            let used = l.used.get();
            // SAFETY: a slot is in use, so the record is this thread's and still taken.
            let r = unsafe { &*l.record.get() };
            let mut rest = used;
            while rest != 0 {
                let i = rest.trailing_zeros() as usize;
                let slot = &r.slots[i];
                if slot.load(Ordering::Relaxed) == key {
                    // Release pairs with the Acquire load of a revoking writer: it sees what
                    // this reader did under the lock.
                    slot.store(0, Ordering::Release);
                    l.used.set(used & !(1 << i));
                    return true;
                }
                rest &= rest - 1;
            }
            false
        })
        .unwrap_or(false)
}

/// The writer's half: after the lock word no longer shows the bias, waits (calling `wait`
/// once per turn) until no slot of any thread names the lock at `key`.
pub(crate) fn revoke(key: usize, mut wait: impl FnMut()) {
    // The writer's half of the store-buffer pattern (see the module comment).
    fence(Ordering::SeqCst);
    for s in all_records().flat_map(|r| &r.slots) {
        // Acquire pairs with the Release in `leave`.
        while s.load(Ordering::Acquire) == key {
            wait();
        }
    }
}

/// Clears every slot that names the lock at `key`, which is being dropped: only read guards
/// that were forgotten (`mem::forget`) can have left them, and a lock made later at the same
/// address would otherwise wait for them forever. Their threads never touch such a slot
/// again (it stays marked in their `used` bits, so they never reuse it either).
pub(crate) fn forget_lock(key: usize) {
    for s in all_records().flat_map(|r| &r.slots) {
        let _ = s.compare_exchange(key, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Whether some thread's slot names the lock at `key` (a momentary snapshot).
pub(crate) fn any_holder(key: usize) -> bool {
    fence(Ordering::SeqCst);
    all_records().flat_map(|r| &r.slots).any(|s| s.load(Ordering::Acquire) == key)
}

/// How many records the list holds.
pub(crate) fn records() -> usize {
    all_records().count()
}
