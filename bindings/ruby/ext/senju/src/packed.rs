//! Byte strings packed into one buffer, for batches: copying a batch's Ruby strings (or
//! collecting its results) costs one growing allocation instead of one per item, and
//! freeing it one `free` under the GVL instead of a thousand.
//!
//! Every copy here is fallible: a value may be as large as 1 GiB, and a buffer that cannot
//! grow reports the bytes it needed (for `NoMemoryError`, see `error::out_of_memory`)
//! instead of aborting the process as `Vec`'s infallible growth does.

use std::ops::Range;

/// A copy of `bytes`, or `Err(len)` where it cannot be allocated.
pub(crate) fn try_copy(bytes: &[u8]) -> Result<Vec<u8>, usize> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes.len()).map_err(|_| bytes.len())?;
    v.extend_from_slice(bytes);
    Ok(v)
}

/// A copy of one short value: on the stack up to [`Copied::INLINE`] bytes, else on the heap.
/// A single `db[key]` of a small value then costs no `malloc` and `free` (about 230 of the
/// call's 1,300 instructions in the extension, for 16-byte values).
pub(crate) enum Copied {
    Inline { len: u8, buf: [u8; Copied::INLINE] },
    Heap(Vec<u8>),
}

impl Copied {
    /// The longest value kept on the stack.
    pub(crate) const INLINE: usize = 128;

    /// A copy of `bytes`, or `Err(len)` where a heap copy cannot be allocated.
    #[inline]
    pub(crate) fn of(bytes: &[u8]) -> Result<Copied, usize> {
        if let Ok(len) = u8::try_from(bytes.len())
            && bytes.len() <= Copied::INLINE
        {
            let mut buf = [0; Copied::INLINE];
            buf[..bytes.len()].copy_from_slice(bytes);
            return Ok(Copied::Inline { len, buf });
        }
        try_copy(bytes).map(Copied::Heap)
    }

    /// The copied bytes.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Copied::Inline { len, buf } => &buf[..usize::from(*len)],
            Copied::Heap(v) => v,
        }
    }
}

/// Appends `bytes` to `data` after reserving room for them (amortized growth first, then
/// exactly what is needed); `Err(needed)` and `data` unchanged if neither can be allocated.
fn try_extend(data: &mut Vec<u8>, bytes: &[u8]) -> Result<(), usize> {
    if data.try_reserve(bytes.len()).is_err() {
        data.try_reserve_exact(bytes.len()).map_err(|_| data.len().saturating_add(bytes.len()))?;
    }
    data.extend_from_slice(bytes);
    Ok(())
}

/// A list of byte strings stored back to back.
#[derive(Debug, Default)]
pub(crate) struct Packed {
    data: Vec<u8>,
    /// Where each item ends in `data` (item `i` starts where item `i - 1` ends).
    ends: Vec<usize>,
}

impl Packed {
    /// An empty list with room for `items` short items, or `Err(bytes)` if that room
    /// cannot be allocated.
    pub(crate) fn with_capacity(items: usize) -> Result<Packed, usize> {
        let mut p = Packed::default();
        let data = items.saturating_mul(16);
        p.data.try_reserve(data).map_err(|_| data)?;
        p.ends.try_reserve(items).map_err(|_| items.saturating_mul(size_of::<usize>()))?;
        Ok(p)
    }

    /// Appends `bytes`; `Err(needed)` (and the list unchanged) if it cannot grow.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<(), usize> {
        self.ends.try_reserve(1).map_err(|_| self.ends.len().saturating_add(1))?;
        try_extend(&mut self.data, bytes)?;
        self.ends.push(self.data.len());
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Bytes of all items together.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Item `i`.
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }
}

/// Optional values collected in one buffer: `None` for an absent key.
#[derive(Debug, Default)]
pub(crate) struct PackedValues {
    data: Vec<u8>,
    items: Vec<Option<Range<usize>>>,
}

impl PackedValues {
    /// An empty list with room for `items` short values, or `Err(bytes)` if that room
    /// cannot be allocated.
    pub(crate) fn with_capacity(items: usize) -> Result<PackedValues, usize> {
        let mut p = PackedValues::default();
        let data = items.saturating_mul(16);
        p.data.try_reserve(data).map_err(|_| data)?;
        p.items
            .try_reserve(items)
            .map_err(|_| items.saturating_mul(size_of::<Option<Range<usize>>>()))?;
        Ok(p)
    }

    /// Appends `value`; `Err(needed)` (and the list unchanged) if it cannot grow.
    pub(crate) fn push(&mut self, value: Option<&[u8]>) -> Result<(), usize> {
        self.items.try_reserve(1).map_err(|_| self.items.len().saturating_add(1))?;
        let item = match value {
            None => None,
            Some(v) => {
                let start = self.data.len();
                try_extend(&mut self.data, v)?;
                Some(start..self.data.len())
            }
        };
        self.items.push(item);
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Every item, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Option<&[u8]>> {
        self.items.iter().map(|r| r.clone().map(|r| &self.data[r]))
    }
}
