//! Recovery after an unclean shutdown: rebuild every shard's index from its records.
//!
//! The records are the truth; the index and the directory are caches of them. After a crash
//! the index pages on disk may be any mix of old and new (the kernel writes dirty pages back
//! in any order), so recovery ignores them:
//!
//! 1. Walk the file from the first chunk to the end. A valid chunk header (magic, salted
//!    checksum, sane length) is taken and skipped over; anything else is skipped one page at a
//!    time (a chunk whose header never reached the disk, or space allocated but unused).
//! 2. Sort the record chunks by (shard, sequence number).
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
//! and is zero after the cut, so no stale record can follow a new one.

use crate::error::Result;
use crate::format::{CHUNK_HEADER_LEN, CHUNK_RECORDS, ChunkHeader, PAGE};
use crate::shard::{Ctx, Shard};
use crate::table;

/// A record chunk found by the walk.
pub(crate) struct Found {
    shard: u32,
    seq: u64,
    off: u64,
    end: u64,
}

/// Walks `data_start..file_len` and returns the record chunks, sorted for replay, and the end
/// of the last valid chunk of any kind. Space after that end holds no valid chunk header; the
/// caller cuts it off before writing, so stale bytes there can never be read as records.
pub(crate) fn walk(ctx: &Ctx, shards: usize, data_start: u64, file_len: u64) -> (Vec<Found>, u64) {
    let mut chunks = Vec::new();
    let mut last_end = data_start;
    let mut pos = data_start;
    while pos + CHUNK_HEADER_LEN <= file_len {
        // SAFETY: recovery runs while opening, before any other thread can see the database.
        let bytes = unsafe { ctx.region.bytes(pos, CHUNK_HEADER_LEN as usize) };
        match bytes.and_then(|b| ChunkHeader::decode(b, ctx.salt)) {
            Some(h) if (h.shard as usize) < shards => {
                let end = pos.saturating_add(h.len).min(file_len);
                if h.kind == CHUNK_RECORDS {
                    chunks.push(Found { shard: h.shard, seq: h.seq, off: pos, end });
                }
                last_end = end;
                pos = end.max(pos + PAGE);
            }
            _ => pos += PAGE,
        }
    }
    chunks.sort_by_key(|c| (c.shard, c.seq, c.off));
    (chunks, last_end)
}

/// Rebuilds the index of every shard from the chunks [`walk`] found. The caller has set
/// `ctx.file_end` past them, so new index tables go after the walked space.
pub(crate) fn replay(ctx: &Ctx, shards: &[Shard], chunks: &[Found]) -> Result<()> {
    let mut i = 0;
    while i < chunks.len() {
        let id = chunks[i].shard;
        let mut w = shards[id as usize].writer_unchecked(ctx);
        while i < chunks.len() && chunks[i].shard == id {
            let c = &chunks[i];
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
            i += 1;
        }
    }
    Ok(())
}

/// Whether `off..off+len` is a page-aligned range inside `data_start..data_end`.
pub(crate) fn chunk_in_range(off: u64, len: u64, data_start: u64, data_end: u64) -> bool {
    off.is_multiple_of(PAGE)
        && off >= data_start
        && off.checked_add(len).is_some_and(|e| e <= data_end)
}
