//! Lab 0022: does a loop of `set_many` then `get_many` (1000 keys of 100,000, 16-byte
//! values; the Ruby binding's batch case) scale from 1 to 2 threads when both threads share
//! one store, and when each has its own?
//!
//! Usage: lab0022-mix ROUNDS SECONDS [shared|separate|both]
//! Each round runs 1 thread, then 2 threads on one store, then 2 threads on two stores
//! (for `both`), every run on fresh files in $TMPDIR (default /tmp). Prints one Markdown row
//! per run: items per second (a set or a get is one item), cores busy (process CPU time over
//! wall time) and CPU nanoseconds per item. With `PROBE=path/to/senju-lockbench` it also
//! runs `senju-lockbench probe --count 1` right before and right after each run and prints
//! the cache line round trips between the two CPUs it measured.

use std::time::{Duration, Instant};

const KEYS: u64 = 100_000;
const BATCH: usize = 1000;
const VALUE: &[u8] = b"vvvvvvvvvvvvvvvv";

fn cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn key(i: u64) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

/// A fresh store holding every key once.
fn fresh(path: &std::path::Path) -> senju::Db {
    let _ = std::fs::remove_file(path);
    let db = senju::Db::builder().create(true).open(path).expect("open the store");
    let keys: Vec<u64> = (0..KEYS).collect();
    for c in keys.chunks(BATCH) {
        let pairs: Vec<(Vec<u8>, &[u8])> = c.iter().map(|&i| (key(i), VALUE)).collect();
        db.set_many(&pairs).expect("fill");
    }
    db
}

/// Runs `threads` threads for `seconds`, thread `t` on `stores[t % stores.len()]`; returns
/// (items per second, cores busy).
fn run(stores: &[&senju::Db], threads: usize, seconds: f64) -> (f64, f64) {
    let t0 = Instant::now();
    let c0 = cpu_seconds();
    let deadline = t0 + Duration::from_secs_f64(seconds);
    let items: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let db = stores[t % stores.len()];
                s.spawn(move || {
                    let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ (t as u64 + 1);
                    let keys: Vec<Vec<u8>> = (0..BATCH)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            key(x % KEYS)
                        })
                        .collect();
                    let pairs: Vec<(&[u8], &[u8])> =
                        keys.iter().map(|k| (k.as_slice(), VALUE)).collect();
                    let mut items = 0;
                    while Instant::now() < deadline {
                        db.set_many(&pairs).expect("set_many");
                        let mut n = 0;
                        db.get_many_with(&keys, |_, v| n += v.map_or(0, <[u8]>::len))
                            .expect("get_many");
                        assert_eq!(n, BATCH * VALUE.len(), "a key went missing");
                        items += 2 * BATCH as u64;
                    }
                    items
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker")).sum()
    });
    let wall = t0.elapsed().as_secs_f64();
    (items as f64 / wall, (cpu_seconds() - c0) / wall)
}

/// The round trip `senju-lockbench probe` measures now, ns, if `PROBE` names it.
fn probe() -> Option<String> {
    let bin = std::env::var_os("PROBE")?;
    let out = std::process::Command::new(bin).args(["probe", "--count", "1"]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // The last table row: `| seconds | ns |`.
    text.lines().last()?.split('|').nth(2).map(|ns| ns.trim().to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let seconds: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let which = args.get(3).map_or("both", String::as_str);
    let dir = std::env::temp_dir();
    let (a, b) = (dir.join("lab0022-a.sj"), dir.join("lab0022-b.sj"));
    println!(
        "| round | run | items/s | cores busy | CPU ns per item | round trip before / after, ns |\n\
         |---:|---|---:|---:|---:|---:|"
    );
    for round in 1..=rounds {
        let mut runs: Vec<(&str, usize, bool)> = vec![("1 thread", 1, false)];
        if which != "separate" {
            runs.push(("2 threads, one store", 2, false));
        }
        if which != "shared" {
            runs.push(("2 threads, a store each", 2, true));
        }
        for (name, threads, separate) in runs {
            let one = fresh(&a);
            let two = separate.then(|| fresh(&b));
            let stores: Vec<&senju::Db> = std::iter::once(&one).chain(two.as_ref()).collect();
            let before = probe().unwrap_or_default();
            let (rate, cores) = run(&stores, threads, seconds);
            let after = probe().unwrap_or_default();
            println!(
                "| {round} | {name} | {:.2}M | {cores:.2} | {:.1} | {before} / {after} |",
                rate / 1e6,
                cores * 1e9 / rate
            );
        }
    }
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
}
