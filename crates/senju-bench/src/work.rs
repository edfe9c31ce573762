//! The protected data and the calibrated busy work done inside and outside the lock.
//!
//! Critical sections are a busy loop whose length is given in nanoseconds and turned into loop
//! turns by one calibration at start. The loop is seeded from the protected data and a writer
//! stores its result into every word, so the work cannot be hoisted out of the lock, and a
//! reader that sees words that differ has caught a writer inside: the scenarios count these
//! as exclusion violations (always 0 for a correct lock).

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Words in [`Shared`]: one 64-byte cache line.
const WORDS: usize = 8;

/// The data every benchmarked lock protects: one cache line of counters that a writer keeps
/// equal to each other.
#[derive(Debug, Default, Clone)]
#[repr(align(64))]
pub struct Shared {
    words: [u64; WORDS],
}

impl Shared {
    /// A reader's critical section: reads every word, checks they agree, then spins `turns`
    /// seeded from them. Returns `false` if the words disagree (a writer was inside).
    #[inline]
    pub fn read(&self, turns: u64) -> bool {
        let first = self.words[0];
        let consistent = self.words.iter().all(|&w| w == first);
        black_box(spin(turns, first));
        consistent
    }

    /// A writer's critical section: spins `turns` seeded from the data, then writes the next
    /// value into every word.
    #[inline]
    pub fn write(&mut self, turns: u64) {
        let next = self.words[0].wrapping_add(1);
        black_box(spin(turns, next));
        for w in &mut self.words {
            *w = next;
        }
    }

    /// How many writes this data has seen (the common value of its words).
    pub fn version(&self) -> u64 {
        self.words[0]
    }
}

/// `turns` steps of a dependent multiply-add chain that the optimizer cannot remove.
///
/// Never inlined: every peer then runs the very same machine code for its critical section
/// and its work outside the lock. Inlined into each lock's monomorphized loop, the chain's
/// placement differed between peers, and at one thread with 2 µs sections two locks whose
/// lock paths cost a few ns differed by 2% (0.531 vs 0.542 Mops/s over 15 rounds).
#[inline(never)]
pub fn spin(turns: u64, seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..turns {
        x = black_box(
            x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407),
        );
    }
    x
}

/// The result of calibrating [`spin`](fn@spin) on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Nanoseconds per turn of [`spin`](fn@spin) (median of several timed runs).
    pub ns_per_turn: f64,
}

impl Calibration {
    /// Times [`spin`](fn@spin) a few times (about 40 ms in all) and keeps the median rate.
    pub fn measure() -> Self {
        let turns = 200_000u64;
        // Warm up the core's clock and caches first.
        black_box(spin(turns, 1));
        let mut rates: Vec<f64> = (0..7)
            .map(|i| {
                let t = Instant::now();
                black_box(spin(turns, i));
                t.elapsed().as_nanos() as f64 / turns as f64
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        Self { ns_per_turn: rates[rates.len() / 2].max(0.01) }
    }

    /// Loop turns that take about `ns` nanoseconds (0 for 0).
    pub fn turns(&self, ns: u64) -> u64 {
        (ns as f64 / self.ns_per_turn).round() as u64
    }

    /// How long `turns` take, by this calibration.
    pub fn duration(&self, turns: u64) -> Duration {
        Duration::from_nanos((turns as f64 * self.ns_per_turn) as u64)
    }
}

/// A small xorshift generator: each worker draws its read/write choices from its own.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value in `0..100`.
    #[inline]
    pub fn percent(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        ((x >> 32) % 100) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_keep_words_equal() {
        let mut s = Shared::default();
        s.write(3);
        s.write(0);
        assert_eq!(s.version(), 2);
        assert!(s.read(5));
        s.words[3] = 9;
        assert!(!s.read(0));
    }

    #[test]
    fn calibration_is_positive() {
        let c = Calibration::measure();
        assert!(c.ns_per_turn > 0.0);
        assert_eq!(c.turns(0), 0);
    }
}
