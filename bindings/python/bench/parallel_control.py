#!/usr/bin/env python3
"""Control for the thread benchmarks: can two Python threads run in parallel on this machine
right now? `hashlib.sha256` releases the GIL for inputs over 2 KiB, so hashing 1 MiB buffers
on 2 threads should take half the time of 1 thread on 2 idle cores. Prints the speedup of 2
threads over 1 per round (rounds alternate the order) and the median."""

from __future__ import annotations

import hashlib
import statistics
import sys
import threading
import time

BUF = b"x" * (1 << 20)
WORK = 400  # MiB hashed per measurement, split between the threads


def run(threads: int) -> float:
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        barrier.wait()
        for _ in range(WORK // threads):
            hashlib.sha256(BUF).digest()

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return WORK / (time.perf_counter() - t0)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    ratios = []
    for r in range(rounds):
        if r % 2:
            two, one = run(2), run(1)
        else:
            one, two = run(1), run(2)
        ratios.append(two / one)
        print(f"round {r + 1}: 1 thread {one:.0f} MiB/s, 2 threads {two:.0f} MiB/s, x{two / one:.2f}")
    print(f"median speedup of 2 threads: x{statistics.median(ratios):.2f} "
          f"[{min(ratios):.2f}-{max(ratios):.2f}]")


if __name__ == "__main__":
    main()
