//! Errors: [`OpenError`] for opening a database, [`StorageError`] for everything done with an
//! open one, and the umbrella [`Error`] that both convert into.
//!
//! Each message says what happened and what to do about it.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a database could not be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// Another process (or another handle in this process) has the file open for writing.
    Locked {
        /// The file.
        path: PathBuf,
        /// The process that holds the lock, as it recorded itself in the header (if known).
        pid: Option<u32>,
    },
    /// The file exists but is not a senju database.
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a newer (or unknown) format version.
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found in the file.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The file is damaged in a way that automatic recovery cannot repair.
    Corrupted {
        /// Byte offset of the damage.
        offset: u64,
        /// What was wrong there.
        what: &'static str,
    },
    /// An option was out of range.
    InvalidOption {
        /// The option's name.
        name: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The file did not exist and the builder said not to create it.
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// A read-only open found a file that was not closed cleanly: recovering it needs a
    /// write. Opening it once for writing recovers it.
    NeedsRecovery {
        /// The file.
        path: PathBuf,
    },
    /// The operating system refused something (open, map, lock, sync).
    Io {
        /// The file (empty for an in-memory database).
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The process could not reserve the address space for the map: `requested` bytes,
    /// from [`Builder::max_size`](crate::Builder::max_size) (without that option, a smaller
    /// reservation is accepted and this error means not even the file itself fits).
    AddressSpace {
        /// The file (empty for an in-memory database).
        path: PathBuf,
        /// Bytes asked for.
        requested: u64,
        /// The operating system's answer.
        source: io::Error,
    },
    /// Recovery or opening needed to write and that failed.
    Storage(StorageError),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Locked { path, pid: Some(pid) } if *pid == std::process::id() => write!(
                f,
                "database {} is already open in this process (pid {pid}); use that handle, \
                 or close it first",
                path.display()
            ),
            OpenError::Locked { path, pid: Some(pid) } => write!(
                f,
                "database {} is locked by process {pid}; close it there, or wait for that \
                 process to exit",
                path.display()
            ),
            OpenError::Locked { path, pid: None } => write!(
                f,
                "database {} is in use by another handle (a writer, or read-only handles when \
                 you want to write); close it there first",
                path.display()
            ),
            OpenError::NeedsRecovery { path } => write!(
                f,
                "database {} was not closed cleanly and needs recovery, which a read-only open \
                 cannot do; open it once for writing (that recovers it), then read-only",
                path.display()
            ),
            OpenError::NotADatabase { path } => {
                write!(f, "{} is not a senju database (bad magic); check the path", path.display())
            }
            OpenError::UnsupportedVersion { path, found, supported } => write!(
                f,
                "{} has format version {found} but this senju reads version {supported}; \
                 open it with a matching senju release",
                path.display()
            ),
            OpenError::Corrupted { offset, what } => write!(
                f,
                "database is corrupted at byte {offset} ({what}); `senju check --repair` \
                 (`senju::salvage`) copies its intact records to a fresh file, or restore it \
                 from a backup"
            ),
            OpenError::AddressSpace { path, requested, source } => write!(
                f,
                "cannot map {}: the process may not reserve {requested} bytes of address space \
                 ({source}); open it with a smaller `Builder::max_size`, or raise the \
                 address-space limit (`ulimit -v`)",
                path.display()
            ),
            OpenError::InvalidOption { name, reason } => {
                write!(f, "invalid option `{name}`: {reason}")
            }
            OpenError::NotFound { path } => write!(
                f,
                "{} does not exist; a writable open creates it with `Builder::create(true)` (a \
                 read-only open never creates a file)",
                path.display()
            ),
            OpenError::Io { path, source } => {
                write!(
                    f,
                    "I/O error on {}: {source}; check the path, permissions and free space",
                    path.display()
                )
            }
            OpenError::Storage(e) => write!(f, "while opening: {e}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Io { source, .. } | OpenError::AddressSpace { source, .. } => Some(source),
            OpenError::Storage(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StorageError> for OpenError {
    fn from(e: StorageError) -> Self {
        OpenError::Storage(e)
    }
}

/// Why an operation on an open database failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StorageError {
    /// A key or value is longer than the format allows.
    TooLarge {
        /// `"key"` or `"value"`.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most allowed ([`MAX_KEY_LEN`](crate::MAX_KEY_LEN) or
        /// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN)).
        max: usize,
    },
    /// The database was closed.
    Closed,
    /// A record or index entry failed its checksum or points outside the file.
    Corrupted {
        /// Byte offset of the damage.
        offset: u64,
        /// What was wrong there.
        what: &'static str,
    },
    /// The database reached its maximum size (the reserved address range).
    Full {
        /// Bytes the file would need.
        needed: u64,
        /// The maximum: [`Db::max_size`](crate::Db::max_size).
        limit: u64,
    },
    /// The operating system refused a write, a growth or a sync.
    Io(io::Error),
    /// A write on a handle opened with [`Builder::read_only`](crate::Builder::read_only).
    ReadOnly,
    /// A call in a child process (made by `fork`) on a handle its parent opened: a handle
    /// belongs to the process that opened it. Open the database in the child once the
    /// parent has closed it, or open it only after forking.
    Forked {
        /// The process that opened the handle.
        opened_by: u32,
    },
    /// A call that waits for the database's readers, made by a thread that is one of them
    /// (it holds an [`Iter`](crate::Iter), or runs inside a
    /// [`get_with`](crate::Db::get_with) closure), or that waits for a rebuild, made from
    /// that rebuild's `progress` callback: it would wait for itself forever.
    Reentrant {
        /// The call refused: `"rebuild"` or `"close"`.
        call: &'static str,
    },
    /// A read by a thread that already holds 65,535 reads of this database at once (live
    /// [`Iter`](crate::Iter)s, nested [`get_with`](crate::Db::get_with) closures): the count
    /// of a thread's reads has 16 bits. Drop iterators that are not needed any more.
    TooManyReads,
    /// The process could not allocate the `needed` bytes of a copy of a value or key (a
    /// [`get`](crate::Db::get), a scan): the record is intact in the database. Free memory,
    /// or read the value in place with [`get_with`](crate::Db::get_with), which copies
    /// nothing.
    OutOfMemory {
        /// The bytes the copy needed.
        needed: usize,
    },
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::TooLarge { what, len, max } => write!(
                f,
                "{what} of {len} bytes is too large (at most {max}); split it or store it \
                 elsewhere and keep a reference"
            ),
            StorageError::Closed => {
                write!(f, "the database is closed; open it again to use it")
            }
            StorageError::Corrupted { offset, what } => write!(
                f,
                "database is corrupted at byte {offset} ({what}); `senju check --repair` \
                 (`senju::salvage`) copies its intact records to a fresh file, or restore it \
                 from a backup"
            ),
            StorageError::Full { needed, limit } => write!(
                f,
                "database would need {needed} bytes but its maximum size is {limit}; reopen it \
                 with a larger `Builder::max_size`"
            ),
            StorageError::Io(e) => {
                write!(f, "I/O error: {e}; check free disk space and permissions")
            }
            StorageError::ReadOnly => {
                write!(f, "the database was opened read-only; open it without `read_only` to write")
            }
            StorageError::Forked { opened_by } => write!(
                f,
                "this handle was opened by process {opened_by}, and this process is a child of \
                 it made by fork, where the handle cannot be used; open the database here once \
                 the parent has closed it, or open it only after forking"
            ),
            StorageError::TooManyReads => write!(
                f,
                "this thread already holds 65,535 reads of the database at once (live \
                 iterators, or nested `get_with` closures); drop iterators it no longer needs"
            ),
            StorageError::OutOfMemory { needed } => write!(
                f,
                "could not allocate {needed} bytes to copy a value out of the database (it is \
                 intact there); free memory, or read the value in place with `get_with`"
            ),
            StorageError::Reentrant { call } => write!(
                f,
                "`{call}` was called by a thread that it would wait for: one that is reading \
                 the database (it holds an iterator, or runs inside a `get_with` or \
                 `get_many_with` closure) or runs a rebuild's `progress` callback; call it \
                 after the iterator is dropped, or the closure or callback has returned"
            ),
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StorageError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for StorageError {
    fn from(e: io::Error) -> Self {
        StorageError::Io(e)
    }
}

impl From<crate::region::GrowError> for StorageError {
    fn from(e: crate::region::GrowError) -> Self {
        match e {
            crate::region::GrowError::Full { needed, limit } => {
                StorageError::Full { needed, limit }
            }
            crate::region::GrowError::Io(e) => StorageError::Io(e),
        }
    }
}

/// Any senju error.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Opening failed.
    Open(OpenError),
    /// An operation on an open database failed.
    Storage(StorageError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open(e) => e.fmt(f),
            Error::Storage(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open(e) => e.source(),
            Error::Storage(e) => e.source(),
        }
    }
}

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Self {
        Error::Open(e)
    }
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        Error::Storage(e)
    }
}

/// A `Result` with a [`StorageError`].
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        // Another process's pid (not this test's own, which reads differently; see below).
        let other = if std::process::id() == 1234 { 1235 } else { 1234 };
        let e = OpenError::Locked { path: "/tmp/x.sj".into(), pid: Some(other) };
        assert_eq!(
            e.to_string(),
            format!(
                "database /tmp/x.sj is locked by process {other}; close it there, or wait for \
                 that process to exit"
            )
        );
        let e = OpenError::Locked { path: "/tmp/x.sj".into(), pid: Some(std::process::id()) };
        assert!(e.to_string().contains("already open in this process"), "{e}");
        let e: Error = StorageError::TooLarge { what: "key", len: 5, max: 4 }.into();
        assert!(e.to_string().contains("too large"));
        assert!(Error::from(StorageError::Closed).to_string().contains("open it again"));
    }
}
