//! Salvage of a damaged database file ([`salvage`]): every intact record into a fresh one.
//!
//! Unlike recovery, which stops reading a chunk at the first bad record (after a crash that
//! is where the writer was), salvage skips damaged bytes and resynchronizes on the next
//! record whose lengths and salted checksum check out, so one damaged byte costs one record,
//! not the rest of its chunk. It replays each shard's records in order, as recovery does
//! (later values win; removals and clears apply). If the newest record of a key is the
//! damaged one, the key gets its previous intact value back (a removed key whose marked last
//! record is damaged comes back too): salvage cannot know a record it cannot read.
//!
//! A chunk whose header does not validate is hidden from the walk that finds the chunks
//! (recovery and an open skip it); salvage finds it between the valid chunks, as `check`
//! does (`gaps::scan_gaps`: a page there that starts with the chunk magic, or holds an
//! intact record where a chunk's first record goes; in a file closed cleanly also any run
//! of bytes there that are not zeros), and reads its records the same way. Their place in
//! the shard's log (the header's sequence number) decides which records win, so:
//!
//! - a header damaged in exactly one byte is repaired (every other value of every byte is
//!   tried; the repair is taken when exactly one makes the header valid), and the chunk
//!   replays at its place, or not at all if a committed rebuild voided it, exactly as if
//!   the header were intact;
//! - otherwise the records' place is lost. Each goes to the shard of its key hash (a clear,
//!   which has no key, to the shard of the region's first keyed record) and replays
//!   *before* every chunk of that shard, in file order: a record whose place is known
//!   always overrides one whose place is lost. So no record that an intact newer record of
//!   a known chunk, a removal mark on one or a clear in one overrides comes back. Among
//!   several lost chunks of one shard, file order need not be log order (space is reused),
//!   so a lost chunk's clear or removal may replay before an older lost chunk's record,
//!   which then comes back. The price: if the lost
//!   chunk held a key's newest record, an older intact value of the key wins (or a clear
//!   that was older than the lost chunk drops its records), and a removal whose marked
//!   record lies in the lost chunk cannot remove values of the key found in known chunks.
//!   Records of a lost chunk that a committed rebuild had voided come back if no known
//!   chunk mentions their key (their removal marks may be in the voided chunks that are
//!   skipped).
//!
//! A false resynchronization needs a byte run that decodes as a record *and* matches its
//! checksum salted with this file's random salt (one chance in 2^32 per position tried).
//! The search through damaged bytes hashes a bounded amount per byte; long candidates past
//! the budget are left unchecked and reported (see `scan_records`).
//!
//! The source is only read, with `pread`, under a shared advisory lock (`check.rs` holds the
//! reading helpers).

use std::collections::HashMap;
use std::path::Path;

use crate::check::{Damage, MAX_DAMAGE, apply, open_shared, read_directory, read_full, read_vec};
use crate::db::Db;
use crate::error::{Error, OpenError};
use crate::format::{
    self, CHUNK_HEADER_LEN, CHUNK_INDEX, CHUNK_RECORDS, ChunkHeader, FLAG_CLEAN, HEADER_LEN,
    Header, HeaderError, PAGE, REC_SET, Record,
};
use crate::gaps::scan_gaps;
use crate::recovery::{self, Found};

/// What [`salvage`] kept and lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SalvageReport {
    /// Records written to the new database.
    pub records: u64,
    /// Live records the source's directory declared, when the source was closed cleanly and
    /// its directory is intact (so `expected_records - records` were lost).
    pub expected_records: Option<u64>,
    /// Whether the source's file header failed its checksum (its salt was used anyway,
    /// confirmed by the chunk headers that decode with it).
    pub header_damaged: bool,
    /// Damaged byte ranges skipped (each may have held one or more records).
    pub damaged_regions: u64,
    /// Bytes in those ranges.
    pub skipped_bytes: u64,
    /// The damaged ranges, in file order (at most 100 entries).
    pub damage: Vec<Damage>,
}

/// Copies every intact record of the database file `src` into a new database at `dst`
/// (replaced if it exists), skipping damaged bytes (see the module documentation). `src`
/// is only read, under a shared lock. The new file has the source's shard count (if the
/// header is damaged, as its data-start field and the chunks' shard numbers tell).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("senju-doc-salvage-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let (src, dst) = (dir.join("old.sj"), dir.join("new.sj"));
/// let db = senju::Db::open(&src)?;
/// db.set(b"k", b"v")?;
/// db.close()?;
/// drop(db);
/// let report = senju::salvage(&src, &dst)?;
/// assert_eq!((report.records, report.damaged_regions), (1, 0));
/// assert_eq!(senju::Db::open(&dst)?.get(b"k")?, Some(b"v".to_vec()));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), senju::Error>(())
/// ```
pub fn salvage(src: impl AsRef<Path>, dst: impl AsRef<Path>) -> Result<SalvageReport, Error> {
    salvage_with_progress(src, dst, &mut |_, _| {})
}

/// [`salvage`], calling `progress(done, total)` (in bytes of chunks read) as it goes.
pub fn salvage_with_progress(
    src: impl AsRef<Path>,
    dst: impl AsRef<Path>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SalvageReport, Error> {
    let (src, dst) = (src.as_ref(), dst.as_ref());
    if same_file(src, dst) {
        return Err(OpenError::InvalidOption {
            name: "dst",
            reason: "salvage needs a destination other than the source".into(),
        }
        .into());
    }
    let (file, len) = open_shared(src)?;
    let io_err = |source| Error::from(OpenError::Io { path: src.to_path_buf(), source });
    let mut b = [0u8; HEADER_LEN];
    let n = read_full(&file, &mut b, 0).map_err(io_err)?;
    let h = match Header::decode_unchecked(&b[..n]) {
        Ok(h) => h,
        Err(HeaderError::Version(found)) => {
            return Err(OpenError::UnsupportedVersion {
                path: src.into(),
                found,
                supported: format::VERSION,
            }
            .into());
        }
        Err(_) => return Err(OpenError::NotADatabase { path: src.into() }.into()),
    };
    let header_ok = Header::decode(&b[..n]).is_ok();
    let mut report = SalvageReport { header_damaged: !header_ok, ..SalvageReport::default() };
    // With a damaged header, trust neither the shard count nor the data start: accept any
    // shard a chunk names and look for chunks right after the header page.
    let (shards, start) = if header_ok {
        (1usize << h.shard_bits, h.data_start)
    } else {
        (1usize << Header::MAX_SHARD_BITS, PAGE)
    };
    let walk = recovery::walk_file(&file, h.salt, shards, start, len);
    if !header_ok && walk.chunks.is_empty() {
        return Err(OpenError::Corrupted {
            offset: 0,
            what: "the file header is damaged and no chunk matches its salt; nothing to salvage",
        }
        .into());
    }
    if header_ok && h.flags & FLAG_CLEAN != 0 {
        let dir = read_directory(&file, shards).map_err(io_err)?;
        report.expected_records = dir.iter().map(|e| e.map(|e| e.count)).sum();
    }
    let bits = if header_ok { h.shard_bits } else { damaged_header_shard_bits(&h, &walk.chunks) };
    let gaps = scan_gaps(&file, h.salt, shards, &walk.chunks, start, len).map_err(io_err)?;
    // Strays: bytes outside every chunk that are not zeros, mostly stale free space. Read
    // only in a file closed cleanly, where records there can only belong to a chunk whose
    // header and first record are both lost; after a crash, free space whose zeroing had not
    // reached the disk may still hold dead records.
    let clean = header_ok && h.flags & FLAG_CLEAN != 0;
    let strays = gaps.strays.iter().filter(|_| clean).map(|s| (s.off, s.end, None, false));
    let orphans = gaps.orphans.iter().map(|o| (o.off, o.end.min(o.limit), o.repaired, true));
    let mut spans: Vec<_> = orphans.chain(strays).collect();
    spans.sort_unstable_by_key(|s| s.0);
    let mut orphans = Vec::with_capacity(spans.len());
    for (off, end, repaired, header) in spans {
        let buf = read_vec(&file, off, end - off).map_err(io_err)?;
        orphans.push(read_orphan(off, buf, header, repaired, bits, h.salt, &mut report));
    }
    // Each shard's sources in replay order: records whose chunk header is lost first (in
    // file order), then the chunks by sequence number, voided ones left out.
    let mut void_before = walk.void_before.clone();
    for p in orphans.iter().filter_map(|o| o.placed) {
        let v = &mut void_before[p.shard as usize];
        *v = (*v).max(p.void_before);
    }
    let mut by_shard: HashMap<u32, Vec<(Order, Source)>> = HashMap::new();
    for c in walk.chunks.iter().filter(|c| c.kind == CHUNK_RECORDS) {
        if c.seq >= void_before[c.shard as usize] {
            by_shard.entry(c.shard).or_default().push(((1, c.seq, c.off), Source::Chunk(*c)));
        }
    }
    for (i, o) in orphans.iter().enumerate() {
        if let Some(p) = o.placed
            && p.seq >= void_before[p.shard as usize]
        {
            let at = (1, p.seq, o.off);
            by_shard.entry(p.shard).or_default().push((at, Source::Orphan(i, true)));
        }
        for &shard in &o.unplaced_shards {
            by_shard.entry(shard).or_default().push(((0, 0, o.off), Source::Orphan(i, false)));
        }
    }
    let size = |src: &Source| match *src {
        Source::Chunk(c) => c.end - c.off,
        Source::Orphan(i, _) => orphans[i].buf.len() as u64,
    };
    let total: u64 = by_shard.values().flatten().map(|(_, src)| size(src)).sum();
    let out_shards = 1 << bits;
    let db = Db::builder().shards(out_shards).truncate(true).open(dst)?;
    let mut ids: Vec<u32> = by_shard.keys().copied().collect();
    ids.sort_unstable();
    let mut done = 0;
    for id in ids {
        let sources = by_shard.get_mut(&id).expect("listed");
        sources.sort_by_key(|&(at, _)| at);
        let mut live: HashMap<Vec<u8>, (u64, u64)> = HashMap::new();
        for (_, src) in sources.iter() {
            match *src {
                Source::Chunk(c) => {
                    let buf = read_vec(&file, c.off, c.end - c.off).map_err(io_err)?;
                    let found = scan_records(&buf, CHUNK_HEADER_LEN as usize, c.off, h.salt);
                    report_bad(&found, c.off, &mut report);
                    for &pos in &found.records {
                        let rec = record_in(&buf, pos);
                        apply(&mut live, &rec, (c.off + pos as u64, rec.len));
                    }
                }
                Source::Orphan(i, placed) => {
                    let o = &orphans[i];
                    for &(pos, shard, in_place) in &o.records {
                        if shard == id && in_place == placed {
                            let rec = record_in(&o.buf, pos);
                            apply(&mut live, &rec, (o.off + pos as u64, rec.len));
                        }
                    }
                }
            }
            done += size(src);
            progress(done, total);
        }
        for (off, rec_len) in live.into_values() {
            let buf = read_vec(&file, off, rec_len).map_err(io_err)?;
            if let Some((&first, rest)) = buf.split_first()
                && let Ok(rec) = Record::decode(first, rest)
            {
                db.set(rec.key, rec.value)?;
                report.records += 1;
            }
        }
    }
    db.close()?;
    report.damage.sort_by_key(|d| d.offset);
    report.damage.truncate(MAX_DAMAGE);
    Ok(report)
}

/// The shard count (as bits) of a file whose header fails its checksum, from what is left:
/// the header's count where its redundant data-start field agrees with it and every chunk's
/// shard fits it; else the fewest bits that the data-start field allows and the chunks fit;
/// else the fewest bits that every chunk's shard fits (at least 7: 128 shards, the default).
/// Records whose chunk header is lost go to the shard of their key hash by these bits.
fn damaged_header_shard_bits(h: &Header, chunks: &[Found]) -> u32 {
    let top = chunks.iter().map(|c| c.shard).max().unwrap_or(0);
    let fits = |bits: u32| bits <= Header::MAX_SHARD_BITS && u64::from(top) < 1u64 << bits;
    if fits(h.shard_bits) && h.data_start == format::data_start(h.shard_bits) {
        return h.shard_bits;
    }
    // Counts up to 32 shards share one directory page: the fewest bits that the chunks fit
    // (exact once the highest shard has a chunk).
    if let Some(b) =
        (0..=Header::MAX_SHARD_BITS).find(|&b| format::data_start(b) == h.data_start && fits(b))
    {
        return b;
    }
    (7..=Header::MAX_SHARD_BITS).find(|&b| fits(b)).unwrap_or(Header::MAX_SHARD_BITS)
}

/// Where a source goes in its shard's replay: `(0, 0, offset)` for records whose chunk
/// header is lost, `(1, sequence number, offset)` for chunks.
type Order = (u8, u64, u64);

/// A source of records for one shard's replay.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// A chunk whose header validates.
    Chunk(Found),
    /// Orphan `i`'s records of the shard: those its header places in the shard's log
    /// (`true`), or those whose place is lost (`false`).
    Orphan(usize, bool),
}

/// An orphan's header, repaired (`gaps::repair_header`): the orphan replays as that chunk.
#[derive(Clone, Copy, Debug)]
struct Placed {
    shard: u32,
    seq: u64,
    void_before: u64,
    len: u64,
}

/// Bytes outside every valid chunk that salvage reads records from: an orphan of
/// [`scan_gaps`] (a chunk whose header does not validate), or, in a file closed cleanly,
/// a stray run of bytes that are not zeros (a chunk whose first page is lost).
struct Orphan {
    off: u64,
    buf: Vec<u8>,
    placed: Option<Placed>,
    /// Every intact record: position in `buf`, shard, and whether `placed` covers it.
    records: Vec<(usize, u32, bool)>,
    /// The shards that records outside `placed` belong to.
    unplaced_shards: Vec<u32>,
}

/// Reads the records of `buf` (read from `off`; `header`: it starts with a chunk header that
/// does not validate) and decides their place in the replay.
///
/// A header damaged in one byte is repaired (`gaps::repair_header`) and the orphan replays as
/// that chunk, at its place in the shard's log (or not at all if a committed rebuild voided
/// it), as recovery would have replayed it. Otherwise (and for records past the repaired
/// chunk's length) the records' place in the log is lost: each record goes to the shard of
/// its key hash (a clear, which has no key, to the shard of the orphan's first keyed
/// record) and replays before every chunk of that shard, so any record whose place is
/// known overrides it.
fn read_orphan(
    off: u64,
    buf: Vec<u8>,
    header: bool,
    repaired: Option<(ChunkHeader, usize)>,
    bits: u32,
    salt: u64,
    report: &mut SalvageReport,
) -> Orphan {
    let mut orphan = Orphan {
        off,
        buf: Vec::new(),
        placed: None,
        records: Vec::new(),
        unplaced_shards: Vec::new(),
    };
    if let Some((c, byte)) = repaired.filter(|(c, _)| c.kind == CHUNK_INDEX) {
        report.damaged_regions += 1;
        report.skipped_bytes += 1;
        report.damage.push(Damage {
            offset: off + byte as u64,
            what: format!(
                "index chunk header of shard {} damaged in this byte (an index is rebuilt from \
                 the records; nothing to salvage)",
                c.shard
            ),
        });
        return orphan;
    }
    orphan.placed = repaired.map(|(c, _)| Placed {
        shard: c.shard,
        seq: c.seq,
        void_before: c.void_before,
        len: c.len,
    });
    let from = if header { CHUNK_HEADER_LEN as usize } else { 0 };
    let found = scan_records(&buf, from, off, salt);
    let shard_of = |pos: usize| {
        let rec = record_in(&buf, pos);
        (rec.kind == REC_SET).then(|| {
            let hash = format::key_hash(rec.key, salt);
            hash.checked_shr(64 - bits).unwrap_or(0) as u32
        })
    };
    let home = found.records.iter().find_map(|&pos| shard_of(pos));
    for &pos in &found.records {
        let (shard, in_place) = match orphan.placed {
            Some(p) if (pos as u64) < p.len => (p.shard, true),
            _ => match shard_of(pos).or(home) {
                Some(s) => (s, false),
                None => continue,
            },
        };
        if !in_place && !orphan.unplaced_shards.contains(&shard) {
            orphan.unplaced_shards.push(shard);
        }
        orphan.records.push((pos, shard, in_place));
    }
    let unplaced = orphan.records.iter().filter(|r| !r.2).count();
    let lost = if unplaced == 0 {
        String::new()
    } else {
        format!(
            "; {unplaced} intact record(s) whose place in their shard's log is lost replay \
             before the shard's chunks"
        )
    };
    if let Some((c, byte)) = repaired {
        report.damaged_regions += 1;
        report.skipped_bytes += 1;
        report.damage.push(Damage {
            offset: off + byte as u64,
            what: format!(
                "record chunk header damaged in this byte, repaired (shard {}, sequence number \
                 {}): its records replay in their place{lost}",
                c.shard, c.seq
            ),
        });
    } else if header {
        report.damaged_regions += 1;
        report.skipped_bytes += CHUNK_HEADER_LEN.min(buf.len() as u64);
        report.damage.push(Damage { offset: off, what: format!("chunk header unreadable{lost}") });
    } else if unplaced > 0 {
        report.damaged_regions += 1;
        report.damage.push(Damage {
            offset: off,
            what: format!("bytes outside every chunk hold records{lost}"),
        });
    }
    // A stray without a record is stale free space (a retired table's slots where hole
    // punching does not work): not damage.
    if header || unplaced > 0 {
        report_bad(&found, off, report);
    }
    orphan.buf = buf;
    orphan
}

/// The record at `pos` of `buf`, which [`scan_records`] found intact.
fn record_in(buf: &[u8], pos: usize) -> Record<'_> {
    Record::decode(buf[pos], &buf[pos + 1..]).expect("scanned before")
}

/// Whether two paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// What [`scan_records`] found: the positions of intact records, and the damaged ranges
/// between them (`from..to` in the buffer).
struct Scanned {
    records: Vec<usize>,
    bad: Vec<(usize, usize)>,
    /// Candidates longer than [`SHORT_CANDIDATE`] left unchecked once the budget for checksums
    /// that fail ran out.
    unchecked: u64,
    /// Bytes hashed by checksums that failed.
    #[cfg(test)]
    failed_hashing: u64,
}

/// A candidate record at most this long is always checked.
const SHORT_CANDIDATE: usize = 4096;

/// What checksums that fail may hash while [`scan_records`] searches damaged bytes: this much
/// at first, plus [`SEARCH_BUDGET_PER_BYTE`] per byte of the buffer passed.
const SEARCH_BUDGET_BASE: u64 = 1 << 20;

/// See [`SEARCH_BUDGET_BASE`].
const SEARCH_BUDGET_PER_BYTE: u64 = 64;

/// Finds every intact record of `buf[from..]` (a chunk, or bytes where one lay, read from
/// file offset `base`), skipping damaged bytes: after a byte that starts no intact record,
/// the next position is tried.
///
/// Inside damaged bytes (a large value whose record head is lost, say) most positions decode
/// as some record, many of them claiming megabytes, and each such claim costs a checksum
/// over its length: tried at every position, that was quadratic in the damaged length (a
/// damaged 4 MiB value hashed gigabytes). So a candidate longer than [`SHORT_CANDIDATE`] is
/// checked only within a budget (the checksums that failed so far stay under
/// [`SEARCH_BUDGET_BASE`] plus [`SEARCH_BUDGET_PER_BYTE`] per byte passed), except where a
/// long record can start a chunk: at `from`, or right after the place of a chunk header
/// whose length field leaves room for it. The candidates left unchecked are counted
/// (`Scanned::unchecked`); a record lost that way is a long record inside a long damaged
/// range, not at the start of its chunk.
fn scan_records(buf: &[u8], from: usize, base: u64, salt: u64) -> Scanned {
    let mut found = Scanned {
        records: Vec::new(),
        bad: Vec::new(),
        unchecked: 0,
        #[cfg(test)]
        failed_hashing: 0,
    };
    let mut pos = from;
    let mut bad_since: Option<usize> = None;
    let mut failed = 0u64;
    while pos < buf.len() {
        let first = buf[pos];
        if first != 0
            && let Ok(rec) = Record::decode(first, &buf[pos + 1..])
        {
            let len = rec.len as usize;
            let worth = len <= SHORT_CANDIDATE
                || pos == from
                || chunk_starts_before(buf, pos, base, len)
                || failed + len as u64
                    <= SEARCH_BUDGET_BASE + SEARCH_BUDGET_PER_BYTE * (pos - from) as u64;
            if !worth {
                found.unchecked += 1;
            } else if rec.verify(salt) {
                if let Some(since) = bad_since.take() {
                    found.bad.push((since, pos));
                }
                found.records.push(pos);
                pos += len;
                continue;
            } else {
                failed += len as u64;
            }
        }
        // Zeros outside a damaged range are unused space; inside one they may be the
        // damage (a zeroed page), and count with it.
        if first != 0 && bad_since.is_none() {
            bad_since = Some(pos);
        }
        pos += 1;
    }
    // Trailing zeros after damage are unused space: end the range at its last non-zero byte.
    if let Some(from) = bad_since {
        let last = buf[from..].iter().rposition(|&b| b != 0).map_or(from, |i| from + i + 1);
        found.bad.push((from, last));
    }
    #[cfg(test)]
    {
        found.failed_hashing = failed;
    }
    found
}

/// Whether a record of `len` bytes at `pos` of `buf` (read from file offset `base`) sits
/// where a chunk's first record goes, after a header place whose length field (read though
/// the header may be damaged) leaves room for it inside `buf`.
fn chunk_starts_before(buf: &[u8], pos: usize, base: u64, len: usize) -> bool {
    let header = CHUNK_HEADER_LEN as usize;
    let Some(at) = pos.checked_sub(header) else { return false };
    if !(base + at as u64).is_multiple_of(PAGE) {
        return false;
    }
    // A record's chunk holds it, and is at most twice the length it needed (a recycled
    // chunk) or a normal chunk's length (32 KiB) more.
    let chunk_len = u64::from_le_bytes(buf[at + 16..at + 24].try_into().expect("8 bytes"));
    let need = (header + len) as u64;
    chunk_len.is_multiple_of(PAGE) && chunk_len >= need && chunk_len <= 2 * need + (32 << 10)
}

/// Counts and lists damaged ranges of a chunk read from `base`.
fn report_bad(found: &Scanned, base: u64, report: &mut SalvageReport) {
    if found.unchecked > 0
        && let Some(&(from, _)) = found.bad.first()
    {
        report.damage.push(Damage {
            offset: base + from as u64,
            what: format!(
                "{} candidate records longer than {SHORT_CANDIDATE} bytes in the damaged bytes \
                 from here on were not checked (the search's budget ran out); a long record \
                 there, not at the start of its chunk, may be lost",
                found.unchecked
            ),
        });
    }
    for &(from, to) in &found.bad {
        report.damaged_regions += 1;
        report.skipped_bytes += (to - from) as u64;
        report.damage.push(Damage {
            offset: base + from as u64,
            what: format!("{} unreadable bytes skipped", to - from),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{RecordHead, record_sum};

    const SALT: u64 = 0x5eed;

    /// One intact SET record of `key` and `value`.
    fn record(key: &[u8], value: &[u8]) -> Vec<u8> {
        let head = RecordHead::new(REC_SET, key.len(), value.len());
        let mut b = head.bytes[..head.len].to_vec();
        b.extend_from_slice(key);
        b.extend_from_slice(value);
        let sum = record_sum(b[0], &b[1..], SALT);
        b.extend_from_slice(&sum.to_le_bytes());
        b
    }

    /// `n` bytes that look random (xorshift), as a compressed value does.
    fn noise(n: usize, mut x: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn searching_damaged_bytes_costs_linear_hashing() {
        // A damaged large value: 1 MiB of noise where the scan must try every position.
        // Tried in full, the candidates that decode there hash about 8 KiB per byte (8 GiB).
        let n = 1 << 20;
        let mut buf = vec![0u8; CHUNK_HEADER_LEN as usize];
        buf.extend(noise(n, 0x9e37_79b9_7f4a_7c15));
        let tail = record(b"after", b"the damage");
        buf.extend_from_slice(&tail);
        let found = scan_records(&buf, CHUNK_HEADER_LEN as usize, 0, SALT);
        assert!(
            found.failed_hashing <= 256 * n as u64,
            "{} bytes hashed for {n} damaged bytes",
            found.failed_hashing
        );
        assert!(found.unchecked > 0);
        // The intact record after the damage is found, and the damage is one range.
        assert_eq!(found.records, vec![buf.len() - tail.len()]);
        assert_eq!(found.bad.len(), 1);
    }

    #[test]
    fn long_records_where_a_chunk_starts_are_always_checked() {
        // A long record first in the buffer; then noise; then a chunk whose header is
        // damaged but whose length field is intact, holding another long record; then a long
        // record right after noise (found while the budget lasts).
        let long = |tag: u8| record(&[tag; 8], &noise(200 << 10, u64::from(tag) + 1));
        let first = long(1);
        let mut buf = vec![0u8; CHUNK_HEADER_LEN as usize];
        buf.extend_from_slice(&first);
        buf.extend(noise(3 << 20, 7));
        buf.resize(format::align_up(buf.len() as u64, PAGE) as usize, 0x55);
        let second = long(2);
        let chunk = format::align_up(CHUNK_HEADER_LEN + second.len() as u64, PAGE);
        let at = buf.len();
        let mut header = noise(CHUNK_HEADER_LEN as usize, 3);
        header[16..24].copy_from_slice(&chunk.to_le_bytes());
        buf.extend_from_slice(&header);
        buf.extend_from_slice(&second);
        buf.resize(at + chunk as usize, 0);
        let third = long(3);
        buf.extend(noise(1000, 11));
        let third_at = buf.len();
        buf.extend_from_slice(&third);
        let found = scan_records(&buf, CHUNK_HEADER_LEN as usize, 0, SALT);
        let want = vec![CHUNK_HEADER_LEN as usize, at + CHUNK_HEADER_LEN as usize, third_at];
        assert_eq!(found.records, want);
    }
}
