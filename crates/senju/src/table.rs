//! One shard's index table: `n` slots of 8 bytes inside an index chunk (`n` fills the chunk's
//! pages; any count, not only powers of two), open addressing with linear probing,
//! tombstones for removed entries (so no entry ever moves while readers probe).
//!
//! A slot holds the record's offset and the low 21 bits of the key's hash (the tag, see
//! [`format::slot_encode`]). The home position of a key is `tag * n >> 21` while
//! `n <= 2^21`, so a table grows without reading a single record; larger tables use 32 hash
//! bits and re-hash keys when they grow. A probe reads a record only when the tag matches.
//!
//! Slots are only read and written as atomics. A writer (holding the shard lock) publishes a
//! record by a `Release` store of its slot after writing the record; a reader's `Acquire` load
//! of the slot pairs with it, so the reader sees the whole record.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Result, StorageError};
use crate::format::{
    self, CHUNK_HEADER_LEN, KIND_MASK, MAX_RECORD_HEAD, PAGE, REC_SET, Record, RecordError,
    SLOT_HASH_BITS, TOMBSTONE,
};
use crate::region::Region;

/// A table's location: the index chunk's offset and length in pages, packed in one word
/// (`offset / PAGE << 24 | pages`). `0` means "no table".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableRef {
    pub(crate) chunk: u64,
    pub(crate) len: u64,
}

impl TableRef {
    pub(crate) fn pack(self) -> u64 {
        debug_assert!(self.chunk.is_multiple_of(PAGE) && self.chunk != 0);
        debug_assert!(self.len / PAGE < 1 << 24);
        (self.chunk / PAGE) << 24 | (self.len / PAGE)
    }

    pub(crate) fn unpack(word: u64) -> Option<TableRef> {
        (word != 0)
            .then_some(TableRef { chunk: (word >> 24) * PAGE, len: (word & 0xff_ffff) * PAGE })
    }

    pub(crate) fn slots(self) -> u64 {
        format::index_slots(self.len)
    }

    /// The slot array, or a `Corrupted` error if it is not inside the map.
    pub(crate) fn view(self, region: &Region) -> Result<&[AtomicU64]> {
        region.atomic_u64s(self.chunk + CHUNK_HEADER_LEN, self.slots()).ok_or(
            StorageError::Corrupted { offset: self.chunk, what: "index table outside the file" },
        )
    }
}

/// The home slot of a key with hash `hash` in a table of `n` slots.
#[inline]
pub(crate) fn home(hash: u64, n: usize) -> usize {
    if n <= 1 << SLOT_HASH_BITS {
        ((tag(hash) * n as u64) >> SLOT_HASH_BITS) as usize
    } else {
        (((hash & 0xffff_ffff) * n as u64) >> 32) as usize
    }
}

/// Starts loading the home slot of `hash` in table `t` into the cache (a hint; no effect on
/// memory, and no bounds check needed: a prefetch never faults).
#[inline]
pub(crate) fn prefetch(region: &Region, t: TableRef, hash: u64) {
    let pos = home(hash, t.slots() as usize) as u64;
    region.prefetch(t.chunk + CHUNK_HEADER_LEN + pos * 8);
}

/// How many slots from the home slot on [`prefetch_record`] looks at for the key's tag.
const PREFETCH_PROBE: u64 = 4;

/// Where [`prefetch_slot`] asked for the home slot of a key: what [`prefetch_record`] needs
/// to look at it again without recomputing it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Asked {
    /// The byte offset of the home slot.
    slot: u64,
    /// The byte offset just past the table's last slot.
    end: u64,
}

/// [`prefetch`], returning where the slot is.
#[inline]
pub(crate) fn prefetch_slot(region: &Region, t: TableRef, hash: u64) -> Asked {
    let (first, n) = (t.chunk + CHUNK_HEADER_LEN, t.slots());
    let slot = first + home(hash, n as usize) as u64 * 8;
    region.prefetch(slot);
    Asked { slot, end: first + n * 8 }
}

/// Starts loading the record of the entry for `hash` whose home slot [`prefetch_slot`]
/// asked for (the table must still be the one it was asked in, and the caller pinned, so
/// that the table's space is not reused meanwhile): the first of the slots from the home
/// slot on (at most [`PREFETCH_PROBE`], up to an empty one) whose tag is the hash's names
/// it. The second stage of a batch's prefetch, run some keys after the first, when the slot
/// is usually in the cache. A hint: the slot may change meanwhile or belong to another key
/// with the same tag, which costs only a wasted load; the record is read and checked later
/// by [`find`] as for any get. Returns whether a slot with the tag was found.
#[inline]
pub(crate) fn prefetch_record(region: &Region, at: Asked, hash: u64) -> bool {
    let count = (at.end.saturating_sub(at.slot) / 8).min(PREFETCH_PROBE);
    let Some(slots) = region.atomic_u64s(at.slot, count) else { return false };
    let want = tag(hash);
    for slot in slots {
        // Relaxed: nothing is read through this load; the record is only prefetched.
        let s = slot.load(Ordering::Relaxed);
        if s == 0 {
            return false;
        }
        if s != TOMBSTONE && format::slot_hash_bits(s) == want {
            region.prefetch(format::slot_offset(s));
            return true;
        }
    }
    false
}

/// Reads the record at `off`: bounds-checked, lengths checked, checksum not yet verified.
pub(crate) fn record_at(region: &Region, off: u64) -> Result<Record<'_>> {
    let bad = |what| StorageError::Corrupted { offset: off, what };
    // Acquire: pairs with the Release store of a slot naming this record (the slot load
    // already made the record visible; this only keeps the kill bit's load atomic).
    let first = region.atomic_u8(off).ok_or(bad("record offset"))?.load(Ordering::Acquire);
    // Most small records have a two-byte head: one more byte decides, and the general
    // decoding below is skipped (a get runs about 35 instructions fewer).
    if first & KIND_MASK == REC_SET {
        // SAFETY: `off` comes from a published slot (or a replay scan at open, before any
        // other thread exists); the bytes after a published record's first byte are never
        // written again until an epoch grace period has passed after it stopped being
        // reachable. A SET record is at least 6 bytes long, so its second byte is its own.
        let second = unsafe { region.bytes(off + 1, 1) }.map(|b| b[0]);
        if let Some((klen, vlen)) = second.and_then(|second| format::short_head(first, second)) {
            // SAFETY: as above.
            let bytes = unsafe { region.bytes(off + 1, 1 + klen + vlen + 4) }
                .ok_or(bad("record length"))?;
            return Record::with_head(first, bytes, REC_SET, klen, vlen, 1)
                .map_err(|_| bad("malformed record"));
        }
    }
    // SAFETY: as above.
    let head =
        unsafe { region.bytes_upto(off + 1, MAX_RECORD_HEAD) }.ok_or(bad("record offset"))?;
    let (kind, klen, vlen, hlen) = format::decode_head(first, head).map_err(|e| match e {
        RecordError::End => bad("index points at empty space"),
        RecordError::Malformed => bad("malformed record header"),
    })?;
    // SAFETY: as above.
    let bytes =
        unsafe { region.bytes(off + 1, hlen + klen + vlen + 4) }.ok_or(bad("record length"))?;
    Record::with_head(first, bytes, kind, klen, vlen, hlen).map_err(|_| bad("malformed record"))
}

/// What a writer's probe found.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Probe {
    /// The key is at slot `pos`, in the record at `off`, which takes `len` bytes.
    Found { pos: usize, off: u64, len: u64 },
    /// The key is absent; it would go in slot `pos` (`tomb`: reusing a tombstone).
    Vacant { pos: usize, tomb: bool },
}

#[inline]
fn tag(hash: u64) -> u64 {
    hash & ((1 << SLOT_HASH_BITS) - 1)
}

/// Probes `slots` for `key` (hash `hash`); the matching, checksum-verified record.
///
/// Safe to run concurrently with a writer of the same table: it reads only atomics and
/// published records. The caller re-checks that the table was not replaced meanwhile.
#[inline]
pub(crate) fn find<'r>(
    region: &'r Region,
    slots: &[AtomicU64],
    hash: u64,
    key: &[u8],
    salt: u64,
) -> Result<Option<Record<'r>>> {
    let n = slots.len();
    let mut pos = home(hash, n);
    for _ in 0..n {
        // Acquire pairs with the writer's Release store of the slot: the record it names is
        // fully written.
        let s = slots[pos].load(Ordering::Acquire);
        if s == 0 {
            return Ok(None);
        }
        if s != TOMBSTONE && format::slot_hash_bits(s) == tag(hash) {
            let off = format::slot_offset(s);
            let rec = record_at(region, off)?;
            if rec.key == key {
                if rec.kind != REC_SET || !rec.verify(salt) {
                    return Err(StorageError::Corrupted {
                        offset: off,
                        what: "record checksum mismatch",
                    });
                }
                return Ok(Some(rec));
            }
        }
        pos += 1;
        if pos == n {
            pos = 0;
        }
    }
    Ok(None)
}

/// Probes for `key` on behalf of the shard's writer (who holds the shard lock).
///
/// The loop is the write path's hottest (an insert looks at about 7 slots on average), so
/// each slot costs one load and two tests: empty or tombstone (`s <= 1`), then the tag.
pub(crate) fn probe(region: &Region, slots: &[AtomicU64], hash: u64, key: &[u8]) -> Result<Probe> {
    let n = slots.len();
    let start = home(hash, n).min(n);
    let mut first_tomb = None;
    // From the home slot to the end, then from the start to the home slot.
    for (base, part) in [(start, &slots[start..]), (0, &slots[..start])] {
        if let Some(found) = scan(region, part, base, tag(hash), key, &mut first_tomb) {
            return found;
        }
    }
    match first_tomb {
        Some(t) => Ok(Probe::Vacant { pos: t, tomb: true }),
        None => Err(StorageError::Corrupted { offset: 0, what: "index table has no free slot" }),
    }
}

/// `probe`'s loop over `part` (slots `base..` of the table): the outcome, or `None` if the
/// probe goes on past its end. Records the first tombstone in `first_tomb`.
#[inline(always)]
fn scan(
    region: &Region,
    part: &[AtomicU64],
    base: usize,
    want: u64,
    key: &[u8],
    first_tomb: &mut Option<usize>,
) -> Option<Result<Probe>> {
    for (i, slot) in part.iter().enumerate() {
        // Relaxed: only the lock holder writes slots, and it is us.
        let s = slot.load(Ordering::Relaxed);
        // One test for the two rare values (empty: `0`, tombstone: `1`), then the tag.
        if s <= TOMBSTONE {
            let pos = base + i;
            if s == 0 {
                return Some(Ok(match *first_tomb {
                    Some(t) => Probe::Vacant { pos: t, tomb: true },
                    None => Probe::Vacant { pos, tomb: false },
                }));
            }
            first_tomb.get_or_insert(pos);
        } else if format::slot_hash_bits(s) == want {
            let off = format::slot_offset(s);
            match record_at(region, off) {
                Ok(r) if r.key == key => {
                    return Some(Ok(Probe::Found { pos: base + i, off, len: r.len }));
                }
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
    None
}

/// Copies every live entry of `from` into the empty table `to` (which no reader sees yet).
/// Entries keep their slot value; positions come from the 21 stored hash bits, or from
/// re-hashing the key when `to` is larger than `2^21` slots.
pub(crate) fn rehash(
    region: &Region,
    from: &[AtomicU64],
    to: &[AtomicU64],
    salt: u64,
) -> Result<()> {
    for slot in from {
        let s = slot.load(Ordering::Relaxed);
        if s == 0 || s == TOMBSTONE {
            continue;
        }
        let hash = if to.len() <= 1 << SLOT_HASH_BITS {
            format::slot_hash_bits(s)
        } else {
            format::key_hash(record_at(region, format::slot_offset(s))?.key, salt)
        };
        insert_slot(to, hash, s)?;
    }
    Ok(())
}

/// Stores slot value `s` (key hash `hash`) in the first empty slot from its home in `to`,
/// a table no reader sees yet.
pub(crate) fn insert_slot(to: &[AtomicU64], hash: u64, s: u64) -> Result<()> {
    {
        let n = to.len();
        let mut pos = home(hash, n);
        let mut probes = 0;
        while to[pos].load(Ordering::Relaxed) != 0 {
            pos += 1;
            if pos == n {
                pos = 0;
            }
            probes += 1;
            if probes == to.len() {
                // Only possible if the old table held more entries than its shard's count
                // says, i.e. the file is damaged.
                return Err(StorageError::Corrupted {
                    offset: 0,
                    what: "index holds too many entries",
                });
            }
        }
        // Relaxed: the table is published later with a Release store of its TableRef.
        to[pos].store(s, Ordering::Relaxed);
    }
    Ok(())
}
