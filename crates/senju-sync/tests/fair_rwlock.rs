//! `FairRwLock` on real threads: exclusion under a mix of every operation, a reader relay that
//! must not keep a writer out, and phase fairness checked by counting (never by timing).
//!
//! Every wait here is a handshake on atomics; the only clock is a watchdog that aborts the
//! process after two minutes so that a broken lock fails loudly instead of hanging.
//!
//! Under Miri, which runs these threads about a thousand times slower, the loops are shorter
//! (each size reads `if cfg!(miri) { .. } else { .. }`):
//! `CARGO_TARGET_DIR=/tmp/miri-target cargo +nightly miri test -p senju-sync --test fair_rwlock
//! -- --test-threads=1`, and again with `MIRIFLAGS="-Zmiri-tree-borrows"`.
#![cfg(not(loom))]

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::NoBarge;
use senju_sync::{FairRwLock, FairRwLockUpgradableReadGuard, FairRwLockWriteGuard, RawFairRwLock};

/// Aborts the process with `what` if the returned flag is not set within 120 s (a hang: on a
/// loaded 2-core machine these tests finish in seconds, and they run side by side).
fn watchdog(what: &'static str) -> Arc<AtomicBool> {
    let finished = Arc::new(AtomicBool::new(false));
    let flag = finished.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while !flag.load(SeqCst) {
            if start.elapsed() > Duration::from_secs(120) {
                // Straight to the stderr handle: libtest captures `eprintln!`, and the
                // capture is lost when the process aborts.
                let _ = writeln!(
                    std::io::stderr(),
                    "watchdog: {what} did not finish within 120 s; the lock hangs"
                );
                std::process::abort();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    finished
}

/// Waits (spinning, then yielding: this machine has 2 cores) until `cond` holds.
fn wait_for(mut cond: impl FnMut() -> bool) {
    let mut turns = 0u32;
    while !cond() {
        if turns < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        turns = turns.saturating_add(1);
    }
}

fn raw<T>(lock: &FairRwLock<T>) -> &RawFairRwLock {
    // SAFETY: the raw lock is only used for its read-only diagnostics, never to lock or
    // unlock behind the guards' back.
    unsafe { lock.raw() }
}

/// Who is inside the critical section right now.
#[derive(Default)]
struct Occupancy {
    readers: AtomicUsize,
    upgradable: AtomicUsize,
    writers: AtomicUsize,
}

impl Occupancy {
    fn enter_read(&self) {
        self.readers.fetch_add(1, SeqCst);
        assert_eq!(self.writers.load(SeqCst), 0, "a reader is inside with a writer");
    }
    fn leave_read(&self) {
        self.readers.fetch_sub(1, SeqCst);
    }
    fn enter_upgradable(&self) {
        assert_eq!(self.upgradable.fetch_add(1, SeqCst), 0, "two upgradable readers inside");
        assert_eq!(self.writers.load(SeqCst), 0, "an upgradable reader is inside with a writer");
    }
    fn leave_upgradable(&self) {
        self.upgradable.fetch_sub(1, SeqCst);
    }
    fn enter_write(&self) {
        assert_eq!(self.writers.fetch_add(1, SeqCst), 0, "two writers inside");
        assert_eq!(self.readers.load(SeqCst), 0, "a writer is inside with readers");
        assert_eq!(self.upgradable.load(SeqCst), 0, "a writer is inside with an upgradable reader");
    }
    fn leave_write(&self) {
        self.writers.fetch_sub(1, SeqCst);
    }
}

/// The protected value: writers bump both halves, readers check they match (a torn or racing
/// write shows up as a mismatch).
type Pair = (u64, u64);

fn check(pair: &Pair) {
    assert_eq!(pair.0, pair.1, "a reader saw a half-done write");
}

fn bump(pair: &mut Pair) {
    pair.0 += 1;
    std::hint::black_box(&mut *pair);
    pair.1 += 1;
}

#[test]
fn eight_threads_mixing_every_operation_keep_exclusion() {
    const THREADS: u64 = 8;
    const OPS: u64 = if cfg!(miri) {
        40
    } else if cfg!(debug_assertions) {
        3_000
    } else {
        20_000
    };
    let finished = watchdog("the mixed-operation test");
    let lock = FairRwLock::new((0u64, 0u64));
    let occ = Occupancy::default();
    let writes = AtomicU64::new(0);
    let tries = [const { AtomicU64::new(0) }; 2];
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (lock, occ, writes, tries) = (&lock, &occ, &writes, &tries);
            s.spawn(move || {
                // What a holder does inside, counted in the occupancy so overlaps are seen.
                let write_inside = |pair: &mut Pair| {
                    occ.enter_write();
                    bump(pair);
                    writes.fetch_add(1, SeqCst);
                    occ.leave_write();
                };
                let read_inside = |pair: &Pair| {
                    occ.enter_read();
                    check(pair);
                    occ.leave_read();
                };
                let mut rng =
                    0x9E37_79B9_7F4A_7C15u64 ^ (t + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                for _ in 0..OPS {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    match rng % 11 {
                        0 => {
                            let g = lock.read();
                            read_inside(&g);
                        }
                        1 => {
                            tries[0].fetch_add(1, SeqCst);
                            if let Some(g) = lock.try_read() {
                                tries[1].fetch_add(1, SeqCst);
                                read_inside(&g);
                            }
                        }
                        2 => {
                            let mut g = lock.write();
                            write_inside(&mut g);
                        }
                        3 => {
                            if let Some(mut g) = lock.try_write() {
                                write_inside(&mut g);
                            }
                        }
                        4 => {
                            let g = lock.upgradable_read();
                            occ.enter_upgradable();
                            check(&g);
                            occ.leave_upgradable();
                        }
                        5 => {
                            let g = lock.upgradable_read();
                            occ.enter_upgradable();
                            check(&g);
                            occ.leave_upgradable();
                            let mut g = FairRwLockUpgradableReadGuard::upgrade(g);
                            write_inside(&mut g);
                        }
                        6 => {
                            if let Some(g) = lock.try_upgradable_read() {
                                occ.enter_upgradable();
                                check(&g);
                                occ.leave_upgradable();
                                match FairRwLockUpgradableReadGuard::try_upgrade(g) {
                                    Ok(mut g) => {
                                        write_inside(&mut g);
                                    }
                                    Err(g) => {
                                        occ.enter_upgradable();
                                        check(&g);
                                        occ.leave_upgradable();
                                    }
                                }
                            }
                        }
                        7 => {
                            let mut g = lock.write();
                            write_inside(&mut g);
                            let g = FairRwLockWriteGuard::downgrade(g);
                            read_inside(&g);
                        }
                        8 => {
                            let g = lock.upgradable_read();
                            occ.enter_upgradable();
                            check(&g);
                            occ.leave_upgradable();
                            let g = FairRwLockUpgradableReadGuard::downgrade(g);
                            read_inside(&g);
                        }
                        9 => {
                            let mut g = lock.write();
                            write_inside(&mut g);
                            let g = FairRwLockWriteGuard::downgrade_to_upgradable(g);
                            occ.enter_upgradable();
                            check(&g);
                            occ.leave_upgradable();
                            let mut g = FairRwLockUpgradableReadGuard::upgrade(g);
                            write_inside(&mut g);
                        }
                        _ => {
                            let mut g = lock.upgradable_read();
                            occ.enter_upgradable();
                            check(&g);
                            occ.leave_upgradable();
                            g.with_upgraded(|v| write_inside(v));
                        }
                    }
                }
            });
        }
    });
    finished.store(true, SeqCst);
    let pair = lock.into_inner();
    assert_eq!(pair.0, writes.load(SeqCst), "a write was lost");
    check(&pair);
    assert!(tries[0].load(SeqCst) > 0 && tries[1].load(SeqCst) > 0, "try_read never ran");
}

/// Readers pass the read lock hand to hand, so the reader count never reaches zero on its
/// own; a writer arrives. A reader-preferring lock never lets it in (the watchdog fires);
/// here the writer's mark holds back every reader that starts after it.
#[test]
fn reader_relay_cannot_keep_a_writer_out() {
    const RELAY: u64 = 3;
    const WARM_UP: u64 = if cfg!(miri) { 20 } else { 200 };
    const AFTER: u64 = if cfg!(miri) { 20 } else { 200 };

    #[derive(Default)]
    struct Relay {
        /// The hand-off whose reader may now call `read()`.
        may_begin: AtomicU64,
        /// The last hand-off whose reader has started its `read()` call (plus one).
        began: AtomicU64,
        /// The last hand-off whose reader is inside (plus one).
        entered: AtomicU64,
        /// Relay readers inside the lock.
        inside: AtomicUsize,
        writer_done: AtomicBool,
        stop: AtomicBool,
        /// Readers that started after the writer's mark was visible and entered before it.
        late_entries: AtomicUsize,
        /// Hand-offs where a reader let go before its successor was in (writer waiting).
        held_back: AtomicUsize,
        /// Hand-offs done in all.
        handoffs: AtomicU64,
    }

    let finished = watchdog("the reader relay (the writer never got in?)");
    let lock = FairRwLock::new(0u64);
    let relay = Relay::default();
    let writer_at = AtomicU64::new(u64::MAX);
    std::thread::scope(|s| {
        for first in 0..RELAY {
            let (lock, relay) = (&lock, &relay);
            s.spawn(move || {
                let mut k = first;
                loop {
                    wait_for(|| relay.may_begin.load(SeqCst) >= k || relay.stop.load(SeqCst));
                    if relay.stop.load(SeqCst) {
                        return;
                    }
                    let after_mark = raw(lock).is_writer_waiting();
                    relay.began.store(k + 1, SeqCst);
                    let g = lock.read();
                    if after_mark && !relay.writer_done.load(SeqCst) {
                        relay.late_entries.fetch_add(1, SeqCst);
                    }
                    relay.inside.fetch_add(1, SeqCst);
                    relay.entered.store(k + 1, SeqCst);
                    relay.may_begin.store(k + 1, SeqCst);
                    // Hold on until the successor is inside, unless the lock holds it back
                    // for a waiting writer (then waiting would deadlock by design).
                    wait_for(|| {
                        relay.entered.load(SeqCst) >= k + 2
                            || relay.stop.load(SeqCst)
                            || (relay.began.load(SeqCst) >= k + 2
                                && raw(lock).is_writer_waiting()
                                && {
                                    relay.held_back.fetch_add(1, SeqCst);
                                    true
                                })
                    });
                    std::hint::black_box(*g);
                    relay.inside.fetch_sub(1, SeqCst);
                    relay.handoffs.fetch_add(1, SeqCst);
                    drop(g);
                    k += RELAY;
                }
            });
        }
        let (lock, relay, writer_at) = (&lock, &relay, &writer_at);
        s.spawn(move || {
            wait_for(|| relay.entered.load(SeqCst) >= WARM_UP);
            let mut g = lock.write();
            assert_eq!(relay.inside.load(SeqCst), 0, "the writer is inside with relay readers");
            *g += 1;
            writer_at.store(relay.entered.load(SeqCst), SeqCst);
            relay.writer_done.store(true, SeqCst);
        });
        wait_for(|| relay.writer_done.load(SeqCst));
        let at = writer_at.load(SeqCst);
        // The relay must go on after the writer: its held-back reader gets in.
        wait_for(|| relay.entered.load(SeqCst) >= at + AFTER);
        relay.stop.store(true, SeqCst);
    });
    finished.store(true, SeqCst);
    assert_eq!(*lock.read(), 1, "the writer never wrote");
    assert_eq!(
        relay.late_entries.load(SeqCst),
        0,
        "a reader that came after the writer's mark entered first"
    );
    assert!(
        relay.held_back.load(SeqCst) >= 1,
        "the writer got in without the relay being held back"
    );
    assert!(writer_at.load(SeqCst) >= WARM_UP);
    assert!(relay.handoffs.load(SeqCst) >= WARM_UP + AFTER);
}

/// Phase fairness by counting: while a writer holds the lock, writers, upgradable readers and
/// readers queue in a known order (each registration confirmed through the lock's diagnostics
/// before the next starts). Then the writer leaves. Every registered reader must enter after
/// exactly one write phase, although writers that registered before it are still queued, and
/// every turn holder must get the lock once. (The order among turn holders is the `Mutex`
/// policy's, not arrival order; its bound is `writer_hand_off_bound` below.)
#[test]
fn registered_readers_wait_one_write_phase_and_every_writer_gets_in() {
    // Under Miri the first 8 rounds queue 14 readers in all (rounds 0, 1 and 4 have none).
    const ROUNDS: usize = if cfg!(miri) {
        8
    } else if cfg!(debug_assertions) {
        30
    } else {
        100
    };
    let finished = watchdog("the phase-fairness test");
    let lock = FairRwLock::new(());
    // Completed write phases (bumped by each writer just before it unlocks).
    let phases = AtomicUsize::new(0);
    let mut max_phases_waited = 0;
    let mut readers_seen = 0;
    for round in 0..ROUNDS {
        // A different queue each round: bits of `round` pick W (writer), U (upgradable reader
        // that upgrades), R (reader).
        let pattern: Vec<u8> = (0..7)
            .map(|i| match (round.wrapping_mul(2654435761) >> (3 * i)) % 3 {
                0 => b'W',
                1 => b'U',
                _ => b'R',
            })
            .collect();
        let turns = Mutex::new(Vec::new());
        let waited = Mutex::new(Vec::new());
        let holder = lock.write();
        let base = phases.load(SeqCst);
        let mut arrivals = Vec::new();
        std::thread::scope(|s| {
            let (mut queued, mut readers) = (1, 0);
            for (id, &kind) in pattern.iter().enumerate() {
                let (lock, phases, turns, waited) = (&lock, &phases, &turns, &waited);
                match kind {
                    b'W' => {
                        s.spawn(move || {
                            let _g = lock.write();
                            turns.lock().unwrap().push(id);
                            phases.fetch_add(1, SeqCst);
                        });
                        queued += 1;
                        arrivals.push(id);
                        wait_for(|| raw(lock).queued_writers() == queued);
                    }
                    b'U' => {
                        s.spawn(move || {
                            let g = lock.upgradable_read();
                            turns.lock().unwrap().push(id);
                            let _g = FairRwLockUpgradableReadGuard::upgrade(g);
                            phases.fetch_add(1, SeqCst);
                        });
                        queued += 1;
                        arrivals.push(id);
                        wait_for(|| raw(lock).queued_writers() == queued);
                    }
                    _ => {
                        s.spawn(move || {
                            let _g = lock.read();
                            waited.lock().unwrap().push(phases.load(SeqCst) - base);
                        });
                        readers += 1;
                        wait_for(|| raw(lock).registered_readers() == readers);
                    }
                }
            }
            phases.fetch_add(1, SeqCst);
            drop(holder);
        });
        let mut served = turns.lock().unwrap().clone();
        served.sort_unstable();
        assert_eq!(served, arrivals, "turn holders lost or doubled in round {round} ({pattern:?})");
        for &w in waited.lock().unwrap().iter() {
            assert_eq!(w, 1, "a reader waited {w} write phases in round {round} ({pattern:?})");
            max_phases_waited = max_phases_waited.max(w);
            readers_seen += 1;
        }
    }
    finished.store(true, SeqCst);
    assert!(readers_seen > ROUNDS, "too few queued readers to say anything");
    assert!(max_phases_waited <= 1);
}

/// Writer A takes and releases the lock in a tight loop, counting its acquisitions and those
/// at whose release it saw another writer registered for the turn (B is the only one). Writer
/// B, again and again, takes the lock once. Once B has registered, A may hold the lock at most
/// `FAIR_RWLOCK_HANDOFF_AFTER` times before B gets it: the Ruby 1.9.3 GVL case for writers.
/// Counted, never timed; the count from B's call to `write` is only reported, since B may be
/// descheduled before it registers (see `hand_off_bound` in `tests/mutex.rs`).
///
/// A holds each write lock for `HOLD_SPINS` spin hints and checks for B just before its
/// release (B, once registered, leaves only by taking the lock, so that release is one the
/// turn counts against B), and B starts each trial only once A's count has moved: checked
/// right after acquiring, with A off the CPU during B's trials, CI once saw no contention in
/// all 300 trials.
#[test]
fn writer_hand_off_bound() {
    const TRIALS: u32 = if cfg!(miri) { 10 } else { 300 };
    const WARM_UP: u64 = if cfg!(miri) { 20 } else { 1000 };
    const K: u64 = senju_sync::FAIR_RWLOCK_HANDOFF_AFTER as u64;
    const HOLD_SPINS: u32 = 200;
    let finished = watchdog("the writer hand-off test");
    let lock = lock_api::RwLock::<RawFairRwLock<NoBarge>, ()>::new(());
    let acquisitions = AtomicU64::new(0);
    let seen_waiter = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let (mut worst, mut waited) = (0, 0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(SeqCst) {
                let g = lock.write();
                acquisitions.fetch_add(1, SeqCst);
                // Hold the lock a little, so that B's attempt lands in a hold and B registers
                // while A still owns the lock.
                for _ in 0..HOLD_SPINS {
                    std::hint::spin_loop();
                }
                // Checked just before the release, which the turn counts against B if B is
                // registered now.
                // SAFETY: a read-only snapshot of the diagnostics; the guard is not touched.
                if unsafe { lock.raw() }.queued_writers() > 1 {
                    seen_waiter.fetch_add(1, SeqCst);
                }
                drop(g);
            }
        });
        while acquisitions.load(SeqCst) < WARM_UP {
            std::hint::spin_loop();
        }
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let _stop = StopOnDrop(&stop);
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        for trial in 0..TRIALS {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for _ in 0..seed % 2000 {
                std::hint::spin_loop();
            }
            // Start the trial only while A is running (see above).
            let running = acquisitions.load(SeqCst);
            while acquisitions.load(SeqCst) == running {
                std::thread::yield_now();
            }
            let seen_before = seen_waiter.load(SeqCst);
            let before = acquisitions.load(SeqCst);
            let g = lock.write();
            let after = acquisitions.load(SeqCst);
            let seen_after = seen_waiter.load(SeqCst);
            drop(g);
            assert!(
                seen_after - seen_before <= K,
                "trial {trial}: A saw B registered during {} of its acquisitions (K = {K})",
                seen_after - seen_before
            );
            worst = worst.max(after - before);
            waited += u32::from(after > before);
        }
    });
    finished.store(true, SeqCst);
    let seen = seen_waiter.load(SeqCst);
    assert!(seen > 0, "A never saw B registered: no contention");
    eprintln!(
        "B waited in {waited} of {TRIALS} trials, A saw it registered during {seen} acquisitions; \
         counted from the call to write, at most {worst} of A's acquisitions"
    );
}
