//! A shard: one slice of the key space (the top bits of the key hash pick it) with its own
//! index table, its own record chunks, its own counters and its own writer lock.
//!
//! Readers take no lock and write nothing: they load the shard's table word, probe the table,
//! and load the table word again; if it changed (the table was replaced by growth or
//! `clear`) they retry. A writer holds the shard lock ([`senju_sync::SpinRwLock`], exclusive)
//! for the whole operation, appends the record to the shard's current chunk (a bump pointer;
//! one global atomic add per new chunk of 4-32 KiB, none per record), then publishes it with
//! one `Release` store into the slot. Nothing a writer touches is shared with other shards.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use senju_sync::{SpinRwLock, SpinRwLockWriteGuard};

use crate::auto::AutoRebuild;
use crate::epoch::Epochs;
use crate::error::{Result, StorageError};
use crate::format::{
    self, CHUNK_HEADER_LEN, CHUNK_INDEX, CHUNK_RECORDS, ChunkHeader, DirEntry, KILLED,
    MAX_FILE_LEN, MAX_RECORD_HEAD, PAGE, REC_CLEAR, REC_SET, Record, RecordHead, TOMBSTONE,
};
use crate::free_space::FreeSpace;
use crate::region::Region;
use crate::table::{self, Probe, TableRef};

mod recycle;
#[cfg(doc)]
use recycle::MAX_FRESH;
use recycle::{Fresh, Recycled};

/// State shared by all shards: the map, the file's salt and the end of the allocated space.
pub(crate) struct Ctx {
    pub(crate) region: Region,
    pub(crate) salt: u64,
    /// End of the space handed out to chunks. One compare-and-swap per new chunk; on a line
    /// of its own, so these writes do not evict what every reader reads (salt, map length).
    pub(crate) file_end: CacheLine<AtomicU64>,
    /// Set once by `close`; checked by writers under their shard lock.
    pub(crate) closed: AtomicBool,
    /// Slots of a shard's first table (from `Builder::capacity_hint`).
    pub(crate) first_table_slots: u64,
    /// Grace periods before space readers may still see is reused.
    pub(crate) epochs: Epochs,
    /// Space inside the file that no chunk uses, for any shard's next chunks.
    pub(crate) free: FreeSpace,
    /// When shards ask for an automatic rebuild (see `auto.rs`).
    pub(crate) auto: AutoRebuild,
}

impl Ctx {
    /// Hands out `len` bytes (a multiple of [`PAGE`]) at the end of the file.
    pub(crate) fn alloc(&self, len: u64) -> Result<u64> {
        // Grown first, claimed after: a growth that fails (the file at its maximum size, a
        // full disk) claims nothing, so one write too large for the room left does not take
        // that room from the writes after it.
        let mut off = self.file_end.load(Ordering::Relaxed);
        let end = loop {
            let end = off.checked_add(len).filter(|&e| e <= MAX_FILE_LEN);
            let end = end.ok_or(StorageError::Full {
                needed: off.saturating_add(len),
                limit: MAX_FILE_LEN,
            })?;
            self.region.ensure(end)?;
            let claim =
                self.file_end.compare_exchange_weak(off, end, Ordering::Relaxed, Ordering::Relaxed);
            match claim {
                Ok(_) => break end,
                Err(now) => off = now,
            }
        };
        // The thread whose chunk crosses a window boundary has the next window faulted in
        // by the region's prefault thread (in this thread where there is none), so writers
        // filling fresh space take no page faults one page at a time.
        let window = end & !(PREFAULT_WINDOW - 1);
        // Best effort: near the end of the reserved range the window may not fit.
        if off < window && self.region.ensure(window + 2 * PREFAULT_WINDOW).is_ok() {
            self.region.populate_ahead(window + 2 * PREFAULT_WINDOW);
        }
        Ok(off)
    }

    /// Writes a chunk header at `off`.
    pub(crate) fn write_chunk_header(&self, off: u64, h: &ChunkHeader) -> Result<()> {
        // SAFETY: `off` was just handed out to the calling writer (no other thread knows it
        // yet), or is the first chunk of a rebuild's copy, whose header bytes no thread reads
        // or writes while the file is open (only opening reads headers).
        unsafe { self.region.write(off, &h.encode(self.salt)) }
            .ok_or(StorageError::Corrupted { offset: off, what: "chunk outside the file" })
    }
}

/// Fresh space at the end of the file is faulted in ahead of use in windows of this size
/// (see [`Ctx::alloc`]): at most this much is mapped and resident before it is used.
const PREFAULT_WINDOW: u64 = 2 << 20;

/// A value alone on its cache line (two lines: adjacent-line prefetch pairs them).
#[repr(align(128))]
#[derive(Debug, Default)]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Records up to this many bytes are assembled on the stack before one copy into the map.
const SMALL_RECORD: usize = 64;

/// [`SMALL_RECORD`] as a file length: the most bytes one copy of a record writes at once
/// (a larger record writes its head first, which holds its length). Recovery uses it to
/// tell a record cut short by a crash from other bytes (`recovery::clear_torn_write`).
pub(crate) const SMALL_RECORD_MAX: u64 = SMALL_RECORD as u64;

/// A whole record of at most [`SMALL_RECORD`] bytes (checksum included), assembled on the
/// stack so that it is checksummed in registers and cache and copied into the map at once.
struct SmallRecord {
    buf: [u8; SMALL_RECORD],
    len: usize,
}

impl SmallRecord {
    /// The record of `kind` for `key` and the concatenated `parts`, or `None` if too large.
    /// Inlined into its callers, so the 64-byte buffer is built in place, not returned and
    /// moved (which cost two `memcpy` calls per write).
    #[inline(always)]
    fn new(kind: u8, key: &[u8], parts: &[&[u8]], salt: u64) -> Option<SmallRecord> {
        let vlen: usize = parts.iter().map(|p| p.len()).sum();
        let head = RecordHead::new(kind, key.len(), vlen);
        let n = head.len + key.len() + vlen;
        if n + 4 > SMALL_RECORD {
            return None;
        }
        let mut buf = [0u8; SMALL_RECORD];
        // The whole head buffer (its unused bytes are zero, and the key overwrites them).
        buf[..MAX_RECORD_HEAD].copy_from_slice(&head.bytes);
        let mut at = head.len;
        format::copy_short(&mut buf[at..], key);
        at += key.len();
        for p in parts {
            format::copy_short(&mut buf[at..], p);
            at += p.len();
        }
        debug_assert_eq!(at, n);
        let sum = format::record_sum(buf[0], &buf[1..n], salt);
        buf[n..n + 4].copy_from_slice(&sum.to_le_bytes());
        debug_assert_eq!(n as u64 + 4, head.record_len(key.len(), vlen));
        Some(SmallRecord { buf, len: n + 4 })
    }
}

/// A retired index table is punched out of the file (`fallocate(PUNCH_HOLE)`) when reclaimed
/// only if it is at least this long and the file's free space would then pass a quarter of
/// the file; otherwise it joins the free space as it is, pages and all. While a database
/// grows, retired tables are reused within moments by the next shard's larger table or by
/// records, so punching them would cost a TLB shoot-down each (an interrupt to every other
/// core running the process; 2M sets: 2.38M → 2.67M sets/s at 1 thread and 2.81M → 3.51M at
/// 2 threads without it) and split the file's large page-cache folios, after which the reused
/// space is mapped in 4 KiB pages instead of 2 MiB ones (10M records: 28 MB of the map
/// PMD-mapped instead of 188 MB, gets about 4% slower). When much space sits free (a `clear`
/// of a large database, say) it is given back at once; `close` punches whatever is left.
const PUNCH_MIN: u64 = 256 << 10;

/// Record chunks start at one page and double per chunk up to this.
const MAX_RECORD_CHUNK: u64 = 32 << 10;

/// A record whose chunk would need more than this (or more than the shard's normal chunk,
/// while that is smaller) gets a [`Solo`] chunk of its own. Above half a normal chunk a
/// record packs no better into shared chunks anyway (a 17 KiB record leaves 15 KiB of its
/// 32 KiB chunk to smaller ones or to waste; alone it wastes at most its last page), and a
/// solo chunk can be recycled when the record is replaced. Below it, shared chunks pack
/// better (three 10 KiB records in 32 KiB, where alone each would take 12 KiB).
const SOLO_CHUNK: u64 = MAX_RECORD_CHUNK / 2;

/// Records longer than this may have a chunk of their own (a [`Solo`] chunk: a chunk's
/// header and the record would not fit the smallest normal chunk, one page); shorter ones
/// never do, so replacing them costs no look-up.
const SOLO_MIN_LEN: u64 = PAGE - CHUNK_HEADER_LEN;

/// Whether a table of `slots` slots with `used` occupied (live or tombstone) entries must be
/// rebuilt before one more insert: above 7/8 the probes get long.
fn over_limit(used: u64, slots: u64) -> bool {
    (used + 1) * 8 > slots * 7
}

/// Bytes of the index chunk for `live` entries filling `num/den` of it (at least one page).
fn table_len_for(live: u64, num: u64, den: u64) -> u64 {
    format::index_chunk_len((live * den).div_ceil(num).max(1))
}

/// What [`ShardWriter::compact`] leaves for `Db::rebuild` to finish.
pub(crate) struct Compacted {
    /// The first chunk of the copy and its sequence number: its header gets `void_before`.
    pub(crate) first_chunk: u64,
    pub(crate) first_seq: u64,
    /// The record chunks the copy replaced, to free after a grace period (see `Db::rebuild`).
    pub(crate) old_chunks: BTreeMap<(u64, u64), RecordChunk>,
    /// [`ShardState::killed`] when the copy was made: an old chunk born in this generation or
    /// earlier may hold a removal or a clear.
    pub(crate) killed: u64,
}

/// A record chunk of a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordChunk {
    pub(crate) off: u64,
    pub(crate) len: u64,
    /// [`Region::sync_generation`](crate::region::Region::sync_generation) when the chunk was
    /// started (0 for chunks found while opening): if it is still the same, no hard sync has
    /// promised any record in it.
    pub(crate) born: u64,
}

/// One shard. Aligned to 128 bytes, so that shards never share a line (nor a pair of lines,
/// which adjacent-line prefetch fetches together).
///
/// The field order is part of the design (`repr(C)`; a test checks the offsets). The first
/// 64-byte line holds everything a small write changes: the live count, the lock word and
/// the hot part of [`ShardState`]. The table word, which every read loads and only a table
/// swap writes, is on a line of its own. When both were on one line, each write in one
/// thread took that line away from every other thread's next operation on the shard: about
/// 5% of the sets and removes at 2 threads, up to 10-14% at 8 (lab 0012).
#[repr(C, align(128))]
pub(crate) struct Shard {
    /// Live records, written under the lock, read by `len`.
    count: AtomicU64,
    state: SpinRwLock<ShardState>,
    /// The current table ([`TableRef::pack`]; 0: none). Written under the lock.
    table: AtomicU64,
}

/// What only the shard's writer touches. The fields a small write uses come first (they
/// share the shard's first line with the lock; see [`Shard`]); the live count is the
/// shard's atomic `count`, which the writer reads and stores under the lock.
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct ShardState {
    tombs: u64,
    chunk: u64,
    cursor: u64,
    chunk_end: u64,
    dead_bytes: u64,
    live_bytes: u64,
    // Cold: changed once per chunk or table, or by removals (`killed`).
    id: u32,
    next_seq: u64,
    /// [`Region::sync_generation`] at this shard's latest removal or clear (0: none since
    /// the file was opened). A removal marks a record in place and a clear appends a record
    /// that holds no key: either may be the only trace, in a chunk no sync has promised, that
    /// an older record of a promised chunk is dead. A rebuild must not zero such a chunk
    /// before its commit voids the older one (see `Core::rebuild`). Written by every removal:
    /// kept off the table word's line.
    killed: u64,
    /// The newest shared record chunks this shard started (since the file was opened, and
    /// not a rebuild's copies), oldest first, at most [`MAX_FRESH`]: each counts its dead
    /// bytes, and once all of its records are dead it is recycled like a solo chunk (see
    /// [`ShardWriter::note_dead`]). Touched once per replacement, so it sits on the line
    /// after the hot one, away from the table word.
    fresh: Vec<Fresh>,
    /// This shard's live record chunks by (sequence number, offset): oldest first.
    chunks: BTreeMap<(u64, u64), RecordChunk>,
    /// Unpublished index chunks waiting for a grace period: (offset, length, epoch).
    limbo: Vec<(u64, u64, u64)>,
    /// Chunks started since the file was opened for one large record, that no other record
    /// has joined, by offset (see [`Solo`]).
    solo: HashMap<u64, Solo>,
    /// Solo chunks whose record was replaced before any hard sync could promise it, oldest
    /// first: space only this shard reuses (see [`ShardWriter::recycle`]).
    recycled: Vec<Recycled>,
    /// A recycled chunk's header, written once its record is (see
    /// [`ShardWriter::write_due_header`]).
    header_due: Option<(u64, ChunkHeader)>,
    /// A rebuild's copy is being written (see [`ShardWriter::compact`]): the chunks started
    /// now are neither fresh nor solo, so none of them can be recycled before the commit.
    copying: bool,
}

/// A chunk that holds one record and nothing else (its tail, the rest of its last page,
/// stays empty while it is solo). When that record is replaced, the whole chunk is dead.
#[derive(Clone, Copy, Debug)]
struct Solo {
    /// The chunk's sequence number (with its offset, its key in [`ShardState::chunks`]).
    seq: u64,
    /// Where the chunk ends.
    end: u64,
    /// [`Region::sync_generation`] when the chunk was started.
    born: u64,
}

impl Shard {
    /// An empty shard.
    pub(crate) fn new(id: u32) -> Shard {
        Shard {
            table: AtomicU64::new(0),
            count: AtomicU64::new(0),
            state: SpinRwLock::new(ShardState { id, ..ShardState::default() }),
        }
    }

    /// A shard as the directory of a cleanly closed file describes it. The caller has checked
    /// that the table chunk is a valid index chunk of this shard.
    pub(crate) fn from_dir(id: u32, e: &DirEntry, table: Option<TableRef>) -> Shard {
        let chunk_end = if e.chunk == 0 { 0 } else { e.cursor.max(e.chunk) };
        let s = Shard::new(id);
        s.table.store(table.map_or(0, TableRef::pack), Ordering::Relaxed);
        s.count.store(e.count, Ordering::Relaxed);
        *s.state.write() = ShardState {
            id,
            tombs: e.tombs,
            chunk: e.chunk,
            cursor: e.cursor,
            chunk_end,
            next_seq: e.next_seq,
            dead_bytes: e.dead_bytes,
            live_bytes: e.live_bytes,
            ..ShardState::default()
        };
        s
    }

    /// Hands the shard its record chunks, `(sequence number, (offset, length))`, found
    /// while opening.
    pub(crate) fn set_chunks(&self, chunks: Vec<(u64, (u64, u64))>) {
        self.state.write().chunks = chunks
            .into_iter()
            .map(|(seq, (off, len))| ((seq, off), RecordChunk { off, len, born: 0 }))
            .collect();
    }

    /// Sets where the current chunk ends (read back from its header on a clean open).
    pub(crate) fn set_chunk_end(&self, end: u64) {
        self.state.write().chunk_end = end;
    }

    /// The shard's live and dead record bytes, if its lock is free (for the automatic
    /// rebuild thread's look at the whole database; see `AutoRebuild::run`).
    pub(crate) fn sample_bytes(&self) -> Option<(u64, u64)> {
        let st = self.state.try_read()?;
        Some((st.live_bytes, st.dead_bytes))
    }

    /// The current table (while opening).
    pub(crate) fn table_ref(&self) -> Option<TableRef> {
        TableRef::unpack(self.table.load(Ordering::Relaxed))
    }

    /// Live records (a momentary value).
    pub(crate) fn len(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The live record for `key`, without taking the lock.
    #[inline]
    pub(crate) fn get<'r>(
        &self,
        ctx: &'r Ctx,
        hash: u64,
        key: &[u8],
    ) -> Result<Option<Record<'r>>> {
        loop {
            // SeqCst: pairs with the Release store that published the table (its slots are
            // visible) and, with the caller's epoch pin, orders this load after the pin
            // (`epoch.rs`).
            let word = self.table.load(Ordering::SeqCst);
            let Some(t) = TableRef::unpack(word) else { return Ok(None) };
            let found = table::find(&ctx.region, t.view(&ctx.region)?, hash, key, ctx.salt);
            // The slot loads above are Acquire, so this load cannot move before them. If the
            // table was replaced meanwhile, the probe may have missed a later write: retry.
            if self.table.load(Ordering::Relaxed) == word {
                return found;
            }
        }
    }

    /// Asks the CPU to start loading the home slot of `hash` in the current table, before
    /// the lock is taken (a hint: the table may be replaced meanwhile, which costs only the
    /// wasted load).
    #[inline]
    pub(crate) fn prefetch(&self, ctx: &Ctx, hash: u64) {
        // Relaxed: nothing is read through this load, the slot is only prefetched.
        if let Some(t) = TableRef::unpack(self.table.load(Ordering::Relaxed)) {
            table::prefetch(&ctx.region, t, hash);
        }
    }

    /// [`prefetch`](Self::prefetch) for a reader that will also ask for the record
    /// ([`prefetch_record`](Self::prefetch_record)): returns the table it looked in and where.
    #[inline]
    pub(crate) fn prefetch_slot(&self, ctx: &Ctx, hash: u64) -> (u64, table::Asked) {
        // Relaxed: nothing is read through this load, the slot is only prefetched.
        let word = self.table.load(Ordering::Relaxed);
        match TableRef::unpack(word) {
            Some(t) => (word, table::prefetch_slot(&ctx.region, t, hash)),
            None => (0, table::Asked::default()),
        }
    }

    /// Asks the CPU to start loading the record of `hash` whose slot
    /// [`prefetch_slot`](Self::prefetch_slot) asked for in the table `word`, if that table
    /// is still the shard's (see [`table::prefetch_record`]); whether a slot with the key's
    /// tag was found. The caller is pinned, so a table still current here is not reused
    /// while its slots are read.
    #[inline]
    pub(crate) fn prefetch_record(
        &self,
        ctx: &Ctx,
        (word, at): (u64, table::Asked),
        hash: u64,
    ) -> bool {
        // SeqCst, as in `get`: with the caller's epoch pin, orders this load after the pin,
        // so a table still current here is not reused while its slots are read (`epoch.rs`).
        word != 0
            && self.table.load(Ordering::SeqCst) == word
            && table::prefetch_record(&ctx.region, at, hash)
    }

    /// Takes the shard's writer lock; fails with `Closed` once the database is closed.
    ///
    /// Callers check for a fork first (`Db::route_index`, `Db::writable`, the scans): in a
    /// child of `fork` the lock may have been held by a parent thread at the fork.
    pub(crate) fn writer<'a>(&'a self, ctx: &'a Ctx) -> Result<ShardWriter<'a>> {
        let st = self.state.write();
        if ctx.closed.load(Ordering::Relaxed) {
            return Err(StorageError::Closed);
        }
        Ok(ShardWriter { ctx, shard: self, st })
    }

    /// Takes the shard's writer lock only if no other thread holds it (`Ok(None)` if one
    /// does); fails with `Closed` once the database is closed. Callers check for a fork
    /// first, as for `writer`.
    pub(crate) fn try_writer<'a>(&'a self, ctx: &'a Ctx) -> Result<Option<ShardWriter<'a>>> {
        let Some(st) = self.state.try_write() else { return Ok(None) };
        if ctx.closed.load(Ordering::Relaxed) {
            return Err(StorageError::Closed);
        }
        Ok(Some(ShardWriter { ctx, shard: self, st }))
    }

    /// [`writer`](Self::writer) if `wait`, else [`try_writer`](Self::try_writer).
    #[inline]
    pub(crate) fn writer_or_busy<'a>(
        &'a self,
        ctx: &'a Ctx,
        wait: bool,
    ) -> Result<Option<ShardWriter<'a>>> {
        if wait { self.writer(ctx).map(Some) } else { self.try_writer(ctx) }
    }

    /// Takes the writer lock even after close (for close itself and for recovery).
    pub(crate) fn writer_unchecked<'a>(&'a self, ctx: &'a Ctx) -> ShardWriter<'a> {
        ShardWriter { ctx, shard: self, st: self.state.write() }
    }
}

/// A shard with its lock held.
pub(crate) struct ShardWriter<'a> {
    ctx: &'a Ctx,
    shard: &'a Shard,
    st: SpinRwLockWriteGuard<'a, ShardState>,
}

/// Releasing a shard whose dead records outweigh its live ones asks for an automatic rebuild.
impl Drop for ShardWriter<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.ctx.auto.wants(self.st.dead_bytes, self.st.live_bytes) {
            self.ctx.auto.request();
        }
    }
}

impl<'a> ShardWriter<'a> {
    /// Whether an automatic rebuild pass takes this shard along (see `AutoRebuild::takes`).
    pub(crate) fn joins_rebuild_pass(&self) -> bool {
        self.ctx.auto.takes(self.st.dead_bytes, self.st.live_bytes)
    }

    fn table(&self) -> Option<TableRef> {
        TableRef::unpack(self.shard.table.load(Ordering::Relaxed))
    }

    /// Live records. Relaxed, here and in [`set_count`](Self::set_count): only the lock
    /// holder writes the count; `len` reads a momentary value.
    #[inline]
    fn count(&self) -> u64 {
        self.shard.count.load(Ordering::Relaxed)
    }

    #[inline]
    fn set_count(&mut self, n: u64) {
        self.shard.count.store(n, Ordering::Relaxed);
    }

    /// Where `key` is, or where it would go (`Vacant { pos: usize::MAX }` if no table yet).
    pub(crate) fn probe(&self, hash: u64, key: &[u8]) -> Result<Probe> {
        match self.table() {
            None => Ok(Probe::Vacant { pos: usize::MAX, tomb: false }),
            Some(t) => table::probe(&self.ctx.region, t.view(&self.ctx.region)?, hash, key),
        }
    }

    /// The live, checksum-verified record a probe found.
    pub(crate) fn record(&self, p: Probe) -> Result<Option<Record<'a>>> {
        match p {
            Probe::Vacant { .. } => Ok(None),
            Probe::Found { off, .. } => {
                let r = table::record_at(&self.ctx.region, off)?;
                if r.kind != REC_SET || !r.verify(self.ctx.salt) {
                    return Err(StorageError::Corrupted {
                        offset: off,
                        what: "record checksum mismatch",
                    });
                }
                Ok(Some(r))
            }
        }
    }

    /// Asks the CPU to start loading the home slot of `hash` (a hint: nothing if the shard
    /// has no table yet).
    pub(crate) fn prefetch(&self, hash: u64) {
        if let Some(t) = self.table() {
            table::prefetch(&self.ctx.region, t, hash);
        }
    }

    /// Sets `key` to `value` (whether or not it is present). The caller has prefetched the
    /// key's home slot ([`Shard::prefetch`], before taking the lock); a small record is
    /// assembled and checksummed on the stack while the slot is on its way from memory; then
    /// probe, append, index, as [`put`](Self::put) does.
    ///
    /// The table is grown before the probe when one more entry would overfill it (so an
    /// overwrite at the limit grows it one insert early, which the next insert would have
    /// done anyway), so the probe runs once and its view of the table serves the store.
    #[inline]
    pub(crate) fn set(&mut self, hash: u64, key: &[u8], value: &[u8]) -> Result<()> {
        let Some(rec) = SmallRecord::new(REC_SET, key, &[value], self.ctx.salt) else {
            let p = self.probe(hash, key)?;
            return self.put(p, hash, key, &[value]);
        };
        let t = match self.table() {
            Some(t) if !over_limit(self.count() + self.st.tombs, t.slots()) => t,
            _ => self.grow_for_insert()?,
        };
        let region = &self.ctx.region;
        let slots = t.view(region)?;
        let p = table::probe(region, slots, hash, key)?;
        let off = self.write_small(&rec)?;
        self.publish(slots, p, hash, off, rec.len as u64)
    }

    /// Replaces the table by one with room for one more entry; returns it.
    #[cold]
    fn grow_for_insert(&mut self) -> Result<TableRef> {
        self.rebuild_table(self.count() + 1)?;
        Ok(self.table().expect("rebuild_table publishes a table"))
    }

    /// Appends an assembled record; returns its offset.
    #[inline]
    fn write_small(&mut self, rec: &SmallRecord) -> Result<u64> {
        let len = rec.len as u64;
        if self.st.chunk == 0 || self.st.chunk_end - self.st.cursor < len {
            return self.write_small_in_new_chunk(rec);
        }
        let off = self.st.cursor;
        self.st.cursor += len;
        self.write_small_at(off, rec)?;
        Ok(off)
    }

    /// [`write_small`](Self::write_small) when the record starts a new chunk, which may be a
    /// recycled one whose header is due after its first record.
    #[cold]
    fn write_small_in_new_chunk(&mut self, rec: &SmallRecord) -> Result<u64> {
        let off = self.reserve_in_new_chunk(rec.len as u64)?;
        self.write_small_at(off, rec)?;
        self.write_due_header()?;
        Ok(off)
    }

    #[inline]
    fn write_small_at(&self, off: u64, rec: &SmallRecord) -> Result<()> {
        // SAFETY: `off..off+len` was reserved in this shard's chunk and is not published
        // yet, so no other thread reads it; the source is on our stack.
        unsafe { self.ctx.region.write(off, &rec.buf[..rec.len]) }
            .ok_or(StorageError::Corrupted { offset: off, what: "record outside the file" })
    }

    /// Sets `key` to the concatenation of `parts`; `p` is this key's fresh probe.
    pub(crate) fn put(&mut self, p: Probe, hash: u64, key: &[u8], parts: &[&[u8]]) -> Result<()> {
        let p = self.make_room(p, hash, key)?;
        let (off, len) = self.append(REC_SET, key, parts)?;
        self.index_put(p, hash, off, len)
    }

    /// Removes the key a probe found (no-op for `Vacant`); returns whether it was there.
    /// The key's newest record is marked [`KILLED`] in place: one atomic byte store that
    /// the checksum does not cover, so it cannot tear the record, and replay reads the marked
    /// record as the removal. Readers that loaded the slot before keep a valid record.
    #[inline]
    pub(crate) fn delete(&mut self, p: Probe, _key: &[u8]) -> Result<bool> {
        if let Probe::Found { off, .. } = p {
            let first = self
                .ctx
                .region
                .atomic_u8(off)
                .ok_or(StorageError::Corrupted { offset: off, what: "record outside the file" })?;
            // A load and a store, not a read-modify-write (whose lock prefix waits for every
            // earlier store to drain): only the shard lock's holder writes this byte. Relaxed:
            // the byte is read by replay (after a crash) and by readers who only need its kind
            // bits, which do not change.
            first.store(first.load(Ordering::Relaxed) | KILLED, Ordering::Relaxed);
            self.note_kill();
            self.index_delete(p, 0)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Records that this shard made a removal or a clear now (see [`ShardState::killed`]).
    /// Written only when the generation moved on: the line it is on then stays shared
    /// between the cores whose writes take turns on this shard.
    #[inline]
    fn note_kill(&mut self) {
        let g = self.ctx.region.sync_generation();
        if self.st.killed != g {
            self.st.killed = g;
        }
    }

    /// Removes every key of this shard.
    pub(crate) fn clear(&mut self) -> Result<()> {
        if self.count() == 0 && self.st.tombs == 0 {
            return Ok(());
        }
        let (_, len) = self.append(REC_CLEAR, b"", &[])?;
        self.note_kill();
        self.index_clear(len);
        Ok(())
    }

    /// Grows (or re-packs) the table first if inserting at `p` would overfill it.
    fn make_room(&mut self, p: Probe, hash: u64, key: &[u8]) -> Result<Probe> {
        let needs = match (p, self.table()) {
            (Probe::Found { .. }, _) | (Probe::Vacant { tomb: true, .. }, Some(_)) => false,
            (_, None) => true,
            (Probe::Vacant { .. }, Some(t)) => over_limit(self.count() + self.st.tombs, t.slots()),
        };
        if !needs {
            return Ok(p);
        }
        self.rebuild_table(self.count() + 1)?;
        self.probe(hash, key)
    }

    /// Replaces the table by one sized for `live` entries at most 2/3 full, dropping
    /// tombstones. Readers keep using the old table until the store below, then notice the
    /// new word and retry; the old table's space is reused after a grace period.
    fn rebuild_table(&mut self, live: u64) -> Result<()> {
        let mut len = table_len_for(live, 2, 3);
        if self.table().is_none() {
            len = len.max(format::index_chunk_len(self.ctx.first_table_slots));
        }
        let new = self.new_table(len)?;
        let region = &self.ctx.region;
        if let Some(old) = self.table() {
            table::rehash(region, old.view(region)?, new.view(region)?, self.ctx.salt)?;
        }
        self.publish_table(Some(new));
        self.st.tombs = 0;
        Ok(())
    }

    /// An empty index chunk of `len` bytes, not yet published.
    fn new_table(&mut self, len: u64) -> Result<TableRef> {
        let (off, _, reused) = self.alloc(len, len)?;
        let h = ChunkHeader { kind: CHUNK_INDEX, shard: self.st.id, len, seq: 0, void_before: 0 };
        self.ctx.write_chunk_header(off, &h)?;
        let t = TableRef { chunk: off, len };
        // Fresh space (past the file's end when it was taken) is zero; only reused space
        // needs clearing.
        if reused {
            // Reused space may hold old slots: clear them before anyone probes.
            for s in t.view(&self.ctx.region)? {
                s.store(0, Ordering::Relaxed);
            }
        } else {
            // In memory, faulted in for writing at once: a probe's read of a fresh page and
            // the insert's write after it would otherwise cost two faults and a TLB flush on
            // every CPU (lab 0013: 9,385 faults and 10,680 flushes in 3.2M batch sets at 2
            // threads, against 717 and 78).
            self.ctx.region.populate_anonymous(off, len);
        }
        Ok(t)
    }

    /// Publishes `t` as the shard's table and retires the old one.
    fn publish_table(&mut self, t: Option<TableRef>) {
        let old = self.table();
        // SeqCst: pairs with the Acquire/SeqCst load in `Shard::get` (readers that see the
        // new word see its slots) and comes before `retire` in the total order (`epoch.rs`).
        self.shard.table.store(t.map_or(0, TableRef::pack), Ordering::SeqCst);
        if let Some(old) = old {
            let e = self.ctx.epochs.retire();
            self.st.limbo.push((old.chunk, old.len, e));
            // Without readers pinned (a load phase) the old table is free at once: give its
            // pages back now rather than at the next allocation.
            self.reclaim();
        }
    }

    /// `need..=want` bytes (multiples of [`PAGE`]) for a new chunk: free space inside the file
    /// if an extent of `need` bytes is there (all of it if shorter than `want`), else `want`
    /// bytes at the end of the file. Returns the offset, the length, and whether the space is
    /// reused (it may then hold old bytes: zero or index garbage) rather than fresh (zero).
    fn alloc(&mut self, need: u64, want: u64) -> Result<(u64, u64, bool)> {
        self.reclaim();
        if let Some((off, len)) = self.ctx.free.take_between(need, want) {
            // Reused space may have been punched: allocate its blocks again (a full disk is
            // then this error, not a SIGBUS at the first write into the hole), then fault it
            // in at once, not page by page.
            if let Err(e) = self.ctx.region.reallocate(off, len) {
                self.ctx.free.add(off, len);
                return Err(StorageError::Io(e));
            }
            self.ctx.region.populate(off, len);
            return Ok((off, len, true));
        }
        Ok((self.ctx.alloc(want)?, want, false))
    }

    /// Moves retired index chunks whose grace period has passed to the free space, as they are
    /// (index garbage, which reused space may hold: tables clear what they reuse, and replay
    /// stops at the first invalid record), or punched first when much space is free already
    /// (see [`PUNCH_MIN`]): then it costs neither memory nor disk blocks until it is reused.
    /// Best effort: where punching fails the space is reused as it is.
    pub(crate) fn reclaim(&mut self) {
        if !self.st.limbo.is_empty() {
            let ctx = self.ctx;
            let st = &mut *self.st;
            st.limbo.retain(|&(off, l, e)| {
                let safe = ctx.epochs.is_safe(e);
                if safe {
                    let file = ctx.file_end.load(Ordering::Relaxed);
                    if l >= PUNCH_MIN && (ctx.free.bytes() + l) * 4 > file {
                        // SAFETY: the table was unpublished at epoch `e` and every reader
                        // pinned at or before it has unpinned, so no reference into it
                        // remains; the shard lock we hold keeps writers out.
                        let _ = unsafe { ctx.region.punch_hole(off, l) };
                    }
                    ctx.free.add(off, l);
                }
                !safe
            });
        }
    }

    /// Appends a record; returns its offset and length.
    fn append(&mut self, kind: u8, key: &[u8], parts: &[&[u8]]) -> Result<(u64, u64)> {
        let vlen: usize = parts.iter().map(|p| p.len()).sum();
        let head = RecordHead::new(kind, key.len(), vlen);
        let len = head.record_len(key.len(), vlen);
        if let Some(rec) = SmallRecord::new(kind, key, parts, self.ctx.salt) {
            return Ok((self.write_small(&rec)?, len));
        }
        let off = self.reserve(len)?;
        let region = &self.ctx.region;
        let oob = || StorageError::Corrupted {
            offset: off,
            what: "record outside the file, or copied onto itself",
        };
        let mut at = off;
        for piece in [&head.bytes[..head.len], key].into_iter().chain(parts.iter().copied()) {
            // SAFETY: `off..off+len` was reserved in this shard's chunk by `reserve` and is not
            // published yet, so no other thread reads it; the sources are caller slices or
            // published (immutable) records, disjoint from it.
            unsafe { region.write(at, piece) }.ok_or_else(oob)?;
            at += piece.len() as u64;
        }
        let covered = (at - off) as usize;
        // SAFETY: the bytes just written, still unpublished and only ours.
        let written = unsafe { region.bytes(off, covered) }.ok_or_else(oob)?;
        let sum = format::record_sum(written[0], &written[1..], self.ctx.salt);
        // SAFETY: as for the writes above.
        unsafe { region.write(at, &sum.to_le_bytes()) }.ok_or_else(oob)?;
        self.write_due_header()?;
        Ok((off, len))
    }

    /// Space for a `len`-byte record in the current chunk, starting a new chunk if needed.
    #[inline]
    fn reserve(&mut self, len: u64) -> Result<u64> {
        if self.st.chunk != 0 && self.st.chunk_end - self.st.cursor >= len {
            let off = self.st.cursor;
            self.st.cursor += len;
            return Ok(off);
        }
        self.reserve_in_new_chunk(len)
    }

    /// [`reserve`](Self::reserve) when the current chunk is full (or there is none): starts
    /// a new chunk, about once per 1,300 small records.
    ///
    /// A record whose chunk would need more than [`SOLO_CHUNK`] (or more than a normal
    /// chunk) gets a [`Solo`] chunk of its own size. While it is the current chunk, the next
    /// record joins the rest of its last page if it fits there (the chunk then stops being
    /// solo: space is not wasted for a recycling that may never come), else starts a chunk. A solo chunk may be a recycled one (see
    /// [`recycle`](Self::recycle)); its header is then written only after its record (see
    /// [`append`](Self::append)).
    #[cold]
    fn reserve_in_new_chunk(&mut self, len: u64) -> Result<u64> {
        self.write_due_header()?;
        if self.st.chunk != 0
            && let Some(s) = self.st.solo.get(&self.st.chunk)
            && s.end - self.st.cursor >= len
        {
            self.st.chunk_end = s.end;
            let chunk = self.st.chunk;
            self.st.solo.remove(&chunk);
            let off = self.st.cursor;
            self.st.cursor += len;
            return Ok(off);
        }
        let prev = (self.st.chunk, self.st.cursor);
        let normal = (PAGE << self.st.next_seq.min(3)).min(MAX_RECORD_CHUNK);
        let need = format::align_up(CHUNK_HEADER_LEN + len, PAGE);
        let want = need.max(normal);
        let solo = need > normal.min(SOLO_CHUNK);
        // Reused space first: a chunk this shard recycled (whole); else any free extent that
        // holds the record becomes (part of) the chunk, so leftovers smaller than a normal
        // chunk are not stranded.
        let recycled = self.reuse_recycled(need, want, solo)?;
        let (off, chunk_len, reused) = match recycled {
            Some((off, l, _)) => (off, l, true),
            None => self.alloc(need, want)?,
        };
        let tail = off + CHUNK_HEADER_LEN + len;
        if reused && !recycled.is_some_and(|(_, _, zeroed)| zeroed) {
            // A record chunk ends at its first empty record: clear what this first record does
            // not cover, so the chunk reads as records followed by zeros (as `check` expects
            // of a cleanly closed file).
            // SAFETY: the space was just taken from the free space or from this shard's
            // recycled chunks (no reader can reach it: its grace period has passed, and no
            // other writer: we took it).
            unsafe { self.ctx.region.zero(tail, off + chunk_len - tail) }
                .ok_or(StorageError::Corrupted { offset: off, what: "chunk outside the file" })?;
        }
        let h = ChunkHeader {
            kind: CHUNK_RECORDS,
            shard: self.st.id,
            len: chunk_len,
            seq: self.st.next_seq,
            void_before: 0,
        };
        if recycled.is_some() {
            self.st.header_due = Some((off, h));
        } else {
            self.ctx.write_chunk_header(off, &h)?;
        }
        let born = self.ctx.region.sync_generation();
        let seq = self.st.next_seq;
        self.st.chunks.insert((seq, off), RecordChunk { off, len: chunk_len, born });
        self.st.next_seq += 1;
        self.st.chunk = off;
        self.st.cursor = tail;
        self.st.chunk_end = off + chunk_len;
        let fresh = (!solo).then_some(RecordChunk { off, len: chunk_len, born });
        self.follow_fresh(fresh, seq, prev);
        if solo && !self.st.copying {
            self.st.solo.insert(off, Solo { seq, end: off + chunk_len, born });
            // Full while solo (see above).
            self.st.chunk_end = tail;
        }
        Ok(off + CHUNK_HEADER_LEN)
    }

    /// Writes the header of a recycled chunk once its record is in place.
    ///
    /// The order is what makes reusing the chunk safe: until the new header is there, the
    /// old one stands, and under it the chunk's bytes read as the old record (intact, or
    /// overwritten by identical bytes), which replays at its old place in the shard's log,
    /// before the record that replaced it, or as nothing (torn) or the whole new record
    /// (replayed early: an older write of its key may then win, and the new record was
    /// promised by no sync yet). Had the header come first, the old record, still intact,
    /// would replay as the newest of its key. The fence keeps the order for a crash of the
    /// process (the page cache then holds every store made before the crash, in program
    /// order); a crash of the machine may write back the header's page (or only its first
    /// sector, the header and the record's head) before the record's other pages. Those
    /// pages then hold whatever the disk had: which is why the chunk is reused as it is only
    /// once its old record's checksum is zeroed and no sync has started since the chunk was
    /// begun, so that no sync can have written the old record whole (see
    /// [`reuse_recycled`](Self::reuse_recycled)).
    fn write_due_header(&mut self) -> Result<()> {
        if let Some((off, h)) = self.st.header_due.take() {
            std::sync::atomic::fence(Ordering::Release);
            self.ctx.write_chunk_header(off, &h)?;
        }
        Ok(())
    }

    /// Points the index at the record at `off` (already written); the probe `p` was made on
    /// the current table, which has room for it (see `make_room`).
    pub(crate) fn index_put(&mut self, p: Probe, hash: u64, off: u64, len: u64) -> Result<()> {
        let t = self.table().expect("make_room creates the table");
        let slots = t.view(&self.ctx.region)?;
        self.publish(slots, p, hash, off, len)
    }

    /// [`index_put`](Self::index_put) on `slots`, the current table's view.
    #[inline]
    fn publish(
        &mut self,
        slots: &[AtomicU64],
        p: Probe,
        hash: u64,
        off: u64,
        len: u64,
    ) -> Result<()> {
        let slot = format::slot_encode(off, hash);
        match p {
            Probe::Found { pos, off: old, len: old_len } => {
                self.st.dead_bytes += old_len;
                self.st.live_bytes = self.st.live_bytes.saturating_sub(old_len) + len;
                // Release pairs with the reader's Acquire load of the slot (`table::find`).
                slots[pos].store(slot, Ordering::Release);
                if !(old_len > SOLO_MIN_LEN && self.recycle(old, old_len)) {
                    self.note_dead(old, old_len);
                }
            }
            Probe::Vacant { pos, tomb } => {
                // Release: as above.
                slots[pos].store(slot, Ordering::Release);
                if tomb {
                    self.st.tombs = self.st.tombs.saturating_sub(1);
                }
                self.set_count(self.count() + 1);
                self.st.live_bytes += len;
            }
        }
        Ok(())
    }

    /// Marks the slot a probe found as removed; `len` is the tombstone record's length.
    #[inline]
    pub(crate) fn index_delete(&mut self, p: Probe, len: u64) -> Result<()> {
        if let Probe::Found { pos, len: old_len, .. } = p {
            let region = &self.ctx.region;
            let t = self.table().expect("a found key has a table");
            // Release: a reader that sees the tombstone also sees the tombstone record (for
            // symmetry; readers do not read it).
            t.view(region)?[pos].store(TOMBSTONE, Ordering::Release);
            // Saturating: counts from a damaged directory must not panic.
            self.set_count(self.count().saturating_sub(1));
            self.st.tombs += 1;
            self.st.live_bytes = self.st.live_bytes.saturating_sub(old_len);
            self.st.dead_bytes += old_len + len;
        } else {
            self.st.dead_bytes += len;
        }
        Ok(())
    }

    /// Drops the whole table (readers see "no table", i.e. no keys); `len` is the clear
    /// record's length.
    pub(crate) fn index_clear(&mut self, len: u64) {
        // Readers that see 0 find nothing, which is the state after the clear record.
        self.publish_table(None);
        self.st.dead_bytes += self.st.live_bytes + len;
        self.st.live_bytes = 0;
        self.set_count(0);
        self.st.tombs = 0;
    }

    /// Replays a record found at `off` during recovery.
    pub(crate) fn replay(&mut self, off: u64, rec: &Record<'_>) -> Result<()> {
        let hash = format::key_hash(rec.key, self.ctx.salt);
        match rec.kind {
            REC_SET if rec.killed() => {
                let p = self.probe(hash, rec.key)?;
                if let Probe::Found { off: old, .. } = p
                    && old != off
                {
                    self.index_delete(p, 0)?;
                }
                // The marked record itself is dead space.
                self.st.dead_bytes += rec.len;
                Ok(())
            }
            REC_SET => {
                let p = self.probe(hash, rec.key)?;
                let p = self.make_room(p, hash, rec.key)?;
                self.index_put(p, hash, off, rec.len)
            }
            _ => {
                self.index_clear(rec.len);
                Ok(())
            }
        }
    }

    /// Records a record chunk seen during recovery, so new chunks get later sequence numbers;
    /// the shard never appends to an old chunk after a crash.
    pub(crate) fn saw_chunk(&mut self, seq: u64) {
        self.st.next_seq = self.st.next_seq.max(seq + 1);
    }

    /// This shard's directory entry.
    pub(crate) fn dir_entry(&self) -> DirEntry {
        DirEntry {
            table: self.table().map_or(0, |t| t.chunk),
            count: self.count(),
            tombs: self.st.tombs,
            chunk: self.st.chunk,
            cursor: self.st.cursor,
            next_seq: self.st.next_seq,
            dead_bytes: self.st.dead_bytes,
            live_bytes: self.st.live_bytes,
        }
    }

    /// Offsets of every live record, read under the lock (a consistent snapshot of the
    /// shard).
    pub(crate) fn live_offsets(&self) -> Result<Vec<u64>> {
        let Some(t) = self.table() else { return Ok(Vec::new()) };
        let slots = t.view(&self.ctx.region)?;
        let mut out = Vec::with_capacity(self.count() as usize);
        for s in slots {
            let s = s.load(Ordering::Relaxed);
            if s != 0 && s != TOMBSTONE {
                out.push(format::slot_offset(s));
            }
        }
        Ok(out)
    }

    /// Copies this shard's live records into fresh chunks and a table sized for them (at
    /// most 3/4 full), then publishes the table. The old chunks stay intact (and in the
    /// file's replay order the copies come after them) until `Db::rebuild` commits; `None`
    /// when the shard has no record chunks.
    ///
    /// If the copy fails midway (a damaged record, a full disk), the shard stays consistent:
    /// each record is copied and then the old table's slot is pointed at its copy (same key
    /// and value, so readers see no change), so the old table names the newest record of
    /// every key, in replay order too. A later removal then kills the copy, not an older
    /// record that a replay after a crash would find overridden by the copy (which would
    /// bring the key back). The old chunks go back on the shard's list, the copies count as
    /// dead where they replaced a record, and the unpublished table is freed as a retired one.
    pub(crate) fn compact(&mut self) -> Result<Option<Compacted>> {
        // Recycled chunks are dead chunks on disk: the rebuild frees them with the others.
        for r in std::mem::take(&mut self.st.recycled) {
            self.unrecycle(r);
        }
        if self.st.chunks.is_empty() {
            return Ok(None);
        }
        // Every old chunk stays until the rebuild frees it: none may be recycled. Nor may
        // the copies' chunks: the first one's header will carry the commit, and a copy's
        // chunk reused by a later write before it would be relabelled as older than the
        // copies, which a replay would then let win. While `copying`, no chunk started is
        // followed as fresh or solo; chunks this shard follows are started after the copy.
        self.st.solo.clear();
        self.st.fresh.clear();
        self.st.copying = true;
        let old_chunks = std::mem::take(&mut self.st.chunks);
        let old_table = self.table();
        // Start a fresh chunk even if the current one has room: the copy must come entirely
        // after every old chunk.
        self.st.chunk = 0;
        let first_seq = self.st.next_seq;
        let mut new = None;
        let mut copied = 0;
        let copy = self.copy_live(old_table, &mut new, &mut copied);
        self.st.copying = false;
        debug_assert!(self.st.fresh.is_empty() && self.st.solo.is_empty());
        match copy {
            Ok(()) => {
                let new = new.expect("a successful copy made its table");
                let first_chunk = self.st.chunks.first_key_value().map_or(0, |(_, r)| r.off);
                self.publish_table(Some(new));
                self.st.tombs = 0;
                self.st.live_bytes = copied;
                self.st.dead_bytes = 0;
                let killed = self.st.killed;
                Ok(Some(Compacted { first_chunk, first_seq, old_chunks, killed }))
            }
            Err(e) => {
                let copies = std::mem::replace(&mut self.st.chunks, old_chunks);
                self.st.chunks.extend(copies);
                self.st.dead_bytes += copied;
                if let Some(t) = new {
                    let epoch = self.ctx.epochs.retire();
                    self.st.limbo.push((t.chunk, t.len, epoch));
                }
                Err(e)
            }
        }
    }

    /// [`compact`](Self::compact)'s copy: a new table into `new`, then each live record of
    /// `old` appended (after the old chunks) and entered there, with the old table's slot
    /// pointed at the copy; `copied` counts the bytes copied.
    fn copy_live(
        &mut self,
        old: Option<TableRef>,
        new: &mut Option<TableRef>,
        copied: &mut u64,
    ) -> Result<()> {
        let t = self.new_table(table_len_for(self.count(), 3, 4))?;
        *new = Some(t);
        self.reserve(0)?;
        let Some(old) = old else { return Ok(()) };
        let region = &self.ctx.region;
        for slot in old.view(region)? {
            let s = slot.load(Ordering::Relaxed);
            if s == 0 || s == TOMBSTONE {
                continue;
            }
            let at = format::slot_offset(s);
            let rec = table::record_at(region, at)?;
            // A damaged record is reported, not copied: the copy would carry a fresh, valid
            // checksum over the damage, and a damaged length may even reach into the space
            // the copy goes to.
            if rec.kind != REC_SET || !rec.verify(self.ctx.salt) {
                return Err(StorageError::Corrupted {
                    offset: at,
                    what: "record checksum mismatch",
                });
            }
            let (off, len) = self.append(REC_SET, rec.key, &[rec.value])?;
            *copied += len;
            let hash = format::key_hash(rec.key, self.ctx.salt);
            table::insert_slot(t.view(region)?, hash, format::slot_encode(off, hash))?;
            // Release: a reader that loads the new value sees the whole copy (`compact`).
            slot.store(format::slot_encode(off, hash), Ordering::Release);
        }
        Ok(())
    }

    /// Gives up a compaction that will not be committed: its old chunks go back on the
    /// shard's list, ahead of the copy's, all of their bytes dead (the copy holds every live
    /// record), so that the next rebuild copies the shard again and frees them.
    pub(crate) fn abandon(&mut self, c: Compacted) {
        self.st.dead_bytes += c.old_chunks.values().map(|r| r.len).sum::<u64>();
        self.st.chunks.extend(c.old_chunks);
    }

    /// Commits a compaction: the first chunk of the copy says that older chunks are void.
    pub(crate) fn commit(&mut self, c: &Compacted) -> Result<()> {
        // The copy's first chunk, still under the sequence number it was started with: no
        // copy chunk is recycled before the commit (see `compact`).
        let Some(first) = self.st.chunks.get(&(c.first_seq, c.first_chunk)) else {
            return Err(StorageError::Corrupted {
                offset: c.first_chunk,
                what: "a rebuild's first copy chunk is gone before its commit",
            });
        };
        let len = first.len;
        let h = ChunkHeader {
            kind: CHUNK_RECORDS,
            shard: self.st.id,
            len,
            seq: c.first_seq,
            void_before: c.first_seq,
        };
        self.ctx.write_chunk_header(c.first_chunk, &h)
    }

    /// Bytes of this shard's record chunks, recycled ones included (for tests).
    #[cfg(test)]
    pub(crate) fn chunk_bytes(&self) -> u64 {
        let chunks: u64 = self.st.chunks.values().map(|r| r.len).sum();
        chunks + self.all_recycled_bytes()
    }

    /// Tombstone slots in this shard's table (for tests).
    #[cfg(test)]
    pub(crate) fn tombstones(&self) -> u64 {
        self.st.tombs
    }

    /// Table slots and byte counters, for `stats`.
    pub(crate) fn usage(&self) -> (u64, u64, u64) {
        (self.table().map_or(0, TableRef::slots), self.st.live_bytes, self.st.dead_bytes)
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    /// The lock word, the live count and the fields a small write changes share the shard's
    /// first 64-byte line; the table word, which reads load, is not on it.
    #[test]
    fn a_small_write_touches_one_line() {
        let s = Shard::new(0);
        let base = std::ptr::from_ref(&s) as usize;
        assert_eq!(base % 128, 0);
        let at = |p: usize| p - base;
        // SAFETY: only the address of the raw lock is taken; nothing is locked or unlocked.
        let lock = at(std::ptr::from_ref(unsafe { s.state.raw() }) as usize);
        let st = s.state.read();
        let hot = [
            std::ptr::from_ref(&st.tombs) as usize,
            std::ptr::from_ref(&st.chunk) as usize,
            std::ptr::from_ref(&st.cursor) as usize,
            std::ptr::from_ref(&st.chunk_end) as usize,
            std::ptr::from_ref(&st.dead_bytes) as usize,
            std::ptr::from_ref(&st.live_bytes) as usize,
        ];
        let count = at(std::ptr::from_ref(&s.count) as usize);
        for off in [lock, count].into_iter().chain(hot.map(|p| at(p) + 7)) {
            assert!(off < 64, "a hot field reaches byte {off} of the shard, past its first line");
        }
        let table = at(std::ptr::from_ref(&s.table) as usize);
        assert!(table >= 64, "the table word shares the writers' line (offset {table})");
        let killed = at(std::ptr::from_ref(&st.killed) as usize);
        assert_ne!(killed / 64, table / 64, "removals write the table word's line");
    }
}
