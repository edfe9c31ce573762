//! A writer revoking a `SpinRwLock`'s reader bias could miss a reader that had just published
//! its thread's record, and write while that reader was still inside.
//!
//! The reader's half of the bias protocol is a `SeqCst` swap into a slot of its record and a
//! `SeqCst` load of the lock word; the writer's half is its CAS on the word, a `SeqCst` fence,
//! and a walk over the list of records from its head. A thread's first biased read pushes its
//! record onto that list, and the push was a `Release` CAS: nothing in the C++20 rules orders a
//! non-`SeqCst` write made before the reader's swap against the writer's fence, so the writer's
//! load of the head could return the list without the new record, skip its slot, and enter
//! beside the reader (a `SeqCst` fence on the reader's side, as under loom, would have ordered
//! it). Miri found it as a data race on the protected data. The push is now a `SeqCst` CAS.
//! Had the writer then read an older head, the push would follow the writer's fence in the
//! `SeqCst` order, and so would the reader's swap and its load of the word, which would see
//! the writer's clear and back out. On x86-64 both CASes are the same instruction.
//!
//! Each round, a fresh thread (whose record is new) takes a biased read lock, reads the data,
//! and tells a writer so through a `Relaxed` flag, on purpose: a flag that synchronised would
//! hand the writer the new record's push instead of the lock's protocol. The writer then takes
//! the write lock, which must wait for the reader. Natively a round only checks that the writer
//! waits. Under Miri, whose weak-memory emulation lets a load return an older value wherever
//! the rules allow it, the `Release` push failed in each of 32 seeds (`-Zmiri-many-seeds=0..32`)
//! with a race between the reader's read and the writer's write, and the `SeqCst` push passes
//! all 64 of `0..64`. Run it with
//! `CARGO_TARGET_DIR=/tmp/miri-target cargo +nightly miri test -p senju-sync --test
//! revoke_missed_a_new_record`.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use senju_sync::SpinRwLock;

#[test]
fn a_writer_waits_for_a_reader_whose_record_was_just_published() {
    // Each round leaves its reader thread alive, holding its record, so that the next round's
    // reader publishes a new one instead of adopting a record the writer has already seen.
    const ROUNDS: u64 = if cfg!(miri) { 8 } else { 100 };
    let lock = Arc::new(SpinRwLock::new((0u64, 0u64)));
    // The last round whose reader is inside (Relaxed: see the module comment).
    let entered = Arc::new(AtomicU64::new(0));
    // The last round whose writer has unlocked.
    let written = Arc::new(AtomicU64::new(0));
    // The readers, and then this thread once the writer is done: they end together.
    let done = Arc::new(Barrier::new(ROUNDS as usize + 1));
    let writer = {
        let (lock, entered, written) = (lock.clone(), entered.clone(), written.clone());
        thread::spawn(move || {
            for round in 1..=ROUNDS {
                while entered.load(Ordering::Relaxed) < round {
                    thread::yield_now();
                }
                let mut g = lock.write();
                g.0 += 1;
                std::hint::black_box(&mut *g);
                g.1 += 1;
                drop(g);
                // Release: the next round's reader finds the lock free of this writer.
                written.store(round, Ordering::Release);
            }
        })
    };
    let mut readers = Vec::new();
    for round in 1..=ROUNDS {
        // Acquire pairs with the writer's Release above: the last write lock is gone, so the
        // new reader can turn the bias on.
        while written.load(Ordering::Acquire) < round - 1 {
            thread::yield_now();
        }
        let (lock, entered, written, done) =
            (lock.clone(), entered.clone(), written.clone(), done.clone());
        readers.push(thread::spawn(move || {
            // SAFETY: `raw` only gives access to the test hook `bias_now`.
            assert!(unsafe { lock.raw() }.bias_now(), "round {round}: the bias did not turn on");
            let g = lock.read();
            assert_eq!(g.0, g.1, "round {round}: a reader saw a half-done write");
            assert_eq!(g.0, round - 1, "round {round}: the writer got in beside the reader");
            entered.store(round, Ordering::Relaxed);
            // Hold the read lock until the writer has taken the word and waits for this
            // reader's slot, so that its walk over the records happens while we are inside
            // (or, were it to miss the slot, until it has written).
            // SAFETY: as above; `is_locked_exclusive` is a snapshot of the word.
            while !unsafe { lock.raw() }.is_locked_exclusive()
                && written.load(Ordering::Acquire) < round
            {
                thread::yield_now();
            }
            assert_eq!(g.0, round - 1, "round {round}: the writer got in beside the reader");
            drop(g);
            done.wait();
        }));
    }
    writer.join().unwrap();
    done.wait();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*lock.read(), (ROUNDS, ROUNDS));
}
