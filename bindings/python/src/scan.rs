//! Iteration over a database: keys, values or items, fetched in chunks.
//!
//! Each chunk of [`CHUNK`] entries (values: no more than [`CHUNK_BYTES`] and one more) is read
//! by a `senju::Cursor` (which borrows nothing, so it lives in the iterator between calls),
//! with the GIL released unless the handle's policy is `hold`; entries are then handed out
//! one by one with the GIL held. A long scan therefore never holds the GIL for more than one
//! chunk of engine work, and Python code (signal handlers included) runs between items.
//! Weakly consistent, as the cursor: a key present for the whole scan is yielded exactly once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::PyTuple;

use senju::Cursor;

use crate::convert;
use crate::db::Inner;
use crate::errors;

/// Entries read per cursor step.
pub(crate) const CHUNK: usize = 512;

/// Bytes of keys and values a step of `values()` or `items()` reads at most (plus one entry):
/// 512 values of up to 1 GiB each must not be copied at once.
pub(crate) const CHUNK_BYTES: usize = 4 << 20;

/// What a scan yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Keys,
    Values,
    Items,
}

struct State {
    cursor: Cursor,
    keys: VecDeque<Vec<u8>>,
    pairs: VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
}

/// An iterator over a database's keys, values or `(key, value)` items.
#[pyclass(frozen, module = "senju._senju", name = "Scan")]
pub(crate) struct Scan {
    inner: Arc<Inner>,
    kind: Kind,
    /// Held only to take an entry or to refill (never while a Python object is made: the
    /// garbage collector may run then, and a callback of its may call `next` on this scan
    /// in the same thread). Taken with `lock_py_attached`: a thread waiting for it (while
    /// another refills with the GIL released) waits detached, so the two cannot deadlock
    /// over the GIL.
    state: Mutex<State>,
}

impl Scan {
    pub(crate) fn new(inner: Arc<Inner>, kind: Kind) -> Scan {
        let cursor = inner.db.cursor();
        let state = State { cursor, keys: VecDeque::new(), pairs: VecDeque::new(), done: false };
        Scan { inner, kind, state: Mutex::new(state) }
    }

    /// The state, locked. If another thread holds it, checks first that the store is still
    /// usable: in a child of `fork`, a lock that a parent thread held at the fork (refilling)
    /// is never released, and the call raises `ForkedError` instead of waiting forever.
    fn lock<'a>(&'a self, py: Python<'_>) -> PyResult<MutexGuard<'a, State>> {
        match self.state.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(e)) => Ok(e.into_inner()),
            Err(TryLockError::WouldBlock) => {
                self.inner.check_usable(py)?;
                Ok(self.state.lock_py_attached(py).unwrap_or_else(PoisonError::into_inner))
            }
        }
    }

    /// The next entry (the value is empty for `Keys`), refilling with the GIL released unless
    /// the policy is `hold`; `None` at the end.
    fn next_entry(&self, py: Python<'_>) -> PyResult<Option<(Vec<u8>, Vec<u8>)>> {
        let mut guard = self.lock(py)?;
        let st = &mut *guard;
        let empty = match self.kind {
            Kind::Keys => st.keys.is_empty(),
            Kind::Values | Kind::Items => st.pairs.is_empty(),
        };
        if empty && !st.done {
            let (db, cursor, kind) = (&self.inner.db, &mut st.cursor, self.kind);
            let release = self.inner.gil.releases_long();
            let got = crate::gil::Gil::run(py, release, || match kind {
                Kind::Keys => cursor.next_keys(db, CHUNK).map(|v| (v, Vec::new())),
                Kind::Values | Kind::Items => {
                    cursor.next_pairs_within(db, CHUNK, CHUNK_BYTES).map(|v| (Vec::new(), v))
                }
            });
            let (keys, pairs) = match got {
                Ok(got) => got,
                Err(e) => {
                    // Unlocked first: making the exception runs Python code.
                    drop(guard);
                    return Err(errors::storage(py, e));
                }
            };
            st.done = keys.is_empty() && pairs.is_empty();
            st.keys.extend(keys);
            st.pairs.extend(pairs);
        }
        Ok(match self.kind {
            Kind::Keys => st.keys.pop_front().map(|k| (k, Vec::new())),
            Kind::Values | Kind::Items => st.pairs.pop_front(),
        })
    }
}

#[pymethods]
impl Scan {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner.check_open(py)?;
        // In a child of `fork`, ForkedError as for every call, even with entries copied
        // before the fork still buffered.
        self.inner.db.check_fork().map_err(|e| errors::storage(py, e))?;
        // The state is unlocked again before any object is made.
        let Some((k, v)) = self.next_entry(py)? else { return Ok(None) };
        Ok(Some(match self.kind {
            Kind::Keys => convert::to_py(py, &k)?.into_any(),
            Kind::Values => convert::to_py(py, &v)?.into_any(),
            Kind::Items => {
                PyTuple::new(py, [convert::to_py(py, &k)?, convert::to_py(py, &v)?])?.into_any()
            }
        }))
    }
}
