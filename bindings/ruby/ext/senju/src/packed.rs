//! Byte strings packed into one buffer, for batches: copying a batch's Ruby strings (or
//! collecting its results) costs one growing allocation instead of one per item, and
//! freeing it one `free` under the GVL instead of a thousand.

use std::ops::Range;

/// A list of byte strings stored back to back.
#[derive(Debug, Default)]
pub(crate) struct Packed {
    data: Vec<u8>,
    /// Where each item ends in `data` (item `i` starts where item `i - 1` ends).
    ends: Vec<usize>,
}

impl Packed {
    pub(crate) fn with_capacity(items: usize) -> Packed {
        Packed { data: Vec::with_capacity(items * 16), ends: Vec::with_capacity(items) }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
        self.ends.push(self.data.len());
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
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
    pub(crate) fn with_capacity(items: usize) -> PackedValues {
        PackedValues { data: Vec::with_capacity(items * 16), items: Vec::with_capacity(items) }
    }

    pub(crate) fn push(&mut self, value: Option<&[u8]>) {
        let item = value.map(|v| {
            let start = self.data.len();
            self.data.extend_from_slice(v);
            start..self.data.len()
        });
        self.items.push(item);
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Every item, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Option<&[u8]>> {
        self.items.iter().map(|r| r.clone().map(|r| &self.data[r]))
    }
}
