//! Python arguments as byte strings, and byte strings as Python `bytes`.
//!
//! `bytes` arguments are borrowed, not copied: a `bytes` object is immutable and the caller
//! keeps it alive for the whole call, so its buffer may be read with the GIL released. `str`
//! is encoded as UTF-8 (borrowed where the interpreter caches the encoding); `bytearray`,
//! which another thread could resize, and `memoryview`, which may show a mutable buffer, are
//! copied while the GIL is held.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString, PyTuple};

use crate::errors;

/// A key or value taken from a Python argument.
pub(crate) enum Arg<'a> {
    /// The buffer of an immutable `bytes` or `str` object the caller keeps alive.
    Borrowed(&'a [u8]),
    /// A copy (a `bytearray`, or a `str` the interpreter had to encode).
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Arg<'_> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        match self {
            Arg::Borrowed(b) => b,
            Arg::Owned(v) => v,
        }
    }
}

/// `obj` as bytes: `bytes`, `str` (UTF-8), `bytearray` or `memoryview`; otherwise a
/// `TypeError` that says `what` it was for and which type was given.
#[inline]
pub(crate) fn arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Arg<'a>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Arg::Borrowed(b.as_bytes()));
    }
    arg_slow(obj, what)
}

#[cold]
fn arg_slow<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Arg<'a>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(match s.to_cow()? {
            Cow::Borrowed(s) => Arg::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Arg::Owned(s.into_bytes()),
        });
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Arg::Owned(b.to_vec()));
    }
    if let Ok(view) = obj.cast::<PyMemoryView>() {
        // The bytes it shows, as `bytes(view)` has them: copied in C order, whatever its
        // strides and item format (`memoryview` cannot be subclassed, so this is its own
        // `tobytes`). A released view raises `ValueError` here.
        let copy = view.call_method0(pyo3::intern!(obj.py(), "tobytes"))?;
        return Ok(Arg::Owned(copy.cast_into::<PyBytes>()?.as_bytes().to_vec()));
    }
    Err(errors::wrong_type(what, obj))
}

/// A new `bytes` object holding a copy of `bytes`: `MemoryError` where it cannot be
/// allocated (a value can be 1 GiB), where PyO3's `PyBytes::new` would panic.
#[inline]
pub(crate) fn to_py<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let len = bytes.len() as pyo3::ffi::Py_ssize_t;
    // SAFETY: `PyBytes_FromStringAndSize` reads `len` bytes of a live slice and returns a
    // new reference, or NULL with an exception (`MemoryError`) set.
    let ptr = unsafe { pyo3::ffi::PyBytes_FromStringAndSize(bytes.as_ptr().cast(), len) };
    // SAFETY: `ptr` is a new reference to a `bytes` object, or NULL with an exception set.
    let obj = unsafe { Bound::from_owned_ptr_or_err(py, ptr) }?;
    // SAFETY: `PyBytes_FromStringAndSize` made a `bytes` object.
    Ok(unsafe { obj.cast_into_unchecked() })
}

/// A copy of `bytes` made without the GIL: `Err(len)` where it cannot be allocated, for
/// [`errors::out_of_memory`] once the GIL is back (`to_vec` would abort the process).
pub(crate) fn try_copy(bytes: &[u8]) -> Result<Vec<u8>, usize> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes.len()).map_err(|_| bytes.len())?;
    v.extend_from_slice(bytes);
    Ok(v)
}

/// `obj` as bytes, or `None` for Python's `None`.
pub(crate) fn opt_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Option<Arg<'a>>> {
    if obj.is_none() { Ok(None) } else { arg(obj, what).map(Some) }
}

/// Every item of the iterable `obj` as bytes (the objects are kept in `keep` so that the
/// borrowed buffers stay valid).
pub(crate) fn args<'a, 'py>(keep: &'a [Bound<'py, PyAny>], what: &str) -> PyResult<Vec<Arg<'a>>> {
    try_map(keep, |o| arg(o, what))
}

/// `f` of every item, in a vector allocated once. Collecting into a `PyResult<Vec<_>>`
/// loses the length and grows the vector from four items by doubling: two reallocations
/// for ten keys, a tenth of a 10-key `get_many` (callgrind).
pub(crate) fn try_map<'a, T, U>(
    items: &'a [T],
    mut f: impl FnMut(&'a T) -> PyResult<U>,
) -> PyResult<Vec<U>> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(f(item)?);
    }
    Ok(out)
}

/// The keys of `keys`, an iterable of keys given to the batch method `method`, collected
/// so that their buffers can be borrowed. Each is checked to be bytes, `str`, `bytearray` or
/// `memoryview` as it comes, so that `get_many(range(10**17))` fails at its first item, not
/// after reading them all. A single key of one of those types is refused with a `TypeError`:
/// iterated, it would be one key per character (or per byte, an `int`), and
/// `remove_many("apple")` would remove the keys "a", "p", "l" and "e".
pub(crate) fn collect_keys<'py>(
    keys: &Bound<'py, PyAny>,
    method: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if is_bytes_or_str(keys) {
        return Err(PyTypeError::new_err(format!(
            "{method} takes an iterable of keys (a list, a tuple, ...), not a single {}; \
             for one key, wrap it in a list",
            keys.get_type().name()?
        )));
    }
    // A list or a tuple is read item by item, without the iterator protocol (about a
    // quarter of what `get_many` spent with the GIL held per key, `callgrind`, lab 0003).
    // No Python code runs in the loop, so the list cannot change meanwhile. Exact types
    // only: a subclass may define its own `__iter__`.
    if let Ok(list) = keys.cast_exact::<PyList>() {
        return checked_keys(list.iter().map(Ok), list.len());
    }
    if let Ok(tuple) = keys.cast_exact::<PyTuple>() {
        return checked_keys(tuple.iter().map(Ok), tuple.len());
    }
    let capacity = capacity_hint(keys)?;
    checked_keys(keys.try_iter()?, capacity)
}

/// The items of `items`, each checked to be a key type as it comes, in a vector made with
/// room for `capacity` of them (at most [`MAX_RESERVED`]).
fn checked_keys<'py>(
    items: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
    capacity: usize,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut out = Vec::with_capacity(capacity.min(MAX_RESERVED));
    for item in items {
        let item = item?;
        if !is_bytes_or_str(&item) {
            return Err(errors::wrong_type("key", &item));
        }
        out.push(item);
    }
    Ok(out)
}

/// A value read by a batch (`None`: the key is absent), turned into `bytes` (or `None`) as
/// a list is filled: [`PyList::new`] takes them one by one, with no vector in between.
pub(crate) struct Value<'a>(pub(crate) Option<&'a [u8]>);

impl<'py> IntoPyObject<'py> for Value<'_> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    #[inline]
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Some(bytes) => to_py(py, bytes).map(Bound::into_any),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

/// Whether [`arg`] takes `obj` (short of a `str` that cannot be encoded or a released view).
#[inline]
fn is_bytes_or_str(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyString>()
        || obj.is_instance_of::<PyByteArray>()
        || obj.is_instance_of::<PyMemoryView>()
}

/// The most items a batch reserves room for before it has read them.
pub(crate) const MAX_RESERVED: usize = 1 << 16;

/// How many items to reserve room for before iterating `obj`: its length, at most
/// [`MAX_RESERVED`]. `__len__` is a hint, not a promise (`range(10**17)` has one, and its
/// items are refused one by one as they come), so a larger batch grows as it is read. An
/// exception raised by `__len__` propagates, except `TypeError`, which means "no length"
/// (a generator), as for `list()`.
pub(crate) fn capacity_hint(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    match obj.len() {
        Ok(n) => Ok(n.min(MAX_RESERVED)),
        Err(e) if e.is_instance_of::<PyTypeError>(obj.py()) => Ok(0),
        Err(e) => Err(e),
    }
}
