//! One thread, no contention: nanoseconds per operation of senju's locks and parking_lot's,
//! in the loop of lab 0001's throughput cells (draw read or write, run the critical section
//! on the shared line of counters, then `gap` turns of the busy loop), alternating the locks
//! round by round in one process. It isolates the T=1 cells, whose figures on a shared
//! machine jump between modes that last seconds (lab 0001, 2026-12-02); pin it to one CPU
//! with `taskset -c N` to take the scheduler out as well.
//!
//! `cargo run --release -p senju-bench --example uncontended -- [rounds] [ops] [gap]`
//! (defaults 15, 5000000, 0; the lab's 50 ns gap is about 37 turns on a 3 GHz core, see the
//! `Busy loop` line of a lab summary)

use std::hint::black_box;
use std::time::Instant;

use senju_bench::work::{Rng, Shared, spin};
use senju_bench::{BenchMutex, BenchRwLock};

type Case = (&'static str, fn(u64, u64) -> f64);

/// ns per operation of `ops` operations, `read_percent` of them reads.
fn rw<L: BenchRwLock<Shared>>(ops: u64, gap: u64, read_percent: u32) -> f64 {
    let lock = L::new(Shared::default());
    let mut rng = Rng::new(1);
    let mut bad = 0u64;
    let t0 = Instant::now();
    for i in 0..ops {
        if rng.percent() < read_percent {
            bad += u64::from(!lock.read(|d| d.read(0)));
        } else {
            lock.write(|d| d.write(0));
        }
        black_box(spin(gap, i));
    }
    let ns = t0.elapsed().as_nanos() as f64 / ops as f64;
    assert_eq!(bad, 0, "a read saw a torn write");
    ns
}

fn mutex<M: BenchMutex<Shared>>(ops: u64, gap: u64) -> f64 {
    let lock = M::new(Shared::default());
    let t0 = Instant::now();
    for i in 0..ops {
        lock.lock(|d| d.write(0));
        black_box(spin(gap, i));
    }
    t0.elapsed().as_nanos() as f64 / ops as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(15, |a| a.parse().expect("rounds: a number"));
    let ops: u64 = args.next().map_or(5_000_000, |a| a.parse().expect("ops: a number"));
    let gap: u64 = args.next().map_or(0, |a| a.parse().expect("gap: a number of turns"));
    let cases: [Case; 8] = [
        ("senju::SpinRwLock read", |n, g| rw::<senju_sync::SpinRwLock<Shared>>(n, g, 100)),
        ("parking_lot::RwLock read", |n, g| rw::<parking_lot::RwLock<Shared>>(n, g, 100)),
        ("senju::FairRwLock read", |n, g| rw::<senju_sync::FairRwLock<Shared>>(n, g, 100)),
        ("senju::SpinRwLock write", |n, g| rw::<senju_sync::SpinRwLock<Shared>>(n, g, 0)),
        ("parking_lot::RwLock write", |n, g| rw::<parking_lot::RwLock<Shared>>(n, g, 0)),
        ("senju::FairRwLock write", |n, g| rw::<senju_sync::FairRwLock<Shared>>(n, g, 0)),
        ("senju::Mutex", mutex::<senju_sync::Mutex<Shared>>),
        ("parking_lot::Mutex", mutex::<parking_lot::Mutex<Shared>>),
    ];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        for k in 0..cases.len() {
            let i = (k + round) % cases.len();
            // On a thread of its own, as the lab's cells run.
            let f = cases[i].1;
            ns[i].push(std::thread::spawn(move || f(ops, gap)).join().expect("case panicked"));
        }
    }
    println!("{rounds} rounds of {ops} operations, {gap} busy-loop turns after each");
    println!("ns per operation: median [min-max]");
    for (i, (name, _)) in cases.iter().enumerate() {
        let v = &mut ns[i];
        v.sort_by(f64::total_cmp);
        println!("{name:26} {:6.2} [{:.2}-{:.2}]", v[v.len() / 2], v[0], v[v.len() - 1]);
    }
}
