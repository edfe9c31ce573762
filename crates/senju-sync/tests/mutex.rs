//! `Mutex` on real threads: exclusion under a mix of every operation, the count-bounded
//! hand-off (the Ruby 1.9.3 GVL case: a thread that releases and re-takes the lock in a loop
//! must not keep a waiter out), and `unlock_fair`. Every check counts; none is timed. A
//! watchdog only turns a hang into a failure.
//!
//! Under Miri, which runs these threads about a thousand times slower, the loops are shorter
//! (each size reads `if cfg!(miri) { .. } else { .. }`):
//! `CARGO_TARGET_DIR=/tmp/miri-target cargo +nightly miri test -p senju-sync --test mutex
//! -- --test-threads=1`, and again with `MIRIFLAGS="-Zmiri-tree-borrows"`.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::NoBarge;
use senju_sync::{Adaptive, Mutex, RawMutex, Relax};

/// Ends the process if the test has not finished in `secs` seconds (a hang, not a slow run).
fn watchdog(name: &'static str, secs: u64) -> mpsc::Sender<()> {
    let (done, wait) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(Duration::from_secs(secs)) {
            eprintln!("{name}: no progress after {secs} s, the lock hangs");
            std::process::exit(101);
        }
    });
    done
}

/// The threaded tests run one at a time: a hand-off test needs its two threads running, and on
/// a 2-core machine tests side by side mostly measure preemption.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A small pseudo-random generator (xorshift), so runs vary without a dependency.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn eight_threads_mixing_every_operation_exclude_each_other() {
    // The watchdog starts once this test has the machine: waiting for another test is not a hang.
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _done = watchdog("mixing", 120);
    const THREADS: usize = 8;
    const ROUNDS: u64 = if cfg!(miri) { 40 } else { 20_000 };
    let lock = Mutex::new(0u64);
    let inside = AtomicUsize::new(0);
    let enter = || assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two threads inside");
    let leave = || assert_eq!(inside.fetch_sub(1, Ordering::SeqCst), 1, "two threads inside");
    let taken = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (lock, taken) = (&lock, &taken);
            s.spawn(move || {
                let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1);
                for _ in 0..ROUNDS {
                    match next(&mut seed) % 4 {
                        0 => {
                            let mut g = lock.lock();
                            enter();
                            *g += 1;
                            leave();
                        }
                        1 => {
                            if let Some(mut g) = lock.try_lock() {
                                enter();
                                *g += 1;
                                leave();
                            } else {
                                continue;
                            }
                        }
                        2 => {
                            let mut g = lock.lock();
                            enter();
                            *g += 1;
                            leave();
                            lock_api::MutexGuard::unlock_fair(g);
                        }
                        _ => {
                            let mut g = lock.lock();
                            enter();
                            *g += 1;
                            leave();
                            // Gives the lock to a waiter (if any) and takes it back.
                            lock_api::MutexGuard::bump(&mut g);
                            enter();
                            *g += 1;
                            leave();
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    taken.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(*lock.lock(), taken.load(Ordering::Relaxed));
    assert!(!lock.is_locked());
}

/// How many trials each `hand_off_bound` test makes.
const TRIALS: u32 = if cfg!(miri) { 10 } else { 300 };

/// How long A holds the lock in `hand_off_bound`, in spin-loop hints: long enough that B,
/// arriving at a random moment, usually finds the lock held and registers before A releases.
const HOLD_SPINS: u32 = 200;

/// Thread A locks and unlocks in a tight loop, counting its acquisitions; thread B, again
/// and again, reads A's count, calls `lock`, and reads the count once it owns the lock. Once
/// B has registered as a waiter, it must get in within `K` of A's acquisitions. Without the
/// hand-off, A re-takes the lock before B is scheduled almost every time (the Ruby 1.9.2
/// hang).
///
/// The bound is asserted with a count that is exact by construction: A counts the
/// acquisitions at whose release it saw a registered waiter (B is the only possible one), a
/// subset of the releases the lock counts against B, so it can exceed `K` only if the lock
/// fails to hand off. (Checked right after acquiring instead, the count stays at 0 with
/// `K = 1` unless B registers in the few instructions between A's acquire and its check: the
/// release after B registers already hands off.) The looser count "A's acquisitions since B
/// called `lock`" is reported, not asserted: B registers only after its barging phase
/// (`Relax::barge`; none with `NoBarge`), and when the OS or the hypervisor deschedules B
/// before it registers (routine on a loaded 2-core VM), A runs on freely and no lock can bound
/// what it does before B has registered.
///
/// `must_wait`: B must have registered in some trial (with `NoBarge` it registers at every
/// miss; with the default policy it may win every time while barging).
fn hand_off_bound<const K: u32, R: Relax>(trials: u32, must_wait: bool) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _done = watchdog("hand-off", 120);
    let lock = lock_api::Mutex::<RawMutex<K, R>, ()>::new(());
    let acquisitions = AtomicU64::new(0);
    let seen_waiter = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let mut worst = 0;
    let mut waited = 0;
    let mut over = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let g = lock.lock();
                acquisitions.fetch_add(1, Ordering::SeqCst);
                // Hold the lock a little, so that B's attempt lands in a hold and B registers
                // while A still owns the lock.
                for _ in 0..HOLD_SPINS {
                    std::hint::spin_loop();
                }
                // Checked just before the release: B, once registered, leaves only by taking
                // the lock, so this release is one the lock counts against B.
                // SAFETY: only read a snapshot of the state word; the guard is not touched.
                if unsafe { lock.raw() }.has_waiters() {
                    seen_waiter.fetch_add(1, Ordering::SeqCst);
                }
                drop(g);
            }
        });
        // Let A get going.
        let warm_up = if cfg!(miri) { 20 } else { 1000 };
        while acquisitions.load(Ordering::SeqCst) < warm_up {
            std::hint::spin_loop();
        }
        // Stops A however this thread leaves (a failed assertion included).
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        let mut seed = 0x2545_F491_4F6C_DD1D;
        for trial in 0..trials {
            for _ in 0..next(&mut seed) % 2000 {
                std::hint::spin_loop();
            }
            // Start the trial only while A is running: on a loaded 2-core machine A can be off
            // the CPU for a whole time slice, long enough for all of B's trials to find the
            // lock free (CI once saw no contention at all).
            let running = acquisitions.load(Ordering::SeqCst);
            while acquisitions.load(Ordering::SeqCst) == running {
                std::thread::yield_now();
            }
            let seen_before = seen_waiter.load(Ordering::SeqCst);
            let before = acquisitions.load(Ordering::SeqCst);
            let g = lock.lock();
            let after = acquisitions.load(Ordering::SeqCst);
            let seen_after = seen_waiter.load(Ordering::SeqCst);
            drop(g);
            assert!(
                seen_after - seen_before <= u64::from(K),
                "trial {trial}: A saw B waiting during {} acquisitions (K = {K})",
                seen_after - seen_before
            );
            let bypassed = after - before;
            over += u32::from(bypassed > u64::from(K));
            worst = worst.max(bypassed);
            waited += u32::from(bypassed > 0);
        }
    });
    // The test only means something if B had to wait in some trials; A saw B waiting at all
    // only if it was contending.
    let seen = seen_waiter.load(Ordering::SeqCst);
    assert!(!must_wait || seen > 0, "A never saw B waiting: no contention");
    eprintln!(
        "K = {K}, {}: B waited in {waited} of {trials} trials, A saw it registered during {seen} \
         acquisitions; counted from the call to lock, at most {worst} of A's acquisitions, more \
         than K in {over} trials (B barging, or descheduled before it registered)",
        std::any::type_name::<R>()
    );
}

#[test]
fn hand_off_bound_default_k() {
    hand_off_bound::<8, NoBarge>(TRIALS, true);
}

#[test]
fn hand_off_bound_k_3() {
    hand_off_bound::<3, NoBarge>(TRIALS, true);
}

#[test]
fn hand_off_bound_k_1() {
    hand_off_bound::<1, NoBarge>(TRIALS, true);
}

#[test]
fn hand_off_bound_default_policy() {
    hand_off_bound::<8, Adaptive>(TRIALS, false);
}

#[test]
fn unlock_fair_hands_off_to_the_waiter() {
    let _done = watchdog("unlock_fair", 120);
    let lock = RawMutex::<1000>::new();
    let waiter_got_in = AtomicBool::new(false);
    let rounds = if cfg!(miri) { 10 } else { 100 };
    for round in 0..rounds {
        waiter_got_in.store(false, Ordering::SeqCst);
        lock.lock();
        std::thread::scope(|s| {
            s.spawn(|| {
                lock.lock();
                waiter_got_in.store(true, Ordering::SeqCst);
                // SAFETY: taken just above.
                unsafe { lock.unlock() };
            });
            while !lock.has_waiters() {
                std::thread::yield_now();
            }
            // SAFETY: taken at the top of the round.
            unsafe { lock.unlock_fair() };
            // With K = 1000 a plain unlock would let us barge straight back in; after a fair
            // unlock the lock is the waiter's, so we get it only after the waiter has been in.
            lock.lock();
            assert!(
                waiter_got_in.load(Ordering::SeqCst),
                "round {round}: unlock_fair let us barge"
            );
            // SAFETY: taken just above.
            unsafe { lock.unlock() };
        });
    }
    assert!(!lock.is_locked());
}

/// A `Relax` policy that panics while its thread waits (queued, counted in the lock's state)
/// aborts the process: unwinding could not take the waiter back out of the state, and the
/// lock would later be handed to nobody and hang every thread. Run in a child process (this
/// test binary again), whose death by `SIGABRT` is the pass.
#[test]
#[cfg_attr(miri, ignore = "runs this test binary again as a child process, which Miri cannot")]
fn a_panicking_relax_aborts_instead_of_wedging_the_lock() {
    use std::sync::Arc;

    const CHILD: &str = "SENJU_SYNC_PANICKING_RELAX_CHILD";
    if std::env::var_os(CHILD).is_some() {
        #[derive(Default)]
        struct Panics;
        impl Relax for Panics {
            fn relax(&mut self) -> bool {
                panic!("a policy that panics");
            }
        }
        let lock = Arc::new(lock_api::Mutex::<RawMutex<8, Panics>, ()>::new(()));
        let held = lock.lock();
        let waiter = Arc::clone(&lock);
        let t = std::thread::spawn(move || {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(waiter.lock())));
        });
        let _ = t.join();
        drop(held);
        // Reached only if the panic unwound: the lock is then wedged.
        std::process::exit(0);
    }
    assert_child_aborts("a_panicking_relax_aborts_instead_of_wedging_the_lock", CHILD);
}

/// The same for a policy whose `Drop` panics: the value was dropped outside the abort guard
/// (when a wait ended, or when a fresh value replaced it after a park), so the panic
/// unwound out of the wait.
#[test]
#[cfg_attr(miri, ignore = "runs this test binary again as a child process, which Miri cannot")]
fn a_relax_whose_drop_panics_aborts_too() {
    use std::sync::Arc;

    const CHILD: &str = "SENJU_SYNC_PANICKING_RELAX_DROP_CHILD";
    if std::env::var_os(CHILD).is_some() {
        #[derive(Default)]
        struct PanicsOnDrop;
        impl Relax for PanicsOnDrop {
            fn relax(&mut self) -> bool {
                false
            }
        }
        // Once only: a second panic during the unwinding would abort by itself.
        static PANICKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        impl Drop for PanicsOnDrop {
            fn drop(&mut self) {
                if !PANICKED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    panic!("a policy whose drop panics");
                }
            }
        }
        let lock = Arc::new(lock_api::Mutex::<RawMutex<8, PanicsOnDrop>, ()>::new(()));
        let held = lock.lock();
        let waiter = Arc::clone(&lock);
        let t = std::thread::spawn(move || {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(waiter.lock())));
        });
        // Once the thread has queued, the unlock wakes it: it drops its policy values.
        // SAFETY: the raw lock is only inspected.
        while unsafe { lock.raw() }.registered_waiters() == 0 {
            std::thread::yield_now();
        }
        drop(held);
        let _ = t.join();
        // Reached only if the panic unwound.
        std::process::exit(0);
    }
    assert_child_aborts("a_relax_whose_drop_panics_aborts_too", CHILD);
}

/// Runs the test `name` of this binary again in a child process with `child_var` set, and
/// asserts that the child died of `SIGABRT` (6 on Linux; the test crate does not depend on
/// `libc`).
fn assert_child_aborts(name: &str, child_var: &str) {
    use std::os::unix::process::ExitStatusExt;
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture"])
        .env(child_var, "1")
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(6), "the child ended with {status:?}");
}
