//! The on-disk format, byte by byte (drawn in `docs/design.md`, section 3): the file header,
//! the shard directory, chunk headers, index slots and records.
//!
//! Everything is little-endian. This module only encodes and decodes byte slices; it never
//! touches the map, so every function here is safe and total: a malformed input gives `None`.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The file starts with these 8 bytes.
pub(crate) const MAGIC: [u8; 8] = *b"SENJUDB\n";
/// The format version this build writes and reads.
pub(crate) const VERSION: u32 = 2;
/// Every chunk starts at a multiple of this, and has a length that is a multiple of it.
pub(crate) const PAGE: u64 = 4096;
/// Bytes of the file header that are meaningful (the rest of the first page is zero).
pub(crate) const HEADER_LEN: usize = 64;
/// Bytes of one shard's directory entry.
pub(crate) const DIR_ENTRY_LEN: usize = 128;
/// Bytes of a chunk header.
pub(crate) const CHUNK_HEADER_LEN: u64 = 48;

/// The longest key accepted, in bytes (1 MiB).
pub const MAX_KEY_LEN: usize = 1 << 20;
/// The longest value accepted, in bytes (1 GiB).
pub const MAX_VALUE_LEN: usize = 1 << 30;

/// Header flag: the file was closed cleanly, so the directory and the index are valid.
pub(crate) const FLAG_CLEAN: u32 = 1;

/// Chunk kind: records, appended in order.
pub(crate) const CHUNK_RECORDS: u8 = 1;
/// Chunk kind: one shard's index table.
pub(crate) const CHUNK_INDEX: u8 = 2;
const CHUNK_MAGIC: [u8; 4] = *b"SJCK";

/// Rounds `n` up to a multiple of `to` (a power of two).
pub(crate) const fn align_up(n: u64, to: u64) -> u64 {
    (n + to - 1) & !(to - 1)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Copies `src` (at most 64 bytes) to the start of `dst` with two overlapping fixed-size
/// copies instead of a call to `memcpy`: records of small keys and values are copied two or
/// three times per write, and for them the call costs more than the copy.
#[inline(always)]
pub(crate) fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    debug_assert!(n <= 64 && n <= dst.len());
    macro_rules! two {
        ($w:literal) => {{
            let a: [u8; $w] = src[..$w].try_into().expect("n >= w");
            let b: [u8; $w] = src[n - $w..].try_into().expect("n >= w");
            dst[..$w].copy_from_slice(&a);
            dst[n - $w..n].copy_from_slice(&b);
        }};
    }
    match n {
        32..=64 => two!(32),
        16..=31 => two!(16),
        8..=15 => two!(8),
        4..=7 => two!(4),
        _ => dst[..n].copy_from_slice(src),
    }
}

/// Inputs at least this long are hashed with AVX2 where the CPU has it (see [`xxh3_64`]).
const LONG_INPUT: usize = 1024;

/// XXH3-64 of `bytes` with `seed`, for checksums. `xxhash-rust` picks its SIMD code when it
/// is compiled (SSE2 for a portable x86-64 build); the `xxh3` crate picks AVX2 when it runs,
/// which hashes a 64 KiB value twice as fast here (30 -> 59 GB/s from cache), and is used
/// for long inputs on CPUs that have it. Both compute the same function (`hash_is_xxh3` checks the
/// result against XXH3's reference values, `long_inputs_hash_alike` the two crates against
/// each other); short inputs stay with `xxhash-rust`, whose short paths are inlined.
#[inline(always)]
fn xxh3_64(bytes: &[u8], seed: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= LONG_INPUT {
        return xxh3_64_long(bytes, seed);
    }
    xxh3_64_with_seed(bytes, seed)
}

/// [`xxh3_64`] of a long input, out of line so that the short path inlines as it did.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn xxh3_64_long(bytes: &[u8], seed: u64) -> u64 {
    if std::arch::is_x86_feature_detected!("avx2") {
        xxh3::hash64_with_seed(bytes, seed)
    } else {
        xxh3_64_with_seed(bytes, seed)
    }
}

/// The low 32 bits of XXH3-64 with `seed`: the checksum of headers and records.
pub(crate) fn checksum(bytes: &[u8], seed: u64) -> u32 {
    xxh3_64(bytes, seed) as u32
}

/// The 64-bit hash of a key; the file's salt is the seed, so colliding keys cannot be chosen
/// in advance.
#[inline]
pub(crate) fn key_hash(key: &[u8], salt: u64) -> u64 {
    // Keys are short as a rule: no length test on this path.
    xxh3_64_with_seed(key, salt)
}

/// The file header (offset 0, [`HEADER_LEN`] bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) version: u32,
    pub(crate) flags: u32,
    pub(crate) shard_bits: u32,
    pub(crate) pid: u32,
    pub(crate) data_start: u64,
    pub(crate) data_end: u64,
    pub(crate) salt: u64,
    pub(crate) generation: u64,
}

/// Why a header did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderError {
    Magic,
    Version(u32),
    Checksum,
    Fields,
}

impl Header {
    /// The largest shard count a file may declare (2^16).
    pub(crate) const MAX_SHARD_BITS: u32 = 16;

    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..20].copy_from_slice(&self.shard_bits.to_le_bytes());
        b[20..24].copy_from_slice(&self.pid.to_le_bytes());
        b[24..32].copy_from_slice(&self.data_start.to_le_bytes());
        b[32..40].copy_from_slice(&self.data_end.to_le_bytes());
        b[40..48].copy_from_slice(&self.salt.to_le_bytes());
        b[48..56].copy_from_slice(&self.generation.to_le_bytes());
        let sum = checksum(&b[..60], 0);
        b[60..64].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes and checks a header; `b` must hold at least [`HEADER_LEN`] bytes.
    pub(crate) fn decode(b: &[u8]) -> Result<Header, HeaderError> {
        let h = Self::decode_unchecked(b)?;
        if checksum(&b[..60], 0) != u32_at(b, 60) {
            return Err(HeaderError::Checksum);
        }
        if h.shard_bits > Self::MAX_SHARD_BITS || h.data_start != data_start(h.shard_bits) {
            return Err(HeaderError::Fields);
        }
        Ok(h)
    }

    /// Decodes a header checking only the magic and the version, not the checksum or the
    /// fields: salvaging a file whose header is damaged still needs its salt.
    pub(crate) fn decode_unchecked(b: &[u8]) -> Result<Header, HeaderError> {
        if b.len() < HEADER_LEN || b[0..8] != MAGIC {
            return Err(HeaderError::Magic);
        }
        let version = u32_at(b, 8);
        if version != VERSION {
            return Err(HeaderError::Version(version));
        }
        Ok(Header {
            version,
            flags: u32_at(b, 12),
            shard_bits: u32_at(b, 16),
            pid: u32_at(b, 20),
            data_start: u64_at(b, 24),
            data_end: u64_at(b, 32),
            salt: u64_at(b, 40),
            generation: u64_at(b, 48),
        })
    }
}

/// Where the first chunk starts for a file with `2^shard_bits` shards: after the header page
/// and the directory.
pub(crate) fn data_start(shard_bits: u32) -> u64 {
    PAGE + align_up((DIR_ENTRY_LEN as u64) << shard_bits, PAGE)
}

/// One shard's entry in the directory (at `PAGE + shard * 64`), valid when the header says
/// the file was closed cleanly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DirEntry {
    /// Offset of the shard's index chunk (0: none yet).
    pub(crate) table: u64,
    /// Live records.
    pub(crate) count: u64,
    /// Tombstone slots in the index table.
    pub(crate) tombs: u64,
    /// Offset of the shard's current record chunk (0: none).
    pub(crate) chunk: u64,
    /// Absolute offset where the next record of the current chunk goes.
    pub(crate) cursor: u64,
    /// Sequence number the shard's next chunk gets.
    pub(crate) next_seq: u64,
    /// Bytes of records that are no longer live (overwritten, removed, cleared).
    pub(crate) dead_bytes: u64,
    /// Bytes of live records.
    pub(crate) live_bytes: u64,
}

impl DirEntry {
    pub(crate) fn encode(&self) -> [u8; DIR_ENTRY_LEN] {
        let mut b = [0u8; DIR_ENTRY_LEN];
        let fields = [
            self.table,
            self.count,
            self.tombs,
            self.chunk,
            self.cursor,
            self.next_seq,
            self.dead_bytes,
            self.live_bytes,
        ];
        for (i, f) in fields.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        let sum = checksum(&b[..124], 0);
        b[124..128].copy_from_slice(&sum.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<DirEntry> {
        if b.len() < DIR_ENTRY_LEN || checksum(&b[..124], 0) != u32_at(b, 124) {
            return None;
        }
        Some(DirEntry {
            table: u64_at(b, 0),
            count: u64_at(b, 8),
            tombs: u64_at(b, 16),
            chunk: u64_at(b, 24),
            cursor: u64_at(b, 32),
            next_seq: u64_at(b, 40),
            dead_bytes: u64_at(b, 48),
            live_bytes: u64_at(b, 56),
        })
    }
}

/// The 48-byte header at the start of every chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub(crate) kind: u8,
    pub(crate) shard: u32,
    /// Bytes, header included; a multiple of [`PAGE`].
    pub(crate) len: u64,
    /// The shard's chunk sequence number: replay visits a shard's record chunks in this order.
    pub(crate) seq: u64,
    /// Record chunks: once a rebuild has committed, the shard's chunks with a lower sequence
    /// number are void (their live records were copied from them); 0 otherwise.
    pub(crate) void_before: u64,
}

impl ChunkHeader {
    fn sum(b: &[u8; CHUNK_HEADER_LEN as usize], salt: u64) -> u32 {
        let mut copy = *b;
        copy[12..16].fill(0);
        checksum(&copy, salt)
    }

    pub(crate) fn encode(&self, salt: u64) -> [u8; CHUNK_HEADER_LEN as usize] {
        let mut b = [0u8; CHUNK_HEADER_LEN as usize];
        b[0..4].copy_from_slice(&CHUNK_MAGIC);
        b[4] = self.kind;
        b[8..12].copy_from_slice(&self.shard.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.void_before.to_le_bytes());
        let sum = Self::sum(&b, salt);
        b[12..16].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes a chunk header; `None` unless the magic, the salted checksum and the length
    /// are right.
    pub(crate) fn decode(b: &[u8], salt: u64) -> Option<ChunkHeader> {
        let b: &[u8; CHUNK_HEADER_LEN as usize] =
            b.get(..CHUNK_HEADER_LEN as usize)?.try_into().ok()?;
        if b[0..4] != CHUNK_MAGIC || Self::sum(b, salt) != u32_at(b, 12) {
            return None;
        }
        let h = ChunkHeader {
            kind: b[4],
            shard: u32_at(b, 8),
            len: u64_at(b, 16),
            seq: u64_at(b, 24),
            void_before: u64_at(b, 32),
        };
        let sane_kind = matches!(h.kind, CHUNK_RECORDS | CHUNK_INDEX);
        let sane_len = h.len >= PAGE && h.len.is_multiple_of(PAGE) && h.len < MAX_FILE_LEN;
        (sane_kind && sane_len && b[5..8] == [0; 3] && b[40..48] == [0; 8]).then_some(h)
    }
}

/// Index slots in an index chunk of `len` bytes.
pub(crate) fn index_slots(len: u64) -> u64 {
    (len - CHUNK_HEADER_LEN) / 8
}

/// Bytes of the smallest index chunk holding at least `slots` slots.
pub(crate) fn index_chunk_len(slots: u64) -> u64 {
    align_up(CHUNK_HEADER_LEN + slots * 8, PAGE)
}

/// Record kind: the key now has this value.
pub(crate) const REC_SET: u8 = 1;
/// Record kind: the shard was cleared (no key, no value).
pub(crate) const REC_CLEAR: u8 = 2;
/// Bit 2 of a SET record's first byte: the key was removed. Set in place, by one atomic
/// byte store, on the key's newest record; replay then reads the record as a removal. The
/// checksum does not cover this bit.
pub(crate) const KILLED: u8 = 4;
pub(crate) const KIND_MASK: u8 = 3;
/// Key lengths below this fit in the first byte's top 5 bits; this value says a LEB128 key
/// length follows.
const SHORT_KEY: usize = 31;

/// Writes `n` as LEB128 into `out`, returning the bytes used.
fn put_varint(out: &mut [u8], mut n: u64) -> usize {
    let mut i = 0;
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out[i] = byte;
            return i + 1;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
}

/// Reads a LEB128 value of at most `max_bytes` bytes.
fn get_varint(b: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut n = 0u64;
    for i in 0..max_bytes {
        let byte = *b.get(i)?;
        n |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            // Reject overlong encodings so each record has one spelling.
            return (i == 0 || byte != 0).then_some((n, i + 1));
        }
    }
    None
}

/// Longest record head: first byte, 3-byte key length, 5-byte value length.
pub(crate) const MAX_RECORD_HEAD: usize = 9;

/// The encoded head of a record (first byte and lengths); the key, the value and the 4-byte
/// checksum follow it.
pub(crate) struct RecordHead {
    pub(crate) bytes: [u8; MAX_RECORD_HEAD],
    pub(crate) len: usize,
}

impl RecordHead {
    #[inline]
    pub(crate) fn new(kind: u8, key_len: usize, value_len: usize) -> RecordHead {
        let mut bytes = [0u8; MAX_RECORD_HEAD];
        let mut len = 1;
        if kind == REC_SET {
            if key_len < SHORT_KEY {
                bytes[0] = kind | (key_len as u8) << 3;
            } else {
                bytes[0] = kind | (SHORT_KEY as u8) << 3;
                len += put_varint(&mut bytes[len..], key_len as u64);
            }
            len += put_varint(&mut bytes[len..], value_len as u64);
        } else {
            bytes[0] = kind;
        }
        RecordHead { bytes, len }
    }

    /// Bytes the whole record takes in the file.
    pub(crate) fn record_len(&self, key_len: usize, value_len: usize) -> u64 {
        (self.len + key_len + value_len + 4) as u64
    }
}

/// The checksum of a record: over everything after the first byte up to the checksum,
/// seeded with the salt and the first byte without [`KILLED`].
pub(crate) fn record_sum(first: u8, rest: &[u8], salt: u64) -> u32 {
    checksum(rest, salt ^ u64::from(first & !KILLED))
}

/// A record decoded from its first byte and the bytes after it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record<'a> {
    /// The first byte: kind, [`KILLED`], short key length.
    pub(crate) first: u8,
    pub(crate) kind: u8,
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
    /// The bytes the checksum covers (after the first byte, up to the checksum).
    covered: &'a [u8],
    stored_sum: u32,
    /// Bytes the record takes.
    pub(crate) len: u64,
}

/// Why a record did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordError {
    /// A zero first byte: no record was ever written here.
    End,
    /// The head is malformed or the record runs past the bytes available.
    Malformed,
}

/// Decodes the lengths of a record with first byte `first` and `rest` after it (at least
/// the head), returning (kind, key length, value length, head bytes after the first).
#[inline]
pub(crate) fn decode_head(
    first: u8,
    rest: &[u8],
) -> Result<(u8, usize, usize, usize), RecordError> {
    let kind = first & KIND_MASK;
    let mut at = 0;
    let (mut klen, mut vlen) = (0, 0);
    match kind {
        0 if first == 0 => return Err(RecordError::End),
        REC_SET => {
            klen = usize::from(first >> 3);
            if klen == SHORT_KEY {
                let (k, n) = get_varint(rest, 3).ok_or(RecordError::Malformed)?;
                if (k as usize) < SHORT_KEY {
                    return Err(RecordError::Malformed);
                }
                at += n;
                klen = k as usize;
            }
            let (v, n) = get_varint(&rest[at..], 5).ok_or(RecordError::Malformed)?;
            at += n;
            vlen = v as usize;
        }
        REC_CLEAR if first == REC_CLEAR => {}
        _ => return Err(RecordError::Malformed),
    }
    if klen > MAX_KEY_LEN || vlen > MAX_VALUE_LEN {
        return Err(RecordError::Malformed);
    }
    Ok((kind, klen, vlen, at))
}

/// The whole length (head, key, value and checksum) that a record with first byte `first`
/// and `rest` after it claims, from its head alone: what a reader of damaged or torn bytes
/// weighs before reading, or checksumming, that far.
pub(crate) fn claimed_len(first: u8, rest: &[u8]) -> Result<usize, RecordError> {
    decode_head(first, rest).map(|(_, klen, vlen, head)| 1 + head + klen + vlen + 4)
}

/// The key and value lengths of a record whose head is two bytes, from those two bytes: a SET
/// record of a key shorter than 31 bytes and a value shorter than 128, the shape of most small
/// records. `None` for any other head, which [`decode_head`] reads; for a two-byte head both
/// give the same lengths (`short_head_agrees_with_decode_head` checks every pair of bytes).
#[inline(always)]
pub(crate) fn short_head(first: u8, second: u8) -> Option<(usize, usize)> {
    let klen = usize::from(first >> 3);
    (first & KIND_MASK == REC_SET && klen < SHORT_KEY && second < 0x80)
        .then_some((klen, usize::from(second)))
}

impl<'a> Record<'a> {
    /// Decodes a record from its first byte and `rest`, which must hold the rest of the
    /// record; the checksum is not checked here (see [`Record::verify`]).
    pub(crate) fn decode(first: u8, rest: &'a [u8]) -> Result<Record<'a>, RecordError> {
        let (kind, klen, vlen, at) = decode_head(first, rest)?;
        Record::with_head(first, rest, kind, klen, vlen, at)
    }

    /// [`decode`](Record::decode) once [`decode_head`] has read `first` and the head of
    /// `rest` (its results are passed on, so the head is decoded only once).
    #[inline]
    pub(crate) fn with_head(
        first: u8,
        rest: &'a [u8],
        kind: u8,
        klen: usize,
        vlen: usize,
        at: usize,
    ) -> Result<Record<'a>, RecordError> {
        let end = at + klen + vlen;
        if rest.len() < end + 4 {
            return Err(RecordError::Malformed);
        }
        Ok(Record {
            first,
            kind,
            key: &rest[at..at + klen],
            value: &rest[at + klen..end],
            covered: &rest[..end],
            stored_sum: u32_at(rest, end),
            len: (1 + end + 4) as u64,
        })
    }

    /// Whether the stored checksum matches the record's bytes.
    pub(crate) fn verify(&self, salt: u64) -> bool {
        record_sum(self.first, self.covered, salt) == self.stored_sum
    }

    /// Whether the key was removed by marking this record.
    pub(crate) fn killed(&self) -> bool {
        self.first & KILLED != 0
    }
}

/// Index slot: `0` is empty, [`TOMBSTONE`] a removed entry; otherwise bits 0..43 hold the
/// record's byte offset and bits 43..64 the low 21 bits of the key's hash (the tag).
pub(crate) const TOMBSTONE: u64 = 1;
const OFFSET_BITS: u32 = 43;
/// The largest file offset a slot can address (8 TiB).
pub(crate) const MAX_FILE_LEN: u64 = 1 << OFFSET_BITS;

#[inline]
pub(crate) fn slot_encode(offset: u64, hash: u64) -> u64 {
    debug_assert!((PAGE..MAX_FILE_LEN).contains(&offset));
    offset | (hash << OFFSET_BITS)
}

#[inline]
pub(crate) fn slot_offset(slot: u64) -> u64 {
    slot & ((1 << OFFSET_BITS) - 1)
}

/// The low 21 bits of the key hash stored in a slot.
#[inline]
pub(crate) fn slot_hash_bits(slot: u64) -> u64 {
    slot >> OFFSET_BITS
}

/// Hash bits a slot keeps (tables up to `2^21` slots take positions from them alone).
pub(crate) const SLOT_HASH_BITS: u32 = 64 - OFFSET_BITS;

#[cfg(test)]
mod tests {
    /// The hash is part of the file format (key placement, every checksum): it must stay
    /// XXH3-64 whatever implements it (a crate update or a switch to another crate). These
    /// are XXH3-64's outputs (the first is the reference value for the empty input) for
    /// lengths that cover each of its code paths, on input bytes `i * 31 + 7`.
    #[test]
    fn hash_is_xxh3() {
        const GOLDEN: [(usize, u64, u64); 20] = [
            (0, 0, 0x2d06_8005_38d3_94c2),
            (0, 0x9e37_79b9_7f4a_7c15, 0x602b_0e2c_d666_2c8b),
            (3, 0, 0x15f7_093b_173d_005c),
            (3, 0x9e37_79b9_7f4a_7c15, 0x079d_d5d5_4d89_480a),
            (8, 0, 0xdec6_a9a4_3575_982e),
            (8, 0x9e37_79b9_7f4a_7c15, 0x19ef_7d39_1910_8aff),
            (16, 0, 0x7e48_4c18_d748_95d0),
            (16, 0x9e37_79b9_7f4a_7c15, 0xa106_5100_78b0_a252),
            (21, 0, 0xc0c2_51a7_aaa8_8000),
            (21, 0x9e37_79b9_7f4a_7c15, 0xa747_b9ba_0c6a_a0b4),
            (100, 0, 0x8c97_1580_42fb_f926),
            (100, 0x9e37_79b9_7f4a_7c15, 0xa0f7_9a4c_a977_f3f1),
            (240, 0, 0xccc7_3751_72c4_1f03),
            (240, 0x9e37_79b9_7f4a_7c15, 0x2d88_2e78_99ff_64cc),
            (241, 0, 0x0b3b_6309_48ce_4a00),
            (241, 0x9e37_79b9_7f4a_7c15, 0x422e_82e8_913e_49e0),
            (1000, 0, 0x9897_65d0_ea7a_5ecd),
            (1000, 0x9e37_79b9_7f4a_7c15, 0x75b5_719d_9f31_a6a2),
            (65536, 0, 0xcf18_8822_0487_98b0),
            (65536, 0x9e37_79b9_7f4a_7c15, 0x4581_b458_cbf3_2717),
        ];
        for (len, seed, want) in GOLDEN {
            let input: Vec<u8> = (0..len as u32).map(|i| (i * 31 + 7) as u8).collect();
            assert_eq!(super::key_hash(&input, seed), want, "len {len}, seed {seed:#x}");
            assert_eq!(super::checksum(&input, seed), want as u32, "len {len}, seed {seed:#x}");
        }
    }

    use super::*;

    /// The two XXH3 implementations agree on every length around the switch between them
    /// and on long inputs of odd lengths (stripes, blocks and the last partial stripe).
    #[test]
    fn long_inputs_hash_alike() {
        let data: Vec<u8> =
            (0..(1u32 << 20) + 77).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        let lens = (0..4200).chain([8191, 8192, 8193, 65_535, 65_536, 65_537, 100_003, data.len()]);
        for len in lens {
            for seed in [0, 0x9e37_79b9_7f4a_7c15, u64::MAX] {
                let (a, b) = (
                    xxh3::hash64_with_seed(&data[..len], seed),
                    xxh3_64_with_seed(&data[..len], seed),
                );
                assert_eq!(a, b, "len {len}, seed {seed:#x}");
            }
        }
    }

    #[test]
    fn copy_short_copies_every_length_exactly() {
        let src: Vec<u8> = (1..=64).collect();
        for n in 0..=64 {
            for spare in [0, 1, 7] {
                let mut dst = vec![0xee; n + spare];
                copy_short(&mut dst, &src[..n]);
                assert_eq!(&dst[..n], &src[..n], "length {n}");
                assert!(dst[n..].iter().all(|&b| b == 0xee), "length {n} wrote past its end");
            }
        }
    }

    #[test]
    fn varint_round_trip_and_rejects_overlong() {
        let mut b = [0u8; 10];
        for n in [0u64, 1, 127, 128, 300, 1 << 20, (1 << 30) + 5] {
            let used = put_varint(&mut b, n);
            assert_eq!(get_varint(&b, 5), Some((n, used)));
        }
        assert_eq!(get_varint(&[0x80, 0x00], 5), None);
        assert_eq!(get_varint(&[0x80, 0x80, 0x80, 0x80], 3), None);
    }

    #[test]
    fn header_round_trip_and_checksum() {
        let h = Header {
            version: VERSION,
            flags: FLAG_CLEAN,
            shard_bits: 10,
            pid: 42,
            data_start: data_start(10),
            data_end: 1 << 20,
            salt: 7,
            generation: 3,
        };
        let mut b = h.encode();
        assert_eq!(Header::decode(&b), Ok(h));
        b[33] ^= 1;
        assert_eq!(Header::decode(&b), Err(HeaderError::Checksum));
        b[0] = b'X';
        assert_eq!(Header::decode(&b), Err(HeaderError::Magic));
    }

    #[test]
    fn chunk_header_needs_the_salt() {
        let c = ChunkHeader { kind: CHUNK_INDEX, shard: 5, len: PAGE, seq: 9, void_before: 3 };
        let b = c.encode(11);
        assert_eq!(ChunkHeader::decode(&b, 11), Some(c));
        assert_eq!(ChunkHeader::decode(&b, 12), None);
    }

    #[test]
    fn short_head_agrees_with_decode_head() {
        for first in 0..=u8::MAX {
            for second in 0..=u8::MAX {
                let Some((klen, vlen)) = short_head(first, second) else { continue };
                let rest = [second, 0, 0, 0, 0, 0, 0, 0, 0];
                assert_eq!(
                    decode_head(first, &rest),
                    Ok((REC_SET, klen, vlen, 1)),
                    "first {first:#04x}, second {second:#04x}"
                );
            }
        }
        // Every head that `RecordHead` writes in two bytes is read by the short path.
        for klen in 0..SHORT_KEY {
            for vlen in 0..0x80 {
                let h = RecordHead::new(REC_SET, klen, vlen);
                assert_eq!(h.len, 2);
                assert_eq!(short_head(h.bytes[0], h.bytes[1]), Some((klen, vlen)));
                assert_eq!(short_head(h.bytes[0] | KILLED, h.bytes[1]), Some((klen, vlen)));
            }
        }
    }

    #[test]
    fn record_of_8_byte_key_and_value_takes_22_bytes() {
        let head = RecordHead::new(REC_SET, 8, 8);
        assert_eq!(head.record_len(8, 8), 22);
        let mut buf = [0u8; 22];
        buf[..head.len].copy_from_slice(&head.bytes[..head.len]);
        buf[head.len..head.len + 8].copy_from_slice(b"key00001");
        buf[head.len + 8..head.len + 16].copy_from_slice(b"value001");
        let sum = record_sum(buf[0], &buf[1..head.len + 16], 5);
        buf[head.len + 16..head.len + 20].copy_from_slice(&sum.to_le_bytes());
        let r = Record::decode(buf[0], &buf[1..]).unwrap();
        assert_eq!(
            (r.kind, r.key, r.value, r.len),
            (REC_SET, &b"key00001"[..], &b"value001"[..], 22)
        );
        assert!(r.verify(5) && !r.killed());
        // The kill bit is outside the checksum.
        let k = Record::decode(buf[0] | KILLED, &buf[1..]).unwrap();
        assert!(k.verify(5) && k.killed());
        buf[5] ^= 0x10;
        assert!(!Record::decode(buf[0], &buf[1..]).unwrap().verify(5));
    }

    #[test]
    fn long_keys_use_a_varint_length() {
        for klen in [0usize, 30, 31, 32, 300, MAX_KEY_LEN] {
            let head = RecordHead::new(REC_SET, klen, 3);
            let mut buf = vec![0u8; head.record_len(klen, 3) as usize];
            buf[..head.len].copy_from_slice(&head.bytes[..head.len]);
            let r = Record::decode(buf[0], &buf[1..]).unwrap();
            assert_eq!((r.key.len(), r.value.len()), (klen, 3));
        }
        let clear = RecordHead::new(REC_CLEAR, 0, 0);
        assert_eq!(clear.record_len(0, 0), 5);
    }
}
