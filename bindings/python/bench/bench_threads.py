#!/usr/bin/env python3
"""Python threads against senju and its peers (issue 4, lab/0003-python-threads).

Cases, each at 1, 2, 4 and 8 threads, every thread on its own keys:
  single  one `set` then one `get` per call, 8-byte values
  batch   `set_many` / `get_many` of 1000 pairs (peers without a batch call loop in Python
          inside one transaction or one lock hold)
  large   `set` / `get` of 64 KiB values
  convoy  one thread runs a pure-Python CPU loop while the others `get` 8-byte values for a
          fixed time (at 1 thread: the store thread alone)
A `get` cell first runs its cell's `set` phase (untimed for it), then pauses SETTLE_S
(0.1 s) before the timed reads. Each cell also reports the cores the process kept busy (CPU
time of all its threads over wall time). A 1-thread run that keeps c cores busy cannot speed
up more than cpus / c times on this machine, however the threads share the work, as long as
an operation costs the CPU time it costs at one thread.
Peers: senju (gil auto / release / hold), tkrzw HashDBM (concurrent on / off), lmdb, sqlite3
(WAL, a connection per thread), dbm.gnu + a lock, dict + a lock. Peers that are not installed
are reported as skipped. Rounds alternate the peers; medians and ranges are printed.

  bench_threads.py [--quick] [--rounds N] [--threads 1,2,4,8] [--peers a,b] [--cases a,b] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

Pairs = List[Tuple[bytes, bytes]]


# ---------------------------------------------------------------- peers: a uniform face ----
class Peer:
    """A store under test; every method may be called from any thread at once."""

    name = "?"

    def set(self, k: bytes, v: bytes) -> None: ...
    def get(self, k: bytes) -> Optional[bytes]: ...
    def set_many(self, pairs: Pairs) -> None:
        for k, v in pairs:
            self.set(k, v)
    def get_many(self, keys: List[bytes]) -> List[Optional[bytes]]:
        return [self.get(k) for k in keys]
    def close(self) -> None: ...


class Senju(Peer):
    def __init__(self, d: str, gil: str) -> None:
        import senju

        self.name = f"senju-{gil}"
        self.db = senju.open(os.path.join(d, "b.sj"), truncate=True, gil=gil)  # type: ignore[arg-type]
        self.set = self.db.__setitem__  # type: ignore[assignment]
        self.get = self.db.get  # type: ignore[assignment]
        self.set_many = self.db.set_many  # type: ignore[assignment]
        self.get_many = self.db.get_many  # type: ignore[assignment]

    def close(self) -> None:
        self.db.close()


class Tkrzw(Peer):
    def __init__(self, d: str, concurrent: bool) -> None:
        import tkrzw

        self.name = "tkrzw-concurrent" if concurrent else "tkrzw"
        self.db = tkrzw.DBM()
        st = self.db.Open(os.path.join(d, "b.tkh"), True, truncate=True, concurrent=concurrent,
                          num_buckets=1_000_000)
        assert st.IsOK(), st
        self.set = self.db.Set  # type: ignore[assignment]
        self.get = self.db.Get  # type: ignore[assignment]

    def set_many(self, pairs: Pairs) -> None:
        self.db.SetMulti(**{k.decode(): v for k, v in pairs})

    def get_many(self, keys: List[bytes]) -> List[Optional[bytes]]:
        got = self.db.GetMulti(*keys)
        return [got.get(k) for k in keys]

    def close(self) -> None:
        self.db.Close()


class Lmdb(Peer):
    name = "lmdb"

    def __init__(self, d: str) -> None:
        import lmdb

        self.env = lmdb.open(os.path.join(d, "b.lmdb"), map_size=8 << 30, sync=False,
                             metasync=False, writemap=True, max_readers=256)

    def set(self, k: bytes, v: bytes) -> None:
        with self.env.begin(write=True) as t:
            t.put(k, v)

    def get(self, k: bytes) -> Optional[bytes]:
        with self.env.begin(buffers=False) as t:
            return t.get(k)  # type: ignore[no-any-return]

    def set_many(self, pairs: Pairs) -> None:
        with self.env.begin(write=True) as t:
            t.cursor().putmulti(pairs)

    def get_many(self, keys: List[bytes]) -> List[Optional[bytes]]:
        with self.env.begin() as t:
            return [t.get(k) for k in keys]

    def close(self) -> None:
        self.env.close()


class Sqlite(Peer):
    name = "sqlite3-wal"

    def __init__(self, d: str) -> None:
        import sqlite3

        self.path = os.path.join(d, "b.sqlite")
        self.local = threading.local()
        c = self.conn()
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def conn(self) -> Any:
        c = getattr(self.local, "c", None)
        if c is None:
            import sqlite3

            c = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                timeout=60)
            c.execute("PRAGMA synchronous=NORMAL")
            self.local.c = c
        return c

    def set(self, k: bytes, v: bytes) -> None:
        self.conn().execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (k, v))

    def get(self, k: bytes) -> Optional[bytes]:
        r = self.conn().execute("SELECT v FROM kv WHERE k = ?", (k,)).fetchone()
        return None if r is None else r[0]  # type: ignore[no-any-return]

    def set_many(self, pairs: Pairs) -> None:
        c = self.conn()
        c.execute("BEGIN IMMEDIATE")
        c.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)", pairs)
        c.execute("COMMIT")

    def get_many(self, keys: List[bytes]) -> List[Optional[bytes]]:
        c = self.conn()
        q = "SELECT k, v FROM kv WHERE k IN (%s)" % ",".join("?" * len(keys))
        got = dict(c.execute(q, keys).fetchall())
        return [got.get(k) for k in keys]


class Locked(Peer):
    """dbm.gnu or dict behind one threading.Lock (what users do today)."""

    def __init__(self, d: str, kind: str) -> None:
        self.name = f"{kind}+lock"
        self.lock = threading.Lock()
        if kind == "dbm.gnu":
            import dbm.gnu

            self.db: Any = dbm.gnu.open(os.path.join(d, "b.gdbm"), "nf")
        else:
            self.db = {}

    def set(self, k: bytes, v: bytes) -> None:
        with self.lock:
            self.db[k] = v

    def get(self, k: bytes) -> Optional[bytes]:
        with self.lock:
            return self.db.get(k)  # type: ignore[no-any-return]

    def set_many(self, pairs: Pairs) -> None:
        with self.lock:
            for k, v in pairs:
                self.db[k] = v

    def get_many(self, keys: List[bytes]) -> List[Optional[bytes]]:
        with self.lock:
            g = self.db.get
            return [g(k) for k in keys]

    def close(self) -> None:
        if hasattr(self.db, "close"):
            self.db.close()


PEERS: Dict[str, Callable[[str], Peer]] = {
    "senju-auto": lambda d: Senju(d, "auto"),
    "senju-release": lambda d: Senju(d, "release"),
    "senju-hold": lambda d: Senju(d, "hold"),
    "tkrzw": lambda d: Tkrzw(d, False),
    "tkrzw-concurrent": lambda d: Tkrzw(d, True),
    "lmdb": Lmdb,
    "sqlite3-wal": Sqlite,
    "dbm.gnu+lock": lambda d: Locked(d, "dbm.gnu"),
    "dict+lock": lambda d: Locked(d, "dict"),
}


def available(name: str) -> Optional[str]:
    """None if the peer can run here, else why not."""
    mod = {"tkrzw": "tkrzw", "tkrzw-concurrent": "tkrzw", "lmdb": "lmdb",
           "dbm.gnu+lock": "dbm.gnu", "sqlite3-wal": "sqlite3"}.get(name, "senju" if name.startswith("senju") else None)
    if mod is None:
        return None
    try:
        __import__(mod)
        return None
    except ImportError as e:
        return f"not installed ({e})"


# ---------------------------------------------------------------------------- cases ----
class Run:
    """One timed run: wall seconds, operations, and the process's CPU seconds over the same
    span (every thread: the workers, the store's own helper threads such as senju's prefault
    thread, and the kernel work they cause)."""

    def __init__(self, wall: float, ops: int, cpu: float) -> None:
        self.wall, self.ops, self.cpu = wall, ops, cpu

    def rate(self) -> Tuple[float, float]:
        """(ops/s, cores busy on average)."""
        return self.ops / self.wall, self.cpu / self.wall


def run_threads(n: int, work: Callable[[int], int]) -> Run:
    """Runs `work(i)` on n threads started together."""
    barrier = threading.Barrier(n + 1)
    counts = [0] * n

    def body(i: int) -> None:
        barrier.wait()
        counts[i] = work(i)

    ts = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for t in ts:
        t.join()
    return Run(time.perf_counter() - t0, sum(counts), time.process_time() - c0)


# A `get` cell reads what its own set phase wrote; it starts this long after that phase
# ends (for every peer), so that the work a store does in the background after a burst of
# writes (senju's prefault thread fills the last few MiB it was asked for: 10-20 ms of one
# core after 100 MB of 64 KiB values, lab 0003) is not counted against the reads.
SETTLE_S = 0.1


def settle() -> None:
    time.sleep(SETTLE_S)


def keys_for(i: int, n: int) -> List[bytes]:
    return [b"%02d%08d" % (i, j) for j in range(n)]


def case_single(peer: Peer, threads: int, size: Dict[str, int], op: str) -> Tuple[float, float]:
    per = size["single"] // threads
    ks = [keys_for(i, per) for i in range(threads)]
    v = b"v" * 8

    def setter(i: int) -> int:
        s = peer.set
        for k in ks[i]:
            s(k, v)
        return per

    def getter(i: int) -> int:
        g = peer.get
        for k in ks[i]:
            g(k)
        return per

    run = run_threads(threads, setter)
    if op == "get":
        settle()
        run = run_threads(threads, getter)
    return run.rate()


def case_batch(peer: Peer, threads: int, size: Dict[str, int], op: str) -> Tuple[float, float]:
    batches = max(1, size["batch"] // 1000 // threads)
    ks = [[keys_for(i * 1000 + b, 1000) for b in range(batches)] for i in range(threads)]
    v = b"v" * 8

    def setter(i: int) -> int:
        for b in ks[i]:
            peer.set_many([(k, v) for k in b])
        return batches * 1000

    def getter(i: int) -> int:
        for b in ks[i]:
            got = peer.get_many(b)
            assert got[0] == v
        return batches * 1000

    run = run_threads(threads, setter)
    if op == "get":
        settle()
        run = run_threads(threads, getter)
    return run.rate()


def case_large(peer: Peer, threads: int, size: Dict[str, int], op: str) -> Tuple[float, float]:
    per = max(1, size["large"] // threads)
    ks = [keys_for(i, per) for i in range(threads)]
    v = os.urandom(64 << 10)

    def setter(i: int) -> int:
        for k in ks[i]:
            peer.set(k, v)
        return per

    def getter(i: int) -> int:
        g = peer.get
        for _ in range(2):
            for k in ks[i]:
                g(k)
        return 2 * per

    run = run_threads(threads, setter)
    if op == "get":
        settle()
        run = run_threads(threads, getter)
    return run.rate()


def case_convoy(peer: Peer, threads: int, size: Dict[str, int], op: str) -> Tuple[float, float]:
    """Store ops/s of the `threads - 1` store threads while one thread spins in Python."""
    stores = max(1, threads - 1)
    ks = [keys_for(i, 2000) for i in range(stores)]
    v = b"v" * 8
    for i in range(stores):
        peer.set_many([(k, v) for k in ks[i]])
    duration = size["convoy_ms"] / 1000
    stop = threading.Event()
    deadline = [0.0]

    def spin() -> None:
        x = 0
        while not stop.is_set():
            for j in range(1000):
                x += j
        del x

    def store(i: int) -> int:
        g = peer.get if op == "get" else None
        s = peer.set
        mine = ks[i]
        n = 0
        end = deadline[0]
        while time.perf_counter() < end:
            for k in mine[n % 2000 : n % 2000 + 16]:
                if g is not None:
                    g(k)
                else:
                    s(k, v)
            n += 16
        return n

    spinner = threading.Thread(target=spin) if threads > 1 else None
    if spinner:
        spinner.start()
    deadline[0] = time.perf_counter() + duration
    run = run_threads(stores, store)
    stop.set()
    if spinner:
        spinner.join()
    return run.rate()


CASES = {"single": case_single, "batch": case_batch, "large": case_large, "convoy": case_convoy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, one round (seconds)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--cases", default="single,batch,large,convoy")
    ap.add_argument("--json", default=None, help="write every sample to this file")
    ap.add_argument("--dir", default=None, help="where the database files go (default: a temp dir)")
    ap.add_argument("--size", action="append", default=[], metavar="CASE=N",
                    help="override a case's size: single, batch (operations in all threads), "
                         "large (64 KiB values in all threads), convoy_ms; repeatable")
    a = ap.parse_args()
    size = ({"single": 20_000, "batch": 40_000, "large": 400, "convoy_ms": 200} if a.quick
            else {"single": 80_000, "batch": 160_000, "large": 1600, "convoy_ms": 500})
    for item in a.size:
        name, _, n = item.partition("=")
        if name not in size or not n.isdigit() or int(n) < 1:
            ap.error(f"--size wants CASE=N with CASE one of {', '.join(size)} and N >= 1, got {item!r}")
        size[name] = int(n)
    rounds = a.rounds or (1 if a.quick else 3)
    threads = [int(t) for t in a.threads.split(",")]
    peers = [p for p in a.peers.split(",") if p]
    cases = [c for c in a.cases.split(",") if c]
    skipped = {p: why for p in peers if (why := available(p))}
    for p, why in skipped.items():
        print(f"skipped {p}: {why}")
    peers = [p for p in peers if p not in skipped]
    if not peers:
        print("bench_threads.py: none of the asked-for peers is installed (see the skipped lines)",
              file=sys.stderr)
        return 2
    print(f"python {sys.version.split()[0]} ({sys.executable}), switch interval "
          f"{sys.getswitchinterval() * 1000:.0f} ms, {os.cpu_count()} CPUs, rounds {rounds}, sizes {size}")
    samples: Dict[Tuple[str, str, str, int], List[float]] = {}
    cores: Dict[Tuple[str, str, str, int], List[float]] = {}
    base = a.dir or tempfile.mkdtemp(prefix="senju-bench-")
    try:
        for r in range(rounds):
            for case in cases:
                for op in ("set", "get"):
                    for t in threads:
                        order = peers[r % len(peers):] + peers[: r % len(peers)]
                        for p in order:
                            d = os.path.join(base, f"{p}-{case}-{op}-{t}")
                            os.makedirs(d, exist_ok=True)
                            peer = PEERS[p](d)
                            try:
                                ops, busy = CASES[case](peer, t, size, op)
                            finally:
                                peer.close()
                                shutil.rmtree(d, ignore_errors=True)
                            samples.setdefault((case, op, p, t), []).append(ops)
                            cores.setdefault((case, op, p, t), []).append(busy)
            print(f"round {r + 1}/{rounds} done", flush=True)
    finally:
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    rows = []
    for case in cases:
        for op in ("set", "get"):
            print(f"\n## {case} {op}: ops/s median [min-max] (x = ratio to the same peer at 1 thread)")
            print(f"{'peer':<18}" + "".join(f"{t:>34}" for t in threads))
            for p in peers:
                line = f"{p:<18}"
                one = statistics.median(samples[(case, op, p, threads[0])])
                for t in threads:
                    s = samples[(case, op, p, t)]
                    m = statistics.median(s)
                    line += f"{m:>12,.0f} [{min(s):,.0f}-{max(s):,.0f}] x{m / one:4.2f}".rjust(34)
                    c = cores[(case, op, p, t)]
                    rows.append({"case": case, "op": op, "peer": p, "threads": t, "median": m,
                                 "min": min(s), "max": max(s), "samples": s, "ratio_to_1": m / one,
                                 "cores": statistics.median(c), "cores_samples": c})
                print(line)
            print(f"{'  cores busy':<18}" + "".join(f"{'(process CPU time / wall time)':>34}" if i == 0 else " " * 34
                                                    for i in range(len(threads))))
            for p in peers:
                print(f"{'  ' + p:<18}" + "".join(f"{statistics.median(cores[(case, op, p, t)]):>34.2f}" for t in threads))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"python": sys.version, "cpus": os.cpu_count(), "size": size, "rounds": rounds,
                       "skipped": skipped, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
