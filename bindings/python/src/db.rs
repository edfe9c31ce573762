//! The `Db` class: one open database, shared by any number of Python threads.
//!
//! The object is frozen (no `&mut self`, so no runtime borrow is held while the GIL is
//! released) and holds an `Arc<Inner>`; scans hold a clone, so the store outlives every call
//! and iterator that uses it. `close()` only flips the engine's closed flag and writes the
//! file's end state (`senju::Db::close` is safe while other threads are inside calls): calls in
//! flight finish, later ones raise `ClosedError`, nothing is freed under a running thread.
//!
//! No Python code runs while a store lock is held: `update_value` calls the user's function
//! between a read and a `compare_and_set`, never inside the engine's `update`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use pyo3::exceptions::{PyTypeError, PyUnicodeEncodeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use senju::{Db, Durability};

use crate::convert::{self, Arg, Value};
use crate::errors;
use crate::gil::{Gil, LARGE};
use crate::scan::{Kind, Scan};

/// How often the thread that waits for a rebuild looks for signals (taking the GIL back
/// for it where it was released).
const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// The store and the handle's settings, shared by the handle and its scans.
pub(crate) struct Inner {
    pub(crate) db: Db,
    pub(crate) gil: Gil,
    closed: AtomicBool,
    /// The length of the value the last read returned if it was [`LARGE`] or more, else 0
    /// (the last read found a smaller value or none): `Auto` releases the GIL for the next
    /// read when it is not 0, and a released read copies straight into a `bytes` object of
    /// this length when the value still has it. Every read sets it, so one large read costs
    /// later reads of other keys at most one needless release and allocation.
    large_read_len: AtomicUsize,
    path: Option<PathBuf>,
    read_only: bool,
}

impl Inner {
    /// `ClosedError` once `close()` has been called.
    #[inline]
    pub(crate) fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        // Relaxed: a hint for a clear error; the engine checks its own flag on every call.
        if self.closed.load(Ordering::Relaxed) {
            return Err(errors::storage(py, senju::StorageError::Closed));
        }
        Ok(())
    }

    /// `ClosedError` once closed, `ForkedError` in a child of `fork`, from the engine's own
    /// checks: `senju::Db` has no public check, but a lookup makes both before it takes any
    /// lock (one held by a parent thread at the fork is never released in the child) or reads
    /// the store. For calls that touch no store (a scan whose lock is taken, a key of another
    /// type).
    #[cold]
    pub(crate) fn check_usable(&self, py: Python<'_>) -> PyResult<()> {
        self.check_open(py)?;
        self.db.contains(b"").map(drop).map_err(|e| errors::storage(py, e))
    }
}

impl Drop for Inner {
    /// Closes the store where `close()` was not called: the last reference (the handle or a
    /// scan) goes away in a Python deallocator, with the GIL held, and closing a file syncs
    /// it twice. Released as `close()` releases it, except under `gil="hold"`. Errors are
    /// ignored, as dropping a `senju::Db` ignores them.
    fn drop(&mut self) {
        if !self.gil.releases_long() || self.db.is_closed() {
            return;
        }
        let db = &self.db;
        // `try_attach`: not while the interpreter cannot be attached to (from 3.13, while it
        // finalizes); `senju::Db`'s own drop then closes it, without releasing anything.
        Python::try_attach(|py| py.detach(|| db.close()).ok());
    }
}

/// A pointer into a fresh `bytes` object that only the calling frame references, so that it
/// may be filled with the GIL released.
struct Dest(*mut u8);

// SAFETY: the pointer is written through only by the one closure it is moved into, while the
// owning `bytes` object is kept alive, and shared with nobody, by the calling frame.
unsafe impl Send for Dest {}

/// Whether a rebuild's helper thread is done, for the thread that waits for it.
#[derive(Default)]
struct Finished {
    done: Mutex<bool>,
    wake: Condvar,
}

impl Finished {
    /// Waits until the helper is done or `timeout` has passed; returns whether it is done.
    fn wait(&self, timeout: std::time::Duration) -> bool {
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        let (done, _) = self
            .wake
            .wait_timeout_while(done, timeout, |done| !*done)
            .unwrap_or_else(PoisonError::into_inner);
        *done
    }
}

/// Marks a [`Finished`] done and wakes its waiter when dropped.
struct FinishedOnDrop<'a>(&'a Finished);

impl Drop for FinishedOnDrop<'_> {
    fn drop(&mut self) {
        *self.0.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.0.wake.notify_all();
    }
}

/// An open senju database (use `senju.open`). Behaves as a mutable mapping from bytes to bytes.
#[pyclass(frozen, subclass, module = "senju._senju", name = "Db")]
pub(crate) struct PyDb {
    inner: Arc<Inner>,
}

impl PyDb {
    /// The value of `key` as a new `bytes` object, or `None`.
    ///
    /// Held: straight from the map into the object (the closure runs under an epoch pin, not
    /// a lock, and creating `bytes` runs no Python code). Released: verified and copied with
    /// the GIL released, into an object of the length the previous large read returned when
    /// that still fits, else into a buffer copied into the object afterwards. `Auto` releases
    /// only if the previous read on this handle returned a large value: the length is known
    /// only after the lookup, which for a large value costs more (checksum and copy) than the
    /// release. A miss or a small value clears the hint.
    fn get_bytes<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let inner = &*self.inner;
        let db = &inner.db;
        // Relaxed: a hint; any value is correct.
        let hint = inner.large_read_len.load(Ordering::Relaxed);
        let release = match inner.gil {
            Gil::Release => true,
            Gil::Hold => false,
            Gil::Auto => hint != 0,
        };
        let (found, len) = if !release {
            let v = db.get_with(key, |v| (convert::to_py(py, v), v.len()));
            match v.map_err(|e| errors::storage(py, e))? {
                Some((b, len)) => (Some(b?), len),
                None => (None, 0),
            }
        } else if hint == 0 {
            self.get_copied(py, key)?
        } else {
            self.get_into(py, key, hint)?
        };
        let new_hint = if len >= LARGE { len } else { 0 };
        if inner.gil != Gil::Hold && new_hint != hint {
            inner.large_read_len.store(new_hint, Ordering::Relaxed);
        }
        Ok(found)
    }

    /// Reads `key` with the GIL released into a buffer, copied into a new `bytes` object
    /// afterwards; returns it with its length (0 if absent).
    fn get_copied<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, usize)> {
        let db = &self.inner.db;
        // A copy that cannot be allocated is `StorageError::OutOfMemory`, a `MemoryError`.
        match py.detach(|| db.get(key)).map_err(|e| errors::storage(py, e))? {
            None => Ok((None, 0)),
            Some(v) => Ok((Some(convert::to_py(py, &v)?), v.len())),
        }
    }

    /// Reads `key` with the GIL released straight into a new `bytes` object of `len` bytes,
    /// or, if the value has another length, into a buffer copied into an object afterwards.
    /// If the object cannot be allocated (`len` is only a guess: the value may be smaller or
    /// absent), reads as [`get_copied`](PyDb::get_copied) does and clears the hint.
    fn get_into<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        len: usize,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, usize)> {
        let db = &self.inner.db;
        // SAFETY: `PyBytes_FromStringAndSize(NULL, n)` only allocates: it returns a new
        // reference to an object of length `n` whose contents are unset, or NULL with an
        // exception set.
        let ptr = unsafe {
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as pyo3::ffi::Py_ssize_t)
        };
        // SAFETY: `ptr` is a new (owned) reference, or NULL with an exception set.
        let obj = match unsafe { Bound::from_owned_ptr_or_err(py, ptr) } {
            Ok(obj) => obj.cast_into::<PyBytes>()?,
            Err(_memory_error) => {
                // Relaxed: a hint; any value is correct.
                self.inner.large_read_len.store(0, Ordering::Relaxed);
                return self.get_copied(py, key);
            }
        };
        // SAFETY: `obj` is a `bytes` object of `len` bytes; its buffer lives as long as `obj`.
        let dest = Dest(unsafe { pyo3::ffi::PyBytes_AsString(obj.as_ptr()) }.cast::<u8>());
        let got = py.detach(move || {
            let dest = dest;
            db.get_with(key, |v| {
                if v.len() != len {
                    return Some(convert::try_copy(v));
                }
                // SAFETY: `dest` points at `len` writable bytes that nothing else reads or
                // writes until this call returns: the object is new and referenced only by the
                // calling frame, which keeps it alive. `v` is `len` bytes of the map.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), dest.0, len) };
                None
            })
        });
        Ok(match got.map_err(|e| errors::storage(py, e))? {
            None => (None, 0),
            Some(None) => (Some(obj), len),
            Some(Some(Ok(other))) => (Some(convert::to_py(py, &other)?), other.len()),
            Some(Some(Err(needed))) => return Err(errors::out_of_memory(needed)),
        })
    }

    fn set_bytes(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        let db = &self.inner.db;
        let bytes = key.len() + value.len();
        (self.inner.gil.write(py, bytes, || db.try_set(key, value), || db.set(key, value)))
            .map_err(|e| errors::storage(py, e))
    }

    fn cas(
        &self,
        py: Python<'_>,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> PyResult<bool> {
        let db = &self.inner.db;
        let bytes = key.len() + expected.map_or(0, <[u8]>::len) + new.map_or(0, <[u8]>::len);
        let gil = self.inner.gil;
        let try_cas = || db.try_compare_and_set(key, expected, new);
        (gil.write(py, bytes, try_cas, || db.compare_and_set(key, expected, new)))
            .map_err(|e| errors::storage(py, e))
    }

    fn scan(&self, py: Python<'_>, kind: Kind) -> PyResult<Scan> {
        self.inner.check_open(py)?;
        // In a child of `fork`, ForkedError at once (as every call), not at the first `next`.
        self.inner.db.check_fork().map_err(|e| errors::storage(py, e))?;
        Ok(Scan::new(self.inner.clone(), kind))
    }
}

/// Items of a batch (`get_many`, `set_many`, `remove_many`) given to the engine per call.
/// Pending signals are handled between two calls, so Ctrl-C stops a batch of millions of
/// keys within one chunk's work (tens of milliseconds) instead of at its end; a chunk is
/// long enough that the GIL, retaken between two, costs nothing measurable.
pub(crate) const BATCH_CHUNK: usize = 1 << 16;

/// The most room `get_many` reserves for its values before it reads them.
const GET_MANY_START: usize = 64 << 10;

/// Runs `step` on each chunk of [`BATCH_CHUNK`] items of `items`, in order, with the GIL
/// released if `release`; between two chunks, handles pending signals, whose exception
/// stops the batch.
fn in_chunks<T, F>(py: Python<'_>, release: bool, items: &[T], mut step: F) -> PyResult<()>
where
    T: Sync,
    F: FnMut(&[T]) -> senju::Result<()> + Send,
{
    for (i, chunk) in items.chunks(BATCH_CHUNK).enumerate() {
        if i > 0 {
            py.check_signals()?;
        }
        Gil::run(py, release, || step(chunk)).map_err(|e| errors::storage(py, e))?;
    }
    Ok(())
}

/// The engine's length checks of a batch's keys and values (`None`: a key only), in order:
/// `TooLarge` for the first too long.
fn check_lengths(lengths: impl Iterator<Item = (usize, Option<usize>)>) -> senju::Result<()> {
    use senju::{MAX_KEY_LEN, MAX_VALUE_LEN, StorageError};
    for (key, value) in lengths {
        if key > MAX_KEY_LEN {
            return Err(StorageError::TooLarge { what: "key", len: key, max: MAX_KEY_LEN });
        }
        if let Some(len) = value.filter(|&len| len > MAX_VALUE_LEN) {
            return Err(StorageError::TooLarge { what: "value", len, max: MAX_VALUE_LEN });
        }
    }
    Ok(())
}

/// One pair given to `set_many`.
enum Pair<'py> {
    /// A 2-tuple, kept whole: its items are borrowed through it (a tuple is immutable, so
    /// they live as long as it does), which saves a reference count on each. Not under the
    /// stable ABI (`abi3`), which has no view of a tuple's items.
    #[cfg(not(feature = "abi3"))]
    Tuple(Bound<'py, PyTuple>),
    /// The two items of any other iterable of length 2 (a list of two, say).
    Parts([Bound<'py, PyAny>; 2]),
}

impl<'py> Pair<'py> {
    /// The key and the value.
    fn items(&self) -> (&Bound<'py, PyAny>, &Bound<'py, PyAny>) {
        match self {
            #[cfg(not(feature = "abi3"))]
            Pair::Tuple(t) => {
                let kv = t.as_slice();
                (&kv[0], &kv[1])
            }
            Pair::Parts([k, v]) => (k, v),
        }
    }
}

/// `(key, value)` pairs from a mapping (its `items()`; an object with `keys()` but no
/// `items()` is a mapping too, read as `dict.update` reads it) or an iterable of pairs.
///
/// The exact built-ins are read their own way. An exact `list` or `tuple` is not asked for
/// `items` or `keys`: it has neither, and each failed lookup raises and clears an
/// `AttributeError` (6,400 instructions a call, more than converting a batch of 10 pairs,
/// `callgrind`, lab 0003); it is read item by item, as is an exact list or tuple that
/// `items()` returns. A `dict`'s pairs are read straight off the
/// dict (locked against other threads on a free-threaded build), without the `items()`
/// view and its tuple per pair (400 instructions a pair with the GIL held, against 170 for
/// a list). Subclasses take the general path: they may define their own `items`, `keys`
/// or `__iter__`.
fn pairs_of<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<Pair<'py>>> {
    if let Ok(dict) = obj.cast_exact::<PyDict>() {
        // `locked_for_each` takes an `Fn`, hence the cell.
        let out = RefCell::new(Vec::with_capacity(dict.len().min(convert::MAX_RESERVED)));
        dict.locked_for_each(|key, value| {
            out.borrow_mut().push(Pair::Parts([key, value]));
            Ok(())
        })?;
        return Ok(out.into_inner());
    }
    let py = obj.py();
    let items = if obj.is_exact_instance_of::<PyList>() || obj.is_exact_instance_of::<PyTuple>() {
        obj.clone()
    } else if obj.hasattr(pyo3::intern!(py, "items"))? {
        obj.call_method0(pyo3::intern!(py, "items"))?
    } else if obj.hasattr(pyo3::intern!(py, "keys"))? {
        let keys = obj.call_method0(pyo3::intern!(py, "keys"))?;
        let mut pairs = Vec::with_capacity(convert::capacity_hint(&keys)?);
        for key in keys.try_iter()? {
            let key = key?;
            let value = obj.get_item(&key)?;
            pairs.push(PyTuple::new(py, [key, value])?);
        }
        PyList::new(py, pairs)?.into_any()
    } else {
        obj.clone()
    };
    if let Ok(list) = items.cast_exact::<PyList>() {
        return pairs_from(list.iter().map(Ok), list.len());
    }
    if let Ok(tuple) = items.cast_exact::<PyTuple>() {
        return pairs_from(tuple.iter().map(Ok), tuple.len());
    }
    pairs_from(items.try_iter()?, convert::capacity_hint(&items)?)
}

/// The pairs among `items`, in a vector made with room for `capacity` of them (at most
/// [`convert::MAX_RESERVED`]).
fn pairs_from<'py>(
    items: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
    capacity: usize,
) -> PyResult<Vec<Pair<'py>>> {
    let mut out = Vec::with_capacity(capacity.min(convert::MAX_RESERVED));
    for (i, item) in items.enumerate() {
        push_pair(&mut out, i, item?)?;
    }
    Ok(out)
}

/// Appends item `i` of `set_many`'s argument to `out` as a pair, or fails if it is none.
///
/// An item that is not iterable, or that yields other than two items, is a `TypeError` that
/// names it; an exception raised while iterating it (say `KeyboardInterrupt`) propagates.
/// At most three items are read, so an endless iterator is refused too.
fn push_pair<'py>(out: &mut Vec<Pair<'py>>, i: usize, item: Bound<'py, PyAny>) -> PyResult<()> {
    let item = match item.cast_into::<PyTuple>() {
        // The stable ABI has no view of a tuple's items: take them as for any other pair.
        #[cfg(not(feature = "abi3"))]
        Ok(t) if t.len() == 2 => {
            out.push(Pair::Tuple(t));
            return Ok(());
        }
        Ok(t) => t.into_any(),
        Err(e) => e.into_inner(),
    };
    let not_a_pair = |item: &Bound<'py, PyAny>| {
        let name = item.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string());
        PyTypeError::new_err(format!(
            "set_many takes a mapping or an iterable of (key, value) pairs; item {i} is a \
             {name}, not a pair"
        ))
    };
    let iter = match item.try_iter() {
        Ok(iter) => iter,
        Err(e) if e.is_instance_of::<PyTypeError>(item.py()) => return Err(not_a_pair(&item)),
        Err(e) => return Err(e),
    };
    let parts = iter.take(3).collect::<PyResult<Vec<_>>>()?;
    let Ok(parts) = <[_; 2]>::try_from(parts) else { return Err(not_a_pair(&item)) };
    out.push(Pair::Parts(parts));
    Ok(())
}

/// An integer option of `open`: `None` if not given; `InvalidOptionError` naming the option
/// for an int outside `T`'s range (PyO3's own conversion raised an `OverflowError` that
/// named no option); `TypeError` for anything but an int.
fn int_option<T>(py: Python<'_>, name: &str, v: Option<Bound<'_, PyAny>>) -> PyResult<Option<T>>
where
    T: TryFrom<i128> + Bounded,
{
    let Some(v) = v else { return Ok(None) };
    let out_of_range = || {
        let (lo, hi) = T::RANGE;
        errors::invalid_option(py, format!("invalid option `{name}`: {v} is not in {lo}..={hi}"))
    };
    match v.extract::<i128>() {
        Ok(n) => T::try_from(n).map(Some).map_err(|_| out_of_range()),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => Err(out_of_range()),
        Err(e) => Err(e),
    }
}

/// The range of an integer option, for its error message.
trait Bounded {
    const RANGE: (u64, u64);
}

impl Bounded for u32 {
    const RANGE: (u64, u64) = (0, u32::MAX as u64);
}

impl Bounded for u64 {
    const RANGE: (u64, u64) = (0, u64::MAX);
}

#[pymethods]
impl PyDb {
    #[new]
    #[pyo3(signature = (path=None, *, memory=false, readonly=false, truncate=false, create=true,
                        gil="auto", shards=None, max_size=None, capacity_hint=None,
                        auto_rebuild=None, recovery_progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: Option<PathBuf>,
        memory: bool,
        readonly: bool,
        truncate: bool,
        create: bool,
        gil: &str,
        shards: Option<Bound<'_, PyAny>>,
        max_size: Option<Bound<'_, PyAny>>,
        capacity_hint: Option<Bound<'_, PyAny>>,
        auto_rebuild: Option<Bound<'_, PyAny>>,
        recovery_progress: Option<Py<PyAny>>,
    ) -> PyResult<PyDb> {
        let gil = Gil::parse(py, gil)?;
        let shards: Option<u32> = int_option(py, "shards", shards)?;
        let max_size: Option<u64> = int_option(py, "max_size", max_size)?;
        let capacity_hint: Option<u64> = int_option(py, "capacity_hint", capacity_hint)?;
        let auto_rebuild: Option<u64> = int_option(py, "auto_rebuild", auto_rebuild)?;
        let mut b = Db::builder().create(create).truncate(truncate).read_only(readonly);
        if let Some(n) = shards {
            b = b.shards(n);
        }
        if let Some(n) = max_size {
            b = b.max_size(n);
        }
        if let Some(n) = capacity_hint {
            b = b.capacity_hint(n);
        }
        if let Some(n) = auto_rebuild {
            b = b.auto_rebuild((n > 0).then_some(n));
        }
        // The callback's first exception, raised once the open is done (a recovery cannot
        // stop halfway).
        let raised: Arc<std::sync::Mutex<Option<PyErr>>> = Arc::default();
        if let Some(cb) = recovery_progress {
            if !cb.bind(py).is_callable() {
                return Err(PyTypeError::new_err(
                    "recovery_progress must be callable as recovery_progress(done, total)",
                ));
            }
            let raised = Arc::clone(&raised);
            b = b.recovery_progress(move |done, total| {
                Python::attach(|py| {
                    let mut first = raised.lock().unwrap_or_else(|e| e.into_inner());
                    if first.is_none()
                        && let Err(e) = cb.call1(py, (done, total))
                    {
                        *first = Some(e);
                    }
                });
            });
        }
        let path = match (path, memory) {
            (None, true) => None,
            (Some(p), false) => Some(p),
            (Some(_), true) => {
                return Err(errors::invalid_option(
                    py,
                    "invalid option `memory`: an in-memory database takes no path; pass \
                     path=None or memory=False"
                        .to_owned(),
                ));
            }
            (None, false) => {
                return Err(errors::invalid_option(
                    py,
                    "invalid option `path`: give the database file's path, or memory=True"
                        .to_owned(),
                ));
            }
        };
        // Opening may recover a file that was not closed cleanly: long work.
        let db = Gil::run(py, gil.releases_long(), || match &path {
            Some(p) => b.open(p),
            None => b.memory(),
        })
        .map_err(|e| errors::open(py, e, readonly))?;
        if let Some(e) = raised.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // The database is open and recovered; closing it marks the file clean.
            Gil::run(py, gil.releases_long(), || db.close()).map_err(|e| errors::storage(py, e))?;
            return Err(e);
        }
        let inner = Inner {
            db,
            gil,
            closed: AtomicBool::new(false),
            large_read_len: AtomicUsize::new(0),
            path,
            read_only: readonly,
        };
        Ok(PyDb { inner: Arc::new(inner) })
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let k = convert::arg(key, "key")?;
        self.get_bytes(py, k.as_ref())?.ok_or_else(|| errors::missing(key))
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let k = convert::arg(key, "key")?;
        let v = convert::arg(value, "value")?;
        self.set_bytes(py, k.as_ref(), v.as_ref())
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = convert::arg(key, "key")?;
        let (k, db) = (k.as_ref(), &self.inner.db);
        let removed = self.inner.gil.write(py, k.len(), || db.try_remove(k), || db.remove(k));
        if removed.map_err(|e| errors::storage(py, e))? {
            Ok(())
        } else {
            Err(errors::missing(key))
        }
    }

    /// Whether `key` is present: `False` for a key of a type that is never stored (`1 in db`,
    /// as for a dict), where reads and writes raise `TypeError`, and for one longer than
    /// `MAX_KEY_LEN`, where they raise `TooLargeError`.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        // A key of a type the store never holds, or a `str` with lone surrogates (which has no
        // UTF-8 form, so no stored key equals it), is not in it, as in a dict.
        let k = match convert::arg(key, "key") {
            Ok(k) => k,
            Err(e)
                if e.is_instance_of::<PyTypeError>(py)
                    || e.is_instance_of::<PyUnicodeEncodeError>(py) =>
            {
                self.inner.check_usable(py)?;
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        let (k, db) = (k.as_ref(), &self.inner.db);
        // Nor is a key too long to be stored (the engine's lookup refuses it as `TooLarge`).
        if k.len() > senju::MAX_KEY_LEN {
            self.inner.check_usable(py)?;
            return Ok(false);
        }
        Gil::run(py, self.inner.gil == Gil::Release, || db.contains(k))
            .map_err(|e| errors::storage(py, e))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.inner.check_open(py)?;
        // `Db::len` reads counters only: in a child of `fork` it would return the parent's
        // count, where every call raises ForkedError (`bool(db)` comes here too).
        self.inner.db.check_fork().map_err(|e| errors::storage(py, e))?;
        Ok(usize::try_from(self.inner.db.len()).unwrap_or(usize::MAX))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<Scan> {
        self.scan(py, Kind::Keys)
    }

    /// An iterator over the values (for `values()`).
    fn _iter_values(&self, py: Python<'_>) -> PyResult<Scan> {
        self.scan(py, Kind::Values)
    }

    /// An iterator over `(key, value)` pairs (for `items()`).
    fn _iter_items(&self, py: Python<'_>) -> PyResult<Scan> {
        self.scan(py, Kind::Items)
    }

    /// The value of `key`, or `default` if absent.
    #[pyo3(signature = (key, default=None, /))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = convert::arg(key, "key")?;
        Ok(match self.get_bytes(py, k.as_ref())? {
            Some(v) => Some(v.into_any()),
            None => default,
        })
    }

    /// Removes `key` and returns its value; if absent, returns `default` or raises `KeyError`.
    #[pyo3(signature = (key, /, *default))]
    fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if default.len() > 1 {
            return Err(PyTypeError::new_err(format!(
                "pop expected at most 2 arguments, got {}",
                default.len() + 1
            )));
        }
        let k = convert::arg(key, "key")?;
        let k = k.as_ref();
        loop {
            let Some(old) = self.get_bytes(py, k)? else {
                return match default.len() {
                    0 => Err(errors::missing(key)),
                    _ => default.get_item(0),
                };
            };
            if self.cas(py, k, Some(old.as_bytes()), None)? {
                return Ok(old.into_any());
            }
        }
    }

    /// The value of `key`; if absent, sets it to `default` first (atomically). `default` is
    /// required in practice: `None` cannot be stored.
    #[pyo3(signature = (key, default=None, /))]
    fn setdefault<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let k = convert::arg(key, "key")?;
        let k = k.as_ref();
        if let Some(old) = self.get_bytes(py, k)? {
            return Ok(old);
        }
        let none = py.None().into_bound(py);
        let v = convert::arg(default.unwrap_or(&none), "value")?;
        let v = v.as_ref();
        loop {
            if self.cas(py, k, None, Some(v))? {
                return convert::to_py(py, v);
            }
            if let Some(old) = self.get_bytes(py, k)? {
                return Ok(old);
            }
        }
    }

    /// The values of `keys` in order, `None` for each absent key (one GIL release per
    /// [`BATCH_CHUNK`] keys, with signals handled between two).
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let objs = convert::collect_keys(keys, "get_many")?;
        let ks = convert::args(&objs, "key")?;
        let db = &self.inner.db;
        // Copied into one buffer with the GIL released; the `bytes` objects are made after.
        // The buffer starts with room for 16 bytes a key (at most 64 KiB): grown from empty,
        // ten 8-byte values cost five reallocations, a quarter of a 10-key call (callgrind).
        let mut buf = Vec::with_capacity(ks.len().saturating_mul(16).min(GET_MANY_START));
        let (mut spans, mut short) = (Vec::with_capacity(ks.len()), None);
        in_chunks(py, self.inner.gil.releases_long(), &ks, |chunk| {
            db.get_many_with(chunk, |_, v| {
                spans.push(v.map(|v| {
                    let start = buf.len();
                    let room = buf.try_reserve(v.len()).or_else(|_| buf.try_reserve_exact(v.len()));
                    match room {
                        Ok(()) => buf.extend_from_slice(v),
                        Err(_) => _ = short.get_or_insert(start.saturating_add(v.len())),
                    }
                    (start, v.len())
                }));
            })
        })?;
        if let Some(needed) = short {
            return Err(errors::out_of_memory(needed));
        }
        PyList::new(py, spans.iter().map(|s| Value(s.map(|(at, n)| &buf[at..at + n]))))
    }

    /// Sets every pair of a mapping or an iterable of `(key, value)` pairs (one GIL release
    /// per [`BATCH_CHUNK`] pairs; each set is atomic, the batch is not). Every key and value
    /// is checked before anything is written; the pairs are then applied chunk by chunk and
    /// shard by shard, so another thread may see them appear in any order (of two pairs with
    /// the same key, the later wins). A signal whose handler raises (Ctrl-C) stops the batch
    /// between two chunks; the chunks written by then stay written.
    fn set_many(&self, py: Python<'_>, pairs: &Bound<'_, PyAny>) -> PyResult<()> {
        let objs = pairs_of(pairs)?;
        let ps = convert::try_map(&objs, |p| {
            let (k, v) = p.items();
            Ok((convert::arg(k, "key")?, convert::arg(v, "value")?))
        })?;
        if ps.len() > BATCH_CHUNK {
            // The engine checks each call's keys and values before it writes any; a batch
            // of several calls is checked whole first, so that it too fails before writing.
            self.inner.check_usable(py)?;
            let lengths = ps.iter().map(|(k, v)| (k.as_ref().len(), Some(v.as_ref().len())));
            check_lengths(lengths).map_err(|e| errors::storage(py, e))?;
        }
        let db = &self.inner.db;
        in_chunks(py, self.inner.gil.releases_long(), &ps, |chunk| db.set_many(chunk))
    }

    /// Removes every key in `keys`; returns how many were present. As `set_many`, checks
    /// every key first and runs in chunks, with signals handled between two.
    fn remove_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<u64> {
        let objs = convert::collect_keys(keys, "remove_many")?;
        let ks = convert::args(&objs, "key")?;
        if ks.len() > BATCH_CHUNK {
            self.inner.check_usable(py)?;
            check_lengths(ks.iter().map(|k| (k.as_ref().len(), None)))
                .map_err(|e| errors::storage(py, e))?;
        }
        let db = &self.inner.db;
        let mut removed = 0;
        in_chunks(py, self.inner.gil.releases_long(), &ks, |chunk| {
            removed += db.remove_many(chunk)?;
            Ok(())
        })?;
        Ok(removed)
    }

    /// If the value of `key` is `expected` (`None`: absent), sets it to `new` (`None`:
    /// remove) and returns `True`; otherwise changes nothing and returns `False`.
    fn compare_and_set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expected: &Bound<'_, PyAny>,
        new: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let k = convert::arg(key, "key")?;
        let e = convert::opt_arg(expected, "expected")?;
        let n = convert::opt_arg(new, "new")?;
        self.cas(py, k.as_ref(), e.as_ref().map(AsRef::as_ref), n.as_ref().map(AsRef::as_ref))
    }

    /// Appends `value` to the value of `key` (an absent key counts as empty).
    fn append(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let k = convert::arg(key, "key")?;
        let v = convert::arg(value, "value")?;
        let (k, v, db) = (k.as_ref(), v.as_ref(), &self.inner.db);
        // Long work, whatever the suffix: the engine rewrites the stored value with the
        // suffix, and that value's length is known only under the shard lock.
        Gil::run(py, self.inner.gil.releases_long(), || db.append(k, v))
            .map_err(|e| errors::storage(py, e))
    }

    /// Replaces the value of `key` by `fn(old)` (`old` is `None` if absent; returning `None`
    /// removes the key) and returns the new value. `fn` runs with no store lock held and may
    /// run more than once if another thread changes the key meanwhile.
    fn update_value<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        func: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let k = convert::arg(key, "key")?;
        let k = k.as_ref();
        loop {
            let old = self.get_bytes(py, k)?;
            let new_obj = func.call1((old.clone(),))?;
            let new = convert::opt_arg(&new_obj, "the value returned by update_value's function")?;
            let expected = old.as_ref().map(|b| b.as_bytes());
            if self.cas(py, k, expected, new.as_ref().map(AsRef::as_ref))? {
                return Ok(match new {
                    None => None,
                    Some(Arg::Owned(v)) => Some(convert::to_py(py, &v)?),
                    Some(Arg::Borrowed(b)) => match new_obj.cast::<PyBytes>() {
                        Ok(same) => Some(same.clone()),
                        Err(_) => Some(convert::to_py(py, b)?),
                    },
                });
            }
            py.check_signals()?;
        }
    }

    /// Removes every record.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let db = &self.inner.db;
        Gil::run(py, self.inner.gil.releases_long(), || db.clear())
            .map_err(|e| errors::storage(py, e))
    }

    /// Makes every earlier write durable: against a crash of the process (`hard=False`,
    /// already true of every write; starts writing back) or of the machine (`hard=True`).
    #[pyo3(signature = (hard=false))]
    fn sync(&self, py: Python<'_>, hard: bool) -> PyResult<()> {
        let db = &self.inner.db;
        let d = if hard { Durability::Hard } else { Durability::Soft };
        Gil::run(py, self.inner.gil.releases_long(), || db.sync(d))
            .map_err(|e| errors::storage(py, e))
    }

    /// Compacts the database online (see the Rust `Db::rebuild`). A signal (Ctrl-C) stops it
    /// before its next shard: the shards copied so far are committed, no record is lost, and
    /// the signal's handler runs (`KeyboardInterrupt` by default).
    ///
    /// The engine's rebuild runs on a helper thread while this one waits, handling pending
    /// signals every [`SIGNAL_CHECK`] (with the GIL, taken back for that only when it was
    /// released, so other threads lose little of it). A handler therefore runs with no store
    /// lock held by its thread: run from inside the rebuild (its progress callback holds the
    /// store's rebuild lock), a handler that closed the database waited for the rebuild it
    /// ran in, and one that rebuilt it for that lock, forever. The helper never touches
    /// Python objects; the engine's `Reentrant` check (a rebuild by a thread inside a read)
    /// cannot apply to this thread, which holds no read between calls.
    fn rebuild(&self, py: Python<'_>) -> PyResult<()> {
        let db = &self.inner.db;
        let release = self.inner.gil.releases_long();
        let stop = AtomicBool::new(false);
        let finished = Finished::default();
        std::thread::scope(|s| {
            let helper = std::thread::Builder::new()
                .name("senju-rebuild".to_owned())
                .spawn_scoped(s, || {
                    // Marks the rebuild finished when dropped, also if it panics.
                    let _done = FinishedOnDrop(&finished);
                    db.rebuild_until(&stop, |_, _| {})
                })
                .map_err(|e| errors::storage(py, senju::StorageError::Io(e)))?;
            let mut raised: Option<PyErr> = None;
            while !Gil::run(py, release, || finished.wait(SIGNAL_CHECK)) {
                if raised.is_none()
                    && let Err(e) = py.check_signals()
                {
                    raised = Some(e);
                    stop.store(true, Ordering::Relaxed);
                }
            }
            let done = Gil::run(py, release, || helper.join())
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            if let Some(e) = raised {
                return Err(e);
            }
            done.map(drop).map_err(|e| errors::storage(py, e))
        })
    }

    /// Counters: records, shards, file_bytes, table_slots, live_bytes, dead_bytes, free_bytes,
    /// auto_rebuilds, and auto_rebuild_error (a str, only if automatic rebuilds stopped).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = &self.inner.db;
        let s = Gil::run(py, self.inner.gil.releases_long(), || db.stats())
            .map_err(|e| errors::storage(py, e))?;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("shards", s.shards)?;
        d.set_item("file_bytes", s.file_bytes)?;
        d.set_item("table_slots", s.table_slots)?;
        d.set_item("live_bytes", s.live_bytes)?;
        d.set_item("dead_bytes", s.dead_bytes)?;
        d.set_item("free_bytes", s.free_bytes)?;
        d.set_item("auto_rebuilds", s.auto_rebuilds)?;
        if let Some(e) = s.auto_rebuild_error {
            d.set_item("auto_rebuild_error", e)?;
        }
        Ok(d)
    }

    /// Closes the database (syncs, marks the file clean, releases its lock). Safe while other
    /// threads are inside calls: they finish or raise `ClosedError`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // Relaxed: the engine's own flag, set inside `close`, is what stops other calls.
        self.inner.closed.store(true, Ordering::Relaxed);
        let db = &self.inner.db;
        Gil::run(py, self.inner.gil.releases_long(), || db.close())
            .map_err(|e| errors::storage(py, e))
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.closed.load(Ordering::Relaxed)
    }

    /// The file's path, or `None` for an in-memory database: as `os.fsdecode` spells it
    /// (bytes that are not UTF-8 as surrogates), so that it opens the same file again.
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyString>> {
        let p = self.inner.path.as_ref()?;
        let Ok(s) = p.as_os_str().into_pyobject(py);
        Some(s)
    }

    /// The GIL policy: "auto", "release" or "hold".
    #[getter]
    fn gil(&self) -> &'static str {
        self.inner.gil.name()
    }

    /// Whether the database was opened read-only.
    #[getter]
    fn readonly(&self) -> bool {
        self.inner.read_only
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let me = slf.get();
        let name = slf.get_type().qualname()?;
        let module = slf.get_type().module()?;
        // The path as `repr` of the `path` attribute shows it, so that bytes that are not
        // UTF-8 show as the escapes that open the same file again, not as U+FFFD.
        let what = match me.path(slf.py()) {
            Some(p) => p.repr()?.to_string(),
            None => "memory".to_owned(),
        };
        let closed = if me.closed() { " closed" } else { "" };
        Ok(format!("<{module}.{name} {what} gil={}{closed}>", me.inner.gil.name()))
    }
}
