//! One thread, read lock / busy loop / unlock / busy loop, `senju::SpinRwLock` against
//! `parking_lot::RwLock`, alternating. Arguments: busy-loop turns inside the lock (92 is
//! the lab's 100 ns on its machine) and outside it (46, the lab's 50 ns gap).

use std::hint::black_box;
use std::time::Instant;

/// The lab's busy loop (`senju-bench`'s `work::spin`): never inlined, so both locks run the
/// very same code for their critical section and their gap.
#[inline(never)]
fn spin(turns: u64, seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..turns {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
    x
}

/// `n` operations: `read(i)` (lock, critical section, unlock), then the gap.
#[inline(never)]
fn run(read: impl Fn(u64) -> u64, n: u64, gap: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = acc.wrapping_add(read(i));
        acc = acc.wrapping_add(black_box(spin(gap, acc)));
    }
    acc
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let arg =
        |i: usize, d: u64| std::env::args().nth(i).map_or(d, |s| s.parse().expect("a number"));
    let (cs, gap) = (arg(1, 92), arg(2, 46));
    let n = 2_000_000u64;
    let senju = Box::new(senju_sync::SpinRwLock::new([0u64; 8]));
    let pl = Box::new(parking_lot::RwLock::new([0u64; 8]));
    let (mut s, mut p, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..15 {
        let t = Instant::now();
        black_box(run(|i| senju.read()[0].wrapping_add(black_box(spin(cs, i))), n, gap));
        let a = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        black_box(run(|i| pl.read()[0].wrapping_add(black_box(spin(cs, i))), n, gap));
        let b = t.elapsed().as_nanos() as f64 / n as f64;
        s.push(a);
        p.push(b);
        ratio.push(b / a);
    }
    let (lo, hi) = ratio.iter().fold((f64::MAX, 0.0f64), |(l, h), &r| (l.min(r), h.max(r)));
    println!(
        "turns {cs} in, {gap} out: senju {:.2} ns/op, parking_lot {:.2} ns/op; \
         senju's speed over parking_lot's, median of pairs {:.4} [{lo:.4}-{hi:.4}]",
        median(&mut s),
        median(&mut p),
        median(&mut ratio)
    );
}
