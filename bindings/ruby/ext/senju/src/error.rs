//! Rust errors to Ruby exceptions. The classes are defined in `lib/senju/error.rb` (loaded
//! before this extension) and mirror the Rust tree:
//!
//! | Rust | Ruby |
//! |---|---|
//! | `OpenError::Locked` | `Senju::LockedError` |
//! | `OpenError::NeedsRecovery` | `Senju::NeedsRecoveryError` |
//! | `OpenError::NotADatabase` | `Senju::NotADatabaseError` |
//! | `OpenError::UnsupportedVersion` | `Senju::UnsupportedVersionError` |
//! | `OpenError::Corrupted`, `StorageError::Corrupted` | `Senju::CorruptedError` |
//! | `OpenError::InvalidOption` | `Senju::InvalidOptionError` |
//! | `OpenError::NotFound` | `Senju::NotFoundError` |
//! | `OpenError::Io`, `OpenError::AddressSpace`, `StorageError::Io` | `Senju::IoError` |
//! | `StorageError::TooLarge` | `Senju::TooLargeError` |
//! | `StorageError::Closed` | `Senju::ClosedError` |
//! | `StorageError::Full` | `Senju::FullError` |
//! | `StorageError::ReadOnly` | `Senju::ReadOnlyError` |
//! | `StorageError::Forked` | `Senju::ForkedError` |
//! | `StorageError::OutOfMemory` | Ruby's `NoMemoryError` |
//!
//! Every class but `NoMemoryError` is a subclass of `Senju::Error < StandardError`; the
//! message is the Rust error's, which says what to do. A copy that cannot be allocated is
//! Ruby's own `NoMemoryError`, as when Ruby cannot allocate an object, with the bytes it
//! needed in the message.

use magnus::prelude::*;
use magnus::value::Lazy;
use magnus::{Error, ExceptionClass, RModule, Ruby};
use senju::{OpenError, StorageError};

/// `Senju::<name>`, an exception class defined by `lib/senju/error.rb`.
fn class(ruby: &Ruby, name: &str) -> ExceptionClass {
    ruby.class_object()
        .const_get::<_, RModule>("Senju")
        .and_then(|m| m.const_get::<_, ExceptionClass>(name))
        .unwrap_or_else(|_| ruby.exception_runtime_error())
}

macro_rules! classes {
    ($($stat:ident = $name:literal;)*) => {
        $(static $stat: Lazy<ExceptionClass> = Lazy::new(|ruby| class(ruby, $name));)*

        /// Looks every class up now, while the extension loads (see `entry::init`).
        pub(crate) fn force_classes(ruby: &Ruby) {
            $(Lazy::force(&$stat, ruby);)*
        }
    };
}

classes! {
    BASE = "Error";
    LOCKED = "LockedError";
    NEEDS_RECOVERY = "NeedsRecoveryError";
    NOT_A_DATABASE = "NotADatabaseError";
    UNSUPPORTED_VERSION = "UnsupportedVersionError";
    CORRUPTED = "CorruptedError";
    INVALID_OPTION = "InvalidOptionError";
    NOT_FOUND = "NotFoundError";
    IO = "IoError";
    TOO_LARGE = "TooLargeError";
    CLOSED = "ClosedError";
    FULL = "FullError";
    READ_ONLY = "ReadOnlyError";
    FORKED = "ForkedError";
}

/// The engine's message with its Rust option names (`Builder::max_size`, `read_only`) as
/// this binding's keywords.
fn in_ruby(msg: String) -> String {
    msg.replace("`Builder::max_size`", "max_size:")
        .replace("`Builder::create(true)`", "create: true")
        .replace("`read_only`", "readonly: true")
}

/// The exception for a failed operation on an open database.
pub(crate) fn storage_error(ruby: &Ruby, e: StorageError) -> Error {
    let class = match &e {
        StorageError::TooLarge { .. } => &TOO_LARGE,
        StorageError::Closed => &CLOSED,
        StorageError::Corrupted { .. } => &CORRUPTED,
        StorageError::Full { .. } => &FULL,
        StorageError::Io(io) => return io_error(ruby, in_ruby(e.to_string()), errno_of(ruby, io)),
        StorageError::ReadOnly => &READ_ONLY,
        StorageError::Forked { .. } => &FORKED,
        StorageError::OutOfMemory { needed } => return out_of_memory(ruby, *needed),
        _ => &BASE,
    };
    Error::new(ruby.get_inner(class), in_ruby(e.to_string()))
}

/// Ruby's `NoMemoryError` for a copy of `needed` bytes (of a value read from the database,
/// or of a String to write) that could not be allocated. The engine's own message names
/// `get_with`, which Ruby code cannot call.
pub(crate) fn out_of_memory(ruby: &Ruby, needed: usize) -> Error {
    Error::new(
        ruby.exception_no_mem_error(),
        format!(
            "could not allocate {needed} bytes to copy a value from or into the database (what \
             is stored is intact); free memory and try again"
        ),
    )
}

/// The exception for a failed open.
pub(crate) fn open_error(ruby: &Ruby, e: OpenError) -> Error {
    let class = match e {
        OpenError::Storage(e) => return storage_error(ruby, e),
        OpenError::Locked { .. } => &LOCKED,
        OpenError::NeedsRecovery { .. } => &NEEDS_RECOVERY,
        OpenError::NotADatabase { .. } => &NOT_A_DATABASE,
        OpenError::UnsupportedVersion { .. } => &UNSUPPORTED_VERSION,
        OpenError::Corrupted { .. } => &CORRUPTED,
        OpenError::InvalidOption { .. } => &INVALID_OPTION,
        OpenError::NotFound { .. } => &NOT_FOUND,
        OpenError::Io { ref source, .. } | OpenError::AddressSpace { ref source, .. } => {
            let errno = errno_of(ruby, source);
            return io_error(ruby, in_ruby(e.to_string()), errno);
        }
        _ => &BASE,
    };
    Error::new(ruby.get_inner(class), in_ruby(e.to_string()))
}

/// The operating system's error number of `e`. The engine words some errors itself (a file
/// that cannot be created because its directory is missing) and keeps only their kind; a
/// `NotFound` one is `ENOENT`, taken from Ruby's `Errno::ENOENT`.
fn errno_of(ruby: &Ruby, e: &std::io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        if e.kind() != std::io::ErrorKind::NotFound {
            return None;
        }
        let errno: RModule = ruby.class_object().const_get("Errno").ok()?;
        let enoent: magnus::RClass = errno.const_get("ENOENT").ok()?;
        enoent.const_get("Errno").ok()
    })
}

/// `Senju::IoError` with the message `msg` and `errno`, the operating system's error number
/// (`Errno::ENOSPC::Errno` on a full disk), as `SystemCallError#errno` has it.
fn io_error(ruby: &Ruby, msg: String, errno: Option<i32>) -> Error {
    let class = ruby.get_inner(&IO);
    let Some(code) = errno else { return Error::new(class, msg) };
    match class.new_instance((msg,)) {
        Ok(exc) => {
            match exc.funcall::<_, _, magnus::Value>("instance_variable_set", ("@errno", code)) {
                Ok(_) => Error::from(exc),
                Err(e) => e,
            }
        }
        Err(e) => e,
    }
}

/// `Senju::ClosedError` for a call on a handle that `close` has closed.
pub(crate) fn closed_error(ruby: &Ruby) -> Error {
    storage_error(ruby, StorageError::Closed)
}

/// `Senju::Error` for a bug in this binding (a caught panic).
pub(crate) fn internal_error(ruby: &Ruby, what: &str) -> Error {
    Error::new(
        ruby.get_inner(&BASE),
        format!("internal error in the senju extension: {what}; please report it"),
    )
}
