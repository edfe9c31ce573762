//! Lab 0003's batch case without Python: `total` pairs (keys `%02d%08d`, 8-byte values) as
//! `set_many` calls of 1000 pairs, split between T threads started together, into a fresh
//! database (a file in /tmp, or `Db::memory()`); only the sets are timed. Rounds alternate
//! 1 and 2 threads. Prints the median pairs/s of each, their ratio, and the median CPU time
//! of the writer threads per second of wall time (2.0 = both threads always on a core).
//!
//! `cargo run --release -- TOTAL ROUNDS [file|mem]`

use std::sync::Barrier;
use std::time::Instant;

/// This thread's CPU time (user + system) in seconds.
fn thread_cpu() -> f64 {
    // SAFETY: `getrusage` fills the zeroed struct it is given.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut r);
        r
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(r.ru_utime) + tv(r.ru_stime)
}

/// One run; returns (pairs/s, writer CPU seconds per wall second).
fn run(threads: usize, total: usize, memory: bool) -> (f64, f64) {
    let path = std::env::temp_dir().join("senju-engine-batch.db");
    let db = if memory {
        senju::Db::memory().expect("memory database")
    } else {
        let _ = std::fs::remove_file(&path);
        senju::Db::open(&path).expect("database in the temporary directory")
    };
    let per = total / 1000 / threads;
    let batches: Vec<Vec<Vec<(Vec<u8>, Vec<u8>)>>> = (0..threads)
        .map(|t| {
            (0..per)
                .map(|b| {
                    (0..1000)
                        .map(|j| {
                            (format!("{:02}{j:08}", t * 1000 + b).into_bytes(), b"v".repeat(8))
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let start = Barrier::new(threads + 1);
    let (elapsed, cpu) = std::thread::scope(|s| {
        let handles: Vec<_> = batches
            .iter()
            .map(|mine| {
                let (db, start) = (&db, &start);
                s.spawn(move || {
                    start.wait();
                    let c0 = thread_cpu();
                    for batch in mine {
                        db.set_many(batch).expect("set_many");
                    }
                    thread_cpu() - c0
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let cpu: f64 = handles.into_iter().map(|h| h.join().expect("writer")).sum();
        (t0.elapsed().as_secs_f64(), cpu)
    });
    drop(db);
    let _ = std::fs::remove_file(&path);
    ((per * 1000 * threads) as f64 / elapsed, cpu / elapsed)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(160_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(15);
    let memory = args.get(3).is_some_and(|a| a == "mem");
    let (mut q1, mut q2, mut c1, mut c2) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let (q, c) = run(1, total, memory);
        q1.push(q);
        c1.push(c);
        let (q, c) = run(2, total, memory);
        q2.push(q);
        c2.push(c);
    }
    let (m1, m2) = (median(q1), median(q2));
    println!(
        "{total} pairs, {} engine, {rounds} rounds: 1 thread {:.2}M/s (cpu {:.2}), \
         2 threads {:.2}M/s (cpu {:.2}), x{:.2}",
        if memory { "memory" } else { "file" },
        m1 / 1e6,
        median(c1),
        m2 / 1e6,
        median(c2),
        m2 / m1
    );
}
