//! Real-thread tests of `SpinRwLock`: exclusion counted by occupants, and the reader relay.
//!
//! Nothing here looks at a clock except the watchdog, which only turns a hang into a failure
//! with a message; every assertion is about counts.
//!
//! Under Miri, which runs these threads about a thousand times slower, the loops are shorter
//! (each size reads `if cfg!(miri) { .. } else { .. }`):
//! `CARGO_TARGET_DIR=/tmp/miri-target cargo +nightly miri test -p senju-sync --test spin_rwlock
//! -- --test-threads=1`, and again with `MIRIFLAGS="-Zmiri-tree-borrows"`.
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

/// Eight threads mix every way in and out; with `bias`, one operation in seven also turns the
/// reader bias on (where no writer holds or waits), so reads through the threads' records mix
/// with writers that revoke it.
fn exclusion<R: Relax + 'static>(bias: bool) {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = if cfg!(miri) { 40 } else { 4_000 };
    let lock = Arc::new(RawSpinRwLock::<R>::new());
    let inside = Arc::new(Occupancy::default());
    let writes = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let biased = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, inside, writes, reads, biased) =
                (lock.clone(), inside.clone(), writes.clone(), reads.clone(), biased.clone());
            thread::spawn(move || {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..ROUNDS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if bias && x % 7 == 0 {
                        if lock.bias_now() {
                            biased.fetch_add(1, SeqCst);
                        }
                        continue;
                    }
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
    assert!(!bias || biased.load(SeqCst) > 0, "the bias was never on");
    assert!(!lock.is_locked(), "lock left held: {lock:?}");
}

#[test]
fn exclusion_adaptive() {
    with_watchdog("exclusion_adaptive", 120, || exclusion::<Adaptive>(false));
}

#[test]
fn exclusion_park() {
    with_watchdog("exclusion_park", 120, || exclusion::<Park>(false));
}

#[test]
fn exclusion_yield() {
    with_watchdog("exclusion_yield", 120, || exclusion::<Yield>(false));
}

#[test]
fn exclusion_spin() {
    with_watchdog("exclusion_spin", 120, || exclusion::<Spin>(false));
}

#[test]
fn exclusion_biased_adaptive() {
    with_watchdog("exclusion_biased_adaptive", 120, || exclusion::<Adaptive>(true));
}

#[test]
fn exclusion_biased_park() {
    with_watchdog("exclusion_biased_park", 120, || exclusion::<Park>(true));
}

#[test]
fn exclusion_biased_spin() {
    with_watchdog("exclusion_biased_spin", 120, || exclusion::<Spin>(true));
}

/// Readers that keep meeting inside the lock turn the bias on by themselves: one thread holds
/// a read lock while another takes and drops its own 2,000 times (each of those finds a reader
/// inside). Then a read through the bias leaves the word's count at zero, and a writer that
/// comes next turns the bias off and still waits for that reader.
#[test]
fn meeting_readers_turn_the_bias_on_and_a_writer_revokes_it() {
    let lock = Arc::new(RawSpinRwLock::<Adaptive>::new());
    lock.lock_shared();
    let other = {
        let lock = lock.clone();
        thread::spawn(move || {
            for _ in 0..2_000 {
                lock.lock_shared();
                // SAFETY: taken just above.
                unsafe { lock.unlock_shared() };
            }
        })
    };
    other.join().unwrap();
    // SAFETY: taken at the start.
    unsafe { lock.unlock_shared() };
    assert!(lock.is_biased(), "2,000 meetings did not turn the bias on: {lock:?}");

    lock.lock_shared();
    assert!(lock.is_locked(), "a biased reader is not seen as a holder");
    assert!(!lock.try_lock_exclusive(), "try_lock_exclusive got in beside a biased reader");
    assert!(lock.is_biased(), "a failed try_lock_exclusive must leave the bias on");
    let entered = Arc::new(AtomicBool::new(false));
    let writer = {
        let (lock, entered) = (lock.clone(), entered.clone());
        thread::spawn(move || {
            lock.lock_exclusive();
            entered.store(true, SeqCst);
            // SAFETY: taken just above.
            unsafe { lock.unlock_exclusive() };
        })
    };
    // Until the writer has cleared the bias and waits, nothing is asserted about time: the
    // assertion is only that it is not inside while the reader is.
    while lock.is_biased() {
        thread::yield_now();
    }
    for _ in 0..100 {
        assert!(!entered.load(SeqCst), "the writer entered beside a biased reader");
        thread::yield_now();
    }
    // SAFETY: taken above.
    unsafe { lock.unlock_shared() };
    writer.join().unwrap();
    assert!(entered.load(SeqCst));
    assert!(!lock.is_biased() && !lock.is_locked());
}

/// A thread may hold more biased read locks than its record has slots: the rest go through
/// the words' counts, and every hold is given back.
#[test]
fn more_biased_read_locks_than_slots() {
    let locks: Vec<RawSpinRwLock<Adaptive>> = (0..20).map(|_| RawSpinRwLock::new()).collect();
    for l in &locks {
        assert!(l.bias_now());
        l.lock_shared();
        l.lock_shared();
    }
    for l in &locks {
        assert!(l.is_locked());
        assert!(!l.try_lock_exclusive());
    }
    for l in locks.iter().rev() {
        // SAFETY: two shared holds of each lock were taken above.
        unsafe { l.unlock_shared() };
        // SAFETY: as above.
        unsafe { l.unlock_shared() };
    }
    for l in &locks {
        assert!(!l.is_locked(), "a hold was lost: {l:?}");
        assert!(l.try_lock_exclusive());
        // SAFETY: taken just above.
        unsafe { l.unlock_exclusive() };
    }
}

/// A thread's record goes back to the list when the thread exits: 200 threads one after the
/// other, each taking a biased read lock, leave at most a few more records than before.
#[test]
fn records_of_finished_threads_are_reused() {
    let lock = Arc::new(RawSpinRwLock::<Adaptive>::new());
    let before = RawSpinRwLock::<Adaptive>::bias_records();
    for _ in 0..200 {
        let lock = lock.clone();
        thread::spawn(move || {
            assert!(lock.bias_now());
            lock.lock_shared();
            // SAFETY: taken just above.
            unsafe { lock.unlock_shared() };
        })
        .join()
        .unwrap();
    }
    let after = RawSpinRwLock::<Adaptive>::bias_records();
    // Other tests of this binary run beside this one and may take records of their own.
    assert!(after - before <= 40, "{before} records before, {after} after 200 threads");
}

/// The lock_api wrapper is a drop-in: data behind it is protected by the same protocol.
#[test]
fn lock_api_wrapper_counts_every_increment() {
    const THREADS: u64 = 8;
    const ROUNDS: u64 = if cfg!(miri) { 40 } else { 5_000 };
    let counter = Arc::new(SpinRwLock::new(0u64));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let counter = counter.clone();
            thread::spawn(move || {
                for i in 0..ROUNDS {
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
    // One round in four reads; the others write.
    assert_eq!(*counter.read(), THREADS * ROUNDS / 4 * 3);
}

/// Plain data behind a biased lock: writers bump both halves of a pair through the `lock_api`
/// wrapper while readers, some of them entering through their threads' records, check that
/// the halves match. The other biased tests count with atomics only; here the protected data
/// is not atomic, so under Miri its race detector checks the orderings of the bias protocol
/// (a reader's announce and check against a writer's clear and scan) on real data.
#[test]
fn biased_readers_see_whole_writes_of_plain_data() {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = if cfg!(miri) { 60 } else { 4_000 };
    let lock = Arc::new(SpinRwLock::new((0u64, 0u64)));
    let writes = Arc::new(AtomicU64::new(0));
    let biased = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, writes, biased) = (lock.clone(), writes.clone(), biased.clone());
            thread::spawn(move || {
                let mut x = (t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..ROUNDS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 4 == 0 {
                        let mut g = lock.write();
                        g.0 += 1;
                        std::hint::black_box(&mut *g);
                        g.1 += 1;
                        writes.fetch_add(1, SeqCst);
                    } else {
                        // SAFETY: `raw` only gives access to the test hook `bias_now`.
                        if x % 3 == 0 && unsafe { lock.raw() }.bias_now() {
                            biased.fetch_add(1, SeqCst);
                        }
                        let g = lock.read();
                        assert_eq!(g.0, g.1, "a reader saw a half-done write");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(biased.load(SeqCst) > 0, "the bias was never on");
    let pair = *lock.read();
    assert_eq!(pair, (writes.load(SeqCst), writes.load(SeqCst)), "a write was lost");
}

/// The reader relay: readers pass the read lock hand to hand so that the reader count never
/// drops to zero on its own. A reader-preferring lock (Tkrzw's single counter, glibc's default
/// rwlock) lets every new reader in and the writer waits forever. `SpinRwLock` must keep out
/// each reader that arrives after the writer announced itself, so the holder can let go and the
/// writer gets in; and no such reader may enter before that writer.
fn relay<R: Relax + 'static>(readers: usize, writer_turns: u64, bias: bool) {
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
                    if bias {
                        lock.bias_now();
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
    let warm_up = if cfg!(miri) { 10 } else { 50 };
    while reader_entries.load(SeqCst) < warm_up {
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
    with_watchdog("reader relay (Adaptive)", 60, || {
        relay::<Adaptive>(3, if cfg!(miri) { 10 } else { 200 }, false)
    });
}

#[test]
fn reader_relay_lets_the_writer_in_when_parking_at_once() {
    with_watchdog("reader relay (Park)", 60, || {
        relay::<Park>(2, if cfg!(miri) { 5 } else { 100 }, false)
    });
}

#[test]
fn reader_relay_with_many_readers() {
    with_watchdog("reader relay (8 readers)", 60, || {
        relay::<Yield>(8, if cfg!(miri) { 5 } else { 50 }, false)
    });
}

/// The relay with every reader turning the bias on before it enters (where no writer waits):
/// readers that enter through their records must still keep the writer-intent rule.
#[test]
fn reader_relay_lets_the_writer_in_with_the_bias() {
    with_watchdog("reader relay (bias)", 60, || {
        relay::<Adaptive>(3, if cfg!(miri) { 10 } else { 200 }, true)
    });
}

/// A read guard forgotten while the lock is biased (`mem::forget`, which `lock_api` allows)
/// leaves its thread's slot naming the lock's address. When that lock is dropped and a new
/// one is made at the same address, the new lock's writer must not take the stale slot for
/// a reader of its own and wait for it forever.
#[test]
fn a_forgotten_biased_read_guard_does_not_hang_a_new_lock_at_its_address() {
    with_watchdog("writer of a new lock at a forgotten guard's address", 30, || {
        let mut lock = Box::new(SpinRwLock::new(0u64));
        // SAFETY: `raw` only gives access to the test hook `bias_now`.
        assert!(unsafe { lock.raw() }.bias_now());
        std::mem::forget(lock.read());
        // Dropped in place (a forgotten guard borrows nothing), a new lock at its address.
        *lock = SpinRwLock::new(0);
        // SAFETY: as above.
        assert!(unsafe { lock.raw() }.bias_now());
        assert!(!lock.is_locked(), "the new lock counts the old lock's forgotten reader");
        *lock.write() += 1;
        assert_eq!(*lock.read(), 1);
    });
}
