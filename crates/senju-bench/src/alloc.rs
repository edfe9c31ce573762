//! The allocator experiment of `lab/0002-allocators` (founding document `000`, part 1):
//! do `malloc`/`free` pairs of 1 KiB serialize threads, with glibc's allocator, mimalloc and
//! jemalloc, when each thread frees its own blocks and when another thread frees them?
//!
//! - [`Dispatch`] is a [`GlobalAlloc`] that forwards every call to the allocator named by
//!   the environment variable [`ENV`] (`system`, `mimalloc` or `jemalloc`; when it is unset,
//!   the default the binary chose with [`Dispatch::with_default`]). It reads the variable once, at the process's first allocation, and never
//!   changes its choice, so every block is freed by the allocator that made it. That is what
//!   makes one dispatching binary sound: the choice is made before the first block exists.
//!   A binary installs it with `#[global_allocator]` and runs each measurement in a child
//!   process with the variable set ([`Allocator::active`] tells the child which one it got).
//! - [`run_local`] and [`run_cross`] are the workloads; they allocate through
//!   [`std::alloc::alloc`], so they measure whatever global allocator the process has.
//!
//! Nothing here asserts on time; the figures are medians across rounds run by the caller.
//!
//! ```
//! use senju_bench::alloc::{Frees, run};
//!
//! let local = run(Frees::Local, 2, 1000, 1024);
//! let cross = run(Frees::Cross, 2, 1000, 1024).expect("2 threads make one pair");
//! assert!(local.is_some() && cross > std::time::Duration::ZERO);
//! assert!(run(Frees::Cross, 1, 1000, 1024).is_none()); // no pair with one thread
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The environment variable that names the allocator [`Dispatch`] forwards to.
pub const ENV: &str = "SENJU_ALLOC";

/// The allocators compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Allocator {
    /// The C library's `malloc` (glibc on Linux), through [`std::alloc::System`].
    System,
    /// mimalloc (the `mimalloc` crate, which builds the C library from source).
    Mimalloc,
    /// jemalloc (the `tikv-jemallocator` crate, which builds the C library from source).
    Jemalloc,
}

impl Allocator {
    /// Every allocator, in the order tables show them.
    pub const ALL: [Allocator; 3] = [Allocator::System, Allocator::Mimalloc, Allocator::Jemalloc];

    /// The name used in [`ENV`] and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::System => "system",
            Allocator::Mimalloc => "mimalloc",
            Allocator::Jemalloc => "jemalloc",
        }
    }

    /// The allocator called `name` (as [`Allocator::name`] spells it).
    pub fn parse(name: &str) -> Option<Allocator> {
        Allocator::ALL.into_iter().find(|a| a.name() == name)
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn from_code(code: u8) -> Option<Allocator> {
        Allocator::ALL.into_iter().find(|a| a.code() == code)
    }

    /// The allocator [`Dispatch`] chose in this process, or `None` if it has not allocated
    /// yet (or is not the global allocator).
    pub fn active() -> Option<Allocator> {
        Allocator::from_code(CHOICE.load(Ordering::Relaxed))
    }
}

/// 0 until the first allocation, then [`Allocator::code`] of the choice, never changed again.
static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Reads [`ENV`] without allocating (this runs inside the allocator) and fixes the choice;
/// `default` when the variable is unset.
#[cold]
fn choose(default: Allocator) -> u8 {
    const NAME: &CStr = c"SENJU_ALLOC";
    // SAFETY: `NAME` is NUL-terminated. `getenv` returns null or a pointer into the
    // environment block. The first allocation happens while the Rust runtime starts, before
    // `main` and before any other thread exists, so nothing can call `setenv` meanwhile.
    let value = unsafe { libc::getenv(NAME.as_ptr()) };
    let wanted = if value.is_null() {
        default
    } else {
        // SAFETY: a non-null `getenv` result points to a NUL-terminated string that stays
        // valid while the environment is not modified (see above).
        let bytes = unsafe { CStr::from_ptr(value) }.to_bytes();
        // An unknown name falls back to the system allocator; a binary checks
        // `Allocator::active` against the name it was given and reports the mismatch.
        std::str::from_utf8(bytes).ok().and_then(Allocator::parse).unwrap_or(Allocator::System)
    };
    // Only the first choice stands: if another thread got here first, use its choice. Relaxed
    // is enough: the value is the only data published, and every reader reads only it.
    match CHOICE.compare_exchange(0, wanted.code(), Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => wanted.code(),
        Err(current) => current,
    }
}

#[inline]
fn chosen(default: Allocator) -> u8 {
    match CHOICE.load(Ordering::Relaxed) {
        0 => choose(default),
        c => c,
    }
}

const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

/// A global allocator that forwards to the allocator named by [`ENV`], fixed at the first
/// allocation (see the module documentation).
///
/// ```ignore
/// // In a binary: the system allocator unless SENJU_ALLOC names another one.
/// #[global_allocator]
/// static GLOBAL: Dispatch = Dispatch::with_default(Allocator::System);
/// ```
#[derive(Debug)]
pub struct Dispatch {
    /// The allocator used when [`ENV`] is unset.
    default: Allocator,
}

impl Dispatch {
    /// A dispatcher that uses `default` when [`ENV`] is unset. The default is read only on
    /// the process's first allocation, so it costs nothing on the allocation path.
    pub const fn with_default(default: Allocator) -> Self {
        Self { default }
    }

    /// The allocator used when [`ENV`] is unset.
    pub const fn default_allocator(&self) -> Allocator {
        self.default
    }
}

// SAFETY: every method forwards to one of three sound allocators. The choice is fixed
// before the first block is handed out and never changes, so a block is always resized and
// freed by the allocator that allocated it.
unsafe impl GlobalAlloc for Dispatch {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match chosen(self.default) {
            // SAFETY: the caller's contract for `alloc` (non-zero size) is passed on unchanged.
            SYSTEM => unsafe { System.alloc(layout) },
            // SAFETY: as above.
            MIMALLOC => unsafe { mimalloc::MiMalloc.alloc(layout) },
            // SAFETY: as above.
            _ => unsafe { tikv_jemallocator::Jemalloc.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match chosen(self.default) {
            // SAFETY: the caller's contract is passed on unchanged.
            SYSTEM => unsafe { System.alloc_zeroed(layout) },
            // SAFETY: as above.
            MIMALLOC => unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) },
            // SAFETY: as above.
            _ => unsafe { tikv_jemallocator::Jemalloc.alloc_zeroed(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match chosen(self.default) {
            // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract),
            // and the choice has not changed since, so it came from `System`.
            SYSTEM => unsafe { System.dealloc(ptr, layout) },
            // SAFETY: as above, from mimalloc.
            MIMALLOC => unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) },
            // SAFETY: as above, from jemalloc.
            _ => unsafe { tikv_jemallocator::Jemalloc.dealloc(ptr, layout) },
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match chosen(self.default) {
            // SAFETY: as in `dealloc`; `new_size` meets the caller's contract.
            SYSTEM => unsafe { System.realloc(ptr, layout, new_size) },
            // SAFETY: as above.
            MIMALLOC => unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) },
            // SAFETY: as above.
            _ => unsafe { tikv_jemallocator::Jemalloc.realloc(ptr, layout, new_size) },
        }
    }
}

/// What one child process measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildResult {
    /// Wall seconds of the workload.
    pub seconds: f64,
    /// Peak resident set of the child, in KiB (0 where `/proc` is missing).
    pub peak_rss_kib: f64,
}

/// The peak resident set of this process in KiB (0 where /proc is missing).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok()
            })
        })
        .unwrap_or(0)
}

/// The child's side: checks that the process runs the allocator [`ENV`] names (or
/// `default` when it is unset), runs the workload and returns the line to print on stdout,
/// which [`measure_in_child`] parses.
pub fn child_report(default: Allocator, args: &ChildArgs) -> Result<String, String> {
    let ChildArgs { frees, threads, pairs, size } = *args;
    let wanted = std::env::var(ENV).unwrap_or_else(|_| default.name().to_string());
    let active = Allocator::active().ok_or("the dispatching allocator has not run")?;
    if active.name() != wanted {
        return Err(format!("{ENV} asks for {wanted:?}, but the process runs {}", active.name()));
    }
    let elapsed = run(frees, threads, pairs, size)
        .ok_or_else(|| format!("{} frees need at least 2 threads", frees.name()))?;
    Ok(format!("elapsed_s={:.6} peak_rss_kib={}", elapsed.as_secs_f64(), peak_rss_kib()))
}

/// The child mode's flags, as [`measure_in_child`] appends them; a binary's child mode
/// flattens this into its subcommand and passes it to [`child_report`].
#[derive(clap::Args, Debug, Clone)]
pub struct ChildArgs {
    /// Who frees the blocks.
    #[arg(long, value_parser = Frees::parse)]
    pub frees: Frees,
    /// Threads in all (cross frees: `threads / 2` producer-consumer pairs).
    #[arg(long)]
    pub threads: usize,
    /// Allocation and free pairs per thread (local frees) or per producer (cross frees).
    #[arg(long)]
    pub pairs: u64,
    /// Block size in bytes.
    #[arg(long)]
    pub size: usize,
}

/// The parent's side: runs `child` (a command that ends in the child mode of a binary whose
/// global allocator is [`Dispatch`]) with [`ENV`] set to `allocator` and the workload's
/// flags appended (`--frees`, `--threads`, `--pairs`, `--size`), and parses its result.
pub fn measure_in_child(
    mut child: std::process::Command,
    allocator: Allocator,
    frees: Frees,
    threads: usize,
    pairs: u64,
    size: usize,
) -> Result<ChildResult, String> {
    let out = child
        .env(ENV, allocator.name())
        .args(["--frees", frees.name()])
        .args(["--threads", &threads.to_string(), "--pairs", &pairs.to_string()])
        .args(["--size", &size.to_string()])
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", child.get_program()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "child {} {} T={threads} failed: {stdout}{}",
            allocator.name(),
            frees.name(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let field = |name: &str| -> Option<f64> {
        stdout.split_whitespace().find_map(|w| w.strip_prefix(name)?.parse().ok())
    };
    match (field("elapsed_s="), field("peak_rss_kib=")) {
        (Some(seconds), Some(peak_rss_kib)) => Ok(ChildResult { seconds, peak_rss_kib }),
        _ => Err(format!("child printed no result: {stdout}")),
    }
}

/// Who frees the blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frees {
    /// Each thread allocates a block, writes to it and frees it at once (the 2012 test).
    Local,
    /// Threads work in producer/consumer pairs: the producer allocates and writes a block
    /// and passes it through a ring; the consumer reads and frees it.
    Cross,
}

impl Frees {
    /// The kind called `name` (`local` or `cross`).
    pub fn parse(name: &str) -> Result<Frees, String> {
        match name {
            "local" => Ok(Frees::Local),
            "cross" => Ok(Frees::Cross),
            _ => Err(format!("expected local or cross, got {name}")),
        }
    }

    /// `local` or `cross`.
    pub fn name(self) -> &'static str {
        match self {
            Frees::Local => "local",
            Frees::Cross => "cross",
        }
    }
}

/// Runs `threads` threads of the given kind, each pair of a thread (local) or each
/// producer (cross) doing `pairs` allocations of `size` bytes with their frees; returns the
/// wall time from before the threads start until they are joined. Cross frees need an even
/// number of threads (`threads / 2` pairs); `None` when there is no pair.
pub fn run(frees: Frees, threads: usize, pairs: u64, size: usize) -> Option<Duration> {
    match frees {
        Frees::Local => Some(run_local(threads, pairs, size)),
        Frees::Cross => (threads >= 2).then(|| run_cross(threads / 2, pairs, size)),
    }
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size.max(1), 8).expect("a block size below isize::MAX")
}

/// Allocates one block of `layout` and writes `tag` into its first byte.
fn alloc_block(layout: Layout, tag: u8) -> *mut u8 {
    // SAFETY: `layout` has a non-zero size (see `layout`).
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` is a fresh, non-null block of at least one byte.
    unsafe { p.write_volatile(tag) };
    p
}

/// Reads a block's first byte and frees it.
///
/// # Safety
/// `p` must come from [`alloc_block`] with the same `layout` and not be freed yet.
unsafe fn free_block(p: *mut u8, layout: Layout) -> u8 {
    // SAFETY: `p` is a live block of at least one byte (the caller's contract).
    let tag = unsafe { p.read_volatile() };
    // SAFETY: `p` was allocated with `layout` and is freed once (the caller's contract).
    unsafe { std::alloc::dealloc(p, layout) };
    tag
}

/// Same-thread frees: `threads` threads × `pairs` allocate-write-free cycles.
pub fn run_local(threads: usize, pairs: u64, size: usize) -> Duration {
    let layout = layout(size);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                let mut sum = 0u8;
                for i in 0..pairs {
                    let p = alloc_block(layout, i as u8);
                    // SAFETY: `p` was just allocated with `layout` and is freed once.
                    sum = sum.wrapping_add(unsafe { free_block(p, layout) });
                }
                std::hint::black_box(sum);
            });
        }
    });
    t0.elapsed()
}

/// Cross-thread frees: `pair_count` producer/consumer pairs, each producer allocating
/// `pairs` blocks that its consumer frees.
pub fn run_cross(pair_count: usize, pairs: u64, size: usize) -> Duration {
    let layout = layout(size);
    let rings: Vec<Ring> = (0..pair_count).map(|_| Ring::new(RING_SLOTS)).collect();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for ring in &rings {
            s.spawn(move || {
                for i in 0..pairs {
                    ring.push(alloc_block(layout, i as u8 | 1) as usize);
                }
                ring.push(0);
            });
            s.spawn(move || {
                let mut sum = 0u8;
                loop {
                    let p = ring.pop() as *mut u8;
                    if p.is_null() {
                        break;
                    }
                    // SAFETY: the producer allocated `p` with `layout` and passed it on once;
                    // this consumer is its only owner now.
                    sum = sum.wrapping_add(unsafe { free_block(p, layout) });
                }
                std::hint::black_box(sum);
            });
        }
    });
    t0.elapsed()
}

/// Slots of each producer/consumer ring: enough to keep both sides busy, small enough that
/// blocks in flight stay few (4 MiB of 1 KiB blocks at most).
const RING_SLOTS: usize = 4096;

/// A bounded single-producer single-consumer queue of block addresses (0 = end of stream).
struct Ring {
    slots: Box<[AtomicUsize]>,
    /// Count of items taken (written by the consumer only).
    head: Padded,
    /// Count of items put (written by the producer only).
    tail: Padded,
}

#[repr(align(128))]
struct Padded(AtomicUsize);

impl Ring {
    fn new(slots: usize) -> Ring {
        Ring {
            slots: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
        }
    }

    fn push(&self, v: usize) {
        let t = self.tail.0.load(Ordering::Relaxed);
        let mut waits = 0u32;
        // Acquire pairs with the consumer's Release store of `head`: its read of the slot
        // being reused happened before.
        while t - self.head.0.load(Ordering::Acquire) == self.slots.len() {
            backoff(&mut waits);
        }
        self.slots[t % self.slots.len()].store(v, Ordering::Relaxed);
        // Release pairs with the consumer's Acquire load of `tail`: the slot and the block's
        // contents written before are visible to it.
        self.tail.0.store(t + 1, Ordering::Release);
    }

    fn pop(&self) -> usize {
        let h = self.head.0.load(Ordering::Relaxed);
        let mut waits = 0u32;
        // Acquire pairs with the producer's Release store of `tail` (see `push`).
        while self.tail.0.load(Ordering::Acquire) == h {
            backoff(&mut waits);
        }
        let v = self.slots[h % self.slots.len()].load(Ordering::Relaxed);
        // Release pairs with the producer's Acquire load of `head` (see `push`).
        self.head.0.store(h + 1, Ordering::Release);
        v
    }
}

/// Spins briefly, then yields: on a machine with fewer cores than threads, the other side
/// of the ring may not be running.
fn backoff(waits: &mut u32) {
    *waits += 1;
    if *waits < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// One row of the 2012 table of founding document `000` (Ubuntu 12.04, glibc 2.15, gcc
/// 4.6.3, Core i7 860: 4 cores, 8 hardware threads; `/usr/bin/time`, seconds). The document
/// runs 1,000,000 malloc/free pairs of 1 KiB in total, divided among the threads (the times
/// of the scalable allocators fall in proportion to the threads).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seed2012 {
    /// Threads.
    pub threads: usize,
    /// glibc's malloc, seconds.
    pub glibc: f64,
    /// jemalloc, seconds.
    pub jemalloc: f64,
    /// tcmalloc, seconds.
    pub tcmalloc: f64,
}

/// The 2012 table, as printed in `seeds/000_9987c04e55243576.txt`.
pub const SEED_2012: [Seed2012; 4] = [
    Seed2012 { threads: 1, glibc: 0.61, jemalloc: 0.34, tcmalloc: 0.24 },
    Seed2012 { threads: 2, glibc: 3.26, jemalloc: 0.17, tcmalloc: 0.12 },
    Seed2012 { threads: 4, glibc: 8.26, jemalloc: 0.10, tcmalloc: 0.07 },
    Seed2012 { threads: 8, glibc: 10.84, jemalloc: 0.07, tcmalloc: 0.06 },
];

/// The 2012 row for `threads`, if the document measured it.
pub fn seed_2012(threads: usize) -> Option<Seed2012> {
    SEED_2012.into_iter().find(|r| r.threads == threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in Allocator::ALL {
            assert_eq!(Allocator::parse(a.name()), Some(a));
            assert_eq!(Allocator::from_code(a.code()), Some(a));
        }
        assert_eq!(Allocator::parse("tcmalloc"), None);
    }

    #[test]
    fn the_ring_delivers_every_item_in_order() {
        let ring = Ring::new(8);
        std::thread::scope(|s| {
            s.spawn(|| (1..=10_000).for_each(|v| ring.push(v)));
            let got: Vec<usize> = (0..10_000).map(|_| ring.pop()).collect();
            assert!(got.iter().copied().eq(1..=10_000));
        });
    }

    #[test]
    fn workloads_run() {
        assert!(run(Frees::Local, 3, 500, 1024).is_some());
        assert!(run(Frees::Cross, 4, 500, 1024).is_some());
        assert!(run(Frees::Cross, 1, 500, 1024).is_none());
    }
}
