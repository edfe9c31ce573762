#!/usr/bin/env python3
"""Where does releasing the GIL start to pay for a single get/set? For value sizes from 256 B
to 64 KiB: ops/s with gil="hold" and gil="release" at 1 and 2 threads (in-memory database,
disjoint keys), rounds alternating the modes; medians. `gil="auto"` releases from
senju.LARGE_VALUE (4 KiB) up.

  gil_threshold.py [--rounds N] [--sizes 256,1024,...]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Dict, List, Tuple

import senju


def run(gil: str, size: int, threads: int, op: str) -> float:
    db = senju.open(memory=True, gil=gil)  # type: ignore[arg-type]
    n = max(200, min(20000, (64 << 20) // size // threads))
    v = b"x" * size
    keys = [[b"%d-%d" % (t, i) for i in range(n)] for t in range(threads)]
    for ks in keys:
        db.set_many([(k, v) for k in ks])
    barrier = threading.Barrier(threads + 1)

    def work(t: int) -> None:
        barrier.wait()
        if op == "get":
            g = db.get
            for k in keys[t]:
                g(k)
        else:
            for k in keys[t]:
                db[k] = v

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    el = time.perf_counter() - t0
    db.close()
    return n * threads / el


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="256,1024,4096,16384,65536")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    res: Dict[Tuple[str, int, str, int], List[float]] = {}
    for r in range(a.rounds):
        for size in sizes:
            for op in ("get", "set"):
                for threads in (1, 2):
                    modes = ["hold", "release"] if r % 2 == 0 else ["release", "hold"]
                    for gil in modes:
                        res.setdefault((op, size, gil, threads), []).append(run(gil, size, threads, op))
    print(f"{'op':<4}{'size':>7}" + "".join(f"{m + '@' + str(t):>14}" for t in (1, 2) for m in ("hold", "release"))
          + f"{'rel/hold@2':>12}")
    for op in ("get", "set"):
        for size in sizes:
            med = {(g, t): statistics.median(res[(op, size, g, t)]) for g in ("hold", "release") for t in (1, 2)}
            print(f"{op:<4}{size:>7}" + "".join(f"{med[(g, t)]:>14,.0f}" for t in (1, 2) for g in ("hold", "release"))
                  + f"{med[('release', 2)] / med[('hold', 2)]:>12.2f}")


if __name__ == "__main__":
    main()
