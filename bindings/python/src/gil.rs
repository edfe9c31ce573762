//! When a call releases the GIL: the per-handle policy of DESIGN.md section 5.
//!
//! Releasing and retaking the GIL costs about 0.05 µs when every thread is in senju, but when
//! another thread runs Python code, the releasing thread waits for a whole switch interval
//! (5 ms by default) to get the GIL back. So `Auto` keeps the GIL for short in-memory work and
//! releases it where the work is long enough to pay for that risk.

use pyo3::prelude::*;

use crate::errors;

/// In `Auto` mode, writes of at least this many bytes (key plus value) release the GIL, and
/// so do reads after a read that returned a value this large. Below it the checksum and copy
/// take about a microsecond, less than retaking a contended GIL; `bench/gil_threshold.py`
/// measures the crossover (see `lab/0003-python-threads`).
pub(crate) const LARGE: usize = 4096;

/// A handle's GIL policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gil {
    /// Release for every call.
    Release,
    /// Never release.
    Hold,
    /// Release for batches, scans, sync, rebuild, clear, opening and closing (also on drop),
    /// appends (the engine rewrites the stored value, whose length the binding cannot know
    /// beforehand), values of [`LARGE`] bytes or more (reads: after a large read), and a
    /// write's wait for a shard that another thread holds; keep it for single operations on
    /// small values.
    Auto,
}

impl Gil {
    /// Parses the `gil=` argument.
    pub(crate) fn parse(py: Python<'_>, s: &str) -> PyResult<Gil> {
        match s {
            "release" => Ok(Gil::Release),
            "hold" => Ok(Gil::Hold),
            "auto" => Ok(Gil::Auto),
            _ => Err(errors::invalid_option(
                py,
                format!(
                    "invalid option `gil`: {s:?} is not one of \"auto\", \"release\", \"hold\""
                ),
            )),
        }
    }

    /// The name given to `gil=`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Gil::Release => "release",
            Gil::Hold => "hold",
            Gil::Auto => "auto",
        }
    }

    /// Whether a single operation moving `bytes` bytes releases.
    #[inline]
    pub(crate) fn releases_for(self, bytes: usize) -> bool {
        match self {
            Gil::Release => true,
            Gil::Hold => false,
            Gil::Auto => bytes >= LARGE,
        }
    }

    /// Whether long work (batches, scans, sync, ...) releases.
    #[inline]
    pub(crate) fn releases_long(self) -> bool {
        self != Gil::Hold
    }

    /// Runs `f`, with the GIL released if `release`.
    #[inline]
    pub(crate) fn run<T, F>(py: Python<'_>, release: bool, f: F) -> T
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        if release { py.detach(f) } else { f() }
    }

    /// Runs a single write of `bytes` bytes. Where this mode keeps the GIL for it (`Hold`;
    /// `Auto` below [`LARGE`]), `Auto` first tries `try_write`, which does the write only
    /// if the key's shard is free; if another thread holds the shard (for a microsecond, or
    /// for milliseconds while its index grows or a rebuild copies it), `write` waits for it
    /// with the GIL released, so other Python threads run meanwhile. `Hold` waits holding
    /// the GIL.
    #[inline]
    pub(crate) fn write<T, Try, Wait>(
        self,
        py: Python<'_>,
        bytes: usize,
        try_write: Try,
        write: Wait,
    ) -> senju::Result<T>
    where
        Try: FnOnce() -> senju::Result<Option<T>>,
        Wait: FnOnce() -> senju::Result<T> + Send,
        T: Send,
    {
        if self.releases_for(bytes) {
            return py.detach(write);
        }
        if self == Gil::Hold {
            return write();
        }
        match try_write()? {
            Some(done) => Ok(done),
            None => py.detach(write),
        }
    }
}
