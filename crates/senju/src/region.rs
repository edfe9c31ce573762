//! The one module that holds the memory map and raw pointers into it.
//!
//! A [`Region`] reserves a large range of virtual addresses once (`PROT_NONE`, no memory
//! committed) and maps the file over the start of it with `MAP_SHARED | MAP_FIXED`
//! (`MAP_PRIVATE` for a read-only open; private anonymous memory for the memory engine,
//! see [`Region::anonymous`]). When the file grows, the new part is mapped right after the
//! old one, in place: the base address never moves, so offsets and references into the map
//! stay valid and readers take no lock.
//! Growth is serialized by a mutex that only growing threads take.
//!
//! Every access is bounds-checked against the mapped length and returns `None` when out of
//! range, so a corrupted offset read from the file cannot reach outside the map.
//!
//! # Hazards
//!
//! - **Truncation by someone else.** If another process (or a user) truncates the file while
//!   it is mapped, touching a page past the new end raises `SIGBUS` and kills the process.
//!   The advisory lock (`flock`) keeps other senju processes out; it cannot stop a process that
//!   ignores it. This is the same caveat as LMDB's.
//! - **Writes by someone else.** Another process writing the file changes bytes under our
//!   references. senju assumes nobody does (same lock).
//! - **Aliasing within this process.** Bytes handed out as `&[u8]` must not be written while
//!   the reference lives. The engine keeps that rule by construction: a record is written once,
//!   before it is published in the index, and its space is reused only after every reader
//!   that could hold a reference has finished (an epoch grace period, `epoch.rs`; see
//!   `docs/design.md`, section 3). Index slots are only touched as `AtomicU64`, and a
//!   record's first byte (which a removal changes in place) only as `AtomicU8`.
//!   [`Region::write`] and [`Region::bytes`] are `unsafe` and state this contract.
//! - **I/O errors on a mapped page** (a failing disk) surface as `SIGBUS` too.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};

/// Files grow by at least this much, and to a multiple of it.
const GROW_STEP: u64 = 1 << 20;
/// Growth at most doubles the file and adds at most this much at once.
const GROW_MAX: u64 = 1 << 30;
/// The same bound for a file on tmpfs, where space allocated ahead is memory taken ahead.
const GROW_MAX_TMPFS: u64 = 64 << 20;

/// A file mapped at a fixed address inside a reserved range (or, for the memory engine,
/// anonymous memory there: [`Region::anonymous`]).
pub(crate) struct Region {
    base: *mut u8,
    /// Bytes of address space reserved at `base` (a whole number of [`GROW_STEP`]s).
    reserved: u64,
    /// The most the file may grow to: the reservation, or the page-aligned size the caller
    /// asked for when that is smaller (the reservation is rounded up to whole steps).
    limit: u64,
    /// Bytes mapped and backed by the file. Only grows, under `grow`.
    mapped: AtomicU64,
    file: File,
    grow: Mutex<()>,
    /// `MAP_SHARED` (writes reach the file) or `MAP_PRIVATE` (a read-only open: the file
    /// descriptor is read-only and nothing written to the map ever reaches the file).
    share: libc::c_int,
    /// The thread that faults in fresh space ahead of the writers, started by the first
    /// [`populate_ahead`](Region::populate_ahead) (`None` inside: it could not be started).
    prefaulter: OnceLock<Option<Prefaulter>>,
    /// Growth allocates the file's blocks (`fallocate`) instead of extending it sparsely, and
    /// reused space is allocated again before it is written; set for database files by
    /// [`preallocating`](Region::preallocating).
    preallocate: bool,
    /// The most one growth adds ([`GROW_MAX`], or [`GROW_MAX_TMPFS`] on tmpfs).
    grow_max: u64,
    /// Hard syncs started so far, plus one (see [`sync_generation`](Region::sync_generation)).
    hard_syncs: AtomicU64,
    /// The highest generation that a completed hard sync raised [`hard_syncs`](Self::hard_syncs) to (see
    /// [`synced_generation`](Region::synced_generation)); 0 before the first.
    synced: AtomicU64,
    /// The first failed sync, as its error's kind, number and message. Linux reports a
    /// failed write-back once, to the first sync after it, and marks the pages clean: a
    /// later sync would succeed with the data gone. So every sync after a failure fails too
    /// (and `close` never marks the file clean).
    failed_sync: OnceLock<(io::ErrorKind, Option<i32>, String)>,
    /// The map is anonymous memory, not the file (the memory engine; see
    /// [`anonymous`](Region::anonymous)).
    anonymous: bool,
    /// This process's fork count when the region was made, and its pid: in a child of `fork`
    /// the region belongs to the parent (see `fork.rs`).
    fork_generation: u64,
    opened_by: u32,
}

/// A thread that faults in pages of the map on request (`MADV_POPULATE_WRITE`), so that the
/// writers' own threads do not pay the page faults of fresh space: zeroing each page and the
/// file system's block reservation, about a quarter of a single writer's time when the
/// database grows. On a machine with a spare core this takes that work off the critical path.
struct Prefaulter {
    shared: Arc<PrefaultShared>,
    thread: Thread,
    handle: Mutex<Option<JoinHandle<()>>>,
}

/// What the region and its prefault thread share.
struct PrefaultShared {
    /// Populate the map up to this offset (only grows).
    want: AtomicU64,
    /// Set when the region stops the thread (close or drop).
    stop: AtomicBool,
}

/// The prefault thread populates at most this much behind the latest request: a request far
/// beyond the last one does not fault in the space between.
const PREFAULT_SPAN: u64 = 4 << 20;

/// `MADV_POPULATE_WRITE` (Linux 5.14); not in every `libc` version.
const MADV_POPULATE_WRITE: libc::c_int = 23;
/// Set when the kernel refused `MADV_POPULATE_WRITE` as unknown: then nobody asks again.
static POPULATE_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

// SAFETY: `base` points at a mapping that lives as long as the Region and is only accessed
// through the methods below, which are bounds-checked and (for writes) `unsafe` with the
// no-concurrent-access contract; all mutable shared state is atomic or behind `grow`.
unsafe impl Send for Region {}
// SAFETY: as for `Send`.
unsafe impl Sync for Region {}

/// Why the region could not grow.
#[derive(Debug)]
pub(crate) enum GrowError {
    /// The reserved address range (the database's maximum size) is exhausted.
    Full {
        needed: u64,
        limit: u64,
    },
    Io(io::Error),
}

/// Why a region could not be set up.
#[derive(Debug)]
pub(crate) enum RegionError {
    /// Not even the smallest acceptable range of address space could be reserved (an
    /// address-space limit such as `ulimit -v`, or a tool such as valgrind that manages the
    /// address space itself). `requested` is the size asked for first.
    Reserve { requested: u64, source: io::Error },
    /// Mapping the file failed.
    Io(io::Error),
}

/// Reserves `want` bytes of address space (`PROT_NONE`, nothing committed). If the process
/// cannot have that much and `floor` is given, tries half as much, a quarter, ... and
/// finally `floor` itself. Returns the base and the size reserved.
fn reserve_address_space(want: u64, floor: Option<u64>) -> Result<(*mut u8, u64), RegionError> {
    let mut size = want;
    loop {
        // First with room to align the start to a huge page, then without.
        if let Some(raw) = reserve(size + HUGE_PAGE) {
            return Ok((align_reservation(raw, size), size));
        }
        if let Some(base) = reserve(size) {
            return Ok((base, size));
        }
        let source = io::Error::last_os_error();
        match floor {
            Some(floor) if size > floor => {
                size = crate::format::align_up(size / 2, GROW_STEP).max(floor);
            }
            _ => return Err(RegionError::Reserve { requested: want, source }),
        }
    }
}

/// A fresh `PROT_NONE` reservation of `size` bytes at an address the kernel picks.
fn reserve(size: u64) -> Option<*mut u8> {
    // SAFETY: no address is given, so the kernel picks one that overlaps nothing of ours.
    let base = unsafe { map_anonymous(std::ptr::null_mut(), size, libc::PROT_NONE, 0) };
    (base != libc::MAP_FAILED).then_some(base.cast())
}

/// `mmap` of `size` bytes of private anonymous memory (never charged ahead:
/// `MAP_NORESERVE`) at `at` (null: anywhere) with `prot` and `flags` added.
///
/// # Safety
///
/// With `MAP_FIXED` in `flags`, `at..at + size` must be ours and nothing may refer to it.
unsafe fn map_anonymous(
    at: *mut u8,
    size: u64,
    prot: libc::c_int,
    flags: libc::c_int,
) -> *mut libc::c_void {
    // SAFETY: the caller's contract.
    unsafe {
        libc::mmap(
            at.cast(),
            size as usize,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | flags,
            -1,
            0,
        )
    }
}

/// The size of a huge page (a PMD mapping) on x86-64 and most arm64 kernels.
const HUGE_PAGE: u64 = 2 << 20;

/// Trims a fresh reservation of `size + HUGE_PAGE` bytes at `raw` to `size` bytes starting at
/// a multiple of [`HUGE_PAGE`], and returns that start.
///
/// Why: file systems with large folios (XFS; ext4 since Linux 6.16) put parts of a file in
/// the page cache as 2 MiB folios, and the kernel maps such a folio with one page-table
/// entry (one TLB entry) only where the address and the file offset agree modulo 2 MiB.
/// Linux 6.7 and later place large anonymous reservations that way by themselves; older
/// kernels (Debian 12 ships 6.1) do not, and there every lookup would pay 4 KiB TLB entries.
fn align_reservation(raw: *mut u8, size: u64) -> *mut u8 {
    let addr = raw as u64;
    let start = crate::format::align_up(addr, HUGE_PAGE);
    let head = start - addr;
    let tail = HUGE_PAGE - head;
    if head > 0 {
        // SAFETY: the first `head` bytes of the reservation just made; nothing refers to
        // them. A failure only leaves address space reserved.
        unsafe { libc::munmap(raw.cast(), head as usize) };
    }
    if tail > 0 {
        // SAFETY: the last `tail` bytes of it (`head + size + tail` is its length), unused.
        unsafe { libc::munmap(raw.wrapping_add((head + size) as usize).cast(), tail as usize) };
    }
    raw.wrapping_add(head as usize)
}

impl Region {
    /// Reserves `reserve` bytes of address space and maps the first `len` bytes of `file`.
    /// With `shrink: true`, a smaller reservation is accepted when the process cannot have
    /// `reserve` bytes of address space (halving down to what `len` needs plus one growth
    /// step); [`limit`](Region::limit) says what was had. Without `shrink`, the file
    /// grows to `reserve` rounded down to a page at most (or stays at `len` if that is more).
    /// With `writable == false` (a file opened read-only) the map is private: the engine
    /// never writes through a read-only handle, and if a bug ever did, the write would stay
    /// in this process's memory instead of faulting or reaching the file.
    pub(crate) fn new(
        file: File,
        reserve: u64,
        shrink: bool,
        len: u64,
        writable: bool,
    ) -> Result<Region, RegionError> {
        let want = crate::format::align_up(reserve.max(len).max(GROW_STEP), GROW_STEP);
        let floor = shrink.then(|| crate::format::align_up(len, GROW_STEP) + GROW_STEP);
        let fork_generation = crate::fork::generation().map_err(RegionError::Io)?;
        let (base, reserved) = reserve_address_space(want, floor.map(|f| f.min(want)))?;
        let page = crate::format::PAGE;
        let asked = (reserve & !(page - 1)).max(crate::format::align_up(len, page));
        let limit = if shrink { reserved } else { asked.min(reserved) };
        let region = Region {
            base,
            reserved,
            limit,
            mapped: AtomicU64::new(0),
            file,
            grow: Mutex::new(()),
            share: if writable { libc::MAP_SHARED } else { libc::MAP_PRIVATE },
            prefaulter: OnceLock::new(),
            preallocate: false,
            grow_max: GROW_MAX,
            hard_syncs: AtomicU64::new(1),
            synced: AtomicU64::new(0),
            failed_sync: OnceLock::new(),
            anonymous: false,
            fork_generation,
            opened_by: std::process::id(),
        };
        if len > 0 {
            region.map_range(0, len).map_err(RegionError::Io)?;
            region.mapped.store(len, Ordering::Release);
        }
        Ok(region)
    }

    /// `Err(Forked)` in a child of `fork` (see `fork.rs`): nothing here may be used then.
    #[inline(always)]
    pub(crate) fn check_fork(&self) -> Result<(), crate::StorageError> {
        if crate::fork::forked_since(self.fork_generation) {
            return Err(self.forked_error());
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn forked_error(&self) -> crate::StorageError {
        crate::StorageError::Forked { opened_by: self.opened_by }
    }

    /// Whether this process is a child, made by `fork`, of the one that made the region.
    pub(crate) fn forked(&self) -> bool {
        crate::fork::forked_since(self.fork_generation)
    }

    /// The most the file can grow to while mapped here: the address space reserved, or the
    /// size asked for if that is smaller (see [`new`](Region::new)).
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Makes growth allocate the file's blocks ahead (`fallocate`), for a database file.
    ///
    /// Why: a sparse file mapped for writing reserves its blocks page by page, inside page
    /// faults. That costs the file system's per-page bookkeeping on every fresh page (64 KiB
    /// sets at 1 thread: 25.4k/s sparse, 29.9k/s preallocated; BENCHMARKS.md), and when the
    /// disk is full the fault cannot fail cleanly: the process gets `SIGBUS`. Allocated
    /// ahead, a full disk is an error from the write that needed the space, and the
    /// preallocated tail is cut off again when the database is closed. The same holds for
    /// space inside the file that was punched and is reused: see
    /// [`reallocate`](Region::reallocate). On tmpfs (memory) a growth allocates at most
    /// [`GROW_MAX_TMPFS`] ahead; it used to stay sparse there, and a full tmpfs (a `/tmp`
    /// on many systems) killed the process with `SIGBUS`. The memory engine never calls this:
    /// its map is anonymous memory.
    pub(crate) fn preallocating(mut self) -> Region {
        self.preallocate = true;
        if on_tmpfs(&self.file) {
            self.grow_max = GROW_MAX_TMPFS;
        }
        self
    }

    /// Allocates the blocks under `off..off + len`, space inside the file about to be reused,
    /// which may have been punched (free space is punched by `close`, by a clean open's walk
    /// and by rebuilds where blocks cannot be kept): a write into a hole on a full disk could
    /// not fail cleanly (`SIGBUS`). Space whose blocks are there costs one `fallocate` that
    /// changes nothing. A file system that cannot allocate ahead (`EOPNOTSUPP`) is left as
    /// it is; nothing to do without [`preallocating`](Region::preallocating) (anonymous
    /// memory, read-only opens).
    pub(crate) fn reallocate(&self, off: u64, len: u64) -> io::Result<()> {
        if !self.preallocate || len == 0 {
            return Ok(());
        }
        match self.allocate(off, off.saturating_add(len)) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => Ok(()),
            r => r,
        }
    }

    /// Turns the map into anonymous memory with the bytes it holds now, for the memory
    /// engine; from then on the file is only a handle (never read or written, never grown).
    /// Call before anyone else sees the region.
    ///
    /// Why: a memfd's pages are shmem, whose page faults cost more than anonymous memory's.
    /// Measured (lab 0011): 64 KiB values written to a fresh memory database at 1 and 2
    /// threads, 2.2x as many per second; 8-byte sets, gets and removes within noise. Huge
    /// pages (`MADV_HUGEPAGE`) were tried on top and not kept: their faults zero 2 MiB at a
    /// time and stall on compaction, so 64 KiB sets swung between 0.6x and 5x and 8-byte
    /// sets at 2 threads lost 10-18%, for 10-15% faster gets.
    pub(crate) fn anonymous(mut self) -> io::Result<Region> {
        let len = self.len();
        // SAFETY: the region is not shared yet (the caller's contract), so no reference into
        // the mapped bytes lives while they are copied out and back.
        let bytes = unsafe { self.bytes(0, len as usize) }.map(<[u8]>::to_vec).unwrap_or_default();
        self.anonymous = true;
        if len > 0 {
            self.map_range(0, len)?;
            // SAFETY: as above; `0..len` is mapped again, now anonymous and zeroed.
            unsafe { self.write(0, &bytes) }.expect("the copy fits the range it came from");
        }
        Ok(self)
    }

    /// Maps file bytes `from..to` at `base + from` (both page-aligned, inside the reservation).
    /// For an [`anonymous`](Region::anonymous) region: zeroed anonymous memory.
    fn map_range(&self, from: u64, to: u64) -> io::Result<()> {
        debug_assert!(from.is_multiple_of(4096) && to <= self.reserved && from < to);
        if self.anonymous {
            // SAFETY: `from..to` lies inside our own reservation, so MAP_FIXED replaces only
            // pages of ours, none of which is referenced (they are past the mapped length,
            // or the region is not shared yet).
            let p = unsafe {
                map_anonymous(
                    self.at(from),
                    to - from,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_FIXED,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            return Ok(());
        }
        // SAFETY: `from..to` lies inside our own reservation (checked by the callers), so
        // MAP_FIXED replaces only PROT_NONE pages of ours; the file is at least `to` long.
        let p = unsafe {
            libc::mmap(
                self.at(from).cast(),
                (to - from) as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                self.share | libc::MAP_FIXED,
                self.file.as_raw_fd(),
                from as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The address of byte `off` of the map (not checked; the callers check bounds).
    #[inline]
    fn at(&self, off: u64) -> *mut u8 {
        self.base.wrapping_add(off as usize)
    }

    /// Asks the CPU to start loading the cache line of byte `off` (a hint: it changes no
    /// memory and never faults, so `off` need not be mapped or even in range).
    #[inline]
    pub(crate) fn prefetch(&self, off: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and changes no memory, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                self.at(off).cast::<i8>().cast_const(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = off;
    }

    /// Bytes mapped now.
    #[inline]
    pub(crate) fn len(&self) -> u64 {
        // Acquire pairs with the Release store in `ensure`: the pages are mapped.
        self.mapped.load(Ordering::Acquire)
    }

    /// Makes sure bytes `..end` are mapped, growing the file if needed. Threads that need
    /// no growth never wait here.
    pub(crate) fn ensure(&self, end: u64) -> Result<(), GrowError> {
        if end <= self.len() {
            return Ok(());
        }
        self.grow_to(end)
    }

    #[cold]
    fn grow_to(&self, end: u64) -> Result<(), GrowError> {
        if end > self.limit {
            return Err(GrowError::Full { needed: end, limit: self.limit });
        }
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.mapped.load(Ordering::Relaxed);
        if end <= cur {
            return Ok(());
        }
        let want = end.max(cur + cur.min(self.grow_max));
        let new_len = crate::format::align_up(want, GROW_STEP).min(self.limit);
        let new_len = self.extend_file(cur, new_len, end).map_err(GrowError::Io)?;
        self.map_range(cur, new_len).map_err(GrowError::Io)?;
        // Release pairs with the Acquire in `len`: whoever sees the new length sees the pages.
        self.mapped.store(new_len, Ordering::Release);
        Ok(())
    }

    /// Extends the file from `cur` to `new_len` bytes and returns its new length. With
    /// [`preallocate`](Region::preallocating), the blocks are allocated; if that fails for
    /// lack of space, only the step that `needed` bytes require is tried before the error is
    /// returned; a file system that cannot allocate ahead gets a sparse extension.
    fn extend_file(&self, cur: u64, new_len: u64, needed: u64) -> io::Result<u64> {
        if self.anonymous {
            return Ok(new_len);
        }
        if !self.preallocate {
            self.file.set_len(new_len)?;
            return Ok(new_len);
        }
        let smallest = crate::format::align_up(needed, GROW_STEP).min(new_len);
        let mut len = new_len;
        loop {
            match self.allocate(cur, len) {
                Ok(()) => return Ok(len),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => {
                    self.file.set_len(new_len)?;
                    return Ok(new_len);
                }
                Err(e)
                    if len > smallest
                        && matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EFBIG)) =>
                {
                    len = smallest;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `fallocate(2)` of bytes `from..to` (mode 0: the file grows to `to` if shorter).
    fn allocate(&self, from: u64, to: u64) -> io::Result<()> {
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(from), libc::off_t::try_from(to - from))
        else {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        };
        loop {
            // SAFETY: a plain system call on our own descriptor; it touches no memory of ours.
            if unsafe { libc::fallocate(self.file.as_raw_fd(), 0, off, len) } == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Cuts the file to `len` (page-aligned) while opening, before anyone else sees the map.
    /// The pages past `len` stay mapped but out of bounds; growth maps over them again.
    pub(crate) fn shrink_file(&self, len: u64) -> io::Result<()> {
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(len.is_multiple_of(4096) && len <= self.mapped.load(Ordering::Relaxed));
        // Lower the bound first: nothing may touch the pages that are about to go.
        self.mapped.store(len, Ordering::Release);
        if self.anonymous {
            return Ok(());
        }
        self.file.set_len(len)
    }

    /// An atomic view of `count` aligned words from `off`, or `None` if out of range.
    #[inline]
    pub(crate) fn atomic_u64s(&self, off: u64, count: u64) -> Option<&[AtomicU64]> {
        let end = count.checked_mul(8)?.checked_add(off)?;
        if !off.is_multiple_of(8) || end > self.len() {
            return None;
        }
        // SAFETY: in bounds and 8-aligned; AtomicU64 has the size and alignment of u64; the
        // map lives as long as `self`; these words are only accessed atomically (module
        // contract: index slots are never read or written as plain bytes while shared).
        Some(unsafe {
            std::slice::from_raw_parts(self.at(off).cast::<AtomicU64>(), count as usize)
        })
    }

    /// An atomic view of the byte at `off`, or `None` if out of range.
    #[inline]
    pub(crate) fn atomic_u8(&self, off: u64) -> Option<&AtomicU8> {
        if off >= self.len() {
            return None;
        }
        // SAFETY: in bounds; AtomicU8 has the size and alignment of u8; the map lives as
        // long as `self`; a record's first byte is only accessed atomically once published
        // (module contract).
        Some(unsafe { &*self.at(off).cast::<AtomicU8>() })
    }

    /// Faults in `off..off+len` (clipped to the map) for writing, in one system call, so
    /// that the writers who fill it later take no page faults. Best effort: a kernel without
    /// `MADV_POPULATE_WRITE` (before 5.14) or a failure just leaves the pages to fault later.
    /// The bytes are not changed (pages already present are left as they are, holes read
    /// as zero), so this is sound while other threads read or write the range.
    pub(crate) fn populate(&self, off: u64, len: u64) {
        let end = off.saturating_add(len).min(self.len());
        if off >= end || !off.is_multiple_of(4096) {
            return;
        }
        // SAFETY: `off..end` lies inside the mapped part of our reservation (checked above).
        unsafe { populate_raw(self.at(off) as usize, end - off) };
    }

    /// [`populate`](Region::populate) for an [`anonymous`](Region::anonymous) region; nothing
    /// for a file. For fresh space that is read before it is written (an index table: probes
    /// read its slots, inserts then write them). In anonymous memory the read maps the
    /// kernel's shared zero page and the write replaces it, which flushes the TLB of every CPU
    /// running the process: an interrupt to each other CPU, costly in a VM. A file's page is
    /// mapped read-only and then made writable in place, with no flush.
    pub(crate) fn populate_anonymous(&self, off: u64, len: u64) {
        if self.anonymous {
            self.populate(off, len);
        }
    }

    /// Asks the prefault thread to fault in the map up to `end` (a multiple of 4096 inside
    /// the mapped part), starting it on first use; returns at once. Where the thread cannot
    /// be started, or the region is closing, populates the last [`PREFAULT_SPAN`] below `end`
    /// here instead.
    pub(crate) fn populate_ahead(&self, end: u64) {
        let end = end.min(self.len());
        let p = self.prefaulter.get_or_init(|| self.start_prefaulter());
        match p {
            Some(p) if !p.shared.stop.load(Ordering::Acquire) => {
                // Relaxed: the thread only reads the number; the pages are the kernel's.
                p.shared.want.fetch_max(end, Ordering::Relaxed);
                p.thread.unpark();
            }
            _ => {
                let from = end.saturating_sub(PREFAULT_SPAN);
                self.populate(from, end - from);
            }
        }
    }

    fn start_prefaulter(&self) -> Option<Prefaulter> {
        if self.share != libc::MAP_SHARED || POPULATE_UNSUPPORTED.load(Ordering::Relaxed) {
            return None;
        }
        let shared =
            Arc::new(PrefaultShared { want: AtomicU64::new(0), stop: AtomicBool::new(false) });
        let base = self.base as usize;
        let theirs = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("senju-prefault".into())
            .spawn(move || prefault_loop(base, &theirs))
            .ok()?;
        Some(Prefaulter {
            shared,
            thread: handle.thread().clone(),
            handle: Mutex::new(Some(handle)),
        })
    }

    /// Stops the prefault thread and waits for it (before the file is cut or unmapped).
    /// Later requests populate in the calling thread.
    pub(crate) fn stop_prefaulter(&self) {
        if let Some(Some(p)) = self.prefaulter.get() {
            if self.forked() {
                // The thread is the parent's and does not exist here.
                crate::fork::forget_thread(&p.handle);
                return;
            }
            p.shared.stop.store(true, Ordering::Release);
            p.thread.unpark();
            let handle = p.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(h) = handle {
                // The loop only calls madvise; a panic there cannot leave anything to clean.
                let _ = h.join();
            }
        }
    }

    /// Gives the file's blocks in `off..off + len` back to the file system; the range then
    /// reads as zeros (the file keeps its length).
    ///
    /// # Safety
    ///
    /// No reference into the range may live (the caller waited out an epoch grace period).
    pub(crate) unsafe fn punch_hole(&self, off: u64, len: u64) -> io::Result<()> {
        if self.anonymous {
            // SAFETY: the caller's contract (no reference into the range lives).
            return unsafe { self.discard(off, len) };
        }
        if crate::testing::NO_PUNCH.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        // SAFETY: the caller guarantees nobody reads the range, whose mapped pages now read
        // as zeros.
        unsafe { self.fallocate(libc::FALLOC_FL_PUNCH_HOLE, off, len) }
    }

    /// `fallocate(mode | FALLOC_FL_KEEP_SIZE)` on the file.
    ///
    /// # Safety
    ///
    /// For modes that change what the range reads (punch, zero): no reference into the range
    /// may live.
    unsafe fn fallocate(&self, mode: libc::c_int, off: u64, len: u64) -> io::Result<()> {
        // SAFETY: a plain syscall on our own descriptor (the caller's contract covers the
        // mapped pages it changes).
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                mode | libc::FALLOC_FL_KEEP_SIZE,
                off as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes `off..off + len` read as zeros, keeping the file's blocks allocated
    /// (`FALLOC_FL_ZERO_RANGE`; a hole is punched where the file system cannot do that). For
    /// space about to be reused: freeing blocks costs a discard on file systems mounted with
    /// `discard`, synchronous, with the file's invalidate lock held, so every page fault of
    /// the writers waits behind it; and the next write into the space would allocate the
    /// blocks again.
    ///
    /// Returns whether the blocks were kept (`false`: anonymous memory, or a hole).
    ///
    /// # Safety
    ///
    /// As for `punch_hole`.
    pub(crate) unsafe fn zero_range(&self, off: u64, len: u64) -> io::Result<bool> {
        if !self.anonymous {
            // SAFETY: the caller's contract (no reference into the range lives).
            match unsafe { self.fallocate(libc::FALLOC_FL_ZERO_RANGE, off, len) } {
                Ok(()) => return Ok(true),
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
                Err(e) => return Err(e),
            }
        }
        // SAFETY: as above (for anonymous memory this discards the range).
        unsafe { self.punch_hole(off, len) }.map(|()| false)
    }

    /// [`punch_hole`](Region::punch_hole) for anonymous memory: the whole pages of the range
    /// go back to the kernel (`MADV_DONTNEED`: they read as zeros afterwards), the partial
    /// pages at its ends are zeroed in place.
    ///
    /// # Safety
    ///
    /// As for `punch_hole`.
    unsafe fn discard(&self, off: u64, len: u64) -> io::Result<()> {
        let end = off.saturating_add(len).min(self.len());
        if off >= end {
            return Ok(());
        }
        let (first, last) = (crate::format::align_up(off, 4096), end & !4095);
        if first >= last {
            // SAFETY: in range (clipped above); nobody refers to it (the caller's contract).
            let _ = unsafe { self.zero(off, end - off) };
            return Ok(());
        }
        // SAFETY: as above, for the partial pages at both ends.
        let _ = unsafe { self.zero(off, first - off) };
        // SAFETY: as above.
        let _ = unsafe { self.zero(last, end - last) };
        // SAFETY: `first..last` is whole pages of our private anonymous map; nothing refers
        // to them, and they read as zeros afterwards, as a punched hole does.
        let rc = unsafe {
            libc::madvise(self.at(first).cast(), (last - first) as usize, libc::MADV_DONTNEED)
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether the map is anonymous memory (the memory engine): nothing in it is ever made
    /// durable, so no sync can have promised any of it.
    pub(crate) fn is_anonymous(&self) -> bool {
        self.anonymous
    }

    /// Makes every write and hole so far durable, file metadata included.
    pub(crate) fn sync_all(&self) -> io::Result<()> {
        if !self.anonymous {
            // Before the count moves: what the sync promises is what was written before it.
            crate::testing::hard_sync(&self.file, false);
        }
        let g = self.hard_sync_starts();
        if self.anonymous {
            return Ok(());
        }
        self.check_synced()?;
        self.file.sync_all().map_err(|e| self.sync_failed(e))?;
        self.hard_sync_done(g);
        Ok(())
    }

    /// Fails if an earlier sync of the file failed (see `failed_sync`).
    fn check_synced(&self) -> io::Result<()> {
        match self.failed_sync.get() {
            None => Ok(()),
            Some((kind, code, msg)) => Err(io::Error::new(
                *kind,
                format!(
                    "an earlier sync of this file failed ({msg}{}), and what it was writing \
                     may be lost; no sync can promise durability on this handle any more: \
                     close it (the file stays marked as not closed cleanly) and open the file \
                     again, which recovers what the device holds",
                    code.map_or(String::new(), |c| format!(", os error {c}"))
                ),
            )),
        }
    }

    /// Records a failed sync, as [`sync`](Region::sync) does when the kernel reports one
    /// (for tests, which cannot make a device fail).
    #[cfg(test)]
    pub(crate) fn record_sync_failure(&self, e: io::Error) -> io::Error {
        self.sync_failed(e)
    }

    /// Records the first failed sync and returns its error.
    fn sync_failed(&self, e: io::Error) -> io::Error {
        let _ = self.failed_sync.set((e.kind(), e.raw_os_error(), e.to_string()));
        e
    }

    /// The number of hard syncs started so far, plus one (never 0). A write made while this
    /// returns `g` is promised durable by no sync that has completed, nor by any completing
    /// later, as long as it still returns `g`: a sync promises only what was written before
    /// it started, and every start raises this first. Automatic rebuilds use it to free dead
    /// records that no sync has promised without waiting for a sync of their own.
    pub(crate) fn sync_generation(&self) -> u64 {
        // SeqCst, with the store in `hard_sync_starts`: a caller that wrote, then reads `g`,
        // knows that any sync started after its writes raises the count past `g`.
        self.hard_syncs.load(Ordering::SeqCst)
    }

    /// Counts a hard sync that is about to start; returns the generation it raised the
    /// count to, for [`hard_sync_done`](Self::hard_sync_done).
    fn hard_sync_starts(&self) -> u64 {
        self.hard_syncs.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Records that the hard sync that raised the count to `g` completed.
    fn hard_sync_done(&self, g: u64) {
        self.synced.fetch_max(g, Ordering::SeqCst);
        crate::testing::hard_sync(&self.file, true);
    }

    /// The highest generation whose hard sync has completed: bytes stored in the map while
    /// [`sync_generation`](Self::sync_generation) still returned `g` (read after the
    /// stores, behind a `SeqCst` fence) are on the disk once this exceeds `g`, as a sync
    /// that raised the count past `g` started after them. In memory, never above what
    /// `sync` calls reached (nothing there needs it).
    pub(crate) fn synced_generation(&self) -> u64 {
        self.synced.load(Ordering::SeqCst)
    }

    /// The bytes `off..off + len`, or `None` if out of range.
    ///
    /// # Safety
    ///
    /// No thread may write these bytes while the returned slice lives (published records are
    /// not rewritten, and their space is reused only after an epoch grace period; see the
    /// module documentation).
    #[inline]
    pub(crate) unsafe fn bytes(&self, off: u64, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len as u64)?;
        if end > self.len() {
            return None;
        }
        // SAFETY: in bounds of the mapping, which lives as long as `self`; no concurrent
        // writer by the caller's contract.
        Some(unsafe { std::slice::from_raw_parts(self.at(off), len) })
    }

    /// The bytes from `off` up to `max` bytes, fewer if the map ends sooner.
    ///
    /// # Safety
    ///
    /// As for [`Region::bytes`].
    #[inline]
    pub(crate) unsafe fn bytes_upto(&self, off: u64, max: usize) -> Option<&[u8]> {
        let avail = self.len().checked_sub(off)?;
        let n = (avail.min(max as u64)) as usize;
        // SAFETY: `off + n <= len`; the caller's contract is forwarded.
        unsafe { self.bytes(off, n) }
    }

    /// Copies `data` to `off`. Returns `None` (writing nothing) if out of range, or if a
    /// `data` longer than 64 bytes overlaps the destination.
    ///
    /// # Safety
    ///
    /// No other thread reads or writes these bytes during the call (the range is unpublished
    /// space owned by the caller, or the file is not shared yet).
    #[inline]
    pub(crate) unsafe fn write(&self, off: u64, data: &[u8]) -> Option<()> {
        let end = off.checked_add(data.len() as u64)?;
        if end > self.len() {
            return None;
        }
        // Both copies below are in bounds, with exclusive access by the caller's contract;
        // `data` cannot overlap the destination unless it was borrowed from the same
        // unpublished range, which the contract excludes (small ones come from the caller's
        // stack). Records of small keys and values are copied without a `memcpy` call
        // (`copy_short`), which for them costs more than the copy.
        if data.len() <= 64 {
            // SAFETY: see above; no other reference to these bytes exists meanwhile.
            let dst = unsafe { std::slice::from_raw_parts_mut(self.at(off), data.len()) };
            crate::format::copy_short(dst, data);
        } else {
            let (src, dst) = (data.as_ptr() as usize, self.at(off) as usize);
            // Only a damaged file could make a record's bytes run into the space being
            // written (a trusted index naming garbage): refuse rather than copy onto itself.
            if src < dst + data.len() && dst < src + data.len() {
                return None;
            }
            // SAFETY: see above; the ranges do not overlap (just checked).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.at(off), data.len()) };
        }
        Some(())
    }

    /// Sets the bytes `off..off + len` to zero, or returns `None` if out of range.
    ///
    /// # Safety
    ///
    /// As for [`write`](Region::write): no other thread may read or write these bytes
    /// meanwhile.
    pub(crate) unsafe fn zero(&self, off: u64, len: u64) -> Option<()> {
        let end = off.checked_add(len)?;
        if end > self.len() {
            return None;
        }
        // SAFETY: in bounds; exclusive access by the caller's contract.
        unsafe { std::ptr::write_bytes(self.at(off), 0, len as usize) };
        Some(())
    }

    /// Makes every write so far durable (`hard`: waits for the device), or (`!hard`) asks
    /// for write-back, which on Linux starts nothing (`msync(MS_ASYNC)` is a no-op there; the
    /// kernel writes dirty pages back on its own schedule). Either fails once any sync of the
    /// file has failed (see `failed_sync`).
    pub(crate) fn sync(&self, hard: bool) -> io::Result<()> {
        if hard && !self.anonymous {
            // As in `sync_all`.
            crate::testing::hard_sync(&self.file, false);
        }
        let g = if hard { self.hard_sync_starts() } else { 0 };
        if self.anonymous {
            return Ok(());
        }
        self.check_synced()?;
        if hard {
            // fdatasync writes back the page cache pages of this file, including those
            // dirtied through MAP_SHARED mappings, and the file size.
            // SAFETY: a plain syscall on our own descriptor.
            let rc = unsafe { libc::fdatasync(self.file.as_raw_fd()) };
            if rc != 0 {
                return Err(self.sync_failed(io::Error::last_os_error()));
            }
            self.hard_sync_done(g);
        } else {
            let len = self.len();
            if len > 0 {
                // SAFETY: `base..base+len` is our mapping.
                let rc = unsafe { libc::msync(self.base.cast(), len as usize, libc::MS_ASYNC) };
                if rc != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }

    /// Sets the file's length (used on close, after the last write; nothing may touch the
    /// map past `len` afterwards).
    pub(crate) fn truncate_file(&self, len: u64) -> io::Result<()> {
        if self.anonymous {
            return Ok(());
        }
        self.file.set_len(len)
    }

    /// The file this region maps.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

/// Whether `file` lives on tmpfs (where `fallocate` would allocate memory, not blocks).
fn on_tmpfs(file: &File) -> bool {
    /// `TMPFS_MAGIC` of `<linux/magic.h>`.
    const TMPFS_MAGIC: libc::c_long = 0x0102_1994;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fstatfs` fills the buffer on success, and it is read only then.
    if unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: initialized by the successful call above.
    let st = unsafe { st.assume_init() };
    libc::c_long::from(st.f_type) == TMPFS_MAGIC
}

/// `madvise(MADV_POPULATE_WRITE)` over `len` bytes at address `at`; errors are ignored (it
/// only saves page faults), but an unsupported kernel is remembered.
///
/// # Safety
///
/// `at..at + len` must lie inside a writable shared mapping of this process that stays
/// mapped during the call; populating changes no byte of it.
unsafe fn populate_raw(at: usize, len: u64) {
    if POPULATE_UNSUPPORTED.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: as the caller guarantees.
    let rc = unsafe { libc::madvise(at as *mut libc::c_void, len as usize, MADV_POPULATE_WRITE) };
    if rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        POPULATE_UNSUPPORTED.store(true, Ordering::Relaxed);
    }
}

/// The prefault thread: populates up to each request, at most [`PREFAULT_SPAN`] behind it,
/// and sleeps between requests until the region stops it.
fn prefault_loop(base: usize, shared: &PrefaultShared) {
    let mut done = 0u64;
    loop {
        let want = shared.want.load(Ordering::Relaxed);
        if want > done {
            let from = done.max(want.saturating_sub(PREFAULT_SPAN)) & !4095;
            // SAFETY: requests lie inside the mapped part of the region (`populate_ahead`
            // clamps them), which only grows while the region lives, and the region stops and
            // joins this thread before it cuts the file or unmaps (`stop_prefaulter`).
            unsafe { populate_raw(base + from as usize, want - from) };
            done = want;
            continue;
        }
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        std::thread::park();
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.stop_prefaulter();
        // SAFETY: the whole reservation is ours; `&mut self` proves no reference into it
        // survives (every slice handed out borrows `self`).
        unsafe {
            libc::munmap(self.base.cast(), self.reserved as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memfd() -> File {
        crate::file_lock::memfd().unwrap()
    }

    #[test]
    fn grows_in_place_and_checks_bounds() {
        let r = Region::new(memfd(), 64 << 20, false, 0, true).unwrap();
        assert_eq!(r.len(), 0);
        assert!(r.atomic_u64s(0, 1).is_none());
        r.ensure(100).unwrap();
        assert_eq!(r.len(), GROW_STEP);
        // SAFETY: single-threaded test.
        unsafe { r.write(8, b"hello").unwrap() };
        let before = r.atomic_u64s(0, 1).unwrap().as_ptr();
        r.ensure(5 << 20).unwrap();
        assert!(r.len() >= 5 << 20);
        assert_eq!(r.atomic_u64s(0, 1).unwrap().as_ptr(), before, "the map moved");
        // SAFETY: single-threaded test.
        assert_eq!(unsafe { r.bytes(8, 5) }, Some(&b"hello"[..]));
        // SAFETY: single-threaded test.
        assert!(unsafe { r.bytes(r.len() - 2, 4) }.is_none());
        assert!(r.atomic_u64s(3, 1).is_none());
        assert!(matches!(r.ensure(65 << 20), Err(GrowError::Full { .. })));
    }

    /// Zeroing a range of a file: it reads as zeros through the map (partial pages at its
    /// ends included), its neighbours keep their bytes, and where the file system zeroes
    /// ranges the blocks stay allocated (a memfd has no zero range: the fallback punches,
    /// which reads the same).
    #[test]
    fn zero_range_reads_zeros_and_keeps_blocks() {
        let path = std::env::temp_dir().join(format!("senju-zero-range-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        for file in [file, memfd()] {
            let len = 64 * 4096;
            file.set_len(len).unwrap();
            let r = Region::new(file, 64 << 20, false, len, true).unwrap();
            let pattern: Vec<u8> = (0..len as u32).map(|i| (i % 251) as u8 | 1).collect();
            // SAFETY: single-threaded test.
            unsafe { r.write(0, &pattern).unwrap() };
            r.sync(true).unwrap();
            let blocks =
                |r: &Region| std::os::unix::fs::MetadataExt::blocks(&r.file().metadata().unwrap());
            let before = blocks(&r);
            let (off, len) = (4000u64, 16 * 4096 + 1000);
            // SAFETY: single-threaded test; no reference into the range lives.
            let kept = unsafe { r.zero_range(off, len).unwrap() };
            // SAFETY: single-threaded test.
            let all = unsafe { r.bytes(0, pattern.len()) }.unwrap();
            for (i, (&got, &was)) in all.iter().zip(&pattern).enumerate() {
                let inside = (off..off + len).contains(&(i as u64));
                assert_eq!(got, if inside { 0 } else { was }, "byte {i}");
            }
            let after = blocks(&r);
            if kept {
                assert_eq!(after, before, "zeroing freed blocks");
            }
        }
    }

    /// The memory engine's map: the bytes survive the move to anonymous memory, growth
    /// works, a punched range reads as zeros (partial pages at its ends included) and its
    /// neighbours keep their bytes, and the map names no file.
    #[test]
    fn anonymous_keeps_bytes_grows_and_discards() {
        let file = memfd();
        file.set_len(8192).unwrap();
        let r = Region::new(file, 64 << 20, false, 8192, true).unwrap();
        // SAFETY: single-threaded test.
        unsafe { r.write(100, b"header bytes").unwrap() };
        let r = r.anonymous().unwrap();
        // SAFETY: single-threaded test.
        assert_eq!(unsafe { r.bytes(100, 12) }, Some(&b"header bytes"[..]));
        r.ensure(5 << 20).unwrap();
        let pattern: Vec<u8> = (0..5 << 20).map(|i: u32| (i % 251) as u8 | 1).collect();
        // SAFETY: single-threaded test.
        unsafe { r.write(0, &pattern).unwrap() };
        let (off, len) = (4000u64, 3 * 4096 + 1000);
        // SAFETY: single-threaded test; no reference into the range lives.
        unsafe { r.punch_hole(off, len).unwrap() };
        // SAFETY: single-threaded test.
        let all = unsafe { r.bytes(0, 5 << 20) }.unwrap();
        for (i, (&got, &was)) in all.iter().zip(&pattern).enumerate() {
            let inside = (off..off + len).contains(&(i as u64));
            assert_eq!(got, if inside { 0 } else { was }, "byte {i}");
        }
        // The map is anonymous now: its line in /proc/self/maps names no file.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = format!("{:x}-", r.base as usize);
        let line = maps.lines().find(|l| l.starts_with(&start)).expect("the map is listed");
        assert_eq!(line.split_whitespace().count(), 5, "{line}");
    }

    #[test]
    fn reservation_starts_on_a_huge_page() {
        // Several sizes, so that a kernel that happens to align one of them cannot hide a
        // broken alignment step.
        for reserve in [3 << 20, 65 << 20, (1 << 30) + (5 << 20)] {
            let r = Region::new(memfd(), reserve, false, 0, true).unwrap();
            assert_eq!(r.base as u64 % HUGE_PAGE, 0, "reservation of {reserve} bytes");
            assert_eq!(r.limit(), crate::format::align_up(reserve, GROW_STEP));
            r.ensure(reserve).unwrap();
            // SAFETY: single-threaded test; the last byte of the reservation is ours.
            unsafe { r.write(reserve - 1, b"x").unwrap() };
        }
    }
}
