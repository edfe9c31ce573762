//! `senju perf sequence`: the workload of `tkrzw_dbm_perf sequence`.
//!
//! Phases: set (the file is truncated first), get, iterate, remove; each reopens the file
//! (the in-memory engine keeps one database). Thread `id` handles iteration `i` with key
//! number `i * threads + id` (interleaved, not range-partitioned), printed `%08d`; with
//! `--random_key` the number is uniform in `[0, iter * threads)`. Values are `size` bytes cut
//! from a per-thread pattern buffer at offset `(i * (i + 1)) mod 2039`, as Tkrzw does. The
//! clock starts before the threads are spawned and stops after they are joined and, for set
//! and remove, after the final `sync(Soft)` (Tkrzw's `Synchronize(false)`).
//! QPS = iterations × threads / elapsed seconds; `mem` is the growth of the resident set.

use std::time::Instant;

use senju::{Db, Durability};

use crate::args::{Engine, SequenceArgs};

/// A small, fast, seedable generator (xorshift64*), one per thread.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

const PATTERN_CYCLE: usize = 2039;

/// Tkrzw's value pattern: byte k is `'a' + (id + k) % (odd k ? 26 : 9)`.
fn pattern(id: u64, size: usize) -> Vec<u8> {
    (0..size + PATTERN_CYCLE)
        .map(|k| b'a' + ((id as usize + k) % if k % 2 == 1 { 26 } else { 9 }) as u8)
        .collect()
}

fn pattern_offset(i: u64) -> usize {
    ((i as u32).wrapping_mul((i as u32).wrapping_add(1)) as usize) % PATTERN_CYCLE
}

fn key_into(buf: &mut Vec<u8>, n: u64) {
    use std::io::Write;
    buf.clear();
    write!(buf, "{n:08}").expect("writing to a Vec");
}

/// Resident set size in bytes (from /proc; 0 where unavailable).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Set,
    Get,
    Iterate,
    Remove,
}

impl Phase {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Phase::Set => ("Setting", "Setting done"),
            Phase::Get => ("Getting", "Getting done"),
            Phase::Iterate => ("Iterating", "Iterating done"),
            Phase::Remove => ("Removing", "Removing done"),
        }
    }
}

/// Runs the phases the flags ask for.
pub(crate) fn run(a: &SequenceArgs) -> Result<(), String> {
    let base_rss = rss();
    let tmp;
    let path = match &a.path {
        Some(p) => p.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("senju-perf-{}.sj", std::process::id()));
            tmp.clone()
        }
    };
    let mut phases = Vec::new();
    if a.set {
        phases.push(Phase::Set);
    }
    if a.get {
        phases.push(Phase::Get);
    }
    if a.set && a.get && a.remove {
        phases.push(Phase::Iterate);
    }
    if a.remove {
        phases.push(Phase::Remove);
    }
    let memory = match a.engine {
        Engine::Memory => {
            Some(Db::builder().capacity_hint(a.buckets).memory().map_err(|e| e.to_string())?)
        }
        Engine::File => None,
    };
    for phase in phases {
        let opened;
        let db = match &memory {
            Some(db) => db,
            None => {
                opened = Db::builder()
                    .capacity_hint(a.buckets)
                    .truncate(phase == Phase::Set)
                    .open(&path)
                    .map_err(|e| e.to_string())?;
                &opened
            }
        };
        run_phase(a, db, phase, base_rss)?;
        if memory.is_none() {
            db.close().map_err(|e| e.to_string())?;
        }
    }
    if a.path.is_none() && a.engine == Engine::File {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

fn run_phase(a: &SequenceArgs, db: &Db, phase: Phase, base_rss: u64) -> Result<(), String> {
    let (start_name, done_name) = phase.names();
    let impl_name = if a.engine == Engine::Memory { "memory" } else { "file" };
    println!(
        "{start_name}: impl={impl_name} num_iterations={} value_size={} num_threads={}",
        a.iter, a.size, a.threads
    );
    let t0 = Instant::now();
    let errors: Vec<String> = if phase == Phase::Iterate {
        iterate(db).err().into_iter().collect()
    } else {
        std::thread::scope(|s| {
            let workers: Vec<_> =
                (0..a.threads).map(|id| s.spawn(move || worker(a, db, phase, id))).collect();
            workers.into_iter().filter_map(|w| w.join().expect("worker panicked").err()).collect()
        })
    };
    if let Some(e) = errors.first() {
        return Err(e.clone());
    }
    if matches!(phase, Phase::Set | Phase::Remove) {
        let ts = Instant::now();
        db.sync(Durability::Soft).map_err(|e| e.to_string())?;
        println!("Synchronizing: ... done (elapsed={:.6})", ts.elapsed().as_secs_f64());
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let ops = if phase == Phase::Iterate { db.len() } else { a.iter * a.threads };
    let stats = db.stats().map_err(|e| e.to_string())?;
    println!(
        "{done_name}: elapsed_time={elapsed:.6} num_records={} qps={:.0} mem={}",
        db.len(),
        ops as f64 / elapsed.max(1e-9),
        rss().saturating_sub(base_rss)
    );
    println!(
        "  file_size={} eff_data_size={} efficiency={:.2}%",
        stats.file_bytes,
        stats.live_bytes,
        100.0 * stats.live_bytes as f64 / stats.file_bytes.max(1) as f64
    );
    println!(
        "  num_buckets={} load_factor={:.2}",
        stats.table_slots,
        stats.records as f64 / stats.table_slots.max(1) as f64
    );
    println!();
    Ok(())
}

fn iterate(db: &Db) -> Result<(), String> {
    let mut n = 0u64;
    for item in db.iter() {
        let (k, _) = item.map_err(|e| e.to_string())?;
        n += k.len() as u64;
    }
    std::hint::black_box(n);
    Ok(())
}

fn worker(a: &SequenceArgs, db: &Db, phase: Phase, id: u64) -> Result<(), String> {
    let total = a.iter * a.threads;
    let mut rng = Rng::new(a.seed + id);
    let mut value_rng = Rng::new(a.seed.wrapping_mul(2) + id + 1);
    let buf = pattern(id, a.size);
    let mut key = Vec::with_capacity(16);
    for i in 0..a.iter {
        let n = if a.random_key { rng.below(total) } else { i * a.threads + id };
        key_into(&mut key, n);
        match phase {
            Phase::Set => {
                let len = if a.random_value {
                    value_rng.below(a.size as u64 + 1) as usize
                } else {
                    a.size
                };
                let off = pattern_offset(i);
                db.set(&key, &buf[off..off + len]).map_err(|e| e.to_string())?;
            }
            Phase::Get => {
                let checked = a.validate && !a.random_key && !a.random_value;
                let found = if checked {
                    let off = pattern_offset(i);
                    let want = &buf[off..off + a.size];
                    db.get_with(&key, |v| v == want)
                        .map_err(|e| e.to_string())?
                        .map(|ok| ok.then_some(()).ok_or(format!("wrong value for key {n:08}")))
                        .transpose()?
                        .is_some()
                } else {
                    db.contains(&key).map_err(|e| e.to_string())?
                };
                if !found && !a.random_key {
                    return Err(format!("key {n:08} not found"));
                }
            }
            Phase::Remove => {
                db.remove(&key).map_err(|e| e.to_string())?;
            }
            Phase::Iterate => unreachable!("iterate runs in one thread"),
        }
    }
    Ok(())
}
