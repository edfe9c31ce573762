//! The random numbers of the perf workloads: a small, fast, seedable generator per thread.
//!
//! Tkrzw draws with `std::mt19937` and libstdc++'s `uniform_int_distribution`, whose exact
//! sequence depends on the GCC version; senju reproduces the distributions (uniform key
//! numbers, uniform value lengths, the operation shares), not Tkrzw's exact sequence.

/// xorshift64*: one word of state, good enough for choosing keys and operations.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for `seed`; different seeds give unrelated sequences.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `[0, n)` (0 when `n` is 0). The modulo bias is below 2^-40 for the
    /// ranges used here.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `1/n`: Tkrzw's `op_dist(mt) % n == 0`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn one_in_five_is_about_a_fifth() {
        let mut r = Rng::new(7);
        let hits = (0..100_000).filter(|_| r.one_in(5)).count();
        assert!((19_000..21_000).contains(&hits), "{hits}");
        assert!((0..1000).all(|_| r.below(3) < 3));
        assert_eq!(r.below(0), 0);
    }
}
