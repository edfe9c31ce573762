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
//! A false resynchronization needs a byte run that decodes as a record *and* matches its
//! checksum salted with this file's random salt (one chance in 2^32 per position tried).
//!
//! The source is only read, with `pread`, under a shared advisory lock (`check.rs` holds the
//! reading helpers).

use std::collections::HashMap;
use std::path::Path;

use crate::check::{Damage, MAX_DAMAGE, apply, open_shared, read_directory, read_full, read_vec};
use crate::db::Db;
use crate::error::{Error, OpenError};
use crate::format::{
    self, CHUNK_HEADER_LEN, FLAG_CLEAN, HEADER_LEN, Header, HeaderError, PAGE, Record,
};
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
/// is only read, under a shared lock. The new file has the source's shard count (128 if
/// the header is unreadable).
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
    let mut by_shard: HashMap<u32, Vec<Found>> = HashMap::new();
    for c in walk.chunks.iter().filter(|c| walk.live(c)) {
        by_shard.entry(c.shard).or_default().push(*c);
    }
    let total: u64 = by_shard.values().flatten().map(|c| c.end - c.off).sum();
    let out_shards = if h.shard_bits <= Header::MAX_SHARD_BITS { 1 << h.shard_bits } else { 128 };
    let db = Db::builder().shards(out_shards).truncate(true).open(dst)?;
    let mut ids: Vec<u32> = by_shard.keys().copied().collect();
    ids.sort_unstable();
    let mut done = 0;
    for id in ids {
        let chunks = by_shard.get_mut(&id).expect("listed");
        chunks.sort_by_key(|c| (c.seq, c.off));
        let mut live: HashMap<Vec<u8>, (u64, u64)> = HashMap::new();
        for c in chunks.iter() {
            let buf = read_vec(&file, c.off, c.end - c.off).map_err(io_err)?;
            salvage_chunk(&buf, c.off, h.salt, &mut live, &mut report);
            done += c.end - c.off;
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
    report.damage.truncate(MAX_DAMAGE);
    Ok(report)
}

/// Whether two paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// Reads every intact record of one chunk, skipping damaged bytes, into `live`
/// (key -> offset and length of its live record).
fn salvage_chunk(
    buf: &[u8],
    base: u64,
    salt: u64,
    live: &mut HashMap<Vec<u8>, (u64, u64)>,
    report: &mut SalvageReport,
) {
    let mut pos = CHUNK_HEADER_LEN as usize;
    let mut bad_since: Option<usize> = None;
    let close_bad = |since: Option<usize>, upto: usize, report: &mut SalvageReport| {
        if let Some(from) = since {
            report.damaged_regions += 1;
            report.skipped_bytes += (upto - from) as u64;
            report.damage.push(Damage {
                offset: base + from as u64,
                what: format!("{} unreadable bytes skipped", upto - from),
            });
        }
    };
    while pos < buf.len() {
        let first = buf[pos];
        if first != 0
            && let Ok(rec) = Record::decode(first, &buf[pos + 1..])
            && rec.verify(salt)
        {
            close_bad(bad_since.take(), pos, report);
            apply(live, &rec, (base + pos as u64, rec.len));
            pos += rec.len as usize;
            continue;
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
        close_bad(Some(from), last, report);
    }
}
