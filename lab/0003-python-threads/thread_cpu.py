#!/usr/bin/env python3
"""Where the CPU time of the 64 KiB case goes, thread by thread: 1,600 sets of 64 KiB values
in one thread, then two gets of each, with every OS thread's CPU ticks (1 tick = 10 ms) read
from /proc/self/task/*/stat before and after each phase. The worker thread has exited when
the second reading is taken, so its own ticks are not listed; the process total is.

    target/pybench/bin/python lab/0003-python-threads/thread_cpu.py [auto|release|hold]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, Tuple

import senju


def ticks() -> Dict[Tuple[str, str], int]:
    """{(tid, name): utime + stime} for every live thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:
            continue  # the thread exited between the listing and the read
        out[(tid, name)] = int(fields[11]) + int(fields[12])
    return out


def main(gil: str) -> None:
    d = tempfile.mkdtemp(prefix="senju-thread-cpu-")
    try:
        db = senju.open(os.path.join(d, "b.sj"), truncate=True, gil=gil)  # type: ignore[arg-type]
        value = os.urandom(64 << 10)
        keys = [b"00%08d" % j for j in range(1600)]

        def sets() -> None:
            for k in keys:
                db[k] = value

        def gets() -> None:
            for _ in range(2):
                for k in keys:
                    db[k]

        phases: Dict[str, Callable[[], None]] = {"set": sets, "get": gets}
        for phase, work in phases.items():
            before, c0, t0 = ticks(), time.process_time(), time.perf_counter()
            t = threading.Thread(target=work)
            t.start()
            t.join()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            after = ticks()
            spent = {k[1]: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
            print(f"{phase}: {wall * 1e3:.1f} ms, {cpu * 1e3:.1f} ms of CPU, "
                  f"{cpu / wall:.2f} cores busy; ticks of live threads: {spent}")
        db.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "auto")
