"""Regression tests, each named after its bug; each docstring says how it failed and what the
fix changed. Tests that could crash or hang the interpreter before the fix run in a child
process with a time limit. Counted, never timed."""

from __future__ import annotations

import errno
import gc
import itertools
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from typing import Any, Callable, Iterator

import pytest

import senju
from conftest import GilCounter


def run_child(code: str, *args: str, timeout: float = 120) -> str:
    """Runs `code` in a fresh interpreter; returns its stdout (fails on a non-zero exit)."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    return out.stdout


class Sized:
    """An iterable of `items` whose `__len__` returns `length` or raises `raises`."""

    def __init__(self, items: list[Any], length: int = 0, raises: BaseException | None = None):
        self.values, self.length, self.raises = items, length, raises

    def __len__(self) -> int:
        if self.raises is not None:
            raise self.raises
        return self.length

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)


def test_batches_do_not_trust_len_for_their_allocation(gil: str) -> None:
    """`get_many(range(10**17))` reserved room for 10**17 keys up front, as `__len__` said:
    the allocation failed and the process aborted (SIGABRT); `range(2**61)` raised a
    PanicException ("capacity overflow"); an exception raised by `__len__` (even
    KeyboardInterrupt) was swallowed. Now the length is only a bounded hint, items are
    checked as they come, and `__len__`'s exceptions propagate (except TypeError, which means
    no length, as for `list()`)."""
    out = run_child(
        """
        import sys, senju
        db = senju.open(memory=True, gil=sys.argv[1])
        for call in (lambda: db.get_many(range(10**17)), lambda: db.remove_many(range(10**17)),
                     lambda: db.set_many(range(10**17)), lambda: db.get_many(range(2**61))):
            try:
                call()
            except TypeError as e:
                print(e)
        """,
        gil,
    )
    assert out.splitlines() == [
        "key must be bytes or str, not int",
        "key must be bytes or str, not int",
        "set_many takes a mapping or an iterable of (key, value) pairs; item 0 is a int, "
        "not a pair",
        "key must be bytes or str, not int",
    ]
    with senju.open(memory=True, gil=gil) as db:  # type: ignore[arg-type]
        db[b"a"] = b"1"
        for exc in (KeyboardInterrupt(), ZeroDivisionError("from __len__")):
            with pytest.raises(type(exc)):
                db.get_many(Sized([b"a"], raises=exc))
            with pytest.raises(type(exc)):
                db.remove_many(Sized([b"a"], raises=exc))
            with pytest.raises(type(exc)):
                db.set_many(Sized([(b"a", b"2")], raises=exc))
        # A `__len__` that lies is only a hint.
        assert db.get_many(Sized([b"a", b"b"], length=2**62)) == [b"1", None]
        assert db.get_many(Sized([b"a"], raises=TypeError("no length"))) == [b"1"]
        db.set_many(Sized([(b"a", b"2")], length=2**62))
        assert db[b"a"] == b"2"


FORK_SCAN = """
import os, signal, sys, threading, time
import senju

db = senju.open(memory=True, shards=1)
db.set_many((b"%09d" % i, b"v") for i in range(int(sys.argv[1])))
busy_seen = 0
for attempt in range(4):
    it = iter(db)
    started = threading.Event()
    done_at = []

    def first() -> None:
        started.set()
        next(it)  # copies the only shard's keys: long, with the GIL released
        done_at.append(time.monotonic())

    th = threading.Thread(target=first)
    th.start()
    started.wait()
    time.sleep(0.02)
    r, w = os.pipe()
    fork_at = time.monotonic()
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)  # a hang ends the child with SIGALRM
        report = []
        for call in (lambda: next(it), lambda: db.get(b"x"), lambda: next(iter(db))):
            try:
                call()
                report.append("ok")
            except senju.ForkedError:
                report.append("ForkedError")
        os.write(w, " ".join(report).encode())
        os._exit(0)
    os.close(w)
    th.join()
    _, status = os.waitpid(pid, 0)
    report = os.read(r, 1000).decode()
    os.close(r)
    busy = fork_at < done_at[0]  # the parent's thread held the scan at the fork
    busy_seen += busy
    print(os.waitstatus_to_exitcode(status), busy, report)
    if busy_seen:
        break
"""


def test_a_scan_busy_at_fork_raises_forked_error_in_the_child() -> None:
    """A scan that a parent thread was refilling at the instant of `fork` hung in the child:
    `next` waited for the scan's lock, held by a thread the child does not have. Now a call
    that finds the scan's lock taken checks for a fork (and a close) before it waits, and
    raises ForkedError as every call in a fork child does."""
    out = run_child(FORK_SCAN, "1000000", timeout=300)
    lines = [line.split(maxsplit=2) for line in out.splitlines()]
    for code, busy, *rest in lines:
        assert code == "0", out  # not killed by the alarm
        report = rest[0] if rest else ""
        # A scan busy at the fork raises, and so does one whose refill finished first,
        # though it holds keys it copied before the fork.
        assert report.split() == ["ForkedError", "ForkedError", "ForkedError"], out
    assert any(line[1] == "True" for line in lines), out


FORK_BUFFERED = """
import os, sys
import senju
with senju.open(sys.argv[1]) as db:
    db.set_many((b"%03d" % i, b"v") for i in range(100))
    it = iter(db)
    next(it)  # the scan now holds the rest of its first chunk, copied
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            next(it)
            print("ok")
        except senju.ForkedError:
            print("ForkedError")
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    print(len(list(it)))
"""


def test_a_scan_with_buffered_keys_raises_forked_error_in_the_child(
    tmp_path: pathlib.Path,
) -> None:
    """A scan handed out, in a fork child, the keys it had copied before the fork (and
    raised ForkedError only when it had to refill). Every call in a child raises now."""
    out = run_child(FORK_BUFFERED, str(tmp_path / "f.sj"))
    assert out.split() == ["ForkedError", "99"], out


@pytest.mark.parametrize("mode", ["auto", "release"])
def test_a_large_read_does_not_make_later_reads_preallocate_its_length(mode: str) -> None:
    """After a read that returned a large value, every later read on the handle of a
    missing key allocated a `bytes` object of that value's length first, as a guess at the
    length it would find: misses never reset the guess. Now a miss resets it as a small
    value does, so only the first read after the large one may guess wrong."""
    big = 8 << 20
    with senju.open(memory=True, gil=mode) as db:  # type: ignore[arg-type]
        db[b"big"] = b"x" * big
        db[b"small"] = b"s"
        assert len(db[b"big"]) == big
        assert db.get(b"missing") is None  # the one wrong guess
        tracemalloc.start()
        try:
            for _ in range(3):
                assert db.get(b"missing") is None
                assert db.pop(b"missing", None) is None
                assert db[b"small"] == b"s"
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < big // 4, peak
        assert len(db[b"big"]) == big


def test_a_failed_preallocation_does_not_stick() -> None:
    """Under an address-space limit, once a 64 MiB value had been read, every read raised
    MemoryError (each tried to preallocate 64 MiB first, and a failing read kept the hint).
    Now a failed preallocation falls back to a plain read and resets the hint."""
    out = run_child(
        """
        import resource, senju
        for mode in ("auto", "release"):
            db = senju.open(memory=True, gil=mode)
            db[b"big"] = b"x" * (64 << 20)
            db[b"small"] = b"s"
            v = db[b"big"]; del v
            with open("/proc/self/statm") as f:
                used = int(f.read().split()[0]) * 4096
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (used + (32 << 20), hard))
            try:
                print(mode, db.get(b"missing"), db.get(b"small"), db.setdefault(b"n", b"1"))
            finally:
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            db.close()
        """
    )
    assert out.splitlines() == ["auto None b's' b'1'", "release None b's' b'1'"]


class Clearing:
    """Equal to nothing; comparing it with a value removes every key of `db` (once)."""

    def __init__(self, db: senju.Db):
        self.db, self.done = db, False

    def __eq__(self, other: object) -> bool:
        if not self.done:
            self.done = True
            self.db.clear()
        return False

    __hash__ = None  # type: ignore[assignment]


def test_values_contains_while_keys_are_removed(gil: str) -> None:
    """`v in db.values()` scanned the keys and looked each one up: a key another thread
    removed meanwhile raised KeyError. Now it scans the values. (Here the comparison itself
    removes the keys, which makes the race deterministic; one shard, so that the scan's
    first chunk holds every key.)"""
    db = senju.open(memory=True, gil=gil, shards=1)  # type: ignore[arg-type]
    db.set_many({b"k%d" % i: b"v%d" % i for i in range(20)})
    assert Clearing(db) not in db.values()
    db.set_many({b"k%d" % i: b"v%d" % i for i in range(20)})
    assert (b"k3", Clearing(db)) not in db.items()  # type: ignore[comparison-overlap]
    db[b"k"] = b"v"
    assert b"v" in db.values() and (b"k", b"v") in db.items() and b"k" in db.keys()
    assert (b"k", b"w") not in db.items() and (b"zz", b"v") not in db.items()
    db.close()


def test_contains_with_a_key_of_another_type_is_false(db: senju.Db) -> None:
    """`1 in db`, `1 in db.keys()` and `(1, 2) in db.items()` raised TypeError where a dict
    (and the stub's `__contains__(key: object)`) says False. Reads and writes still raise
    TypeError for such keys; a closed handle still raises ClosedError."""
    db[b"a"] = b"1"
    for bad in (1, None, 1.5, (b"a",), [b"a"], object()):
        assert bad not in db
        assert bad not in db.keys()
        assert (bad, b"1") not in db.items()
    for item in (1, (b"a",), (b"a", b"1", b"x"), [b"a", b"1"], "ab", None):
        assert item not in db.items()  # type: ignore[operator]
    assert "a" in db and bytearray(b"a") in db  # type: ignore[comparison-overlap]
    assert ("a", b"1") in db.items()  # type: ignore[comparison-overlap]
    with pytest.raises(TypeError, match="key must be bytes or str, not int"):
        db.get(1)  # type: ignore[call-overload]
    db.close()
    with pytest.raises(senju.ClosedError):
        1 in db  # type: ignore[comparison-overlap]


def test_gc_callback_reentering_a_scan_does_not_deadlock() -> None:
    """On Python 3.11 and older the garbage collector may run while a scan builds its next
    item; a `gc.callbacks` function calling `next()` on the same scan then waited for the
    scan's lock, held by its own thread: a deadlock. Now the lock is released before any
    Python object is made, and the re-entrant call gets the next item."""
    out = run_child(
        """
        import gc, signal, senju
        signal.alarm(30)
        for mode in ("auto", "release", "hold"):
            db = senju.open(memory=True, gil=mode)
            db.set_many((b"%05d" % i, b"v") for i in range(3000))
            it = iter(db.items())
            seen = [next(it)]
            calls = [0]
            def cb(phase, info):
                if phase == "start" and calls[0] < 50:
                    calls[0] += 1
                    item = next(it, None)
                    if item is not None:
                        seen.append(item)
            gc.set_threshold(1)
            gc.callbacks.append(cb)
            try:
                seen.extend(it)
            finally:
                gc.callbacks.remove(cb)
                gc.set_threshold(700)
            assert sorted(seen) == [(b"%05d" % i, b"v") for i in range(3000)], len(seen)
            print(mode, "ok")
        """
    )
    assert out.split() == ["auto", "ok", "release", "ok", "hold", "ok"]


def test_set_many_propagates_exceptions_raised_while_reading_a_pair(db: senju.Db) -> None:
    """An exception raised while iterating one of `set_many`'s pairs (KeyboardInterrupt
    included) became the TypeError "item 0 ... not a pair"; and an item that iterates
    forever was read to its end. Now only "not iterable" and "not two items" are that
    TypeError; anything else propagates, and at most three items of a pair are read."""

    def raising(exc: BaseException) -> Iterator[bytes]:
        yield b"k"
        raise exc

    for exc in (KeyboardInterrupt(), ZeroDivisionError("in a pair")):
        with pytest.raises(type(exc)):
            db.set_many([raising(exc)])  # type: ignore[list-item]
    read = itertools.count()
    endless = (b"%d" % next(read) for _ in itertools.count())
    with pytest.raises(TypeError, match="item 0 is a generator, not a pair"):
        db.set_many([endless])  # type: ignore[list-item]
    assert next(read) <= 3
    with pytest.raises(TypeError, match="item 1 is a int, not a pair"):
        db.set_many([(b"a", b"1"), 7])  # type: ignore[list-item]
    assert len(db) == 0


def test_auto_append_to_a_large_value_releases_the_gil(count_gil_releases: GilCounter) -> None:
    """In gil="auto", `append` chose by the suffix's length alone, so appending one byte to a
    large value copied the whole value with the GIL held. Now append, whose cost is that of
    the stored value, releases it in "auto" as long work does."""
    db = senju.open(memory=True, auto_rebuild=0)
    db[b"log"] = b"x" * (1 << 20)
    assert count_gil_releases(lambda i: db, lambda d: d.append(b"log", b"y"), 200) == 1
    v = db[b"log"]
    assert v[: 1 << 20] == b"x" * (1 << 20) and v[1 << 20 :] == b"y" * (len(v) - (1 << 20)) != b""
    db.close()


def test_auto_close_by_drop_releases_the_gil(
    tmp_path: pathlib.Path, count_gil_releases: GilCounter
) -> None:
    """A handle dropped without `close()` closed its database (two hard syncs) with the GIL
    held, even in gil="auto", whose `close()` releases it. Now the drop releases it too."""
    value = os.urandom(1 << 16)
    handles: list[senju.Db] = []

    def prepare(i: int) -> None:
        db = senju.open(tmp_path / ("d%d.sj" % i), auto_rebuild=0)
        db.set_many((b"k%d" % j, value) for j in range(64))
        handles.append(db)

    def drop(_: None) -> None:
        handles.pop()  # the last reference: the store is closed here

    released = count_gil_releases(prepare, drop, 50)
    assert released == 1, "dropping an unclosed handle kept the GIL for its close"
    for path in tmp_path.iterdir():
        with senju.open(path) as again:  # closed cleanly: the lock was released
            assert len(again) == 64


def test_a_missing_directory_gives_an_os_error_with_enoent(tmp_path: pathlib.Path) -> None:
    # The engine words this error itself and kept only its kind: errno was None.
    import errno

    path = tmp_path / "missing" / "x.sj"
    try:
        senju.open(path)
    except senju.IoError as e:
        assert isinstance(e, OSError)
        assert e.errno == errno.ENOENT, e
        assert "does not exist" in str(e)
    else:
        raise AssertionError("opening in a missing directory succeeded")


FORK_LEN = """
import os, sys
import senju
with senju.open(sys.argv[1]) as db:
    db[b"a"] = b"1"
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        for call in (lambda: len(db), lambda: bool(db), lambda: iter(db), lambda: iter(db.items())):
            try:
                print("returned", call())
            except senju.ForkedError:
                print("ForkedError")
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_len_and_a_new_scan_in_a_fork_child_raise_forked_error(tmp_path: pathlib.Path) -> None:
    """`len(db)` and `bool(db)` in a fork child returned the parent's count (they read
    counters only), and a new scan (`iter(db)`, `iter(db.items())`) raised only at its first
    `next`."""
    out = run_child(FORK_LEN, str(tmp_path / "f.sj"))
    assert out.split() == ["ForkedError"] * 4, out


LARGE_VALUES_SCAN = """
import resource, sys
import senju
db = senju.open(memory=True, shards=1, gil=sys.argv[1])
for i in range(32):
    db[b"k%02d" % i] = bytes([i]) * (8 << 20)
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
# 96 MiB of address space beyond what is mapped now: room for a few 8 MiB values at once,
# not for the 256 MiB of all of them.
resource.setrlimit(resource.RLIMIT_AS, (used + (96 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
n = 0
for k, v in db.items():
    assert v == bytes([int(k[1:])]) * (8 << 20)
    n += 1
    del k, v
print(n)
"""


@pytest.mark.parametrize("gil", ["auto", "hold"])
def test_a_scan_of_large_values_copies_a_few_at_a_time(gil: str) -> None:
    """`values()` and `items()` copied 512 values per step whatever their size (up to
    512 GiB for values of 1 GiB): under an address-space limit, 32 values of 8 MiB aborted
    the process. A step now stops once it holds `senju.SCAN_CHUNK_BYTES` (4 MiB)."""
    out = run_child(LARGE_VALUES_SCAN, gil)
    assert out.split() == ["32"], out


def test_the_path_of_a_file_whose_name_is_not_utf8_opens_it_again(tmp_path: pathlib.Path) -> None:
    """`db.path` (and an error's `filename`) replaced bytes that are not UTF-8 with U+FFFD,
    so the path named no file; it is spelled as `os.fsdecode` spells it now."""
    raw = os.fsencode(tmp_path) + b"/x\xff.sj"
    with senju.open(raw) as db:
        db[b"k"] = b"v"
        path = db.path
    assert path == os.fsdecode(raw)
    with senju.open(path, create=False) as db:
        assert db[b"k"] == b"v"
    with pytest.raises(senju.NotFoundError) as e:
        senju.open(raw + b"-missing", create=False)
    assert e.value.filename == os.fsdecode(raw + b"-missing")


def test_repr_shows_a_path_that_is_not_utf8_as_python_spells_it(tmp_path: pathlib.Path) -> None:
    """`repr(db)` replaced bytes that are not UTF-8 with U+FFFD, so two files showed alike."""
    raw = os.fsencode(tmp_path) + b"/x\xff.sj"
    with senju.open(raw) as db:
        assert repr(os.fsdecode(raw)) in repr(db), repr(db)
        assert "\ufffd" not in repr(db)


def test_a_str_key_with_lone_surrogates_is_not_in_the_store() -> None:
    """`"\\ud800" in db` raised `UnicodeEncodeError`; such a key has no UTF-8 form, so no
    stored key equals it, and `in` says False as for a key of a type the store never holds."""
    with senju.open(memory=True) as db:
        db[b"k"] = b"v"
        assert "\ud800" not in db
        assert "k\udcff" not in db
        with pytest.raises(UnicodeEncodeError):
            db["\ud800"] = b"v"


def test_a_full_database_names_the_python_option() -> None:
    """The engine's message named the Rust option (`Builder::max_size`)."""
    db = senju.open(memory=True, max_size=1 << 20)
    with pytest.raises(senju.FullError) as e:
        for i in range(1000):
            db[b"k%d" % i] = b"x" * 10000
    assert "Builder::" not in str(e.value) and "max_size=" in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "option",
    [dict(shards=-1), dict(shards=2**40), dict(max_size=-1), dict(capacity_hint=-1),
     dict(auto_rebuild=-1), dict(max_size=2**70)],
)
def test_an_integer_option_out_of_range_names_the_option(option: dict[str, int]) -> None:
    """PyO3's conversion raised `OverflowError: out of range integral type conversion
    attempted`, naming no option; now `InvalidOptionError` (a `ValueError`) names it."""
    name = next(iter(option))
    with pytest.raises(senju.InvalidOptionError, match=f"`{name}`"):
        senju.open(memory=True, **option)


def test_an_integer_option_of_another_type_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        senju.open(memory=True, shards="4")  # type: ignore[arg-type]


@pytest.mark.parametrize("gil", ["hold", "auto", "release"])
def test_a_value_larger_than_the_memory_left_raises_memory_error(
    tmp_path: pathlib.Path, gil: str
) -> None:
    """Reading a value that could not be copied aborted the process (Rust's `to_vec`) or
    raised PyO3's `PanicException` (`PyBytes::new`); every read raises `MemoryError` now, and
    the same reads work once memory is there again. The limit is the address space
    (`RLIMIT_AS`): what is mapped already, plus less than the value."""
    out = run_child(
        """
        import resource, sys
        import senju
        size = 48 << 20
        db = senju.open(sys.argv[1], gil=sys.argv[2])
        db[b"big"] = b"x" * size
        db[b"small"] = b"y"
        reads = {
            "getitem": lambda: db[b"big"],
            "get": lambda: db.get(b"big"),
            "get_many": lambda: db.get_many([b"small", b"big"])[1],
            "values": lambda: [v for v in db.values() if len(v) == size][0],
            "items": lambda: [v for _, v in db.items() if len(v) == size][0],
        }
        for read in reads.values():  # whatever is made lazily (a hint, a thread) is made now
            assert len(read()) == size
        mapped = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) << 10
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (mapped + (24 << 20), hard))
        failed = []
        for name, read in reads.items():
            try:
                read()
            except MemoryError:
                failed.append(name)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        for read in reads.values():
            assert read() == b"x" * size
        db.close()
        print(" ".join(failed))
        """,
        str(tmp_path / "big.sj"),
        gil,
    )
    assert out.split() == ["getitem", "get", "get_many", "values", "items"], out


def test_a_signal_stops_a_rebuild_between_shards(gil: str) -> None:
    """A signal (Ctrl-C) during `rebuild` was handled only once the whole rebuild was done.
    It now stops the rebuild before its next shard: the shards copied by then are committed
    (their dead bytes are gone), the others keep theirs, and the handler's exception comes
    out of `rebuild`. A SIGALRM 20 ms into the call stands for Ctrl-C (a rebuild that
    released the GIL looks for signals at most every 50 ms, so the rebuild here takes longer:
    800,000 records); a round whose signal came before the call or after its end is tried
    again."""
    import signal

    class Alarm(Exception):
        pass

    def handler(signum: int, frame: object) -> None:
        raise Alarm

    old = signal.signal(signal.SIGALRM, handler)
    try:
        with senju.open(memory=True, gil=gil, shards=256) as db:  # type: ignore[arg-type]
            n, partway = 800_000, False
            for _ in range(5):
                for round_ in range(2):
                    db.set_many((b"key%d" % i, b"value %d %d" % (round_, i)) for i in range(n))
                dead = db.stats()["dead_bytes"]
                signal.setitimer(signal.ITIMER_REAL, 0.02)
                try:
                    db.rebuild()
                    time.sleep(1)  # the alarm, if it came after the rebuild
                except Alarm:
                    pass
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                left = db.stats()["dead_bytes"]
                if 0 < left < dead:
                    partway = True
                    break
            assert partway, "no signal stopped a rebuild partway"
            assert len(db) == n
            assert db[b"key123"] == b"value 1 123"
            db.rebuild()
            assert db.stats()["dead_bytes"] == 0
    finally:
        signal.signal(signal.SIGALRM, old)


def test_a_signal_handler_may_close_the_database_during_a_rebuild(gil: str) -> None:
    """`rebuild` ran signal handlers inside the engine's rebuild (from its per-shard progress
    callback, holding the store's rebuild lock), so a handler that closed the database (a
    SIGTERM handler that shuts down cleanly) waited for the rebuild it was running in: the
    process hung forever, in every GIL mode (a handler that called `rebuild` hung the same
    way, on the lock its own thread held). Now the engine's rebuild runs on a helper thread
    and the calling thread handles signals while it waits, holding no store lock, and the
    close stops the rebuild, which raises `ClosedError`. A round whose signal came after the
    rebuild (it returned) is tried again."""
    out = run_child(
        """
        import signal, sys
        import senju

        def handler(signum, frame):
            db.close()

        signal.signal(signal.SIGALRM, handler)
        for _ in range(5):
            db = senju.open(memory=True, gil=sys.argv[1], shards=256)
            for round_ in range(2):
                db.set_many((b"key%d" % i, b"value %d %d" % (round_, i)) for i in range(800_000))
            signal.setitimer(signal.ITIMER_REAL, 0.02)
            try:
                db.rebuild()
            except senju.ClosedError:
                print("closed during the rebuild")
                break
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                db.close()
        """,
        gil,
        timeout=60,
    )
    assert "closed during the rebuild" in out, out


def test_items_contains_a_pair_whose_str_key_has_lone_surrogates_is_false() -> None:
    """`("\\ud800", b"v") in db.items()` raised `UnicodeEncodeError`, where `"\\ud800" in db`
    (and `in` on a dict's items) says False: such a key has no UTF-8 form, so no stored pair
    has it. The items view now answers as `in` on the mapping does."""
    with senju.open(memory=True) as db:
        db[b"k"] = b"v"
        assert ("\ud800", b"v") not in db.items()
        assert ("k\udcff", b"v") not in db.items()
        assert ("k", b"v") in db.items()
        db.close()
        with pytest.raises(senju.ClosedError):
            ("\ud800", b"v") in db.items()


def test_memoryview_keys_and_values_are_taken_as_bytes(db: senju.Db) -> None:
    """A `memoryview` key or value raised `TypeError` ("must be bytes or str, not
    memoryview"), and `memoryview(b"k") in db` said False with `b"k"` stored, where a dict of
    bytes takes a view as the bytes it shows (`memoryview(b"k") in {b"k": 1}` is True) and
    `bytearray` was already taken. A view is now copied as `bytes(view)` does: in C order, so
    a strided (non-contiguous) view or one of another item format gives the bytes it
    shows."""
    import array

    db[memoryview(b"key")] = memoryview(b"abcdef")[::2]  # a non-contiguous view
    assert db[b"key"] == b"ace" and type(db[b"key"]) is bytes
    assert memoryview(b"key") in db and memoryview(bytearray(b"key")) in db
    assert db[memoryview(b"key")] == db.get(memoryview(b"key")) == b"ace"
    assert (memoryview(b"key"), b"ace") in db.items()
    ints = array.array("i", [1, 2, 3])
    db[b"ints"] = memoryview(ints)[::-1]
    assert db[b"ints"] == bytes(memoryview(ints)[::-1])
    db.set_many([(memoryview(b"m1"), memoryview(b"v1")), (b"m2", memoryview(bytearray(b"v2")))])
    assert db.get_many([memoryview(b"m1"), b"m2"]) == [b"v1", b"v2"]
    assert db.compare_and_set(memoryview(b"m1"), memoryview(b"v1"), memoryview(b"w1"))
    db.append(b"m1", memoryview(b"!"))
    assert db.update_value(b"m2", lambda old: memoryview(b"u2")) == b"u2"
    assert db.setdefault(memoryview(b"m3"), memoryview(b"v3")) == b"v3"
    assert db.pop(memoryview(b"m1")) == b"w1!"
    assert db.remove_many([memoryview(b"m2"), memoryview(b"m3")]) == 2
    del db[memoryview(b"ints")]
    assert dict(db.items()) == {b"key": b"ace"}
    released = memoryview(b"key")
    released.release()
    with pytest.raises(ValueError, match="released"):
        db[released]
    with pytest.raises(TypeError, match="takes an iterable of keys.*not a single memoryview"):
        db.get_many(memoryview(b"ab"))  # type: ignore[arg-type]


def test_a_missing_file_opened_read_only_is_not_said_to_need_create_true(
    tmp_path: pathlib.Path,
) -> None:
    """`senju.open(missing, readonly=True)` said "open it with create=True to create it",
    but a read-only open never creates a file, with `create=True` too (which is the
    default): it failed the same way. The message now says to open it without
    `readonly=True`; with `create=False` it still names `create=True`."""
    missing = tmp_path / "missing.sj"
    for create in (True, False):
        with pytest.raises(senju.NotFoundError) as e:
            senju.open(missing, readonly=True, create=create)
        assert "create=True" not in str(e.value), str(e.value)
        assert "without readonly=True" in str(e.value), str(e.value)
        assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)
    with pytest.raises(senju.NotFoundError, match="with create=True"):
        senju.open(missing, create=False)
    assert not missing.exists()


def test_a_key_longer_than_the_format_allows_is_not_in_the_store(db: senju.Db) -> None:
    """`big in db`, `big in db.keys()` and `(big, v) in db.items()` raised `TooLargeError`
    for a key longer than `MAX_KEY_LEN`, where such a key can never be stored: as for a key
    of another type or a `str` with no UTF-8 form, `in` says False now (reads and writes of
    it still raise `TooLargeError`, and a closed handle `ClosedError`)."""
    big = b"k" * (senju.MAX_KEY_LEN + 1)
    db[b"k"] = b"v"
    for key in (big, bytearray(big), big.decode()):
        assert key not in db
        assert key not in db.keys()
        assert (key, b"v") not in db.items()
    assert b"k" * senju.MAX_KEY_LEN not in db
    with pytest.raises(senju.TooLargeError):
        db[big]
    with pytest.raises(senju.TooLargeError):
        db[big] = b"v"
    db.close()
    with pytest.raises(senju.ClosedError):
        big in db


def test_a_signal_is_handled_between_the_chunks_of_a_long_batch(gil: str) -> None:
    """A signal during `get_many`, `set_many` or `remove_many` was handled only once the whole
    batch was done: Ctrl-C waited seconds for a batch of millions of keys (2.5 s after the
    signal for `set_many` of 4 million pairs). Batches now run in chunks of
    `BATCH_CHUNK` items and handle pending signals between two, so a handler that raises
    stops the batch there (the chunks written by then stay written, as a batch is not
    atomic). Counted, not timed: a handler that raises leaves `set_many` and `remove_many`
    partway (some but not all keys written or removed), and one that writes a key during
    `get_many` makes the batch read the new value of that key, its last. A round whose
    signal came after the batch is tried again."""
    import signal

    class Alarm(Exception):
        pass

    n = 4 * senju.BATCH_CHUNK
    keys = [b"key%d" % i for i in range(n)]
    pairs = [(k, b"v") for k in keys]
    old = signal.getsignal(signal.SIGALRM)
    try:
        with senju.open(memory=True, gil=gil) as db:  # type: ignore[arg-type]
            def raise_alarm(signum: int, frame: object) -> None:
                raise Alarm

            def set_marker(signum: int, frame: object) -> None:
                db[b"marker"] = b"seen"

            partway = set()
            for _ in range(10):
                db.clear()
                signal.signal(signal.SIGALRM, raise_alarm)
                signal.setitimer(signal.ITIMER_REAL, 0.01)
                try:
                    db.set_many(pairs)
                    time.sleep(0.5)
                except Alarm:
                    pass
                if 0 < len(db) < n:
                    partway.add("set_many")
                db.set_many(pairs)
                signal.setitimer(signal.ITIMER_REAL, 0.01)
                try:
                    db.remove_many(keys)
                    time.sleep(0.5)
                except Alarm:
                    pass
                if 0 < len(db) < n:
                    partway.add("remove_many")
                db.set_many(pairs)
                signal.signal(signal.SIGALRM, set_marker)
                signal.setitimer(signal.ITIMER_REAL, 0.01)
                if db.get_many(keys + [b"marker"])[-1] == b"seen":
                    partway.add("get_many")
                time.sleep(0.5)
                del db[b"marker"]
                if len(partway) == 3:
                    break
            assert partway == {"set_many", "remove_many", "get_many"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_batch_of_several_chunks_is_checked_whole_before_it_writes(db: senju.Db) -> None:
    """A batch longer than `BATCH_CHUNK` goes to the engine in several calls; a key too long
    in a later chunk must still fail the batch before any chunk is written or removed, as
    it did when the batch was one call."""
    n = senju.BATCH_CHUNK + 10
    pairs = [(b"k%d" % i, b"v") for i in range(n)]
    too_long = b"k" * (senju.MAX_KEY_LEN + 1)
    with pytest.raises(senju.TooLargeError):
        db.set_many(pairs + [(too_long, b"v")])
    assert len(db) == 0
    db.set_many(pairs)
    with pytest.raises(senju.TooLargeError):
        db.remove_many([k for k, _ in pairs] + [too_long])
    assert len(db) == n
    assert db.remove_many([k for k, _ in pairs] + [b"absent"]) == n
    assert len(db) == 0
    db.close()
    with pytest.raises(senju.ClosedError):
        db.set_many(pairs + [(too_long, b"v")])


def test_set_many_takes_an_object_with_keys_as_a_mapping() -> None:
    """`set_many` took an object with `keys()` and `__getitem__` but no `items()` (what
    `dict.update` and `MutableMapping.update` take as a mapping) for an iterable of pairs:
    its `__getitem__` with 0, 1, 2, ... never raised IndexError, so the collection of
    "pairs" never ended and the process grew until it was killed. It is now read through
    `keys()`, as `dict.update` reads it. Run in a child with a memory limit and a time limit."""
    out = run_child(
        """
        import resource, senju
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        class Keyed:
            def keys(self):
                return [b"a", "b"]
            def __getitem__(self, key):
                return b"v-" + (key if isinstance(key, bytes) else key.encode())
        db = senju.open(None, memory=True)
        db.set_many(Keyed())
        print(sorted(db.items()))
        """,
        timeout=60,
    )
    assert out.strip() == "[(b'a', b'v-a'), (b'b', b'v-b')]"
