"""senju's exceptions: one class per kind of Rust error (``senju::OpenError``,
``senju::StorageError``), all under :class:`senju.Error`.

Some also derive from the built-in class a caller would catch for that kind of problem:
``TooLargeError`` and ``InvalidOptionError`` are ``ValueError``s, ``NotFoundError`` is a
``FileNotFoundError``, ``IoError`` is an ``OSError``.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "Error",
    "LockedError",
    "NotADatabaseError",
    "UnsupportedVersionError",
    "CorruptedError",
    "InvalidOptionError",
    "NotFoundError",
    "NeedsRecoveryError",
    "IoError",
    "ClosedError",
    "TooLargeError",
    "FullError",
    "ReadOnlyError",
    "ForkedError",
]


class Error(Exception):
    """Base class of every senju error."""

    def __str__(self) -> str:
        # senju's own message, also for the classes that are OSErrors (IoError,
        # NotFoundError): OSError would print "[Errno N] strerror: 'filename'" instead
        # once `errno`, `strerror` and `filename` are set, and those are set as Python's own
        # I/O errors have them.
        if len(self.args) == 1:
            return str(self.args[0])
        return super().__str__()


class LockedError(Error):
    """Another process (or handle) has the file open for writing, or, for a writer, a
    read-only handle has it open. ``pid`` is the holder's process id when known."""

    path: str
    pid: Optional[int]


class NotADatabaseError(Error):
    """The file exists but is not a senju database."""


class UnsupportedVersionError(Error):
    """The file was written in a format version this senju does not read."""


class CorruptedError(Error):
    """The file is damaged in a way automatic recovery cannot repair."""


class InvalidOptionError(Error, ValueError):
    """An option of :func:`senju.open` is out of range."""


class NotFoundError(Error, FileNotFoundError):
    """The file does not exist and ``create=False`` (or ``readonly=True``) was given."""


class NeedsRecoveryError(Error):
    """A read-only open found a file that was not closed cleanly; open it once for writing
    to recover it."""


class IoError(Error, OSError):
    """The operating system refused an open, a write, a growth or a sync."""


class ClosedError(Error):
    """The database was closed."""


class TooLargeError(Error, ValueError):
    """A key or value is longer than the format allows (``length`` and ``limit`` in bytes)."""

    length: int
    limit: int


class FullError(Error):
    """The file reached its maximum size (``max_size`` of :func:`senju.open`)."""


class ReadOnlyError(Error):
    """A write on a database opened with ``readonly=True``."""


class ForkedError(Error):
    """A call in a child process made by ``os.fork()`` (or ``multiprocessing`` with the
    ``fork`` start method) on a database its parent opened: a handle belongs to the process
    that opened it. ``opened_by`` is that process's id. Closing or collecting the handle in
    the child leaves the file and the parent alone. Open the database in the child once the
    parent has closed it, or open it only after forking."""

    opened_by: int
