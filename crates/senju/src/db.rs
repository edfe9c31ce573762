//! The database handle and its operations.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::builder::Builder;
use crate::epoch::Reading;
use crate::error::{OpenError, Result, StorageError};
use crate::format::{self, DIR_ENTRY_LEN, FLAG_CLEAN, Header, MAX_KEY_LEN, MAX_VALUE_LEN, PAGE};
use crate::iter::{Cursor, Iter};
use crate::shard::{Compacted, Ctx, Shard, ShardWriter};
use crate::table::{self, Probe};

mod batch;

/// How durable [`Db::sync`] makes earlier writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Survives a crash of this process (every write already does: it is in the operating
    /// system's page cache). Asks for write-back without waiting (`msync(MS_ASYNC)`, which
    /// on Linux starts nothing: the kernel writes dirty pages back on its own schedule).
    Soft,
    /// Survives a crash of the machine or a power loss: waits until the device has the data.
    Hard,
}

/// Counters describing a database (momentary values, read shard by shard).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Live records.
    pub records: u64,
    /// Shards.
    pub shards: u64,
    /// Bytes of file handed out to chunks (the file's length after a clean close).
    pub file_bytes: u64,
    /// Index slots in all tables.
    pub table_slots: u64,
    /// Bytes of live records.
    pub live_bytes: u64,
    /// Bytes of records that are overwritten or removed (reclaimed by the next rebuild; a
    /// chunk whose records were all replaced is reused instead, and its bytes move to
    /// `free_bytes`, once no sync it must wait for is pending).
    pub dead_bytes: u64,
    /// Bytes inside the file that no chunk uses (left by replaced index tables and by
    /// rebuilds; new chunks of any shard reuse them before the file grows), and chunks whose
    /// records were all replaced and which the same shard's next chunks can reuse at once
    /// (see `docs/design.md` §3.1, "Shared chunks and recycling").
    pub free_bytes: u64,
    /// Automatic rebuilds done by this handle (passes that rebuilt at least one shard; see
    /// [`Builder::auto_rebuild`](crate::Builder::auto_rebuild)).
    pub auto_rebuilds: u64,
    /// Why automatic rebuilds stopped for this handle (`None`: they did not).
    pub auto_rebuild_error: Option<String>,
}

/// An open database: a hash table of byte-string keys and values in one memory-mapped file
/// (or in anonymous memory). See the [crate documentation](crate) for the guarantees.
///
/// All methods take `&self`; share a `Db` between threads by reference or in an `Arc`.
pub struct Db {
    core: Arc<Core>,
    shard_bits: u32,
    header: Header,
    /// Whether `close` ran: `None` not yet, `Some(None)` it succeeded, `Some(Some(why))` it
    /// failed (later calls fail the same way). Serializes concurrent `close` calls.
    close_done: Mutex<Option<Option<String>>>,
    /// Opened with `Builder::read_only`: every write fails, nothing is written to the file.
    read_only: bool,
}

/// What the handle shares with its automatic rebuild thread (`auto.rs`).
pub(crate) struct Core {
    pub(crate) ctx: Ctx,
    pub(crate) shards: Box<[Shard]>,
    /// The file's path (`None`: an in-memory database, which never syncs).
    path: Option<PathBuf>,
    /// Held by a rebuild: one at a time.
    rebuilding: Mutex<()>,
    /// Set by `close` before it waits for a rebuild called by hand (`rebuilding`): that
    /// rebuild stops as an automatic one does when its thread is stopped.
    closing: AtomicBool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.core.path)
            .field("shards", &self.core.shards.len())
            .field("closed", &self.core.ctx.closed.load(Ordering::Relaxed))
            .finish()
    }
}

/// Whether [`Db::set`] accepts a key and a value of these lengths: `TooLarge` for a key over
/// [`MAX_KEY_LEN`] or a value over [`MAX_VALUE_LEN`]. For a caller that splits a batch
/// across several calls and must check all of it before the first.
pub fn check_pair(key: &[u8], value: &[u8]) -> Result<()> {
    check_key(key)?;
    check_value(value.len())
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(StorageError::TooLarge { what: "key", len: key.len(), max: MAX_KEY_LEN });
    }
    Ok(())
}

fn check_value(len: usize) -> Result<()> {
    if len > MAX_VALUE_LEN {
        return Err(StorageError::TooLarge { what: "value", len, max: MAX_VALUE_LEN });
    }
    Ok(())
}

impl Db {
    /// Opens (creating if needed) the database file at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Db, OpenError> {
        Builder::new().open(path)
    }

    /// Options for opening a database.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// An empty database in anonymous memory with default options.
    pub fn memory() -> Result<Db, OpenError> {
        Builder::new().memory()
    }

    pub(crate) fn from_parts(
        ctx: Ctx,
        shards: Box<[Shard]>,
        header: Header,
        path: Option<PathBuf>,
        read_only: bool,
    ) -> Db {
        let shard_bits = header.shard_bits;
        let core =
            Core { ctx, shards, path, rebuilding: Mutex::new(()), closing: AtomicBool::new(false) };
        Db { core: Arc::new(core), shard_bits, header, close_done: Mutex::new(None), read_only }
    }

    /// The file's path (`None` for an in-memory database).
    pub fn path(&self) -> Option<&Path> {
        self.core.path.as_deref()
    }

    /// Whether this handle was opened with [`Builder::read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Whether [`close`](Db::close) has been called.
    pub fn is_closed(&self) -> bool {
        self.core.ctx.closed.load(Ordering::Relaxed)
    }

    /// Fails with [`StorageError::Forked`] in a child made by `fork` of the process that
    /// opened this handle, as every other call there does. One load: no lock, no read of the
    /// store. For callers that hand out data they copied from the store before, such as a
    /// binding's buffered scan, so that they fail in a child too.
    pub fn check_fork(&self) -> Result<()> {
        self.core.ctx.region.check_fork()
    }

    /// Fails with `Closed` on a closed handle, with `Forked` in a child of `fork`, and with
    /// `ReadOnly` on a read-only handle (checked before any write that does not go through
    /// [`route_index`](Db::route_index)).
    #[inline]
    fn writable(&self) -> Result<()> {
        self.check_open()?;
        self.writable_routed()
    }

    /// Fails with `Closed` once the handle is closed, else with `Forked` in a child of
    /// `fork`: in that order, as [`route_index`](Db::route_index) checks (inline there: a
    /// call to this cost every single-key operation 6 instructions), so that every call on a
    /// closed handle says `Closed`.
    #[inline]
    fn check_open(&self) -> Result<()> {
        if self.core.ctx.closed.load(Ordering::Relaxed) {
            return Err(StorageError::Closed);
        }
        self.core.ctx.region.check_fork()
    }

    /// [`writable`](Db::writable) after [`route_index`](Db::route_index), which checked for a
    /// fork already.
    #[inline]
    fn writable_routed(&self) -> Result<()> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        if self.core.ctx.auto.needs_start() {
            self.start_auto_rebuild();
        }
        Ok(())
    }

    /// Starts the automatic rebuild thread (a shard asked for a rebuild; see `auto.rs`).
    #[cold]
    fn start_auto_rebuild(&self) {
        let core = Arc::clone(&self.core);
        self.core.ctx.auto.start(move || {
            std::thread::Builder::new().name("senju-rebuild".into()).spawn(move || {
                core.ctx.auto.run(
                    |stop| {
                        let stopped = || stop.load(Ordering::Acquire);
                        core.rebuild(|w| w.joins_rebuild_pass(), |_, _| {}, &stopped)
                            .map(|p| p.shards)
                            .map_err(|e| format!("automatic rebuild failed: {e}"))
                    },
                    || {
                        // Sampled: a shard whose lock is taken is left out this time.
                        let (live, dead) = core
                            .shards
                            .iter()
                            .filter_map(Shard::sample_bytes)
                            .fold((0, 0), |(l, d), (sl, sd)| (l + sl, d + sd));
                        core.ctx.auto.is_urgent(dead, live, core.shards.len() as u64)
                    },
                );
            })
        });
    }

    /// [`route`](Db::route) for a write.
    #[inline]
    fn route_write(&self, key: &[u8]) -> Result<(u64, &Shard)> {
        let (hash, shard) = self.route(key)?;
        // Started before the shard lock is taken, so the slot's load overlaps that.
        shard.prefetch(&self.core.ctx, hash);
        self.writable_routed()?;
        Ok((hash, shard))
    }

    #[inline]
    fn route(&self, key: &[u8]) -> Result<(u64, &Shard)> {
        let (hash, idx) = self.route_index(key)?;
        Ok((hash, &self.core.shards[idx as usize]))
    }

    /// The key's hash and the index of its shard (checks the key and that the database is
    /// open).
    #[inline]
    fn route_index(&self, key: &[u8]) -> Result<(u64, u32)> {
        if self.core.ctx.closed.load(Ordering::Relaxed) {
            return Err(StorageError::Closed);
        }
        self.core.ctx.region.check_fork()?;
        check_key(key)?;
        let hash = format::key_hash(key, self.core.ctx.salt);
        // At most 16 shard bits (`Header::MAX_SHARD_BITS`), so the index fits a u32.
        let idx = hash.checked_shr(64 - self.shard_bits).unwrap_or(0) as u32;
        Ok((hash, idx))
    }

    /// Calls `f` with the value of `key` in place (no copy) and returns what it returns, or
    /// `None` if the key is absent. `f` runs without any lock held; it may call this
    /// database, except [`rebuild`](Db::rebuild) and [`close`](Db::close) (which fail then
    /// with [`StorageError::Reentrant`]: they would wait for the view `f` holds).
    #[inline]
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.lookup(key, |v| {
            let _reading = Reading::mark();
            f(v)
        })
    }

    /// [`get_with`](Db::get_with) for the engine's own closures, which do not call back.
    #[inline]
    fn lookup<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        let (hash, shard) = self.route(key)?;
        // Started before the pin's read-modify-write, so the slot's load overlaps it.
        shard.prefetch(&self.core.ctx, hash);
        // The pin keeps the record's space from being reused until `f` returns.
        let _pin = self.pin_open()?;
        Ok(shard.get(&self.core.ctx, hash, key)?.map(|r| f(r.value)))
    }

    /// A copy of the value of `key`, or `None` if absent.
    /// [`StorageError::OutOfMemory`] if the copy cannot be allocated.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.lookup(key, copy_out)?.transpose()
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        Ok(self.lookup(key, |_| ())?.is_some())
    }

    /// Sets `key` to `value`, replacing any previous value.
    #[inline]
    pub fn set(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.set_at(key, value, true).map(|_| ())
    }

    /// [`set`](Db::set) if no other thread holds the lock of `key`'s shard; `Ok(None)`,
    /// with nothing written, if one does.
    ///
    /// The `try_` writes never wait for a lock, so a caller that must not block while it
    /// holds something of its own (a binding holding Python's GIL or Ruby's GVL) can give
    /// that up first and then call the waiting form. A shard is held for about a
    /// microsecond per write, but for milliseconds while its index table grows or while
    /// [`rebuild`](Db::rebuild) copies it.
    #[inline]
    pub fn try_set(&self, key: &[u8], value: &[u8]) -> Result<Option<()>> {
        self.set_at(key, value, false)
    }

    /// [`set`](Db::set) (`wait`: for the shard lock) or [`try_set`](Db::try_set). One body
    /// for both, not inlined: with two inlined copies the compiler stopped inlining the
    /// record writing inside them, which cost about 30 instructions per `set` (callgrind).
    #[inline(never)]
    fn set_at(&self, key: &[u8], value: &[u8], wait: bool) -> Result<Option<()>> {
        let (hash, shard) = self.route_write(key)?;
        check_value(value.len())?;
        let ctx = &self.core.ctx;
        // Spelled out rather than `writer_or_busy`, which compiled to 7 more instructions
        // per set here (callgrind).
        let w = if wait { Some(shard.writer(ctx)?) } else { shard.try_writer(ctx)? };
        match w {
            Some(mut w) => w.set(hash, key, value).map(Some),
            None => Ok(None),
        }
    }

    /// Sets `key` to `value` only if `key` is absent; returns whether it was set.
    pub fn add(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let (hash, shard) = self.route_write(key)?;
        check_value(value.len())?;
        let mut w = shard.writer(&self.core.ctx)?;
        match w.probe(hash, key)? {
            Probe::Found { .. } => Ok(false),
            p => w.put(p, hash, key, &[value]).map(|()| true),
        }
    }

    /// Removes `key`; returns whether it was present.
    #[inline]
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        self.remove_at(key, true).map(Option::unwrap_or_default)
    }

    /// [`remove`](Db::remove) if no other thread holds the lock of `key`'s shard;
    /// `Ok(None)`, with nothing removed, if one does (see [`try_set`](Db::try_set)).
    #[inline]
    pub fn try_remove(&self, key: &[u8]) -> Result<Option<bool>> {
        self.remove_at(key, false)
    }

    /// [`remove`](Db::remove) (`wait`: for the shard lock) or [`try_remove`](Db::try_remove),
    /// one body for both (see [`set_at`](Db::set_at)).
    #[inline(never)]
    fn remove_at(&self, key: &[u8], wait: bool) -> Result<Option<bool>> {
        let (hash, shard) = self.route_write(key)?;
        let Some(mut w) = shard.writer_or_busy(&self.core.ctx, wait)? else { return Ok(None) };
        let p = w.probe(hash, key)?;
        w.delete(p, key).map(Some)
    }

    /// If the value of `key` equals `expected` (`None`: absent), replaces it with `new`
    /// (`None`: remove) and returns `true`; otherwise changes nothing and returns `false`.
    #[inline]
    pub fn compare_and_set(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        self.compare_and_set_at(key, expected, new, true).map(Option::unwrap_or_default)
    }

    /// [`compare_and_set`](Db::compare_and_set) if no other thread holds the lock of
    /// `key`'s shard; `Ok(None)`, with nothing compared or written, if one does (see
    /// [`try_set`](Db::try_set)).
    #[inline]
    pub fn try_compare_and_set(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<Option<bool>> {
        self.compare_and_set_at(key, expected, new, false)
    }

    /// Both forms of [`compare_and_set`](Db::compare_and_set) (`wait`: for the shard lock).
    #[inline(never)]
    fn compare_and_set_at(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        wait: bool,
    ) -> Result<Option<bool>> {
        let (hash, shard) = self.route_write(key)?;
        if let Some(v) = new {
            check_value(v.len())?;
        }
        let Some(mut w) = shard.writer_or_busy(&self.core.ctx, wait)? else { return Ok(None) };
        let p = w.probe(hash, key)?;
        let current = w.record(p)?.map(|r| r.value);
        if current != expected {
            return Ok(Some(false));
        }
        match new {
            Some(v) => w.put(p, hash, key, &[v])?,
            None => {
                w.delete(p, key)?;
            }
        }
        Ok(Some(true))
    }

    /// Appends `suffix` to the value of `key` (an absent key counts as empty).
    #[inline]
    pub fn append(&self, key: &[u8], suffix: &[u8]) -> Result<()> {
        self.append_at(key, suffix, true).map(|_| ())
    }

    /// [`append`](Db::append) if no other thread holds the lock of `key`'s shard;
    /// `Ok(None)`, with nothing written, if one does (see [`try_set`](Db::try_set)).
    #[inline]
    pub fn try_append(&self, key: &[u8], suffix: &[u8]) -> Result<Option<()>> {
        self.append_at(key, suffix, false)
    }

    /// [`try_append`](Db::try_append) that writes only a new value shorter than `limit`
    /// bytes: `Ok(Some(Ok(())))` once written, `Ok(Some(Err(len)))` with nothing written if
    /// the new value would take `len` bytes, `Ok(None)` if another thread holds the shard.
    /// For callers that do short writes in one way and long ones in another (the Ruby
    /// binding keeps its GVL for the first and releases it for the second) without a
    /// lookup of the old value's length first.
    #[inline]
    pub fn try_append_below(
        &self,
        key: &[u8],
        suffix: &[u8],
        limit: usize,
    ) -> Result<Option<std::result::Result<(), usize>>> {
        self.append_within(key, suffix, false, limit)
    }

    /// Both forms of [`append`](Db::append) (`wait`: for the shard lock).
    #[inline(never)]
    fn append_at(&self, key: &[u8], suffix: &[u8], wait: bool) -> Result<Option<()>> {
        self.append_within(key, suffix, wait, usize::MAX).map(|r| r.map(|_| ()))
    }

    /// [`append_at`](Db::append_at) writing only new values shorter than `limit`.
    #[inline(always)]
    fn append_within(
        &self,
        key: &[u8],
        suffix: &[u8],
        wait: bool,
        limit: usize,
    ) -> Result<Option<std::result::Result<(), usize>>> {
        let (hash, shard) = self.route_write(key)?;
        let Some(mut w) = shard.writer_or_busy(&self.core.ctx, wait)? else { return Ok(None) };
        let p = w.probe(hash, key)?;
        let old = w.record(p)?.map_or(&[][..], |r| r.value);
        let len = old.len().saturating_add(suffix.len());
        if len >= limit {
            return Ok(Some(Err(len)));
        }
        check_value(len)?;
        w.put(p, hash, key, &[old, suffix]).map(|()| Some(Ok(())))
    }

    /// Removes `key` and returns the value it had (`None`: it was absent), in one step under
    /// the key's shard lock. If the copy of the value cannot be allocated it fails with
    /// [`StorageError::OutOfMemory`] and removes nothing.
    ///
    /// ```
    /// let db = senju::Db::builder().memory()?;
    /// db.set(b"k", b"v")?;
    /// assert_eq!(db.take(b"k")?, Some(b"v".to_vec()));
    /// assert_eq!(db.take(b"k")?, None);
    /// # Ok::<(), senju::Error>(())
    /// ```
    pub fn take(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut failed = None;
        let taken = self.take_with(key, |v| match copy_out(v) {
            Ok(copy) => Some(copy),
            Err(e) => {
                failed = Some(e);
                None
            }
        })?;
        failed.map_or(Ok(taken), Err)
    }

    /// Removes `key` if `f`, given its value under the key's shard lock, returns `Some`, and
    /// returns that; `Ok(None)` if the key is absent or `f` returned `None` (nothing is
    /// removed then). For removals that hand the value on in a form of their own, or only
    /// under a condition on it (the bindings copy small values here and read large ones
    /// outside the lock). `f` must be short and must not call this database.
    pub fn take_with<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> Option<R>,
    ) -> Result<Option<R>> {
        self.take_at(key, f, true).map(Option::flatten)
    }

    /// [`take_with`](Db::take_with) if no other thread holds the lock of `key`'s shard;
    /// `Ok(None)`, without calling `f`, if one does (see [`try_set`](Db::try_set)).
    pub fn try_take_with<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> Option<R>,
    ) -> Result<Option<Option<R>>> {
        self.take_at(key, f, false)
    }

    /// Both forms of [`take_with`](Db::take_with) (`wait`: for the shard lock).
    fn take_at<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> Option<R>,
        wait: bool,
    ) -> Result<Option<Option<R>>> {
        let (hash, shard) = self.route_write(key)?;
        let Some(mut w) = shard.writer_or_busy(&self.core.ctx, wait)? else { return Ok(None) };
        let p = w.probe(hash, key)?;
        let Some(out) = w.record(p)?.and_then(|r| f(r.value)) else { return Ok(Some(None)) };
        w.delete(p, key)?;
        Ok(Some(Some(out)))
    }

    /// Atomically replaces the value of `key` by `f(old)` (`None` in: absent; `None` out:
    /// remove) and returns the new value.
    ///
    /// `f` runs with the key's shard locked: it must be short and must not call this
    /// database (that would deadlock on the same shard).
    pub fn update<F>(&self, key: &[u8], f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnOnce(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        self.update_at(key, f, true).map(Option::unwrap_or_default)
    }

    /// [`update`](Db::update) if no other thread holds the lock of `key`'s shard;
    /// `Ok(None)`, without calling `f`, if one does (see [`try_set`](Db::try_set)).
    pub fn try_update<F>(&self, key: &[u8], f: F) -> Result<Option<Option<Vec<u8>>>>
    where
        F: FnOnce(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        self.update_at(key, f, false)
    }

    /// Both forms of [`update`](Db::update) (`wait`: for the shard lock).
    fn update_at<F>(&self, key: &[u8], f: F, wait: bool) -> Result<Option<Option<Vec<u8>>>>
    where
        F: FnOnce(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let (hash, shard) = self.route_write(key)?;
        let Some(mut w) = shard.writer_or_busy(&self.core.ctx, wait)? else { return Ok(None) };
        let p = w.probe(hash, key)?;
        let new = f(w.record(p)?.map(|r| r.value));
        match &new {
            Some(v) => {
                check_value(v.len())?;
                w.put(p, hash, key, &[v])?;
            }
            None => {
                w.delete(p, key)?;
            }
        }
        Ok(Some(new))
    }

    /// The number of records (a momentary sum over the shards).
    pub fn len(&self) -> u64 {
        self.core.shards.iter().map(Shard::len).sum()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A cursor over all records, shard by shard.
    ///
    /// Weakly consistent: it sees every record that is present from its start to its end, at
    /// most once, and may or may not see records set or removed meanwhile. It holds no lock
    /// between items; it locks each shard only while copying that shard's offsets.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// An owned, resumable cursor over all keys (see [`Cursor`]): for scans that cannot keep
    /// a borrow of the database between steps.
    pub fn cursor(&self) -> Cursor {
        Cursor::new(self)
    }

    /// Removes every record (shard by shard; a concurrent set may survive).
    pub fn clear(&self) -> Result<()> {
        self.writable()?;
        for shard in self.core.shards.iter() {
            shard.writer(&self.core.ctx)?.clear()?;
        }
        Ok(())
    }

    /// Makes every write that returned before this call durable to the given degree. Runs
    /// concurrently with writers; for an in-memory database it does nothing.
    pub fn sync(&self, durability: Durability) -> Result<()> {
        self.check_open()?;
        if self.core.path.is_none() || self.read_only {
            return Ok(());
        }
        Ok(self.core.ctx.region.sync(durability == Durability::Hard)?)
    }

    /// Compacts the database online and resizes every index table to its data: each shard's
    /// live records are copied into fresh space, its table replaced by one sized for them,
    /// and the space of the old records and tables is reused afterwards. Readers never wait;
    /// a writer waits only while its own shard is being copied. One rebuild runs at a time
    /// (a second call waits for the first).
    ///
    /// Crash-safe at every point: the copies are synced before a header marks the old chunks
    /// void, and that mark is synced before their space is reused, so a crash leaves either
    /// the old records or the copies. Old chunks written since the last hard sync started
    /// hold nothing a sync has promised, so they are freed before the first sync, while
    /// their pages are still in memory: the syncs then write back the copies, not the dead
    /// records (for a file database a rebuild costs two hard syncs, and a third when it
    /// frees chunks that an earlier sync had written). Old chunks that hold a removal or a
    /// clear made since then wait for the commit instead, because the older records they
    /// overrule would come back with them after a crash.
    ///
    /// The old space is freed only once no reader still looks at it, so a rebuild waits for
    /// every [`Iter`] and every [`get_with`](Db::get_with) closure that began before it
    /// swapped the tables. Called by a thread that holds an `Iter` of this database or from
    /// inside such a closure, it would wait for itself: it fails with
    /// [`StorageError::Reentrant`] instead, having done nothing.
    ///
    /// A [`close`](Db::close) from another thread stops it: the shards copied so far are
    /// committed, and it fails with [`StorageError::Closed`] if some were not copied yet
    /// (stopped while it waits for readers, after its commit, it has done its work: the
    /// next open frees the old space). `close` returns once it has stopped.
    pub fn rebuild(&self) -> Result<()> {
        self.rebuild_with_progress(|_, _| {})
    }

    /// [`rebuild`](Db::rebuild), calling `progress(done, total)` after each shard is copied
    /// (`total` is the number of shards; the syncs and the commit follow the last call).
    /// For progress bars on large databases. A `rebuild` or `close` of this database called
    /// from `progress` would wait for this rebuild: it fails with
    /// [`StorageError::Reentrant`] instead. If `progress` panics, the rebuild stops before its commit
    /// and the panic goes on: no record is lost, and the old chunks of the shards copied so
    /// far are dead space for the next rebuild to free.
    pub fn rebuild_with_progress(&self, progress: impl FnMut(u64, u64)) -> Result<()> {
        self.rebuild_until(&AtomicBool::new(false), progress).map(drop)
    }

    /// [`rebuild_with_progress`](Db::rebuild_with_progress) that stops early once `stop` is
    /// set (by another thread, or a signal handler): it looks before each shard and while
    /// it waits for readers, commits the shards copied by then, and returns `Ok(false)` if
    /// some shards were not copied (their dead space waits for a later rebuild), `Ok(true)`
    /// once every shard was. No record is lost either way. For callers that must answer an
    /// interrupt within one shard's copy, such as the Python and Ruby bindings.
    ///
    /// ```
    /// use std::sync::atomic::AtomicBool;
    /// let db = senju::Db::builder().memory()?;
    /// db.set(b"k", b"v")?;
    /// assert!(db.rebuild_until(&AtomicBool::new(false), |_, _| {})?);
    /// assert!(!db.rebuild_until(&AtomicBool::new(true), |_, _| {})?, "stopped at once");
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), senju::Error>(())
    /// ```
    pub fn rebuild_until(&self, stop: &AtomicBool, progress: impl FnMut(u64, u64)) -> Result<bool> {
        self.writable()?;
        if self.core.ctx.epochs.pinned_here() || self.core.rebuilding_here() {
            return Err(StorageError::Reentrant { call: "rebuild" });
        }
        let closing = &self.core.closing;
        let (mut progress, mut copied) = (progress, 0);
        let report = |done, total| {
            copied = done;
            progress(done, total);
        };
        let stopped = || closing.load(Ordering::Acquire) || stop.load(Ordering::Acquire);
        self.core.rebuild(|_| true, report, &stopped)?;
        // Stopped before every shard was copied (a stop while waiting for readers comes
        // after the commit: the rebuild is done, and the next open frees the old space).
        let whole = copied == self.core.shards.len() as u64;
        if !whole && closing.load(Ordering::Acquire) {
            return Err(StorageError::Closed);
        }
        Ok(whole)
    }

    /// The most bytes the file can grow to while this handle has it open: the address space
    /// reserved for the map ([`Builder::max_size`](crate::Builder::max_size), or less where
    /// the default could not be had). A write that needs more fails with
    /// [`StorageError::Full`].
    pub fn max_size(&self) -> u64 {
        self.core.ctx.region.limit()
    }

    /// Counters (momentary; each shard is locked briefly).
    pub fn stats(&self) -> Result<Stats> {
        self.check_open()?;
        let mut s = Stats {
            shards: self.core.shards.len() as u64,
            file_bytes: self.core.ctx.file_end.load(Ordering::Relaxed),
            free_bytes: self.core.ctx.free.bytes(),
            ..Stats::default()
        };
        for shard in self.core.shards.iter() {
            let w = shard.writer(&self.core.ctx)?;
            let (slots, live, dead) = w.usage();
            s.free_bytes += w.recycled_bytes();
            s.records += shard.len();
            s.table_slots += slots;
            s.live_bytes += live;
            s.dead_bytes += dead;
        }
        (s.auto_rebuilds, s.auto_rebuild_error) = self.core.ctx.auto.report();
        Ok(s)
    }

    /// Closes the database: waits for writers in flight and for readers that hold views of
    /// the map on other threads (a [`get_with`](Db::get_with) closure running, an [`Iter`]
    /// between items: its next item is `Err(Closed)`), writes the directory, syncs (hard),
    /// trims the file, marks it clean and releases the lock. Later calls fail with `Closed`
    /// (`close` itself returns `Ok`, or the error it failed with the first time: a close that
    /// fails, say because a sync fails, leaves the file marked as not closed cleanly).
    /// Dropping the handle closes it too, ignoring errors.
    ///
    /// Called by a thread that holds an `Iter` of this database, or from inside a `get_with`
    /// closure, it would wait for itself: it fails with [`StorageError::Reentrant`] and
    /// does nothing.
    ///
    /// In a child process made by `fork` (the handle belongs to the parent; see
    /// [`StorageError::Forked`]) closing only marks this copy of the handle closed: the file,
    /// its lock and the helper threads stay the parent's, untouched.
    pub fn close(&self) -> Result<()> {
        if self.core.ctx.region.forked() {
            // Before any lock: one may have been held by a parent thread at the fork.
            self.core.ctx.closed.store(true, Ordering::Relaxed);
            self.core.ctx.auto.forget_thread();
            return Ok(());
        }
        if self.core.ctx.epochs.pinned_here() || self.core.rebuilding_here() {
            return Err(StorageError::Reentrant { call: "close" });
        }
        let mut done = self.close_done.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(failed) = &*done {
            return match failed {
                None => Ok(()),
                Some(why) => Err(StorageError::Io(std::io::Error::other(format!(
                    "an earlier close of this database failed ({why}); the file is marked as \
                     not closed cleanly, and the next open recovers it"
                )))),
            };
        }
        let result = self.close_once();
        *done = Some(result.as_ref().err().map(ToString::to_string));
        result
    }

    /// [`close`](Db::close)'s work, done once.
    fn close_once(&self) -> Result<()> {
        // First, so that no rebuild runs from here on (one in progress commits what it
        // copied and stops): the automatic one, then one called by hand, which would
        // otherwise go on zeroing its old space after the file is closed and unlocked, when
        // another handle may already have put new records there. Release: pairs with the
        // Acquire in `Core::rebuild`'s check.
        self.core.closing.store(true, Ordering::Release);
        self.core.ctx.auto.stop();
        drop(self.core.rebuilding.lock().unwrap_or_else(|e| e.into_inner()));
        // SeqCst, with the pin's read-modify-write and the load in `pin_open`: a reader that
        // pinned too late for the wait below to see it sees `closed`.
        self.core.ctx.closed.store(true, Ordering::SeqCst);
        // Readers in flight hold views into the map (a `get_with` closure, an `Iter` between
        // items). Once the lock is released, another handle may truncate or rewrite the
        // file under them (SIGBUS, or bytes changing under a live borrow), and the recycled
        // chunks freed below may be punched or cut off: wait for them first. None is this
        // thread's (`pinned_here` above).
        let e = self.core.ctx.epochs.retire();
        while !self.core.ctx.epochs.is_safe(e) {
            std::thread::yield_now();
        }
        if self.core.path.is_none() {
            return Ok(());
        }
        if self.read_only {
            crate::file_lock::unlock(self.core.ctx.region.file())?;
            return Ok(());
        }
        for (id, shard) in self.core.shards.iter().enumerate() {
            // Taking each lock once after `closed` is set waits out the writer in flight;
            // later writers see `closed` under the lock.
            let mut w = shard.writer_unchecked(&self.core.ctx);
            // Recycled chunks become free space, punched below.
            w.release_recycled();
            let e = w.dir_entry();
            drop(w);
            let at = PAGE + (id * DIR_ENTRY_LEN) as u64;
            // SAFETY: the directory is written only here and read only while opening.
            unsafe { self.core.ctx.region.write(at, &e.encode()) }
                .ok_or(StorageError::Corrupted { offset: at, what: "directory outside file" })?;
        }
        // No more growth: stop faulting in space ahead before the file is cut to its data.
        self.core.ctx.region.stop_prefaulter();
        // Free space at the very end (say, chunks a rebuild freed last) is cut off too, and
        // the rest of the free space holds no disk blocks in the closed file (best effort:
        // where the file system cannot punch holes it keeps them).
        let data_end = self.core.ctx.free.trim_tail(self.core.ctx.file_end.load(Ordering::Relaxed));
        for (off, len) in self.core.ctx.free.extents() {
            // SAFETY: free space is referenced by no table and read by no reader (its grace
            // period passed before it was freed), and no writer runs any more (`closed`).
            let _ = unsafe { self.core.ctx.region.punch_hole(off, len) };
        }
        let mut header = Header { data_end, flags: 0, ..self.header };
        self.write_header(&header)?;
        self.core.ctx.region.sync(true)?;
        self.core.ctx.region.truncate_file(data_end)?;
        header.flags = FLAG_CLEAN;
        self.write_header(&header)?;
        self.core.ctx.region.sync(true)?;
        crate::file_lock::unlock(self.core.ctx.region.file())?;
        Ok(())
    }

    /// Writes the file header (only while opening and closing).
    pub(crate) fn write_header(&self, h: &Header) -> Result<()> {
        // SAFETY: the header is written only by open and close, which no other operation
        // overlaps, and read only while opening.
        unsafe { self.core.ctx.region.write(0, &h.encode()) }
            .ok_or(StorageError::Corrupted { offset: 0, what: "header outside file" })
    }

    /// Syncs hard unless the database is in memory.
    pub(crate) fn sync_hard_if_file(&self) -> Result<()> {
        self.core.sync_hard_if_file()
    }

    pub(crate) fn shards(&self) -> &[Shard] {
        &self.core.shards
    }

    pub(crate) fn ctx(&self) -> &Ctx {
        &self.core.ctx
    }

    /// Pins the calling thread (see `epoch.rs`), then checks that the database is still
    /// open: `close` waits for every reader pinned before it began to wait, and a reader
    /// pinned later sees `closed` here (both `SeqCst`, with `close`'s store).
    #[inline]
    pub(crate) fn pin_open(&self) -> Result<crate::epoch::Guard<'_>> {
        let pin = self.core.ctx.epochs.pin().ok_or(StorageError::TooManyReads)?;
        if self.core.ctx.closed.load(Ordering::SeqCst) {
            return Err(StorageError::Closed);
        }
        Ok(pin)
    }

    /// Reads the key of the live record at `off` (for the cursor; the caller is pinned).
    pub(crate) fn key_at(&self, off: u64) -> Result<Vec<u8>> {
        let r = table::record_at(&self.core.ctx.region, off)?;
        if !r.verify(self.core.ctx.salt) {
            return Err(StorageError::Corrupted { offset: off, what: "record checksum mismatch" });
        }
        copy_out(r.key)
    }

    /// Reads the live record at `off` as an owned pair (for the iterator). Inlined by hand:
    /// the compiler's choice flips with unrelated changes (a larger `epoch.rs` left it out of
    /// line, 7 instructions more per item, callgrind).
    #[inline]
    pub(crate) fn pair_at(&self, off: u64) -> Result<(Vec<u8>, Vec<u8>)> {
        let r = table::record_at(&self.core.ctx.region, off)?;
        if !r.verify(self.core.ctx.salt) {
            return Err(StorageError::Corrupted { offset: off, what: "record checksum mismatch" });
        }
        Ok((copy_out(r.key)?, copy_out(r.value)?))
    }
}

/// A copy of `bytes`, or [`StorageError::OutOfMemory`] where the allocation fails: a copy
/// of a value as large as 1 GiB fails with an error, not by aborting the process.
/// Allocated as `to_vec` allocates (`Vec::try_reserve_exact` goes through the vector's
/// generic growth path, 100 instructions more per copy, callgrind).
#[inline]
fn copy_out(bytes: &[u8]) -> Result<Vec<u8>> {
    let len = bytes.len();
    if len == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: a slice is at most `isize::MAX` bytes, and alignment 1 is a power of two.
    let layout = unsafe { std::alloc::Layout::from_size_align_unchecked(len, 1) };
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { std::alloc::alloc(layout) };
    if ptr.is_null() {
        return Err(StorageError::OutOfMemory { needed: len });
    }
    // SAFETY: `ptr` is `len` fresh bytes that `bytes` cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, len) };
    // SAFETY: `ptr` was allocated by the global allocator with `len` bytes at alignment 1
    // (the layout of a `Vec<u8>` of capacity `len`), and all `len` bytes are initialized.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

thread_local! {
    /// The database (the address of its [`Core`]) whose rebuild the calling thread runs; 0:
    /// none. A `rebuild` or `close` of that database from inside it (the `progress` callback)
    /// would wait for the rebuild, which waits for the callback.
    static REBUILDING_HERE: Cell<usize> = const { Cell::new(0) };
}

/// Marks the calling thread as running a rebuild of one database while it lives; the mark
/// it replaced (a rebuild of another database, from whose callback this one was called)
/// comes back when it is dropped, by a return or a panic.
struct RebuildingHere(usize);

impl RebuildingHere {
    fn mark(core: &Core) -> RebuildingHere {
        RebuildingHere(REBUILDING_HERE.replace(std::ptr::from_ref(core) as usize))
    }
}

impl Drop for RebuildingHere {
    fn drop(&mut self) {
        REBUILDING_HERE.set(self.0);
    }
}

/// Which old chunks of a rebuild went to the free space (see [`Core::finish`]).
#[derive(Debug, Default)]
struct Freed {
    unpromised: bool,
    promised: bool,
}

/// What one run of [`Core::rebuild`] did.
#[derive(Debug, Default, PartialEq, Eq)]
struct Pass {
    /// Shards rebuilt.
    shards: u64,
    /// Bytes of old chunks freed before the first sync (no hard sync had promised them).
    freed_unsynced: u64,
    /// Bytes of old chunks freed after the commit was durable.
    freed_after_commit: u64,
}

impl Core {
    /// Whether the calling thread is running a rebuild of this database (and so is inside its
    /// `progress` callback, the only code of the caller's that a rebuild runs).
    fn rebuilding_here(&self) -> bool {
        REBUILDING_HERE.get() == std::ptr::from_ref(self) as usize
    }

    /// Hands the compactions of a rebuild that stops before its commit (an error, a panic of
    /// its progress callback) back to their shards: nothing is committed, so each shard keeps
    /// its old chunks (valid on disk, behind their copies) as dead space for a later rebuild
    /// to free.
    fn abandon(&self, work: Vec<(usize, Compacted)>) {
        for (id, c) in work {
            if let Ok(mut w) = self.shards[id].writer(&self.ctx) {
                w.abandon(c);
            }
        }
    }

    /// Rebuilds the shards `pick` chooses (see [`Db::rebuild`]). With `stop`, gives up when
    /// it is set: before the next shard (committing the shards already copied), or while
    /// waiting for readers before the old space is freed (it still commits; that space, void
    /// on disk, is then reused only after the file is opened again).
    ///
    /// The steps, each shard's old chunks split by whether a hard sync has promised them
    /// (`RecordChunk::born` against the sync generation read after the copies):
    /// 1. copy every chosen shard's live records and swap in its new table;
    /// 2. wait out the readers, zero the unpromised old chunks, sync (`fsync`: the copies
    ///    and the zeros), and free them. A crash before (3) is durable leaves every promised
    ///    record in the promised chunks, and loses only records whose copies it keeps (a
    ///    chunk with a removal or a clear since its start counts as promised, see below);
    /// 3. commit (each copy's first header voids the shard's older chunks) and sync hard;
    /// 4. zero the promised old chunks, sync, and free them.
    fn rebuild(
        &self,
        pick: impl Fn(&ShardWriter<'_>) -> bool,
        mut progress: impl FnMut(u64, u64),
        stopped: &dyn Fn() -> bool,
    ) -> Result<Pass> {
        let _one = self.rebuilding.lock().unwrap_or_else(|e| e.into_inner());
        let _here = RebuildingHere::mark(self);
        let total = self.shards.len() as u64;
        let mut work = Vec::new();
        for (id, shard) in self.shards.iter().enumerate() {
            if stopped() {
                break;
            }
            let compacted = shard
                .writer(&self.ctx)
                .and_then(|mut w| if pick(&w) { w.compact() } else { Ok(None) });
            match compacted {
                Ok(Some(c)) => work.push((id, c)),
                Ok(None) => {}
                Err(e) => {
                    self.abandon(work);
                    return Err(e);
                }
            }
            let report = AssertUnwindSafe(|| progress(id as u64 + 1, total));
            if let Err(panic) = std::panic::catch_unwind(report) {
                self.abandon(work);
                std::panic::resume_unwind(panic);
            }
        }
        let mut pass = Pass { shards: work.len() as u64, ..Pass::default() };
        if work.is_empty() {
            return Ok(pass);
        }
        let file = self.path.is_some();
        // Old chunks that no hard sync has promised (none started since they were begun,
        // read after every copy was written) hold only records a crash may lose anyway, and
        // their live records are in the copies: they can be freed before anything is synced.
        // Under heavy churn they are most of the dead data, and zeroing them while their
        // pages are still dirty (which drops the pages) spares the syncs below from writing
        // them back at all.
        let generation = self.ctx.region.sync_generation();
        let mut unpromised = Vec::new();
        let mut promised = Vec::new();
        for (id, c) in &work {
            for r in c.old_chunks.values() {
                // A chunk born before the shard's latest removal or clear may hold that
                // removal (a `KILLED` mark) or clear: its records may be the only ones that
                // overrule older records of promised chunks, which stay valid on disk until
                // the commit. Zeroed before it, they would bring those records back after a
                // crash, of the process or (if a sync started meanwhile) of the machine.
                let early = !file || (r.born == generation && c.killed < r.born);
                let to = if early { &mut unpromised } else { &mut promised };
                to.push((*id, r.off, r.len));
            }
        }
        let mut freed = Freed::default();
        let finished = self.finish(&work, &unpromised, &promised, stopped, &mut pass, &mut freed);
        if let Err(e) = finished {
            // The old chunks not freed yet go back to their shards as dead chunks (valid on
            // disk, or void once the commit was written, or zeroed: dead in every case), for
            // a later rebuild to free; left out of every shard's list, their space would be
            // lost to this handle, and the shards' dead bytes would not count it.
            let work = work.into_iter().map(|(id, mut c)| {
                let done = [(freed.unpromised, &unpromised), (freed.promised, &promised)];
                for (_, list) in done.into_iter().filter(|(done, _)| *done) {
                    c.old_chunks.retain(|_, r| !list.contains(&(id, r.off, r.len)));
                }
                (id, c)
            });
            self.abandon(work.collect());
            return Err(e);
        }
        Ok(pass)
    }

    /// [`rebuild`](Self::rebuild) from the wait for readers on: zero and free the old chunks
    /// of `work` (`unpromised` before the commit, `promised` after it) and commit. `freed`
    /// says which of the two lists went to the free space.
    fn finish(
        &self,
        work: &[(usize, Compacted)],
        unpromised: &[(usize, u64, u64)],
        promised: &[(usize, u64, u64)],
        stopped: &dyn Fn() -> bool,
        pass: &mut Pass,
        freed: &mut Freed,
    ) -> Result<()> {
        let file = self.path.is_some();
        // Readers that could still hold a reference into the old chunks pinned before the
        // tables were swapped; wait them out before any old space is zeroed.
        let e = self.ctx.epochs.retire();
        let mut waited = true;
        while !self.ctx.epochs.is_safe(e) {
            if stopped() {
                waited = false;
                break;
            }
            std::thread::yield_now();
        }
        if waited {
            self.zero(unpromised)?;
            if crate::testing::ABORT_AFTER_EARLY_ZERO.load(Ordering::Relaxed) {
                std::process::abort();
            }
            pass.freed_unsynced = unpromised.iter().map(|e| e.2).sum();
            // The tables the copies replaced are past their grace period too: free them now,
            // not at each shard's next allocation, so the rest of the rebuild (and whatever
            // writes next) can use their space.
            for (id, _) in work {
                if let Ok(mut w) = self.shards[*id].writer(&self.ctx) {
                    w.reclaim();
                }
            }
        }
        // (1) The copies (and the holes) durable before any commit: a crash from here on
        // leaves the copies in full, after the old chunks.
        if file {
            self.ctx.region.sync_all()?;
        }
        if waited {
            self.free(unpromised);
            freed.unpromised = true;
        }
        // (2) Commit: each shard's copy voids its older chunks.
        for (id, c) in work {
            self.shards[*id].writer(&self.ctx)?.commit(c)?;
        }
        self.sync_hard_if_file()?;
        if !waited {
            // Stopped while readers held the old chunks: they are void on disk, and the next
            // open frees them.
            return Ok(());
        }
        // (3) The promised chunks, void on disk since (2): zero them, and make the zeros
        // durable before any new record lands there.
        if !promised.is_empty() {
            self.zero(promised)?;
            if file {
                self.ctx.region.sync_all()?;
            }
            self.free(promised);
            freed.promised = true;
            pass.freed_after_commit = promised.iter().map(|e| e.2).sum();
        }
        Ok(())
    }

    /// Zeroes `(shard, offset, length)` extents
    /// ([`Region::zero_range`](crate::region::Region::zero_range): their blocks stay allocated
    /// for reuse), one call per run of adjacent extents (of any of the shards), not one per
    /// extent: each call locks the file against page faults and shoots down the map's TLB
    /// entries.
    fn zero(&self, extents: &[(usize, u64, u64)]) -> Result<()> {
        let mut old: Vec<(u64, u64)> = extents.iter().map(|&(_, off, len)| (off, len)).collect();
        old.sort_unstable();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (off, len) in old {
            match runs.last_mut() {
                Some((o, l)) if *o + *l == off => *l += len,
                _ => runs.push((off, len)),
            }
        }
        for (off, len) in runs {
            // Zeroed, not punched: the space goes to the free space for reuse (`close` punches
            // what is still free then). SAFETY: the caller passes chunks no table names any
            // more (since the tables were swapped), after the grace period of every reader
            // that could still read them.
            unsafe { self.ctx.region.zero_range(off, len)? };
        }
        Ok(())
    }

    /// Hands zeroed `(shard, offset, length)` extents, durably zero, to the free space.
    fn free(&self, extents: &[(usize, u64, u64)]) {
        for &(_, off, len) in extents {
            self.ctx.free.add(off, len);
        }
    }

    /// Syncs hard unless the database is in memory.
    fn sync_hard_if_file(&self) -> Result<()> {
        if self.path.is_some() {
            self.ctx.region.sync(true)?;
        }
        Ok(())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_common::TempDir;

    fn fill(db: &Db, round: u8) {
        for k in 0..2000u32 {
            db.set(&k.to_le_bytes(), &[round; 100]).unwrap();
        }
    }

    /// After a failed sync every later sync fails too, naming the first failure (Linux
    /// reports a failed write-back once and marks the pages clean), and `close` fails, every
    /// time, without marking the file clean: the next open recovers it.
    #[test]
    fn a_failed_sync_stays_failed_and_close_leaves_the_file_to_recovery() {
        let dir = TempDir::new("sticky-sync");
        let path = dir.file("s.sj");
        let db = Db::open(&path).unwrap();
        fill(&db, 1);
        db.sync(Durability::Hard).unwrap();
        // What a failed write-back reports to the sync that comes after it.
        let failed =
            db.core.ctx.region.record_sync_failure(std::io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(failed.raw_os_error(), Some(libc::EIO));
        fill(&db, 2);
        for durability in [Durability::Hard, Durability::Soft, Durability::Hard] {
            let e = db.sync(durability).unwrap_err().to_string();
            assert!(e.contains("an earlier sync of this file failed"), "{e}");
            assert!(e.contains("os error 5"), "{e}");
        }
        assert!(db.rebuild().is_err(), "a rebuild's syncs fail too");
        let first = db.close().unwrap_err().to_string();
        assert!(first.contains("an earlier sync"), "{first}");
        let again = db.close().unwrap_err().to_string();
        assert!(again.contains("an earlier close of this database failed"), "{again}");
        drop(db);
        let header = Header::decode(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(header.flags & FLAG_CLEAN, 0, "a failed close marked the file clean");
        let db = Db::open(&path).unwrap();
        assert_eq!(db.get(&1u32.to_le_bytes()).unwrap(), Some(vec![2u8; 100]));
    }

    /// `auto_rebuild`'s threshold is split among the file's shards, which an existing file
    /// keeps whatever `Builder::shards` says. It was split among the builder's (128 by
    /// default): a 1-shard file reopened with the defaults was rebuilt once 512 KiB of its
    /// records were dead, not 64 MiB.
    #[test]
    fn the_automatic_rebuild_threshold_is_split_among_the_files_shards() {
        let dir = TempDir::new("auto-shards");
        let path = dir.file("a.sj");
        Builder::new().shards(1).open(&path).unwrap().close().unwrap();
        let db = Builder::new().open(&path).unwrap();
        assert_eq!(db.core.shards.len(), 1);
        let auto = &db.core.ctx.auto;
        assert!(!auto.wants((64 << 20) - 1, 0), "a shard asks for a rebuild below 64 MiB");
        assert!(auto.wants(64 << 20, 0));
    }

    /// A rebuild that fails after its copies were made (here at its first sync; a failed
    /// zeroing takes the same path) hands the old chunks back to their shards as dead ones.
    /// It dropped them: their space was lost to the handle, and no shard counted it as dead,
    /// so no later rebuild could free it.
    #[test]
    fn a_rebuild_that_fails_after_copying_keeps_its_old_chunks() {
        let dir = TempDir::new("rebuild-fails");
        let db = Builder::new().shards(4).auto_rebuild(None).open(dir.file("f.sj")).unwrap();
        fill(&db, 1);
        fill(&db, 2);
        let before = chunk_bytes(&db);
        db.core.ctx.region.record_sync_failure(std::io::Error::from_raw_os_error(libc::EIO));
        assert!(db.rebuild().is_err());
        let after = chunk_bytes(&db);
        assert!(after > before, "{before} bytes of chunks before the rebuild, {after} after");
        let dead = db.stats().unwrap().dead_bytes;
        assert!(dead >= before, "{dead} bytes dead, {before} in the old chunks");
    }

    fn chunk_bytes(db: &Db) -> u64 {
        db.core.shards.iter().map(|s| s.writer_unchecked(&db.core.ctx).chunk_bytes()).sum()
    }

    fn rebuild_all(db: &Db) -> Pass {
        db.core.rebuild(|_| true, |_, _| {}, &|| false).unwrap()
    }

    /// An insert takes the first tombstone on its probe path: a key removed and set again
    /// finds its own tombstone (at the latest) and takes it, so no tombstone is left behind.
    #[test]
    fn an_insert_reuses_the_tombstone_of_a_removed_key() {
        let db = Builder::new().shards(1).auto_rebuild(None).memory().unwrap();
        let tombs = || db.core.shards[0].writer_unchecked(&db.core.ctx).tombstones();
        for k in 0..1000u32 {
            db.set(&k.to_le_bytes(), b"v").unwrap();
        }
        for k in 0..1000u32 {
            assert!(db.remove(&k.to_le_bytes()).unwrap());
            assert_eq!(tombs(), 1);
            db.set(&k.to_le_bytes(), b"w").unwrap();
            assert_eq!(tombs(), 0, "key {k}: the re-insert left its tombstone");
        }
        assert_eq!(db.get(&7u32.to_le_bytes()).unwrap().as_deref(), Some(&b"w"[..]));
        assert_eq!(db.len(), 1000);
    }

    /// The chunks a rebuild frees before it syncs are exactly those written since the last
    /// hard sync started; a chunk written before it waits for the commit.
    #[test]
    fn a_rebuild_frees_early_only_what_no_sync_promised() {
        let dir = TempDir::new("promised");
        let db = Builder::new().shards(4).auto_rebuild(None).open(dir.file("p.sj")).unwrap();
        fill(&db, 1);
        db.sync(Durability::Hard).unwrap();
        let synced = chunk_bytes(&db);
        fill(&db, 2);
        let unsynced = chunk_bytes(&db) - synced;
        let p = rebuild_all(&db);
        assert_eq!(p, Pass { shards: 4, freed_unsynced: unsynced, freed_after_commit: synced });

        // The copies and everything before them are now promised (the pass synced); a soft
        // sync promises nothing.
        let copies = chunk_bytes(&db);
        fill(&db, 3);
        db.sync(Durability::Soft).unwrap();
        let unsynced = chunk_bytes(&db) - copies;
        let p = rebuild_all(&db);
        assert_eq!(p, Pass { shards: 4, freed_unsynced: unsynced, freed_after_commit: copies });
        drop(db);

        let db = Builder::new().open(dir.file("p.sj")).unwrap();
        for k in 0..2000u32 {
            assert_eq!(db.get(&k.to_le_bytes()).unwrap().as_deref(), Some(&[3u8; 100][..]));
        }
        // Chunks found when opening were synced by the close: none is freed early.
        let before = chunk_bytes(&db);
        let p = rebuild_all(&db);
        assert_eq!(p, Pass { shards: 4, freed_unsynced: 0, freed_after_commit: before });
    }

    /// In memory nothing is ever promised to a disk: everything old is freed at once.
    #[test]
    fn in_memory_rebuilds_free_everything_early() {
        let db = Builder::new().shards(4).auto_rebuild(None).memory().unwrap();
        fill(&db, 1);
        let all = chunk_bytes(&db);
        let p = rebuild_all(&db);
        assert_eq!(p, Pass { shards: 4, freed_unsynced: all, freed_after_commit: 0 });
    }
}
