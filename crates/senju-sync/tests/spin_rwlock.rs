//! Real-thread tests of `SpinRwLock`: exclusion counted by occupants, and the reader relay.
//!
//! Nothing here looks at a clock except the watchdog, which only turns a hang into a failure
//! with a message; every assertion is about counts.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use senju_sync::{Adaptive, Park, RawSpinRwLock, Relax, Spin, SpinRwLock, Yield};

/// Runs `body` on its own thread and fails the test if it has not finished after `secs`.
fn with_watchdog(what: &str, secs: u64, body: impl FnOnce() + Send + 'static) {
    let (done, wait) = mpsc::channel();
    let worker = thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match wait.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: report its panic.
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still running after {secs} s"),
    }
}

/// Counts the threads inside: readers in the low half, writers in the high half.
#[derive(Default)]
struct Occupancy(AtomicU64);

const ONE_WRITER: u64 = 1 << 32;

impl Occupancy {
    fn enter_read(&self) {
        let before = self.0.fetch_add(1, SeqCst);
        assert_eq!(before >> 32, 0, "a reader entered while a writer was inside");
    }
    fn leave_read(&self) {
        let before = self.0.fetch_sub(1, SeqCst);
        assert_eq!(before >> 32, 0, "a writer entered while a reader was inside");
    }
    fn enter_write(&self) {
        let before = self.0.fetch_add(ONE_WRITER, SeqCst);
        assert_eq!(before, 0, "a writer entered while others were inside: {before:#x}");
    }
    fn leave_write(&self) {
        let before = self.0.fetch_sub(ONE_WRITER, SeqCst);
        assert_eq!(before, ONE_WRITER, "someone entered while a writer was inside: {before:#x}");
    }
}

fn exclusion<R: Relax + 'static>() {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = 4_000;
    let lock = Arc::new(RawSpinRwLock::<R>::new());
    let inside = Arc::new(Occupancy::default());
    let writes = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, inside, writes, reads) =
                (lock.clone(), inside.clone(), writes.clone(), reads.clone());
            thread::spawn(move || {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..ROUNDS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    match x % 6 {
                        0 => {
                            lock.lock_exclusive();
                            inside.enter_write();
                            writes.fetch_add(1, SeqCst);
                            inside.leave_write();
                            // SAFETY: taken just above.
                            unsafe { lock.unlock_exclusive() };
                        }
                        1 => {
                            if lock.try_lock_exclusive() {
                                inside.enter_write();
                                writes.fetch_add(1, SeqCst);
                                inside.leave_write();
                                // SAFETY: taken just above.
                                unsafe { lock.unlock_exclusive() };
                            }
                        }
                        2 => {
                            // Write, then downgrade: no writer may slip in between.
                            lock.lock_exclusive();
                            inside.enter_write();
                            writes.fetch_add(1, SeqCst);
                            // Leave as writer and enter as reader in one step for the count.
                            inside.0.fetch_sub(ONE_WRITER - 1, SeqCst);
                            // SAFETY: the exclusive lock is held.
                            unsafe { lock.downgrade() };
                            reads.fetch_add(1, SeqCst);
                            inside.leave_read();
                            // SAFETY: the downgrade left a shared hold.
                            unsafe { lock.unlock_shared() };
                        }
                        3 => {
                            if lock.try_lock_shared() {
                                inside.enter_read();
                                reads.fetch_add(1, SeqCst);
                                inside.leave_read();
                                // SAFETY: taken just above.
                                unsafe { lock.unlock_shared() };
                            }
                        }
                        _ => {
                            lock.lock_shared();
                            inside.enter_read();
                            reads.fetch_add(1, SeqCst);
                            std::hint::spin_loop();
                            inside.leave_read();
                            // SAFETY: taken just above.
                            unsafe { lock.unlock_shared() };
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(writes.load(SeqCst) > 0 && reads.load(SeqCst) > 0);
    assert!(!lock.is_locked(), "lock left held: {lock:?}");
}

#[test]
fn exclusion_adaptive() {
    with_watchdog("exclusion_adaptive", 120, exclusion::<Adaptive>);
}

#[test]
fn exclusion_park() {
    with_watchdog("exclusion_park", 120, exclusion::<Park>);
}

#[test]
fn exclusion_yield() {
    with_watchdog("exclusion_yield", 120, exclusion::<Yield>);
}

#[test]
fn exclusion_spin() {
    with_watchdog("exclusion_spin", 120, exclusion::<Spin>);
}

/// The lock_api wrapper is a drop-in: data behind it is protected by the same protocol.
#[test]
fn lock_api_wrapper_counts_every_increment() {
    let counter = Arc::new(SpinRwLock::new(0u64));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let counter = counter.clone();
            thread::spawn(move || {
                for i in 0..5_000 {
                    if i % 4 == 0 {
                        let _ = *counter.read();
                    } else {
                        *counter.write() += 1;
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*counter.read(), 8 * 3_750);
}

/// The reader relay: readers pass the read lock hand to hand so that the reader count never
/// drops to zero on its own. A reader-preferring lock (Tkrzw's single counter, glibc's default
/// rwlock) lets every new reader in and the writer waits forever. `SpinRwLock` must keep out
/// each reader that arrives after the writer announced itself, so the holder can let go and the
/// writer gets in; and no such reader may enter before that writer.
fn relay<R: Relax + 'static>(readers: usize, writer_turns: u64) {
    let lock = Arc::new(RawSpinRwLock::<R>::new());
    let turn = Arc::new(AtomicUsize::new(0)); // the next relay entry to perform
    let attempting = Arc::new(AtomicUsize::new(0)); // highest entry that began its attempt
    let entered = Arc::new(AtomicUsize::new(0)); // highest entry that got in
    let writer_acqs = Arc::new(AtomicU64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let reader_entries = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    let relay: Vec<_> = (0..readers)
        .map(|me| {
            let (lock, turn, attempting, entered, writer_acqs, violations, reader_entries, stop) = (
                lock.clone(),
                turn.clone(),
                attempting.clone(),
                entered.clone(),
                writer_acqs.clone(),
                violations.clone(),
                reader_entries.clone(),
                stop.clone(),
            );
            thread::spawn(move || {
                let mut seq = me + 1; // entries are numbered from 1
                'relay: loop {
                    while turn.load(SeqCst) + 1 != seq {
                        if stop.load(SeqCst) {
                            break 'relay;
                        }
                        thread::yield_now();
                    }
                    let saw_writer = lock.is_writer_waiting();
                    let writes_before = writer_acqs.load(SeqCst);
                    attempting.store(seq, SeqCst);
                    lock.lock_shared();
                    if saw_writer && writer_acqs.load(SeqCst) == writes_before {
                        violations.fetch_add(1, SeqCst);
                    }
                    reader_entries.fetch_add(1, SeqCst);
                    entered.store(seq, SeqCst);
                    turn.store(seq, SeqCst);
                    // Hold until the next reader is in, or until it is kept out by a writer
                    // that announced itself: only then may the count reach zero.
                    loop {
                        if entered.load(SeqCst) > seq || stop.load(SeqCst) {
                            break;
                        }
                        if attempting.load(SeqCst) > seq && lock.is_writer_waiting() {
                            break;
                        }
                        thread::yield_now();
                    }
                    // SAFETY: taken above in this iteration.
                    unsafe { lock.unlock_shared() };
                    seq += readers;
                }
            })
        })
        .collect();

    // Let the relay run before the writer arrives, so it really finds readers passing the lock.
    while reader_entries.load(SeqCst) < 50 {
        thread::yield_now();
    }
    for _ in 0..writer_turns {
        lock.lock_exclusive();
        writer_acqs.fetch_add(1, SeqCst);
        // SAFETY: taken just above.
        unsafe { lock.unlock_exclusive() };
        // Let some relay entries happen between writer turns.
        let target = reader_entries.load(SeqCst) + 3;
        while reader_entries.load(SeqCst) < target {
            thread::yield_now();
        }
    }
    stop.store(true, SeqCst);
    for r in relay {
        r.join().unwrap();
    }
    assert_eq!(writer_acqs.load(SeqCst), writer_turns);
    assert_eq!(
        violations.load(SeqCst),
        0,
        "a reader that arrived after the writer's intent entered before the writer"
    );
}

#[test]
fn reader_relay_lets_the_writer_in() {
    with_watchdog("reader relay (Adaptive)", 60, || relay::<Adaptive>(3, 200));
}

#[test]
fn reader_relay_lets_the_writer_in_when_parking_at_once() {
    with_watchdog("reader relay (Park)", 60, || relay::<Park>(2, 100));
}

#[test]
fn reader_relay_with_many_readers() {
    with_watchdog("reader relay (8 readers)", 60, || relay::<Yield>(8, 50));
}
