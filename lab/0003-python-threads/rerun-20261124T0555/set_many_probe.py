"""Scratch probe of lab 0003 (2026-11-24): `set_many` of 1.6M fresh 8-byte pairs in batches
of 1000, split between T threads, timed from a barrier to the last join.

    python set_many_probe.py run T ROUNDS [mem]   # one line per round; CPU=1 adds CPU per pair
    python set_many_probe.py hint ROUNDS          # with and without capacity_hint, alternating

`mem` (or MEM=1 for `hint`) uses the memory engine instead of a file in /tmp.
"""
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time

import senju

N = 1_600_000


def batches_for(threads):
    per = N // threads
    return [[[(b"%02d%08d" % (t, i), b"%08d" % i) for i in range(s, s + 1000)]
             for s in range(0, per, 1000)] for t in range(threads)]


def timed(db, batches):
    """Runs one thread per batch list; (seconds, CPU seconds of the process) of the run."""
    bar = threading.Barrier(len(batches) + 1)

    def work(mine):
        bar.wait()
        for b in mine:
            db.set_many(b)

    ths = [threading.Thread(target=work, args=(b,)) for b in batches]
    for th in ths:
        th.start()
    bar.wait()
    t0, ru0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    for th in ths:
        th.join()
    dt, ru1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return dt, cpu


def one(threads, mem, batches, **kw):
    d = tempfile.mkdtemp()
    try:
        db = (senju.open(None, memory=True, **kw) if mem
              else senju.open(os.path.join(d, "b.sj"), truncate=True, **kw))
        dt, cpu = timed(db, batches)
        db.close()
    finally:
        shutil.rmtree(d)
    return dt, cpu


def main():
    if sys.argv[1] == "run":
        threads, rounds, mem = int(sys.argv[2]), int(sys.argv[3]), len(sys.argv) > 4
        batches = batches_for(threads)
        for _ in range(rounds):
            dt, cpu = one(threads, mem, batches)
            extra = (f" cpu {cpu / dt:.2f} cores, {cpu * 1e9 / N:.0f} ns/pair"
                     if os.environ.get("CPU") else "")
            print(f"{threads}T {N / dt / 1e6:.2f}M{extra}")
    else:
        rounds, mem = int(sys.argv[2]), bool(os.environ.get("MEM"))
        res = {}
        for _ in range(rounds):
            for hint in (False, True):
                for threads in (1, 2):
                    kw = {"capacity_hint": N} if hint else {}
                    dt, _ = one(threads, mem, batches_for(threads), **kw)
                    res.setdefault((hint, threads), []).append(N / dt)
        for hint in (False, True):
            m1, m2 = statistics.median(res[(hint, 1)]), statistics.median(res[(hint, 2)])
            print(f"hint={hint}: 1T {m1 / 1e6:.2f}M 2T {m2 / 1e6:.2f}M x{m2 / m1:.2f}")


main()
