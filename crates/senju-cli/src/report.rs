//! What the perf workloads print and measure: Tkrzw's `done` block, the resident set, the
//! key format.

use std::io::Write;
use std::time::Instant;

use senju::{Db, Durability};

/// Writes key number `n` as `%08d` (8 ASCII digits, more from 10^8), as Tkrzw does.
pub(crate) fn key_into(buf: &mut Vec<u8>, n: u64) {
    buf.clear();
    write!(buf, "{n:08}").expect("writing to a Vec");
}

/// The number of a key written by [`key_into`], or `None` if it is not one.
pub(crate) fn key_number(key: &[u8]) -> Option<u64> {
    if key.len() < 8 || !key.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(key).ok()?.parse().ok()
}

/// Resident set size in bytes (from /proc; 0 where unavailable).
pub(crate) fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

/// Prints Tkrzw's closing block of a phase: the `done` line with QPS (`ops` / elapsed), then
/// the file and table lines and an empty line.
pub(crate) fn print_done(
    done_name: &str,
    db: &Db,
    elapsed: f64,
    ops: u64,
    base_rss: u64,
) -> Result<(), String> {
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

/// Runs `work(id)` on `threads` threads at once (ids 0..threads) and returns the first error
/// any of them reported. A panicking worker panics the caller.
pub(crate) fn run_workers(
    threads: u64,
    work: impl Fn(u64) -> Result<(), String> + Sync,
) -> Result<(), String> {
    let work = &work;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads).map(|id| s.spawn(move || work(id))).collect();
        let mut first = Ok(());
        for w in workers {
            let result = w.join().expect("worker panicked");
            if first.is_ok() {
                first = result;
            }
        }
        first
    })
}

/// Flushes the database (soft sync) and prints Tkrzw's `Synchronizing` line.
pub(crate) fn sync_and_report(db: &Db) -> Result<(), String> {
    let ts = Instant::now();
    db.sync(Durability::Soft).map_err(|e| e.to_string())?;
    println!("Synchronizing: ... done (elapsed={:.6})", ts.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let mut k = Vec::new();
        key_into(&mut k, 42);
        assert_eq!(k, b"00000042");
        assert_eq!(key_number(&k), Some(42));
        key_into(&mut k, 123_456_789);
        assert_eq!(key_number(&k), Some(123_456_789));
        assert_eq!(key_number(b"0000004x"), None);
        assert_eq!(key_number(b"42"), None);
    }
}
