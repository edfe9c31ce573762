//! How long a cache line takes to go from one CPU to another and back, measured as a
//! ping-pong between two threads pinned to two CPUs.
//!
//! Every contended lock moves its lock word between cores on each hand-over, so this figure
//! bounds how fast any of them can be when threads alternate. On the project's 2-vCPU VM it
//! is not a constant: the round trip is about 50-100 ns most of the time and about 400-500 ns
//! for stretches of seconds, as the host moves the vCPUs (lab 0022). The lock benchmarks record one
//! probe before every run, so a reader can tell which runs met the slow mode.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::rounds::Padded;
use crate::stats::{Spread, median};

/// Round trips per burst; a probe runs [`BURSTS`] bursts and keeps the median burst, so one
/// preemption of either thread does not decide the figure.
const ROUND_TRIPS: u64 = 2000;
/// Bursts per probe: a probe takes 5 × 2000 round trips, 1-5 ms on the VM.
const BURSTS: usize = 5;

/// Nanoseconds per round trip of a cache line between the first two CPUs this process may
/// run on (the median of 5 bursts of 2000), or `None` where it cannot be measured: fewer than
/// two CPUs, or the threads could not be pinned.
pub fn line_round_trip_ns() -> Option<f64> {
    let (a, b) = two_cpus()?;
    let ball = Padded(AtomicU64::new(0));
    let bursts = std::thread::scope(|s| {
        let ball = &ball.0;
        // The measuring side turns each even value into the next odd one, the partner each
        // odd value into the next even one; either side that cannot go on stores `ABORT`.
        // Both advance by compare-and-swap, so an `ABORT` is never overwritten.
        let partner = s.spawn(move || {
            if !pin(b) {
                ball.store(ABORT, Ordering::Release);
                return false;
            }
            let last = BURSTS as u64 * ROUND_TRIPS * 2;
            (1..last).step_by(2).all(|want| pass(ball, want))
        });
        // The measuring side runs in a thread of its own too: pinning the caller would pin
        // every thread it starts afterwards (threads inherit their creator's mask).
        let measurer = s.spawn(move || {
            let mut bursts = Vec::with_capacity(BURSTS);
            if pin(a) {
                let mut next = 0;
                'bursts: for _ in 0..BURSTS {
                    let t0 = Instant::now();
                    for _ in 0..ROUND_TRIPS {
                        if !pass(ball, next) {
                            break 'bursts;
                        }
                        next += 2;
                    }
                    bursts.push(t0.elapsed().as_nanos() as f64 / ROUND_TRIPS as f64);
                }
            }
            if bursts.len() < BURSTS {
                ball.store(ABORT, Ordering::Release);
                bursts.clear();
            }
            bursts
        });
        let bursts = measurer.join().unwrap_or_default();
        let answered = partner.join().unwrap_or(false);
        if answered { bursts } else { Vec::new() }
    });
    (!bursts.is_empty()).then(|| median(bursts))
}

/// Stored by a side of the ping-pong that cannot go on.
const ABORT: u64 = u64::MAX;

/// Waits for `ball` to hold `want`, then passes it on as `want + 1`; false once the other
/// side has aborted.
fn pass(ball: &AtomicU64, want: u64) -> bool {
    loop {
        match ball.load(Ordering::Acquire) {
            // Only this side moves the ball on from `want`; the swap fails only if the other
            // side aborted meanwhile.
            v if v == want => {
                return ball
                    .compare_exchange(want, want + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
            }
            ABORT => return false,
            _ => std::hint::spin_loop(),
        }
    }
}

/// The first two CPUs of this process's affinity mask.
fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: `cpu_set_t` is plain data; zeroed is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; `set` is a valid `cpu_set_t` of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `CPU_ISSET` reads the set it is given, for CPUs below `CPU_SETSIZE`.
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    Some((cpus.next()?, cpus.next()?))
}

/// Pins the calling thread to `cpu`; whether that worked.
fn pin(cpu: usize) -> bool {
    // SAFETY: `cpu_set_t` is plain data; zeroed is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` came from the affinity mask, so it is below `CPU_SETSIZE`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a valid `cpu_set_t` of the size passed.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// Round-trip probes summed up: how many runs met the slow mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeSummary {
    /// Runs with a probe.
    pub probed: usize,
    /// The probes' median, fastest and slowest round trip, ns.
    pub round_trip_ns: Spread,
    /// Probes slower than twice the fastest: runs that met a slow mode.
    pub slow: usize,
}

impl ProbeSummary {
    /// Sums up `probes` (runs without a probe are skipped); `None` if none had one.
    pub fn of(probes: impl IntoIterator<Item = Option<f64>>) -> Option<Self> {
        let p: Vec<f64> = probes.into_iter().flatten().collect();
        if p.is_empty() {
            return None;
        }
        let round_trip_ns = Spread::of(p.iter().copied());
        let slow = p.iter().filter(|&&x| x > 2.0 * round_trip_ns.min).count();
        Some(Self { probed: p.len(), round_trip_ns, slow })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_measures_where_two_cpus_exist() {
        let two = two_cpus().is_some();
        let probe = line_round_trip_ns();
        // Pinning may be refused in a restricted cpuset; then there is no figure, not a
        // wrong one.
        if let Some(ns) = probe {
            assert!(two);
            assert!(ns.is_finite() && ns > 0.0, "round trip {ns} ns");
        }
    }

    #[test]
    fn summary_counts_probes_slower_than_twice_the_fastest() {
        let s = ProbeSummary::of([Some(100.0), None, Some(198.0), Some(450.0), Some(200.0)])
            .expect("probes");
        assert_eq!(s.probed, 4);
        assert_eq!(s.slow, 1);
        assert_eq!(s.round_trip_ns.min, 100.0);
        assert_eq!(s.round_trip_ns.max, 450.0);
        assert_eq!(s.round_trip_ns.median, 199.0);
        assert!(ProbeSummary::of([None, None]).is_none());
    }
}
