//! The space between a file's valid chunks: what `check` reports there and what `salvage`
//! reads there. A chunk whose header does not validate is hidden from the file's walk
//! (`recovery::walk_file`); its pages are found here, as *orphans*, by the chunk magic or by
//! an intact record where a chunk's first record goes, and a header damaged in one byte is
//! repaired. Anything else that is not zeros is a *stray* (damage only in a file closed
//! cleanly; see `check_gaps` in `check.rs` and docs/design.md §3.4).

use std::fs::File;
use std::io;

use crate::check::{read_full, read_vec};
use crate::format::{self, CHUNK_HEADER_LEN, ChunkHeader, PAGE, REC_SET, Record};
use crate::recovery::Found;

/// A chunk found where the walk found none: a page in the space between valid chunks that
/// starts with the chunk magic, or that holds an intact record (lengths and salted checksum)
/// where a chunk's first record goes, right after its header. Either means a chunk whose
/// header does not validate (a damaged header): free space holds no records (record chunks
/// are zeroed before they are freed) and no chunk magic outside a valid header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Orphan {
    /// The damaged header's place (a page boundary).
    pub(crate) off: u64,
    /// The end of its last page that is not all zeros (at most `limit`).
    pub(crate) end: u64,
    /// Where the chunk ends if its header was repaired, else where the next valid chunk or
    /// orphan starts or the scanned space ends: the chunk lies inside `off..limit`.
    pub(crate) limit: u64,
    /// Bytes in `off..end` that are not zeros.
    pub(crate) nonzero: u64,
    /// Whether the page starts with the chunk magic.
    pub(crate) magic: bool,
    /// The header and the position of its damaged byte, if one byte was damaged
    /// ([`repair_header`]).
    pub(crate) repaired: Option<(ChunkHeader, usize)>,
    /// The shard it belongs to, where known: the repaired header's, or that of the key of
    /// the record after the header.
    pub(crate) shard: Option<u32>,
}

/// Bytes that are not zeros outside every chunk and every orphan, in one stretch between
/// valid chunks: `off` is the first page holding some, `end` the end of the last.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stray {
    pub(crate) off: u64,
    pub(crate) end: u64,
    pub(crate) nonzero: u64,
}

/// What the space between valid chunks holds, in file order.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    pub(crate) orphans: Vec<Orphan>,
    pub(crate) strays: Vec<Stray>,
}

/// Reads every page of `start..end` that no chunk of `chunks` (a walk's, in file order)
/// covers, and sorts what is not zeros into orphans (chunks with a damaged header) and
/// strays (anything else).
pub(crate) fn scan_gaps(
    file: &File,
    salt: u64,
    shards: usize,
    chunks: &[Found],
    start: u64,
    end: u64,
) -> io::Result<Gaps> {
    let mut spans = Vec::new();
    let mut pos = start;
    for c in chunks {
        if pos < c.off {
            spans.push((pos, c.off));
        }
        pos = format::align_up(pos.max(c.end.max(c.off + PAGE)), PAGE);
    }
    if pos < end {
        spans.push((pos, end));
    }
    let mut gaps = Gaps::default();
    let mut block = vec![0u8; 16 * PAGE as usize];
    for (from, to) in spans {
        let mut orphan: Option<Orphan> = None;
        let mut stray: Option<Stray> = None;
        let mut at = from;
        while at < to {
            let n = read_full(file, &mut block[..(to - at).min(16 * PAGE) as usize], at)?;
            if n == 0 {
                break;
            }
            for (i, page) in block[..n].chunks(PAGE as usize).enumerate() {
                let p = at + (i as u64) * PAGE;
                let page_end = p + page.len() as u64;
                // A repaired header says where its chunk ends.
                if let Some(o) = orphan.take_if(|o| o.repaired.is_some() && p >= o.limit) {
                    gaps.orphans.push(o);
                }
                let nonzero = page.iter().filter(|&&b| b != 0).count() as u64;
                let magic = page.len() >= 4 && page[..4] == *b"SJCK";
                // Inside an orphan, a page whose record happens to start at byte 48 is not
                // another chunk; the magic always is.
                let first = if magic || orphan.is_none() {
                    first_record_at(file, salt, shards, p, page, to)?
                } else {
                    None
                };
                if magic || (orphan.is_none() && first.is_some()) {
                    if let Some(mut o) = orphan.take() {
                        o.limit = p;
                        gaps.orphans.push(o);
                    }
                    gaps.strays.extend(stray.take());
                    let repaired = repair_header(page, salt).filter(|(c, _)| {
                        (c.shard as usize) < shards && p.checked_add(c.len).is_some_and(|e| e <= to)
                    });
                    let limit = repaired.map_or(to, |(c, _)| p + c.len);
                    let shard = repaired.map(|(c, _)| c.shard).or(first.flatten());
                    let end = page_end;
                    orphan = Some(Orphan { off: p, end, limit, nonzero, magic, repaired, shard });
                } else if nonzero > 0 {
                    if let Some(o) = &mut orphan {
                        o.end = page_end;
                        o.nonzero += nonzero;
                    } else {
                        let s = stray.get_or_insert(Stray { off: p, end: p, nonzero: 0 });
                        s.end = page_end;
                        s.nonzero += nonzero;
                    }
                }
            }
            at += n as u64;
        }
        gaps.orphans.extend(orphan);
        gaps.strays.extend(stray);
    }
    gaps.strays.sort_unstable_by_key(|s| s.off);
    Ok(gaps)
}

/// A chunk header damaged in exactly one byte, repaired: the header and the byte's
/// position, if exactly one change of one byte of `page`'s first 48 makes them a valid
/// header (magic, salted checksum, sane fields). That is about 12,000 checksums of 48
/// bytes; a wrong repair needs one of the other changes to match by chance (about 3 in a
/// million), and a header damaged in more than one byte is left alone.
pub(crate) fn repair_header(page: &[u8], salt: u64) -> Option<(ChunkHeader, usize)> {
    let mut b: [u8; CHUNK_HEADER_LEN as usize] =
        page.get(..CHUNK_HEADER_LEN as usize)?.try_into().ok()?;
    let mut found = None;
    for i in 0..b.len() {
        let was = b[i];
        for v in (0..=u8::MAX).filter(|&v| v != was) {
            b[i] = v;
            if let Some(c) = ChunkHeader::decode(&b, salt) {
                if found.is_some() {
                    return None;
                }
                found = Some((c, i));
            }
        }
        b[i] = was;
    }
    found
}

/// Whether the page at `p` (`page`, its bytes) holds an intact record right after a chunk
/// header's place, ending before `limit`: `Some` with the key's shard (`None` for a clear). A record that runs past the page is read only when
/// the header's length field (bytes 16..24, read though the header failed) leaves room for
/// it, so stray bytes that decode as a long record cost no long read.
fn first_record_at(
    file: &File,
    salt: u64,
    shards: usize,
    p: u64,
    page: &[u8],
    limit: u64,
) -> io::Result<Option<Option<u32>>> {
    let at = CHUNK_HEADER_LEN as usize;
    let Some(&first) = page.get(at) else { return Ok(None) };
    let Ok(len) = format::claimed_len(first, &page[at + 1..]) else { return Ok(None) };
    let len = len as u64;
    if p + CHUNK_HEADER_LEN + len > limit {
        return Ok(None);
    }
    let rec = if at + len as usize <= page.len() {
        page[at..at + len as usize].to_vec()
    } else {
        let chunk_len = u64::from_le_bytes(page[16..24].try_into().expect("8 bytes"));
        let room = chunk_len.is_multiple_of(PAGE)
            && chunk_len >= CHUNK_HEADER_LEN + len
            && p.saturating_add(chunk_len) <= limit;
        if !room {
            return Ok(None);
        }
        read_vec(file, p + CHUNK_HEADER_LEN, len)?
    };
    let Some(rec) = Record::decode(first, &rec[1..]).ok().filter(|r| r.verify(salt)) else {
        return Ok(None);
    };
    let bits = shards.trailing_zeros();
    let hash = format::key_hash(rec.key, salt);
    Ok(Some((rec.kind == REC_SET).then(|| hash.checked_shr(64 - bits).unwrap_or(0) as u32)))
}
