//! What the perf workloads print and measure: Tkrzw's `done` block, the resident set, the
//! key format.

use std::io::{ErrorKind, Write};
use std::time::Instant;

use senju::{Db, Durability};

use crate::args::PerfArgs;

/// Writes key number `n` as `%08d` (8 ASCII digits, more from 10^8), as Tkrzw does.
///
/// Written by hand: `core::fmt` took about 8% of every perf phase, time that belongs to the
/// benchmark driver and not to the database.
pub(crate) fn key_into(buf: &mut Vec<u8>, mut n: u64) {
    // Two digits per division, from the end; at least 8 digits (zero-padded).
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let pair = |n: u64| -> [u8; 2] {
        let at = n as usize * 2;
        [PAIRS[at], PAIRS[at + 1]]
    };
    buf.clear();
    if n < 100_000_000 {
        // The common case, 8 digits: four pairs, one fixed-size copy.
        let (hi, lo) = (n / 10_000, n % 10_000);
        let [a, b] = pair(hi / 100);
        let [c, d] = pair(hi % 100);
        let [e, f] = pair(lo / 100);
        let [g, h] = pair(lo % 100);
        buf.extend_from_slice(&[a, b, c, d, e, f, g, h]);
        return;
    }
    let mut digits = [b'0'; 20]; // u64::MAX has 20 digits
    let mut start = digits.len();
    while n >= 10 {
        start -= 2;
        digits[start..start + 2].copy_from_slice(&pair(n % 100));
        n /= 100;
    }
    if n > 0 {
        start -= 1;
        digits[start] = b'0' + n as u8;
    }
    buf.extend_from_slice(&digits[start.min(digits.len() - 8)..]);
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
    outln!(
        "{done_name}: elapsed_time={elapsed:.6} num_records={} qps={:.0} mem={}",
        db.len(),
        ops as f64 / elapsed.max(1e-9),
        rss().saturating_sub(base_rss)
    );
    outln!(
        "  file_size={} eff_data_size={} efficiency={:.2}%",
        stats.file_bytes,
        stats.live_bytes,
        100.0 * stats.live_bytes as f64 / stats.file_bytes.max(1) as f64
    );
    outln!(
        "  num_buckets={} load_factor={:.2}",
        stats.table_slots,
        stats.records as f64 / stats.table_slots.max(1) as f64
    );
    // Only when `--auto_rebuild` turned them on (Tkrzw prints no such line).
    if stats.auto_rebuilds > 0 || stats.auto_rebuild_error.is_some() {
        outln!("  auto_rebuilds={}", stats.auto_rebuilds);
    }
    if let Some(e) = &stats.auto_rebuild_error {
        return Err(e.clone());
    }
    outln!();
    Ok(())
}

/// Prints Tkrzw's header line of a phase: `LABEL: impl=... num_iterations=... value_size=...
/// num_threads=...`.
pub(crate) fn print_header(label: &str, a: &PerfArgs) {
    outln!(
        "{label}: impl={} num_iterations={} value_size={} num_threads={}",
        a.engine.name(),
        a.iter,
        a.size,
        a.threads
    );
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
    outln!("Synchronizing: ... done (elapsed={:.6})", ts.elapsed().as_secs_f64());
    Ok(())
}

/// Ends the program with `code` at once, from any thread, after removing the temporary
/// database of `perf` (`std::process::exit` runs no destructors, so its guard would not).
pub(crate) fn exit(code: i32) -> ! {
    crate::args::remove_temp_files();
    std::process::exit(code)
}

/// Writes to stdout (with a newline if `newline`). A reader that went away
/// (`senju perf ... | head`) ends the program quietly with status 141, as SIGPIPE ends other
/// Unix tools: Rust ignores SIGPIPE, so `println!` would panic instead. Any other write error
/// is reported on stderr and ends the program with status 1 (through [`exit`]).
pub(crate) fn emit(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| {
        if newline {
            stdout.write_all(b"\n")?;
        }
        Ok(())
    });
    if let Err(e) = written {
        if e.kind() == ErrorKind::BrokenPipe {
            exit(141);
        }
        eprintln!("senju: cannot write to stdout: {e}");
        exit(1);
    }
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
        let powers = (0..20).flat_map(|e| {
            let p = 10u64.pow(e);
            [p - 1, p, p + 1, p.saturating_mul(5) - 3]
        });
        for n in (0..1000).chain(powers).chain([99_999_999, 123_456_789_012, 1 << 40, u64::MAX]) {
            key_into(&mut k, n);
            assert_eq!(k, format!("{n:08}").as_bytes(), "{n}");
        }
        assert_eq!(key_number(b"42"), None);
    }
}
