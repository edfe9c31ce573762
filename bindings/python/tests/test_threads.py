"""Threads: mixed operations on overlapping keys checked against a model, and close()
racing with busy threads. Counts outcomes; never times anything."""

from __future__ import annotations

import random
import threading
from typing import Callable

import senju
from conftest import GilCounter

THREADS = 8


def run_threads(target: Callable[[int], None], n: int = THREADS) -> None:
    errors: list[BaseException] = []

    def wrap(i: int) -> None:
        try:
            target(i)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_mixed_operations_on_overlapping_keys(gil: str) -> None:
    """Each thread owns the counters `c<i>` (its model is exact) and all threads fight over
    the shared keys `s<j>`, whose final values must be ones some thread wrote, and over the
    counter `total`, which update_value and compare_and_set must not lose increments of."""
    db = senju.open(memory=True, gil=gil)  # type: ignore[arg-type]
    rounds = 400
    shared = [b"s%d" % j for j in range(16)]
    models: list[dict[bytes, bytes]] = [{} for _ in range(THREADS)]
    increments = [0] * THREADS

    def work(i: int) -> None:
        rng = random.Random(i)
        model = models[i]
        for r in range(rounds):
            own = b"c%d-%d" % (i, rng.randrange(32))
            op = rng.randrange(8)
            if op == 0:
                db[own] = b"%d" % r
                model[own] = b"%d" % r
            elif op == 1:
                if own in model:
                    del db[own]
                    del model[own]
            elif op == 2:
                db.set_many({own: b"m%d" % r, rng.choice(shared): b"t%d-%d" % (i, r)})
                model[own] = b"m%d" % r
            elif op == 3:
                got = db.get_many([own] + shared)
                assert got[0] == model.get(own)
                assert all(v is None or v.startswith(b"t") for v in got[1:])
            elif op == 4:
                increments[i] += 1
                db.update_value(b"total", lambda old: b"%d" % (int(old or b"0") + 1))
            elif op == 5:
                increments[i] += 1
                while True:
                    old = db.get(b"total")
                    new = b"%d" % (int(old or b"0") + 1)
                    if db.compare_and_set(b"total", old, new):
                        break
            elif op == 6:
                db.append(b"log", b"%d," % i)
            else:
                keys = list(db)
                assert len(keys) == len(set(keys))
            assert db.get(own) == model.get(own)

    run_threads(work)
    assert int(db[b"total"]) == sum(increments)
    for i, model in enumerate(models):
        mine = {k: db[k] for k in db if k.startswith(b"c%d-" % i)}
        assert mine == model
    log = db.get(b"log", b"")
    assert log.count(b",") == sum(1 for x in log.split(b",") if x)
    db.close()


def test_close_racing_busy_threads() -> None:
    """100 times: 8 threads hammer a handle while the main thread closes it. Every call
    either succeeds or raises ClosedError; nothing crashes or hangs."""
    outcomes = {"ok": 0, "closed": 0}
    lock = threading.Lock()
    for round_ in range(100):
        db = senju.open(memory=True, gil=["auto", "release", "hold"][round_ % 3])  # type: ignore[arg-type]
        db.set_many({b"k%d" % i: b"v" * (i * 500) for i in range(20)})
        started = threading.Barrier(THREADS + 1)

        def work(i: int) -> None:
            ok = closed = 0
            started.wait()
            for j in range(200):
                try:
                    k = b"k%d" % ((i + j) % 20)
                    op = j % 5
                    if op == 0:
                        db[k] = b"x" * (j * 50)
                    elif op == 1:
                        db.get(k)
                    elif op == 2:
                        db.get_many([k, b"k1", b"k19"])
                    elif op == 3:
                        for _ in db.items():
                            pass
                    else:
                        db.update_value(k, lambda old: old)
                    ok += 1
                except senju.ClosedError:
                    closed += 1
            with lock:
                outcomes["ok"] += ok
                outcomes["closed"] += closed

        threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        started.wait()
        db.close()
        for t in threads:
            t.join()
        assert db.closed
    assert outcomes["ok"] + outcomes["closed"] == 100 * THREADS * 200
    assert outcomes["closed"] > 0


def test_file_close_racing_busy_threads(tmp_path: object) -> None:
    """The same race on a file database, whose close writes the directory and trims the
    file while readers may still be inside calls."""
    import pathlib

    assert isinstance(tmp_path, pathlib.Path)
    for round_ in range(20):
        db = senju.open(tmp_path / "race.sj", truncate=True)
        db.set_many({b"k%d" % i: b"v%d" % i for i in range(500)})
        started = threading.Barrier(THREADS + 1)

        def work(i: int) -> None:
            started.wait()
            for j in range(300):
                try:
                    db[b"k%d" % ((i * 37 + j) % 500)] = b"w%d" % j
                    db.get(b"k%d" % j)
                except senju.ClosedError:
                    return

        threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        started.wait()
        db.close()
        for t in threads:
            t.join()
        with senju.open(tmp_path / "race.sj") as again:
            assert len(again) == 500


def test_reads_while_values_change_length(gil: str) -> None:
    """Readers of keys whose values other threads keep rewriting with other lengths (small,
    just over the large-value threshold, 64 KiB) must always get one whole value: every byte
    the same, and a length that some writer wrote. Catches a read that fills a `bytes` object
    of a stale length or leaves part of it unset."""
    db = senju.open(memory=True, gil=gil)  # type: ignore[arg-type]
    sizes = [7, senju.LARGE_VALUE + 1, 65536]
    keys = [b"k%d" % i for i in range(4)]
    for k in keys:
        db[k] = b"a" * sizes[0]
    seen = [0] * THREADS

    def work(i: int) -> None:
        rng = random.Random(i)
        for r in range(300):
            k = rng.choice(keys)
            if i % 2:
                fill = bytes([97 + rng.randrange(26)])
                db[k] = fill * rng.choice(sizes)
            else:
                v = db[k] if r % 2 else db.get_many([k])[0]
                assert v is not None and len(v) in sizes
                assert v == v[:1] * len(v)
                seen[i] += 1

    run_threads(work)
    assert sum(seen) == (THREADS // 2) * 300
    db.close()


def test_set_many_while_another_thread_rewrites_its_list(gil: str) -> None:
    """set_many borrows each pair's key and value through the pair's tuple while it writes
    without the GIL; another thread replacing the list's items meanwhile must neither crash
    it nor change what it writes: each call writes the pairs the list held when it was
    called, so every value read back is one a writer put there."""
    db = senju.open(memory=True, gil=gil)  # type: ignore[arg-type]
    keys = [b"k%d" % i for i in range(1000)]
    shared = [(k, b"v0-" + k) for k in keys]
    stop = threading.Event()

    def rewriter(_: int) -> None:
        gen = 0
        while not stop.is_set():
            gen += 1
            fresh = [(k, b"v%d-" % gen + k) for k in keys]  # new tuples and bytes objects
            shared[:] = fresh
            del fresh
            if gen % 7 == 0:
                shared.clear()

    def writer(_: int) -> None:
        try:
            for _ in range(300):
                db.set_many(shared)
        finally:
            stop.set()

    run_threads(lambda i: writer(i) if i == 0 else rewriter(i), n=2)
    for k in keys:
        v = db.get(k)
        assert v is None or (v.startswith(b"v") and v.endswith(b"-" + k)), (k, v)


def test_auto_write_waits_for_a_busy_shard_without_the_gil(count_gil_releases: GilCounter) -> None:
    """In gil="auto" a small write keeps the GIL, but not while it waits for a shard that
    another thread holds (here a rebuild copying the only shard). Counted, not timed (see
    `count_gil_releases`)."""
    db = senju.open(memory=True, shards=1)
    db.set_many((b"%08d" % i, b"v") for i in range(300_000))
    started = threading.Event()

    def rebuild() -> None:
        started.set()
        db.rebuild()

    rebuilder = threading.Thread(target=rebuild)
    rebuilder.start()
    started.wait()
    try:
        released = count_gil_releases(lambda i: None, lambda _: db.__setitem__(b"k", b"v"), 2_000_000)
    finally:
        rebuilder.join()
    assert released == 1, "no write released the GIL while the rebuild held the shard"
    assert db[b"k"] == b"v" and len(db) == 300_001
    db.close()
