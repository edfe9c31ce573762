//! senju's Rust errors as Python exceptions.
//!
//! The exception classes are defined in Python (`senju/_errors.py`) so that some can also
//! derive from a built-in class (`TooLargeError` is a `ValueError`, `IoError` an `OSError`,
//! ...). They are looked up once and cached. Each message is the Rust error's text, which
//! says what happened and what to do.

use pyo3::exceptions::{PyKeyError, PyMemoryError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use senju::{OpenError, StorageError};

const MODULE: &str = "senju._errors";

/// One cached exception class of `senju._errors`.
struct Class {
    name: &'static str,
    cell: PyOnceLock<Py<PyType>>,
}

impl Class {
    const fn new(name: &'static str) -> Class {
        Class { name, cell: PyOnceLock::new() }
    }

    fn get<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyType>> {
        self.cell.import(py, MODULE, self.name)
    }

    /// An instance with the message `msg`.
    fn err(&self, py: Python<'_>, msg: String) -> PyErr {
        self.err_with(py, msg, |_| Ok(()))
    }

    /// An instance with the message `msg`, on which `attrs` sets attributes.
    fn err_with(
        &self,
        py: Python<'_>,
        msg: String,
        attrs: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<()>,
    ) -> PyErr {
        let build = || -> PyResult<PyErr> {
            let exc = self.get(py)?.call1((msg,))?;
            attrs(&exc)?;
            Ok(PyErr::from_value(exc))
        };
        build().unwrap_or_else(|e| e)
    }
}

static ERROR: Class = Class::new("Error");
static LOCKED: Class = Class::new("LockedError");
static NOT_A_DATABASE: Class = Class::new("NotADatabaseError");
static UNSUPPORTED_VERSION: Class = Class::new("UnsupportedVersionError");
static CORRUPTED: Class = Class::new("CorruptedError");
static INVALID_OPTION: Class = Class::new("InvalidOptionError");
static NOT_FOUND: Class = Class::new("NotFoundError");
static NEEDS_RECOVERY: Class = Class::new("NeedsRecoveryError");
static IO: Class = Class::new("IoError");
static TOO_LARGE: Class = Class::new("TooLargeError");
static CLOSED: Class = Class::new("ClosedError");
static FULL: Class = Class::new("FullError");
static READ_ONLY: Class = Class::new("ReadOnlyError");
static FORKED: Class = Class::new("ForkedError");

/// The engine's message with its Rust option names (`Builder::max_size`) as this binding's
/// keywords.
fn in_python(msg: String) -> String {
    msg.replace("`Builder::max_size`", "max_size=")
        .replace("`Builder::create(true)`", "create=True")
}

/// The Python exception for an error of an open database.
pub(crate) fn storage(py: Python<'_>, e: StorageError) -> PyErr {
    let msg = in_python(e.to_string());
    match e {
        StorageError::TooLarge { len, max, .. } => TOO_LARGE.err_with(py, msg, |exc| {
            exc.setattr("length", len)?;
            exc.setattr("limit", max)
        }),
        StorageError::Closed => CLOSED.err(py, msg),
        StorageError::Corrupted { .. } => CORRUPTED.err(py, msg),
        StorageError::Full { .. } => FULL.err(py, msg),
        StorageError::Io(e) => IO.err_with(py, msg, |exc| os_error_attrs(exc, &e, None)),
        StorageError::ReadOnly => READ_ONLY.err(
            py,
            "the database was opened read-only; open it without readonly=True to write".to_owned(),
        ),
        StorageError::Forked { opened_by } => {
            FORKED.err_with(py, msg, |exc| exc.setattr("opened_by", opened_by))
        }
        StorageError::OutOfMemory { needed } => out_of_memory(needed),
        _ => ERROR.err(py, msg),
    }
}

/// Python's `MemoryError` for a copy of `needed` bytes that could not be allocated.
pub(crate) fn out_of_memory(needed: usize) -> PyErr {
    PyMemoryError::new_err(format!(
        "could not allocate {needed} bytes for a value read from the database (it is intact \
         there); free memory and read it again"
    ))
}

/// `errno`, `strerror` and `filename` on an exception that is also an `OSError`, as
/// Python's own I/O errors have them (`e.errno == errno.ENOSPC` on a full disk); left `None`
/// where the error has no operating-system code.
fn os_error_attrs(
    exc: &Bound<'_, PyAny>,
    e: &std::io::Error,
    path: Option<&std::path::Path>,
) -> PyResult<()> {
    // The engine words some errors itself (a file that cannot be created because its
    // directory is missing) and keeps only their kind: a `NotFound` one is `ENOENT`.
    let code = match e.raw_os_error() {
        Some(code) => Some(code),
        None if e.kind() == std::io::ErrorKind::NotFound => {
            Some(exc.py().import("errno")?.getattr("ENOENT")?.extract::<i32>()?)
        }
        None => None,
    };
    if let Some(code) = code {
        let strerror = exc.py().import("os")?.call_method1("strerror", (code,))?;
        exc.setattr("errno", code)?;
        exc.setattr("strerror", strerror)?;
    }
    if let Some(p) = path {
        // The path as Python spells it (`os.fsdecode`: bytes that are not UTF-8 as
        // surrogates), so that it names the same file.
        exc.setattr("filename", p.as_os_str())?;
    }
    Ok(())
}

/// The Python exception for a failed open (`read_only`: whether `readonly=True` was given).
pub(crate) fn open(py: Python<'_>, e: OpenError, read_only: bool) -> PyErr {
    let msg = in_python(e.to_string());
    match e {
        OpenError::Locked { path, pid } => LOCKED.err_with(py, msg, |exc| {
            exc.setattr("path", path.as_os_str())?;
            exc.setattr("pid", pid)
        }),
        OpenError::NotADatabase { .. } => NOT_A_DATABASE.err(py, msg),
        OpenError::UnsupportedVersion { .. } => UNSUPPORTED_VERSION.err(py, msg),
        OpenError::Corrupted { .. } => CORRUPTED.err(py, msg),
        OpenError::InvalidOption { .. } => INVALID_OPTION.err(py, msg),
        OpenError::NotFound { path } => NOT_FOUND.err_with(
            py,
            // A read-only open never creates the file, whatever `create` says.
            if read_only {
                format!(
                    "{} does not exist; a read-only open does not create it: open it without \
                     readonly=True to create it",
                    path.display()
                )
            } else {
                format!("{} does not exist; open it with create=True to create it", path.display())
            },
            |exc| {
                let enoent: i32 = exc.py().import("errno")?.getattr("ENOENT")?.extract()?;
                os_error_attrs(exc, &std::io::Error::from_raw_os_error(enoent), Some(&path))
            },
        ),
        OpenError::NeedsRecovery { .. } => NEEDS_RECOVERY.err(py, msg),
        OpenError::Io { path, source } => {
            IO.err_with(py, msg, |exc| os_error_attrs(exc, &source, Some(&path)))
        }
        OpenError::AddressSpace { path, source, .. } => {
            let path = (!path.as_os_str().is_empty()).then_some(path);
            IO.err_with(py, msg, |exc| os_error_attrs(exc, &source, path.as_deref()))
        }
        OpenError::Storage(e) => storage(py, e),
        _ => ERROR.err(py, msg),
    }
}

/// An invalid option given from Python (raised as `InvalidOptionError`, a `ValueError`).
pub(crate) fn invalid_option(py: Python<'_>, msg: String) -> PyErr {
    INVALID_OPTION.err(py, msg)
}

/// `KeyError(key)` for a missing key, with the key as the caller gave it.
pub(crate) fn missing(key: &Bound<'_, PyAny>) -> PyErr {
    PyKeyError::new_err(key.clone().unbind())
}

/// `TypeError` naming what was given where bytes or str was expected.
pub(crate) fn wrong_type(what: &str, got: &Bound<'_, PyAny>) -> PyErr {
    let name = got.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string());
    PyTypeError::new_err(format!("{what} must be bytes or str, not {name}"))
}
