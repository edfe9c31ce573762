"""senju: an embedded key-value database whose Python threads run in parallel.

A database behaves as a :class:`collections.abc.MutableMapping` of ``bytes`` to ``bytes``
(``str`` keys and values are accepted and stored as UTF-8, ``bytearray`` and ``memoryview``
as the bytes they hold; values come back as ``bytes``)::

    import senju

    with senju.open("data.sj") as db:        # created if missing
        db[b"apple"] = b"red"
        db["pear"] = "green"                 # stored as b"pear" -> b"green"
        assert db[b"pear"] == b"green"
        db.set_many({b"a": b"1", b"b": b"2"})    # one call, one GIL release
        print(db.get_many([b"a", b"zzz"]))       # [b'1', None]

Every method may be called from any number of threads at once. ``gil=`` chooses when calls
release the GIL: ``"auto"`` (default: batches, scans, sync, rebuild, append and values of
4 KiB or more), ``"release"`` (every call) or ``"hold"`` (never). See the README's "Python"
section.
"""

from __future__ import annotations

import os
from collections.abc import Callable, ItemsView, Iterable, Iterator, MutableMapping, ValuesView
from typing import TYPE_CHECKING, Optional, Tuple, Union

from ._errors import (
    ClosedError,
    CorruptedError,
    Error,
    ForkedError,
    FullError,
    InvalidOptionError,
    IoError,
    LockedError,
    NeedsRecoveryError,
    NotADatabaseError,
    NotFoundError,
    ReadOnlyError,
    TooLargeError,
    UnsupportedVersionError,
)
from ._senju import (
    BATCH_CHUNK,
    LARGE_VALUE,
    MAX_KEY_LEN,
    MAX_VALUE_LEN,
    SCAN_CHUNK,
    SCAN_CHUNK_BYTES,
    __version__,
)
from ._senju import Db as _NativeDb

if TYPE_CHECKING:
    from typing import Literal

    from _typeshed import SupportsKeysAndGetItem

    GilMode = Literal["auto", "release", "hold"]

__all__ = [
    "open",
    "Db",
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
    "MAX_KEY_LEN",
    "MAX_VALUE_LEN",
    "LARGE_VALUE",
    "SCAN_CHUNK",
    "SCAN_CHUNK_BYTES",
    "BATCH_CHUNK",
    "__version__",
]

_Bytes = Union[bytes, bytearray, memoryview, str]


class _Values(ValuesView[bytes]):
    """``db.values()``: iterates in chunks in Rust instead of one lookup per key."""

    __slots__ = ()
    _mapping: Db

    def __iter__(self) -> Iterator[bytes]:
        return self._mapping._iter_values()

    def __contains__(self, value: object) -> bool:
        # One scan of the values: the inherited method looks each key up, and a key that
        # another thread removes meanwhile raised KeyError.
        return any(v is value or v == value for v in self._mapping._iter_values())


class _Items(ItemsView[bytes, bytes]):
    """``db.items()``: iterates in chunks in Rust instead of one lookup per key."""

    __slots__ = ()
    _mapping: Db

    def __iter__(self) -> Iterator[Tuple[bytes, bytes]]:
        return self._mapping._iter_items()

    def __contains__(self, item: object) -> bool:
        # As a dict's items: anything but a 2-tuple whose key has a type that can be stored
        # is not in it (the inherited method raised TypeError for `(1, 2)`). One lookup.
        if not isinstance(item, tuple) or len(item) != 2:
            return False
        key, value = item
        if not isinstance(key, (bytes, bytearray, memoryview, str)):
            return False
        try:
            v = self._mapping.get(key)
        except (UnicodeEncodeError, TooLargeError):
            # A str with lone surrogates has no UTF-8 form, and a key longer than
            # MAX_KEY_LEN cannot be stored, so no stored key equals either: False as
            # `key in db` says (which also raises ClosedError once closed).
            return key in self._mapping
        return v is not None and (v is value or v == value)


class Db(_NativeDb, MutableMapping[bytes, bytes]):
    """An open senju database (see :func:`open`): a mutable mapping of bytes to bytes.

    The mapping methods, ``get_many``/``set_many``/``remove_many``, ``compare_and_set``,
    ``append``, ``update_value``, ``sync``, ``rebuild``, ``stats`` and ``close`` are
    implemented in Rust; ``values()``, ``items()``, ``update()`` and ``popitem()`` here.
    Iteration is weakly consistent: a key present for the whole scan is seen exactly once.
    """

    __slots__ = ()

    def values(self) -> ValuesView[bytes]:
        return _Values(self)

    def items(self) -> ItemsView[bytes, bytes]:
        return _Items(self)

    def update(
        self,
        other: Union[
            SupportsKeysAndGetItem[bytes, _Bytes],
            SupportsKeysAndGetItem[str, _Bytes],
            Iterable[Tuple[_Bytes, _Bytes]],
        ] = (),
        /,
        **kwds: _Bytes,
    ) -> None:
        """Sets every pair of ``other`` (a mapping or pairs) and of ``kwds``, in batches."""
        self.set_many(other)
        if kwds:
            self.set_many(kwds)

    def popitem(self) -> Tuple[bytes, bytes]:
        """Removes and returns some ``(key, value)`` pair; ``KeyError`` if empty."""
        for key in self:
            value = self.pop(key, None)
            if value is not None:
                return key, value
        raise KeyError("popitem(): database is empty")


def open(
    path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]", None] = None,
    *,
    memory: bool = False,
    readonly: bool = False,
    truncate: bool = False,
    create: bool = True,
    gil: GilMode = "auto",
    shards: Optional[int] = None,
    max_size: Optional[int] = None,
    capacity_hint: Optional[int] = None,
    auto_rebuild: Optional[int] = None,
    recovery_progress: Optional[Callable[[int, int], object]] = None,
) -> Db:
    """Opens the database file at ``path`` (created if missing; ``str``, ``bytes`` or a
    path-like object), or a new in-memory one with ``memory=True``.

    ``readonly``: open for reading only (a shared lock; any number of readers, no writer).
    ``truncate``: start empty. ``create=False``: fail with :class:`NotFoundError` if missing.
    ``gil``: ``"auto"`` (default), ``"release"`` or ``"hold"`` (see the module docstring).
    ``shards`` (a power of two, default 128; fixed when the file is created),
    ``max_size`` (bytes, default 256 GiB or as much address space as the process may
    reserve; a size given is reserved as given or :class:`IoError` is raised), ``capacity_hint`` (records expected): as in the
    Rust ``Builder``. ``auto_rebuild``: rebuild shards in a background thread once their
    dead records (overwritten or removed) outweigh their live ones and reach this many bytes
    in all (default ``None``: 64 MiB; ``0`` turns it off, leaving it to :meth:`Db.rebuild`).
    ``recovery_progress``: called as ``recovery_progress(done, total)`` while the open
    recovers a file that was not closed cleanly (bytes of records replayed so far, of
    ``total``; at most about a thousand calls, never for a clean open). Recovery reads every
    record, about 3 s per GiB of records on a small machine. If the callback raises, the open finishes, closes the database
    and raises that exception.

    A file another process has open for writing raises :class:`LockedError`.
    """
    # fsdecode: a bytes path (any bytes, as `builtins.open` takes) becomes the str that
    # encodes back to it, which is how the extension receives paths.
    fspath = None if path is None else os.fsdecode(path)
    return Db(
        fspath,
        memory=memory,
        readonly=readonly,
        truncate=truncate,
        create=create,
        gil=gil,
        shards=shards,
        max_size=max_size,
        capacity_hint=capacity_hint,
        auto_rebuild=auto_rebuild,
        recovery_progress=recovery_progress,
    )

