//! Offline verification of a database file ([`check`]).
//!
//! Check (and salvage) read the file with `pread` under a *shared* advisory lock, so they
//! never run against a writer and never write the file, and trust nothing they read: every
//! length and offset is checked before use, the way recovery reads a file (`recovery.rs`).
//!
//! [`check`] verifies, in file order:
//!
//! 1. the file header (magic, version, checksum, fields) and the file's length against it;
//! 2. every chunk header, and the space between chunks: a page there that starts with the
//!    chunk magic, or that holds an intact record where a chunk's first record goes, is a
//!    chunk whose header is damaged (recovery and an open skip its records; salvage reads
//!    them), and in a file closed cleanly any byte there that is not zero is damage, since
//!    `close` punched that space (after a crash, free space may keep stale index slots, which
//!    are not damage; see `check_gaps`);
//! 3. every record of every live record chunk (lengths and checksum), replaying each shard's
//!    chunks in sequence order as recovery does, to find the live record of every key;
//! 4. for a file that was closed cleanly, the shard directory and every index table: each
//!    entry points at the live record of its key, carries the key's hash bits and is
//!    reachable from the key's home slot; each live record has exactly one entry; the
//!    directory's record and tombstone counts match. A shard with a chunk whose records
//!    could not all be read (a damaged record, or a damaged header whose shard is known) is
//!    left out: its index would only repeat the damage already reported.
//!
//! A file left by a crash (not closed cleanly) is checked as recovery will read it: its index
//! is not checked (the next writable open rebuilds it), and a record cut short at the end of
//! a chunk, with nothing but zeros after it, is where a writer was when the process died.
//! Such records were written after the last sync, which the crash contract allows to lose,
//! so they are counted as *torn*, not as damage. A record that does not read intact with
//! other bytes after it is damage: recovery would drop the records that follow it.
//!
//! [`salvage`](mod@crate::salvage) (`salvage.rs`) shares the reading helpers below.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::OpenError;
use crate::file_lock::{self, Unlocking};
use crate::format::{
    self, CHUNK_HEADER_LEN, CHUNK_INDEX, ChunkHeader, DIR_ENTRY_LEN, DirEntry, FLAG_CLEAN,
    HEADER_LEN, Header, HeaderError, MAGIC, PAGE, REC_SET, Record, SLOT_HASH_BITS, TOMBSTONE,
};
use crate::gaps::{Gaps, scan_gaps};
use crate::recovery::{self, Found};
use crate::table;

/// The most damage entries a report keeps (the count goes on).
pub(crate) const MAX_DAMAGE: usize = 100;

/// One place where a file is damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Damage {
    /// Byte offset in the file.
    pub offset: u64,
    /// What is wrong there.
    pub what: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.what)
    }
}

/// What [`check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Whether the file was closed cleanly (else its index is not checked; see the module
    /// documentation).
    pub closed_cleanly: bool,
    /// The file's length in bytes.
    pub file_bytes: u64,
    /// Shards the header declares.
    pub shards: u64,
    /// Live record chunks read.
    pub record_chunks: u64,
    /// Index chunks found (current tables and reusable old ones).
    pub index_chunks: u64,
    /// Intact records read, including overwritten and removed ones.
    pub scanned_records: u64,
    /// Live records (each key's newest record, after removals and clears).
    pub records: u64,
    /// Chunks of a file that was not closed cleanly whose last record was cut short by the
    /// crash (expected; not damage).
    pub torn_chunks: u64,
    /// The damage found, in file order (at most 100 entries; see `damage_count`).
    pub damage: Vec<Damage>,
    /// How many places are damaged in all.
    pub damage_count: u64,
}

impl CheckReport {
    /// Whether no damage was found.
    pub fn is_ok(&self) -> bool {
        self.damage_count == 0
    }

    /// The damage at the lowest offset, if any.
    pub fn first_damage(&self) -> Option<&Damage> {
        self.damage.first()
    }

    fn damage(&mut self, offset: u64, what: impl Into<String>) {
        self.damage_count += 1;
        self.damage.push(Damage { offset, what: what.into() });
    }

    fn finish(mut self) -> CheckReport {
        self.damage.sort_by_key(|d| d.offset);
        self.damage.truncate(MAX_DAMAGE);
        self
    }
}

/// Verifies the whole database file at `path` without changing it (see the module
/// documentation for what is checked). Damage is reported in the [`CheckReport`]; an `Err`
/// means the file could not be read at all (missing, locked by a writer, not a senju
/// database, a newer format, an I/O error).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("senju-doc-check-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("checked.sj");
/// let db = senju::Db::open(&path)?;
/// db.set(b"k", b"v")?;
/// db.close()?;
/// drop(db);
/// let report = senju::check(&path)?;
/// assert!(report.is_ok() && report.closed_cleanly);
/// assert_eq!(report.records, 1);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), senju::Error>(())
/// ```
pub fn check(path: impl AsRef<Path>) -> Result<CheckReport, OpenError> {
    check_with_progress(path, &mut |_, _| {})
}

/// [`check`], calling `progress(done, total)` (in bytes of chunks read) as it goes.
pub fn check_with_progress(
    path: impl AsRef<Path>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CheckReport, OpenError> {
    let path = path.as_ref();
    let (file, len) = open_shared(path)?;
    let io_err = |source| OpenError::Io { path: path.to_path_buf(), source };
    let mut r = CheckReport { file_bytes: len, ..CheckReport::default() };
    let mut b = [0u8; HEADER_LEN];
    let n = read_full(&file, &mut b, 0).map_err(io_err)?;
    let h = match Header::decode(&b[..n]) {
        Ok(h) => h,
        Err(HeaderError::Magic) if n == 0 => {
            r.damage(0, "the file is empty: no header");
            return Ok(r.finish());
        }
        Err(HeaderError::Magic) if n < HEADER_LEN && b[..n.min(8)] == MAGIC[..n.min(8)] => {
            r.damage(n as u64, "the file is cut short inside its header");
            return Ok(r.finish());
        }
        Err(HeaderError::Magic) => return Err(OpenError::NotADatabase { path: path.into() }),
        Err(HeaderError::Version(found)) => {
            return Err(OpenError::UnsupportedVersion {
                path: path.into(),
                found,
                supported: format::VERSION,
            });
        }
        Err(HeaderError::Checksum) => {
            r.damage(0, "file header checksum mismatch (salvage may still read the records)");
            return Ok(r.finish());
        }
        Err(HeaderError::Fields) => {
            r.damage(16, "file header fields out of range");
            return Ok(r.finish());
        }
    };
    let shards = 1usize << h.shard_bits;
    r.shards = shards as u64;
    r.closed_cleanly = h.flags & FLAG_CLEAN != 0;
    if len < h.data_start {
        r.damage(len, format!("the file is cut short inside the shard directory ({len} bytes)"));
        return Ok(r.finish());
    }
    if !len.is_multiple_of(PAGE) {
        r.damage(len, "the file's length is not a whole number of pages (cut short?)");
    }
    let mut end = len;
    if r.closed_cleanly {
        if h.data_end > len {
            r.damage(
                len,
                format!(
                    "the file is cut short: its header says the data ends at byte {}",
                    h.data_end
                ),
            );
        } else if h.data_end < h.data_start || !h.data_end.is_multiple_of(PAGE) {
            r.damage(32, format!("file header: data end {} is out of range", h.data_end));
        } else {
            end = h.data_end;
        }
    }
    let walk = recovery::walk_file(&file, h.salt, shards, h.data_start, end);
    // Shards with a chunk whose header is damaged: their replay misses its records.
    let gaps = scan_gaps(&file, h.salt, shards, &walk.chunks, h.data_start, end).map_err(io_err)?;
    let damaged = check_gaps(&gaps, &mut r);
    let dir =
        if r.closed_cleanly { Some(read_directory(&file, shards).map_err(io_err)?) } else { None };
    let mut by_shard = vec![Vec::new(); shards];
    for c in &walk.chunks {
        if walk.live(c) {
            by_shard[c.shard as usize].push(*c);
        } else if recovery::is_index(c) {
            r.index_chunks += 1;
        }
    }
    let total: u64 = by_shard.iter().flatten().map(|c| c.end - c.off).sum();
    let mut done = 0;
    for (s, chunks) in by_shard.iter_mut().enumerate() {
        chunks.sort_by_key(|c| (c.seq, c.off));
        r.record_chunks += chunks.len() as u64;
        let entry = dir.as_ref().and_then(|d| d[s]);
        let dir_at = PAGE + (s * DIR_ENTRY_LEN) as u64;
        if dir.is_some() && entry.is_none() {
            r.damage(dir_at, format!("shard {s}: directory entry checksum mismatch"));
        }
        let mut live = HashMap::new();
        let mut complete = !damaged.contains(&(s as u32));
        for c in chunks.iter() {
            let buf = read_vec(&file, c.off, c.end - c.off).map_err(io_err)?;
            let cursor = entry.filter(|e| e.chunk == c.off).map(|e| e.cursor);
            complete &= scan_chunk(&buf, c, cursor, h.salt, r.closed_cleanly, &mut live, &mut r);
            done += c.end - c.off;
            progress(done, total);
        }
        r.records += live.len() as u64;
        // A shard whose records could not all be read is already reported; comparing its
        // index with a partial replay would only add consequences of the same damage.
        if let Some(e) = entry.filter(|_| complete) {
            if e.chunk != 0 && !chunks.iter().any(|c| c.off == e.chunk) {
                r.damage(
                    dir_at,
                    format!(
                        "shard {s}: directory names a record chunk at byte {} that is not there",
                        e.chunk
                    ),
                );
            }
            check_index(&file, s, dir_at, &e, &live, h, end, &mut r).map_err(io_err)?;
        }
    }
    Ok(r.finish())
}

/// Opens `path` for reading under a shared lock; returns the file, which gives the lock back
/// when dropped, and its length.
pub(crate) fn open_shared(path: &Path) -> Result<(Unlocking, u64), OpenError> {
    let io_err = |source| OpenError::Io { path: path.to_path_buf(), source };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(OpenError::NotFound { path: path.into() });
        }
        Err(e) => return Err(io_err(e)),
    };
    if !file_lock::try_lock(&file, file_lock::Kind::Shared).map_err(io_err)? {
        let mut b = [0u8; HEADER_LEN];
        let pid = match read_full(&file, &mut b, 0) {
            Ok(HEADER_LEN) if b[..8] == MAGIC => {
                Some(u32::from_le_bytes(b[20..24].try_into().expect("4 bytes")))
            }
            _ => None,
        };
        return Err(OpenError::Locked { path: path.into(), pid });
    }
    let file = Unlocking::new(file);
    let len = file.metadata().map_err(io_err)?.len();
    Ok((file, len))
}

/// Reads as many bytes as the file has at `off`, up to `b.len()`.
pub(crate) fn read_full(file: &File, b: &mut [u8], off: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < b.len() {
        match file.read_at(&mut b[n..], off + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// `len` bytes at `off` (fewer if the file ends first). A length that cannot be allocated
/// (a damaged or crafted chunk length in a sparse file, say) is an `OutOfMemory` error,
/// not an abort.
pub(crate) fn read_vec(file: &File, off: u64, len: u64) -> io::Result<Vec<u8>> {
    let no_room = || {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("cannot allocate {len} bytes to read the file at byte {off}"),
        )
    };
    let n = usize::try_from(len).map_err(|_| no_room())?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(n).map_err(|_| no_room())?;
    buf.resize(n, 0);
    let n = read_full(file, &mut buf, off)?;
    buf.truncate(n);
    Ok(buf)
}

/// Reports the space between valid chunks (and after the last) that does not read as it
/// should ([`scan_gaps`]), and returns the shards known to have a chunk there. Every orphan
/// is damage. Other bytes that are not zeros are not: they are free space that kept what it
/// held (old index slots beside a record chunk that took part of a retired table's space,
/// after a crash or where the file system cannot punch holes). A chunk whose header and
/// first record are both unreadable looks the same and goes unreported here (salvage still
/// reads such bytes in a file closed cleanly).
fn check_gaps(gaps: &Gaps, r: &mut CheckReport) -> HashSet<u32> {
    for o in &gaps.orphans {
        let what = match o.repaired {
            Some((c, byte)) => format!(
                "chunk header damaged in its byte {byte} (the rest names a {} chunk of shard \
                 {}, sequence number {}); recovery skips the chunk",
                if c.kind == CHUNK_INDEX { "index" } else { "record" },
                c.shard,
                c.seq
            ),
            None if o.magic => "unreadable chunk header (checksum mismatch)".into(),
            None => "unreadable chunk header (no chunk magic)".into(),
        };
        r.damage(
            o.off,
            format!(
                "{what}; {} bytes that are not zeros follow, up to byte {} (salvage reads the \
                 records there by their checksums)",
                o.nonzero, o.end
            ),
        );
    }
    gaps.orphans.iter().filter_map(|o| o.shard).collect()
}

/// Every shard's directory entry (`None` where the entry fails its checksum).
pub(crate) fn read_directory(file: &File, shards: usize) -> io::Result<Vec<Option<DirEntry>>> {
    let bytes = read_vec(file, PAGE, (shards * DIR_ENTRY_LEN) as u64)?;
    Ok((0..shards)
        .map(|s| bytes.get(s * DIR_ENTRY_LEN..(s + 1) * DIR_ENTRY_LEN).and_then(DirEntry::decode))
        .collect())
}

/// Reads the records of one chunk (`buf`, read from `c.off`), applying them to `live`
/// (key -> offset of its live record). `cursor`: where the shard's writer stood, for its
/// current chunk of a cleanly closed file. Returns whether every record was read.
fn scan_chunk(
    buf: &[u8],
    c: &Found,
    cursor: Option<u64>,
    salt: u64,
    clean: bool,
    live: &mut HashMap<Vec<u8>, u64>,
    r: &mut CheckReport,
) -> bool {
    let declared = ChunkHeader::decode(buf, salt).map_or(0, |h| h.len);
    if c.off + declared > c.end {
        r.damage(
            c.end,
            format!("the record chunk at byte {} runs past the end of the data", c.off),
        );
    }
    let mut stop = buf.len();
    if let Some(cur) = cursor {
        if cur < c.off + CHUNK_HEADER_LEN || cur > c.end {
            r.damage(c.off, format!("the directory's write position {cur} is outside its chunk"));
        } else {
            stop = (cur - c.off) as usize;
        }
    }
    let mut pos = CHUNK_HEADER_LEN as usize;
    while pos < stop {
        let first = buf[pos];
        if first == 0 {
            break;
        }
        let what = match Record::decode(first, &buf[pos + 1..stop]) {
            Ok(rec) if rec.verify(salt) => {
                r.scanned_records += 1;
                apply(live, &rec, c.off + pos as u64);
                pos += rec.len as usize;
                continue;
            }
            Ok(_) => "record checksum mismatch",
            Err(_) => "malformed record (bad lengths, or it runs past its chunk)",
        };
        if !clean && recovery::torn_write_len(&buf[pos..stop]).is_some() {
            r.torn_chunks += 1;
            break;
        }
        let rest = if clean {
            "the rest of this chunk is unreadable"
        } else {
            "recovery drops the rest of this chunk (salvage reads the intact records there)"
        };
        r.damage(c.off + pos as u64, format!("{what}; {rest}"));
        return false;
    }
    true
}

/// Replays one record into a shard's key -> offset map, as recovery does.
pub(crate) fn apply<V: Copy>(live: &mut HashMap<Vec<u8>, V>, rec: &Record<'_>, v: V) {
    match rec.kind {
        REC_SET if rec.killed() => {
            live.remove(rec.key);
        }
        REC_SET => {
            live.insert(rec.key.to_vec(), v);
        }
        _ => live.clear(),
    }
}

/// Checks one shard's index table against its live records.
#[allow(clippy::too_many_arguments)]
fn check_index(
    file: &File,
    s: usize,
    dir_at: u64,
    e: &DirEntry,
    live: &HashMap<Vec<u8>, u64>,
    h: Header,
    end: u64,
    r: &mut CheckReport,
) -> io::Result<()> {
    if e.count != live.len() as u64 {
        r.damage(
            dir_at,
            format!(
                "shard {s}: the directory counts {} records but the records hold {}",
                e.count,
                live.len()
            ),
        );
    }
    if e.table == 0 {
        if !live.is_empty() {
            r.damage(dir_at, format!("shard {s}: {} live records but no index table", live.len()));
        }
        return Ok(());
    }
    let head = read_vec(file, e.table, CHUNK_HEADER_LEN)?;
    let table = ChunkHeader::decode(&head, h.salt).filter(|c| {
        c.kind == CHUNK_INDEX
            && c.shard as usize == s
            && recovery::chunk_in_range(e.table, c.len, h.data_start, end)
    });
    let Some(t) = table else {
        r.damage(e.table, format!("shard {s}: the directory names no valid index chunk here"));
        return Ok(());
    };
    let bytes = read_vec(file, e.table + CHUNK_HEADER_LEN, t.len - CHUNK_HEADER_LEN)?;
    let slots: Vec<u64> =
        bytes.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))).collect();
    let by_off: HashMap<u64, &[u8]> = live.iter().map(|(k, &o)| (o, k.as_slice())).collect();
    let n = slots.len();
    let mut seen = HashSet::new();
    let mut tombs = 0;
    for (pos, &slot) in slots.iter().enumerate() {
        let at = e.table + CHUNK_HEADER_LEN + 8 * pos as u64;
        if slot == 0 {
            continue;
        }
        if slot == TOMBSTONE {
            tombs += 1;
            continue;
        }
        let off = format::slot_offset(slot);
        let Some(key) = by_off.get(&off) else {
            r.damage(
                at,
                format!("shard {s}: index entry points at byte {off}, which holds no live record"),
            );
            continue;
        };
        if !seen.insert(off) {
            r.damage(at, format!("shard {s}: a second index entry for the record at byte {off}"));
            continue;
        }
        let hash = format::key_hash(key, h.salt);
        if format::slot_hash_bits(slot) != hash & ((1 << SLOT_HASH_BITS) - 1) {
            r.damage(at, format!("shard {s}: index entry's hash bits do not match its key"));
            continue;
        }
        let mut p = table::home(hash, n);
        while p != pos {
            if slots[p] == 0 {
                r.damage(
                    at,
                    format!("shard {s}: index entry is unreachable from its key's home slot"),
                );
                break;
            }
            p = if p + 1 == n { 0 } else { p + 1 };
        }
    }
    if let Some(off) = by_off.keys().filter(|o| !seen.contains(o)).min() {
        let missing = by_off.len() - seen.len();
        r.damage(
            *off,
            format!("shard {s}: {missing} live record(s) missing from the index, the first here"),
        );
    }
    if tombs != e.tombs {
        r.damage(
            dir_at,
            format!(
                "shard {s}: the directory counts {} tombstones but the index holds {tombs}",
                e.tombs
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_that_cannot_be_allocated_is_an_error() {
        let file = File::open("/dev/null").unwrap();
        for len in [u64::MAX, 1 << 62] {
            let e = read_vec(&file, 4096, len).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
            assert!(e.to_string().contains("at byte 4096"), "{e}");
        }
        assert_eq!(read_vec(&file, 0, 10).unwrap(), Vec::<u8>::new());
    }
}
