//! Options and the open procedure.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use crate::auto::AutoRebuild;
use crate::db::Db;
use crate::epoch::Epochs;
use crate::error::OpenError;
use crate::file_lock::{self, Unlocking};
use crate::format::{
    self, CHUNK_INDEX, CHUNK_RECORDS, ChunkHeader, DIR_ENTRY_LEN, DirEntry, FLAG_CLEAN, HEADER_LEN,
    Header, HeaderError, MAX_FILE_LEN, PAGE, VERSION,
};
use crate::free_space::FreeSpace;
use crate::recovery;
use crate::region::{Region, RegionError};
use crate::shard::{CacheLine, Ctx, Shard};
use crate::table::TableRef;

/// [`Builder::auto_rebuild`]'s default: 64 MiB of dead records (split among the shards).
const DEFAULT_AUTO_REBUILD: u64 = 64 << 20;

/// [`Builder::max_size`]'s default: 256 GiB of address space.
const DEFAULT_MAX_SIZE: u64 = 256 << 30;

/// Options for opening or creating a database.
///
/// | option | default | saved in the file? |
/// |---|---|---|
/// | [`shards`](Builder::shards) | 128 | yes: fixed when the file is created, ignored afterwards |
/// | [`max_size`](Builder::max_size) | 256 GiB, or less if the process cannot reserve that | no: chosen at each open |
/// | [`create`](Builder::create) | `true` | no |
/// | [`truncate`](Builder::truncate) | `false` | no |
/// | [`read_only`](Builder::read_only) | `false` | no |
/// | [`capacity_hint`](Builder::capacity_hint) | 0 (none) | no |
/// | [`auto_rebuild`](Builder::auto_rebuild) | `Some(64 MiB)` | no |
/// | [`recovery_progress`](Builder::recovery_progress) | none | no |
///
/// There is no bucket count to guess: each shard's index grows with its data.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("senju-doc-builder-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let db = senju::Db::builder().shards(64).truncate(true).open(dir.join("b.sj"))?;
/// db.set(b"k", b"v")?;
/// # drop(db); std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), senju::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    shards: u32,
    /// `None`: the default, [`DEFAULT_MAX_SIZE`] or as much as the process can reserve.
    max_size: Option<u64>,
    create: bool,
    truncate: bool,
    read_only: bool,
    capacity_hint: u64,
    auto_rebuild: Option<u64>,
    recovery_progress: Option<RecoveryProgress>,
}

/// The callback of [`Builder::recovery_progress`].
#[derive(Clone)]
pub(crate) struct RecoveryProgress(pub(crate) Arc<dyn Fn(u64, u64) + Send + Sync>);

impl std::fmt::Debug for RecoveryProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryProgress(..)")
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            shards: 128,
            max_size: None,
            create: true,
            truncate: false,
            read_only: false,
            capacity_hint: 0,
            auto_rebuild: Some(DEFAULT_AUTO_REBUILD),
            recovery_progress: None,
        }
    }
}

impl Builder {
    /// The default options.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Number of shards (a power of two, 1 to 65536): independent slices of the key space,
    /// each with its own lock, index and space. More shards mean less contention between
    /// writers and shorter index growth pauses; each costs 128 bytes of memory and at least
    /// two pages of file once written to. Saved in the file when it is created.
    pub fn shards(mut self, n: u32) -> Builder {
        self.shards = n;
        self
    }

    /// The largest the file may grow to, in bytes (1 MiB to 8 TiB; a file grows in whole
    /// pages, so up to this rounded down to 4 KiB). This much address space is reserved (not
    /// allocated) at open, so the map never moves. Not saved.
    ///
    /// Without this option the limit is 256 GiB, or, where the process may not reserve that
    /// much address space (`ulimit -v`, valgrind), the most it can, down to what the file
    /// needs to open and grow by 1 MiB; [`Db::max_size`](crate::Db::max_size) says what was
    /// had. A size given here is reserved as given, or the open fails with
    /// [`OpenError::AddressSpace`].
    pub fn max_size(mut self, bytes: u64) -> Builder {
        self.max_size = Some(bytes);
        self
    }

    /// Whether to create the file if it does not exist.
    pub fn create(mut self, yes: bool) -> Builder {
        self.create = yes;
        self
    }

    /// Whether to discard the file's contents and start empty.
    pub fn truncate(mut self, yes: bool) -> Builder {
        self.truncate = yes;
        self
    }

    /// Whether to open the file for reading only. A read-only handle takes a *shared*
    /// advisory lock: any number of read-only handles (in this process or others) may have
    /// the file open at once, but not while a writer has it, and a writer cannot open it
    /// while they do (both get [`OpenError::Locked`]). Reads work as usual; every write
    /// (including `clear` and `rebuild`) fails with
    /// [`StorageError::ReadOnly`](crate::StorageError::ReadOnly), and `sync` does nothing.
    ///
    /// The file must exist and must have been closed cleanly: a file left by a crash needs
    /// recovery, which writes, so it is refused with [`OpenError::NeedsRecovery`] (open it
    /// once for writing to recover it). Not compatible with [`truncate`](Builder::truncate)
    /// nor with [`memory`](Builder::memory).
    pub fn read_only(mut self, yes: bool) -> Builder {
        self.read_only = yes;
        self
    }

    /// Records you expect (optional): each shard's first index table is sized so that its
    /// share of this many records (split among the file's shards) fits without the table
    /// growing. Tables grow with the data anyway; the
    /// hint only saves the early doublings. Not saved. A hint whose tables (about 9.2 bytes a
    /// record) would take more than half of [`max_size`](Builder::max_size) is refused with
    /// [`OpenError::InvalidOption`] when opening.
    pub fn capacity_hint(mut self, records: u64) -> Builder {
        self.capacity_hint = records;
        self
    }

    /// Rebuilds shards in the background once dead records (overwritten or removed) outweigh
    /// live ones, so a database whose keys are rewritten again and again keeps a bounded
    /// size. With `Some(bytes)`, a shard is rebuilt once its dead records take at least
    /// `bytes / shards` bytes (the file's shards: an existing file keeps its count) and at
    /// least as many bytes as its live records; the file then
    /// stays within about twice its live data plus `bytes` while the passes keep up. Passes
    /// are paced (after one that took `t`, none for `2 t`), unless the dead records reach 16
    /// times the larger of the live data and `bytes`: under churn faster than the passes the
    /// file is bounded near that. (Values over 16 KiB replaced between two syncs do not get
    /// that far: their space is reused at once, without a pass; 64 KiB values rewritten over
    /// 256 keys keep a 24 MiB file, where this bound alone left 1.4-2.0 GB; lab 0014.)
    /// `None` turns it off: the file then keeps every overwritten record until you call
    /// [`Db::rebuild`].
    ///
    /// The rebuild runs in a thread of its own (`senju-rebuild`, started the first time a
    /// shard crosses the threshold) with the protocol of [`Db::rebuild`]: readers never wait,
    /// a writer waits only while its own shard is copied, and each pass syncs the file (hard)
    /// twice. [`Db::close`] stops it. [`Stats::auto_rebuilds`](crate::Stats) counts the
    /// passes; if one fails (a full disk, say), automatic rebuilds stop for this handle and
    /// [`Stats::auto_rebuild_error`](crate::Stats) says why. Default: `Some(64 MiB)`. Not
    /// saved; ignored for read-only handles.
    pub fn auto_rebuild(mut self, min_dead_bytes: Option<u64>) -> Builder {
        self.auto_rebuild = min_dead_bytes;
        self
    }

    /// Calls `progress(done, total)` while an open recovers a file that was not closed
    /// cleanly: `total` is the number of bytes of record chunks to replay, `done` how many
    /// have been (at most about a thousand calls, the last with `done == total`). Recovery
    /// reads every record, so it takes time linear in the file (about 3 s per GiB of records
    /// on a 2-vCPU test machine, BENCHMARKS.md);
    /// this is for a progress bar or a log line. Never called for a clean open. Not saved.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("senju-doc-progress-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let db = senju::Db::builder()
    ///     .recovery_progress(|done, total| eprint!("\rrecovering: {}%", done * 100 / total.max(1)))
    ///     .open(dir.join("p.sj"))?;
    /// # drop(db); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), senju::Error>(())
    /// ```
    pub fn recovery_progress(
        mut self,
        progress: impl Fn(u64, u64) + Send + Sync + 'static,
    ) -> Builder {
        self.recovery_progress = Some(RecoveryProgress(Arc::new(progress)));
        self
    }

    /// The per-shard threshold of [`auto_rebuild`](Builder::auto_rebuild) (0: never) for a
    /// file of `shards` shards (the file's count, which an existing file keeps whatever
    /// [`shards`](Builder::shards) says).
    fn auto_rebuild_shard_min(&self, shards: u64) -> u64 {
        self.auto_rebuild.map_or(0, |b| (b / shards.max(1)).max(1))
    }

    /// Bytes of address space to reserve: [`max_size`](Builder::max_size) or the default.
    fn reservation(&self) -> u64 {
        self.max_size.unwrap_or(DEFAULT_MAX_SIZE)
    }

    /// Slots of the first table of a file of `shards` shards (the file's count, as for
    /// [`auto_rebuild_shard_min`](Self::auto_rebuild_shard_min)): `capacity_hint / shards`
    /// records at most 7/8 full.
    fn first_table_slots(&self, shards: u64) -> u64 {
        let per_shard = self.capacity_hint / shards.max(1);
        per_shard.saturating_mul(8).div_ceil(7).min(1 << 31)
    }

    fn check(&self) -> Result<u32, OpenError> {
        if !self.shards.is_power_of_two() || self.shards > 1 << Header::MAX_SHARD_BITS {
            return Err(OpenError::InvalidOption {
                name: "shards",
                reason: format!("{} is not a power of two from 1 to 65536", self.shards),
            });
        }
        if let Some(n) = self.max_size
            && !(1 << 20..=MAX_FILE_LEN).contains(&n)
        {
            return Err(OpenError::InvalidOption {
                name: "max_size",
                reason: format!("{n} is not between 1 MiB and 8 TiB"),
            });
        }
        // The first tables of every shard must fit the map with room to spare: a mistyped
        // hint would otherwise allocate gigabytes of index (up to 16 GiB a shard) at the
        // first write, and in memory fault them all in.
        let shards = u64::from(self.shards);
        let index = self.first_table_slots(shards).saturating_mul(8).saturating_mul(shards);
        let room = self.reservation();
        if index > room / 2 {
            return Err(OpenError::InvalidOption {
                name: "capacity_hint",
                reason: format!(
                    "{} records would take {:.1} GiB of index tables up front, more than half of \
                     max_size ({:.1} GiB); give a smaller hint (tables grow with the data \
                     anyway) or a larger max_size",
                    self.capacity_hint,
                    index as f64 / f64::from(1u32 << 30),
                    room as f64 / f64::from(1u32 << 30),
                ),
            });
        }
        Ok(self.shards.trailing_zeros())
    }

    /// Opens (or creates) the database file at `path` for reading and writing, taking the
    /// advisory writer lock. Recovers automatically if the file was not closed cleanly.
    /// With [`read_only`](Builder::read_only), opens an existing file for reading only.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Db, OpenError> {
        let path = path.as_ref().to_path_buf();
        let shard_bits = self.check()?;
        if self.read_only {
            return self.open_read_only(path);
        }
        let io_err = |source| OpenError::Io { path: path.clone(), source };
        let file = match OpenOptions::new().read(true).write(true).create(self.create).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !self.create => {
                return Err(OpenError::NotFound { path });
            }
            // Allowed to create the file and still "not found": the directory is missing.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(io_err(cannot_create(&path)));
            }
            Err(e) => return Err(io_err(e)),
        };
        if !file_lock::try_lock(&file, file_lock::Kind::Exclusive).map_err(io_err)? {
            return Err(locked(&file, path));
        }
        // A refused open gives the lock back explicitly (see `file_lock`); an open one keeps
        // it until `close`.
        let held = Unlocking::new(file.try_clone().map_err(io_err)?);
        if self.truncate {
            file.set_len(0).map_err(io_err)?;
        }
        let db = open_file(file, Some(path), shard_bits, &self)?;
        held.keep();
        Ok(db)
    }

    /// [`open`](Builder::open) for [`read_only`](Builder::read_only): a shared lock, no
    /// recovery, nothing written.
    fn open_read_only(self, path: PathBuf) -> Result<Db, OpenError> {
        if self.truncate {
            return Err(OpenError::InvalidOption {
                name: "truncate",
                reason: "a read-only open cannot truncate the file".into(),
            });
        }
        let io_err = |source| OpenError::Io { path: path.clone(), source };
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(OpenError::NotFound { path });
            }
            Err(e) => return Err(io_err(e)),
        };
        if !file_lock::try_lock(&file, file_lock::Kind::Shared).map_err(io_err)? {
            return Err(locked(&file, path));
        }
        let held = Unlocking::new(file.try_clone().map_err(io_err)?);
        let len = file.metadata().map_err(io_err)?.len();
        let mut b = [0u8; HEADER_LEN];
        let n = file.read_at(&mut b, 0).map_err(io_err)?;
        let header = decode_header(&b[..n], &path)?;
        // Bytes past the data's end (a clean file lengthened afterwards) are ignored, as a
        // writable open and `check` ignore them.
        let clean = header.flags & FLAG_CLEAN != 0
            && header.data_end <= len
            && header.data_end >= header.data_start
            && header.data_end.is_multiple_of(PAGE);
        if !clean {
            return Err(OpenError::NeedsRecovery { path });
        }
        let region = Region::new(file, self.reservation(), self.max_size.is_none(), len, false)
            .map_err(|e| region_err(e, &path))?;
        let ctx = Ctx {
            region,
            salt: header.salt,
            file_end: CacheLine(AtomicU64::new(len)),
            closed: AtomicBool::new(false),
            first_table_slots: 0,
            epochs: Epochs::new(),
            free: FreeSpace::default(),
            auto: AutoRebuild::new(0),
        };
        let n = 1usize << header.shard_bits;
        let shards = load_directory(&ctx, &header, n)
            .ok_or(OpenError::NeedsRecovery { path: path.clone() })?;
        // Nothing is ever allocated through a read-only handle; the free space is only
        // counted, for `stats`.
        let walk = recovery::walk(&ctx, n, header.data_start, header.data_end);
        for (off, len) in sort_space(&shards, &walk).free {
            ctx.free.add(off, len);
        }
        held.keep();
        Ok(Db::from_parts(ctx, shards, header, Some(path), true))
    }

    /// Creates an empty database in anonymous memory: the same engine and format, nothing
    /// written to disk, gone when the handle is dropped. Refuses
    /// [`read_only`](Builder::read_only) with [`OpenError::InvalidOption`]: there is nothing
    /// to read.
    pub fn memory(self) -> Result<Db, OpenError> {
        let shard_bits = self.check()?;
        if self.read_only {
            return Err(OpenError::InvalidOption {
                name: "read_only",
                reason: "a database in memory starts empty, so a read-only one would stay \
                         empty; open it without `read_only`"
                    .into(),
            });
        }
        let file =
            file_lock::memfd().map_err(|source| OpenError::Io { path: PathBuf::new(), source })?;
        open_file(file, None, shard_bits, &self)
    }
}

/// Everything after the lock: read or create the header, map, load or recover, mark dirty.
fn open_file(
    file: File,
    path: Option<PathBuf>,
    shard_bits: u32,
    options: &Builder,
) -> Result<Db, OpenError> {
    let max_size = options.reservation();
    let shown = path.clone().unwrap_or_default();
    let io_err = |source| OpenError::Io { path: shown.clone(), source };
    let mut len = file.metadata().map_err(io_err)?.len();
    let header = if len == 0 {
        let start = format::data_start(shard_bits);
        let h = Header {
            version: VERSION,
            flags: 0,
            shard_bits,
            pid: std::process::id(),
            data_start: start,
            data_end: start,
            salt: file_lock::random_u64(),
            generation: 0,
        };
        file.set_len(start).map_err(io_err)?;
        file.write_all_at(&h.encode(), 0).map_err(io_err)?;
        // The header and the file's name durable before anything is written to it: a file
        // that a power loss leaves at its full length but without its header does not open
        // (`NotADatabase`), and one whose directory entry was lost is gone with every later
        // sync.
        file.sync_all().map_err(io_err)?;
        if let Some(p) = &path {
            sync_parent_dir(p).map_err(io_err)?;
        }
        len = start;
        h
    } else {
        let mut b = [0u8; HEADER_LEN];
        let n = file.read_at(&mut b, 0).map_err(io_err)?;
        decode_header(&b[..n], &shown)?
    };
    // Keep the file a whole number of pages and at least as long as its directory, so the
    // map can grow in place page by page.
    let fixed_len = format::align_up(len, PAGE).max(header.data_start);
    if fixed_len != len {
        file.set_len(fixed_len).map_err(io_err)?;
    }
    let region = Region::new(file, max_size, options.max_size.is_none(), fixed_len, true)
        .map_err(|e| region_err(e, &shown))?;
    // A database file allocates its blocks as it grows; the memory engine moves to anonymous
    // memory (`Region::anonymous`).
    let region = match path {
        Some(_) => region.preallocating(),
        None => region.anonymous().map_err(io_err)?,
    };
    // The header and directory pages: a new file has them as a hole (`set_len` above), and
    // `close` writes the directory there through the map, where a full disk would be a
    // `SIGBUS`. Allocated now, a full disk fails this open instead.
    region.reallocate(0, header.data_start).map_err(io_err)?;
    // Per shard of the file: an existing file keeps its shard count.
    let file_shards = 1u64 << header.shard_bits;
    let first_table_slots = options.first_table_slots(file_shards);
    let auto_rebuild = options.auto_rebuild_shard_min(file_shards);
    let ctx = Ctx {
        region,
        salt: header.salt,
        file_end: CacheLine(AtomicU64::new(fixed_len)),
        closed: AtomicBool::new(false),
        first_table_slots,
        epochs: Epochs::new(),
        free: FreeSpace::default(),
        auto: AutoRebuild::new(auto_rebuild),
    };
    let n = 1usize << header.shard_bits;
    let clean = header.flags & FLAG_CLEAN != 0
        && header.data_end <= len
        && header.data_end >= header.data_start
        && header.data_end.is_multiple_of(PAGE);
    let loaded = if clean { load_directory(&ctx, &header, n) } else { None };
    let walk_len = if loaded.is_some() { header.data_end } else { len };
    let walk = recovery::walk(&ctx, n, header.data_start, walk_len);
    let recovered = loaded.is_none();
    let shards = match loaded {
        Some(shards) => {
            ctx.file_end.store(header.data_end, std::sync::atomic::Ordering::Relaxed);
            shards
        }
        None => {
            let shards: Box<[Shard]> = (0..n as u32).map(Shard::new).collect();
            let end = format::align_up(walk.end, PAGE);
            if end < fixed_len {
                ctx.region.shrink_file(end).map_err(io_err)?;
            }
            ctx.file_end.store(end, std::sync::atomic::Ordering::Relaxed);
            let report = |done, total| {
                if let Some(p) = &options.recovery_progress {
                    (p.0)(done, total);
                }
            };
            recovery::replay(&ctx, &shards, &walk, &report)?;
            shards
        }
    };
    hand_out_space(&ctx, &shards, &walk, recovered).map_err(io_err)?;
    let header =
        Header { flags: 0, pid: std::process::id(), generation: header.generation + 1, ..header };
    let db = Db::from_parts(ctx, shards, header, path, false);
    db.write_header(&header)?;
    db.sync_hard_if_file()?;
    Ok(db)
}

/// The open error for a region that could not be set up.
fn region_err(e: RegionError, path: &Path) -> OpenError {
    match e {
        RegionError::Reserve { requested, source } => {
            OpenError::AddressSpace { path: path.to_path_buf(), requested, source }
        }
        RegionError::Io(source) => OpenError::Io { path: path.to_path_buf(), source },
    }
}

/// The header in the first bytes of a file (`b` is shorter if the file is), or why not.
fn decode_header(b: &[u8], path: &Path) -> Result<Header, OpenError> {
    let path = path.to_path_buf();
    match Header::decode(b) {
        Ok(h) => Ok(h),
        Err(HeaderError::Magic)
            if b.len() < HEADER_LEN && b == &format::MAGIC[..b.len().min(8)] =>
        {
            Err(OpenError::Corrupted { offset: b.len() as u64, what: "file cut short" })
        }
        Err(HeaderError::Magic) => Err(OpenError::NotADatabase { path }),
        Err(HeaderError::Version(found)) => {
            Err(OpenError::UnsupportedVersion { path, found, supported: VERSION })
        }
        Err(HeaderError::Checksum) => {
            Err(OpenError::Corrupted { offset: 0, what: "file header checksum" })
        }
        Err(HeaderError::Fields) => {
            Err(OpenError::Corrupted { offset: 16, what: "file header fields" })
        }
    }
}

/// The error for a file whose advisory lock another handle holds: names the last writer's
/// pid from the header when a writer holds it (readers leave no pid).
fn locked(file: &File, path: PathBuf) -> OpenError {
    let writer = !file_lock::try_lock(file, file_lock::Kind::Shared).unwrap_or(false);
    if !writer {
        // Only readers hold it; give back the shared lock taken just now.
        let _ = file_lock::unlock(file);
        return OpenError::Locked { path, pid: None };
    }
    let mut b = [0u8; HEADER_LEN];
    let pid = match file.read_at(&mut b, 0) {
        Ok(HEADER_LEN) if b[..8] == format::MAGIC => {
            Some(u32::from_le_bytes(b[20..24].try_into().expect("4 bytes")))
        }
        _ => None,
    };
    OpenError::Locked { path, pid }
}

/// Gives each shard its live record chunks, and the free space the walk found to the file's
/// free space. Voided record chunks still hold valid records: they (and, after a crash, all
/// of the free space) are punched to zeros and synced before any of that space is reused, so
/// no stale record can ever follow a new one, and no chunk the walk did not see survives.
/// After a clean close, index chunks other than the shards' current tables are free as
/// they are.
fn hand_out_space(
    ctx: &Ctx,
    shards: &[Shard],
    walk: &recovery::Walk,
    recovered: bool,
) -> std::io::Result<()> {
    let Space { chunks, mut free, voided } = sort_space(shards, walk);
    if !recovered {
        // A cleanly closed file's gaps are free extents that `close` punched: they read as
        // zeros. A gap that does not is a record chunk whose header was damaged, and the
        // index, trusted in a clean open, may still name records inside it: handing that
        // space out would let new chunks overwrite them. It stays unused instead (a
        // recovery, or a copy by `senju rebuild`, gets it back).
        let file = ctx.region.file();
        let mut damaged = Vec::new();
        for &(off, len) in &walk.gaps {
            if !reads_as_zeros(file, off, len)? {
                damaged.push((off, len));
            }
        }
        free.retain(|e| !damaged.contains(e));
    }
    // After a crash every free extent is punched, retired tables too: a power cut may have
    // kept a table's header while record chunks written after the last sync went into its
    // space, and the walk, taking the header, skipped them. Left there, they would read
    // again once a later chunk overwrote that header (without covering theirs), newer by
    // sequence number than what was written and synced in between (removals included).
    let punch = if recovered { free.clone() } else { voided };
    if !punch.is_empty() {
        for &(off, len) in &punch {
            // SAFETY: opening is single-threaded; nothing references this space.
            unsafe { ctx.region.punch_hole(off, len)? };
        }
        ctx.region.sync_all()?;
    }
    for (off, len) in free {
        ctx.free.add(off, len);
    }
    for (s, c) in shards.iter().zip(chunks) {
        s.set_chunks(c);
    }
    Ok(())
}

/// Whether bytes `off..off + len` of `file` all read as zero. Holes are passed over without
/// reading (`SEEK_DATA`/`SEEK_HOLE`); where the file system cannot tell, everything is read.
fn reads_as_zeros(file: &File, off: u64, len: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let seek = |pos: u64, whence| {
        // SAFETY: `lseek` on a descriptor we own; this file's readers use `pread`, which
        // does not depend on the offset it moves.
        let r = unsafe { libc::lseek(file.as_raw_fd(), pos as libc::off_t, whence) };
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r as u64) }
    };
    let end = off + len;
    let mut pos = off;
    let mut buf = vec![0u8; 64 << 10];
    while pos < end {
        let data = match seek(pos, libc::SEEK_DATA) {
            Ok(d) => d.max(pos),
            // Nothing but a hole from `pos` to the end of the file.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Ok(true),
            Err(_) => pos,
        };
        if data >= end {
            return Ok(true);
        }
        let to = seek(data, libc::SEEK_HOLE).map_or(end, |h| h.clamp(data + 1, end));
        let mut at = data;
        while at < to {
            let n = ((to - at) as usize).min(buf.len());
            file.read_exact_at(&mut buf[..n], at)?;
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            at += n as u64;
        }
        pos = to;
    }
    Ok(true)
}

/// The space a walk found, sorted: each shard's live record chunks (with their sequence
/// numbers), every free extent, and among them the voided record chunks (which still hold
/// valid records until they are punched).
struct Space {
    chunks: Vec<Vec<(u64, (u64, u64))>>,
    free: Vec<(u64, u64)>,
    voided: Vec<(u64, u64)>,
}

fn sort_space(shards: &[Shard], walk: &recovery::Walk) -> Space {
    let mut space =
        Space { chunks: vec![Vec::new(); shards.len()], free: Vec::new(), voided: Vec::new() };
    let tables: std::collections::HashSet<u64> =
        shards.iter().filter_map(|s| s.table_ref().map(|t| t.chunk)).collect();
    for c in &walk.chunks {
        let ext = (c.off, c.end - c.off);
        if walk.live(c) {
            space.chunks[c.shard as usize].push((c.seq, ext));
        } else if recovery::is_index(c) {
            if !tables.contains(&c.off) {
                space.free.push(ext);
            }
        } else {
            space.voided.push(ext);
            space.free.push(ext);
        }
    }
    space.free.extend(&walk.gaps);
    space
}

/// Reads the directory of a cleanly closed file; `None` if anything in it does not check
/// out (then the caller recovers from the records instead).
fn load_directory(ctx: &Ctx, h: &Header, n: usize) -> Option<Box<[Shard]>> {
    let mut shards = Vec::with_capacity(n);
    for id in 0..n as u32 {
        let at = PAGE + u64::from(id) * DIR_ENTRY_LEN as u64;
        // SAFETY: opening is single-threaded; nobody else sees the map yet.
        let e = DirEntry::decode(unsafe { ctx.region.bytes(at, DIR_ENTRY_LEN) }?)?;
        let chunk = |off: u64, kind: u8| -> Option<ChunkHeader> {
            // SAFETY: as above.
            let c = ChunkHeader::decode(
                unsafe { ctx.region.bytes(off, format::CHUNK_HEADER_LEN as usize) }?,
                ctx.salt,
            )?;
            let ok = c.kind == kind
                && c.shard == id
                && recovery::chunk_in_range(off, c.len, h.data_start, h.data_end);
            ok.then_some(c)
        };
        let table = if e.table == 0 {
            None
        } else {
            let c = chunk(e.table, CHUNK_INDEX)?;
            Some(TableRef { chunk: e.table, len: c.len })
        };
        let used = e.count.checked_add(e.tombs)?;
        if table.map_or(used != 0, |t| used >= t.slots()) {
            return None;
        }
        let shard = Shard::from_dir(id, &e, table);
        if e.chunk != 0 {
            let c = chunk(e.chunk, CHUNK_RECORDS)?;
            let end = e.chunk + c.len;
            if e.cursor < e.chunk + format::CHUNK_HEADER_LEN || e.cursor > end {
                return None;
            }
            shard.set_chunk_end(end);
        }
        shards.push(shard);
    }
    Some(shards.into_boxed_slice())
}

/// Makes the entry of a file just created in its directory durable (`fsync` of the
/// directory, as POSIX asks after creating a file). A directory this process may not open
/// for reading is left to the file system (ext4 and XFS persist a new file's entry with the
/// file's own sync).
fn sync_parent_dir(path: &Path) -> io::Result<()> {
    // The directory that holds the new entry: through a symbolic link, the target's.
    let path = &std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match File::open(dir) {
        Ok(d) => d.sync_all(),
        Err(_) => Ok(()),
    }
}

/// Why a file that may be created was "not found": its directory is missing (or the path is
/// a symbolic link to a place that does not exist). Kind `NotFound`, so programs can still
/// match on it.
fn cannot_create(path: &Path) -> io::Error {
    if path.as_os_str().is_empty() {
        return io::Error::new(io::ErrorKind::NotFound, "the path is empty");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let why = if dir.is_dir() {
        "cannot create the file there: no such file or directory (a symbolic link to a missing \
         place?)"
            .to_string()
    } else {
        format!("cannot create the file: the directory {} does not exist", dir.display())
    };
    io::Error::new(io::ErrorKind::NotFound, why)
}
