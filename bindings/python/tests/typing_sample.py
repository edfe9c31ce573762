"""Uses the whole public API with the types a user would write; checked by `mypy --strict`
(`make python`), never run by pytest."""

from __future__ import annotations

import pathlib
from collections.abc import MutableMapping
from typing import Optional

import senju


def sample(path: pathlib.Path) -> int:
    with senju.open(path, gil="auto", truncate=True) as db:
        db[b"k"] = b"v"
        db["s"] = "t"
        db[memoryview(b"m")] = memoryview(bytearray(b"w"))
        value: bytes = db[b"k"]
        maybe: Optional[bytes] = db.get(b"k")
        with_default: bytes = db.get("x", b"d")
        either: bytes | int = db.get(b"x", 0)
        del db["s"]
        present: bool = b"k" in db
        count: int = len(db)
        keys: list[bytes] = list(db)
        items: dict[bytes, bytes] = dict(db.items())
        values: list[bytes] = list(db.values())
        many: list[Optional[bytes]] = db.get_many([b"k", "s"])
        db.set_many({b"a": b"1"})
        db.set_many([(b"b", "2")])
        removed: int = db.remove_many([b"a"])
        swapped: bool = db.compare_and_set(b"k", b"v", None)
        db.append(b"log", b"x")
        new: Optional[bytes] = db.update_value(b"n", lambda old: (old or b"") + b"1")
        popped: bytes = db.pop(b"n")
        default: bytes | None = db.pop(b"n", None)
        db.update({b"u": b"1"}, w="2")
        db.sync(hard=True)
        db.rebuild()
        stats: dict[str, int] = db.stats()
        mapping: MutableMapping[bytes, bytes] = db
        closed: bool = db.closed
    try:
        db[b"k"]
    except senju.ClosedError as e:
        assert isinstance(e, senju.Error)
    try:
        senju.open(path, readonly=True, gil="hold").close()
    except senju.LockedError as e:
        pid: Optional[int] = e.pid
        print(pid)
    del value, maybe, with_default, either, present, keys, items, values, many, removed
    del swapped, new, popped, default, stats, mapping, closed
    return count
