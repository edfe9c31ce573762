//! Recovery after an unclean shutdown: rebuild every shard's index from its records.
//!
//! The records are the truth; the index and the directory are caches of them. After a crash
//! the index pages on disk may be any mix of old and new (the kernel writes dirty pages back
//! in any order), so recovery ignores them:
//!
//! 1. Walk the file from the first chunk to the end. A valid chunk header (magic, salted
//!    checksum, sane length) is taken and skipped over; anything else is skipped one page at a
//!    time (a chunk whose header never reached the disk, or space allocated but unused).
//! 2. Drop the record chunks a committed `rebuild` voided (sequence number below the
//!    shard's largest `void_before`), then sort the rest by (shard, sequence number).
//! 3. Replay each shard's chunks in order. In a chunk, records are read until the first empty
//!    or invalid one (bad lengths, bad checksum): that is where the shard's writer was, or a
//!    record torn by the crash. Every record written before the last `sync` is intact, so it
//!    lies before that point.
//!
//! Time is linear in the file size (one sequential read), independent of what the crash hit.
//! Afterwards each shard starts a fresh chunk; the old ones are never appended to again, so
//! a torn tail can never be mistaken for data later. The file is cut right after the last
//! valid chunk (dropping the growth slack and any chunk whose header never reached the disk),
//! and new chunks are allocated from there: the space they reuse holds no valid chunk header
//! and is zero after the cut, so no stale record can follow a new one. Space between valid
//! chunks (voided chunks, gaps, old index chunks) is punched to zeros (so no stale record
//! can follow a new one there either) and handed to the shards for reuse.

use std::os::unix::fs::FileExt;

use crate::error::Result;
use crate::format::{self, CHUNK_HEADER_LEN, CHUNK_INDEX, CHUNK_RECORDS, ChunkHeader, PAGE};
use crate::shard::SMALL_RECORD_MAX;
use crate::shard::{Ctx, Shard};
use crate::table;

/// A chunk found by the walk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub(crate) kind: u8,
    pub(crate) shard: u32,
    pub(crate) seq: u64,
    pub(crate) off: u64,
    pub(crate) end: u64,
}

/// What the walk found: chunks in file order, free extents between them, per-shard
/// `void_before`, and the end of the last valid chunk.
pub(crate) struct Walk {
    pub(crate) chunks: Vec<Found>,
    pub(crate) gaps: Vec<(u64, u64)>,
    pub(crate) void_before: Vec<u64>,
    pub(crate) end: u64,
}

impl Walk {
    /// Whether a record chunk is live (not voided by a committed rebuild).
    pub(crate) fn live(&self, c: &Found) -> bool {
        c.kind == CHUNK_RECORDS && c.seq >= self.void_before[c.shard as usize]
    }
}

/// Walks `data_start..file_len` by chunk headers (read with `pread`, so the walk adds
/// nothing to the process's resident memory). Space after `end` holds no valid chunk
/// header; the caller cuts it off before writing, so stale bytes there can never be read as
/// records. (The memory engine's map is anonymous memory, not its file: it is walked only
/// at open, when both are empty.)
pub(crate) fn walk(ctx: &Ctx, shards: usize, data_start: u64, file_len: u64) -> Walk {
    walk_file(ctx.region.file(), ctx.salt, shards, data_start, file_len)
}

/// [`walk`] over a file that is not mapped (`check.rs` reads files this way too).
pub(crate) fn walk_file(
    file: &std::fs::File,
    salt: u64,
    shards: usize,
    data_start: u64,
    file_len: u64,
) -> Walk {
    let mut w = Walk {
        chunks: Vec::new(),
        gaps: Vec::new(),
        void_before: vec![0; shards],
        end: data_start,
    };
    let mut pos = data_start;
    let mut gap_start = None;
    let mut buf = [0u8; CHUNK_HEADER_LEN as usize];
    while pos + CHUNK_HEADER_LEN <= file_len {
        let read = file.read_at(&mut buf, pos).ok();
        match read.filter(|&n| n == buf.len()).and_then(|_| ChunkHeader::decode(&buf, salt)) {
            Some(h) if (h.shard as usize) < shards => {
                if let Some(g) = gap_start.take() {
                    w.gaps.push((g, pos - g));
                }
                let end = pos.saturating_add(h.len).min(file_len);
                if h.kind == CHUNK_RECORDS {
                    let v = &mut w.void_before[h.shard as usize];
                    *v = (*v).max(h.void_before);
                }
                w.chunks.push(Found { kind: h.kind, shard: h.shard, seq: h.seq, off: pos, end });
                w.end = end;
                pos = end.max(pos + PAGE);
            }
            _ => {
                gap_start.get_or_insert(pos);
                pos += PAGE;
            }
        }
    }
    if let Some(g) = gap_start
        && g < w.end
    {
        w.gaps.push((g, w.end - g));
    }
    w
}

/// Rebuilds the index of every shard from the live record chunks, visiting each shard's
/// chunks by sequence number. The caller has set `ctx.file_end` past them, so new index
/// tables go after the walked space.
///
/// `progress(done, total)`: bytes of those chunks replayed so far, reported each time another
/// thousandth is done, and at the end.
pub(crate) fn replay(
    ctx: &Ctx,
    shards: &[Shard],
    w: &Walk,
    progress: &dyn Fn(u64, u64),
) -> Result<()> {
    let mut chunks: Vec<&Found> = w.chunks.iter().filter(|c| w.live(c)).collect();
    chunks.sort_by_key(|c| (c.shard, c.seq, c.off));
    let total: u64 = chunks.iter().map(|c| c.end - c.off).sum();
    let (mut done, mut reported) = (0u64, 0u64);
    progress(0, total);
    let mut i = 0;
    while i < chunks.len() {
        let id = chunks[i].shard;
        let mut w = shards[id as usize].writer_unchecked(ctx);
        while i < chunks.len() && chunks[i].shard == id {
            let c = chunks[i];
            w.saw_chunk(c.seq);
            let mut at = c.off + CHUNK_HEADER_LEN;
            while at < c.end {
                let Ok(rec) = table::record_at(&ctx.region, at) else { break };
                if at + rec.len > c.end || !rec.verify(ctx.salt) {
                    break;
                }
                w.replay(at, &rec)?;
                at += rec.len;
            }
            clear_torn_write(ctx, at, c.end);
            done += c.end - c.off;
            let step = done * 1000 / total.max(1);
            if step != reported && done < total {
                reported = step;
                progress(done, total);
            }
            i += 1;
        }
    }
    progress(total, total);
    Ok(())
}

/// Zeroes the rest of a chunk after its last intact record at `at` if what is there is one
/// record cut short by the crash: a record whose writer was killed before it was whole, or
/// a recycled chunk's first record (see `ShardWriter::reuse_recycled`), followed by nothing
/// but zeros up to the chunk's end `end`. Recovery never reads past `at` anyway (the shard
/// starts a new chunk), and the chunk then reads as records followed by zeros, which is
/// what `check` expects of a file closed cleanly: left as it was, the torn record was
/// reported as damage by every `check` after the next clean close. Anything else after `at`
/// (intact records past a damaged one, or pages of other data, which a crash of the machine
/// can leave) is kept for `check` to report and `salvage` to read.
fn clear_torn_write(ctx: &Ctx, at: u64, end: u64) {
    let region = &ctx.region;
    if at >= end {
        return;
    }
    // SAFETY: recovery runs before any other thread can reach the map, and nothing refers
    // to these bytes (the same holds for the write below).
    let Some(tail) = (unsafe { region.bytes(at, (end - at) as usize) }) else { return };
    if let Some(reach) = torn_write_len(tail) {
        // SAFETY: as above.
        let _ = unsafe { region.zero(at, reach as u64) };
    }
}

/// If `tail` (the rest of a chunk from the first record that does not read intact) is one
/// record cut short by a crash followed by nothing but zeros, the bytes that record could
/// have reached; else `None`. Recovery clears those bytes ([`clear_torn_write`]); `check`
/// counts such a chunk as torn and anything else there as damage.
pub(crate) fn torn_write_len(tail: &[u8]) -> Option<usize> {
    let (&first, rest) = tail.split_first()?;
    if first == 0 {
        return None;
    }
    // Where the torn record could reach: its whole length if its head can be read and it
    // fits in the chunk, else the most that one copy writes at once (a small record, head
    // and all; a larger record writes its head first).
    let whole = format::claimed_len(first, rest).ok().filter(|&n| n <= tail.len());
    let reach = whole.unwrap_or(SMALL_RECORD_MAX as usize).min(tail.len());
    tail[reach..].iter().all(|&b| b == 0).then_some(reach)
}

/// Whether a chunk is an index chunk.
pub(crate) fn is_index(c: &Found) -> bool {
    c.kind == CHUNK_INDEX
}

/// Whether `off..off+len` is a page-aligned range inside `data_start..data_end`.
pub(crate) fn chunk_in_range(off: u64, len: u64, data_start: u64, data_end: u64) -> bool {
    off.is_multiple_of(PAGE)
        && off >= data_start
        && off.checked_add(len).is_some_and(|e| e <= data_end)
}
