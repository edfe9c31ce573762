#!/usr/bin/env python3
"""Reads a `bench_threads.py --json` file and prints PASS/FAIL for each target of issue 4's
"Done when" (senju in its default gil="auto" mode unless a line says otherwise)."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Tuple


def main(path: str) -> int:
    data = json.load(open(path))
    med: Dict[Tuple[str, str, str, int], float] = {
        (r["case"], r["op"], r["peer"], r["threads"]): r["median"] for r in data["rows"]
    }
    cores: Dict[Tuple[str, str, str, int], float] = {
        (r["case"], r["op"], r["peer"], r["threads"]): r["cores"] for r in data["rows"] if "cores" in r
    }
    raw: Dict[Tuple[str, str, str, int], List[float]] = {
        (r["case"], r["op"], r["peer"], r["threads"]): r["samples"] for r in data["rows"]
    }

    def paired(case: str, op: str, t: int) -> Tuple[float, float, float]:
        """Median, min and max over rounds of auto/hold, each ratio taken within one round
        (the two modes run next to each other in every round, so drift mostly cancels)."""
        rs = [a / h for a, h in zip(raw[(case, op, "senju-auto", t)], raw[(case, op, "senju-hold", t)])]
        return sorted(rs)[len(rs) // 2], min(rs), max(rs)

    lines: List[Tuple[bool, str]] = []

    def check(ok: bool, text: str) -> None:
        lines.append((ok, text))

    for op in ("set", "get"):
        if ("single", op, "senju-auto", 1) not in med:
            continue
        s = med[("single", op, "senju-auto", 1)]
        for peer in ("tkrzw", "lmdb"):
            if ("single", op, peer, 1) in med:
                p = med[("single", op, peer, 1)]
                check(s >= p, f"single {op}, 1 thread: senju-auto {s:,.0f} >= {peer} {p:,.0f} ops/s ({s / p:.2f}x)")
    for case in ("batch", "large"):
        for op in ("set", "get"):
            if (case, op, "senju-auto", 1) not in med or (case, op, "senju-auto", 2) not in med:
                continue
            one, two = med[(case, op, "senju-auto", 1)], med[(case, op, "senju-auto", 2)]
            text = f"{case} {op}: 2 threads {two:,.0f} = {two / one:.2f}x 1 thread {one:,.0f} (>= 1.7x)"
            busy, cpus = cores.get((case, op, "senju-auto", 1)), data.get("cpus")
            if busy and cpus:
                # If the CPU time per operation stays what it is at one thread, two threads
                # keep at most min(cpus, 2 * busy) cores busy: a speed-up of at most
                # min(2, cpus / busy).
                text += (f"; 1 thread kept {busy:.2f} cores busy, so at most "
                         f"{min(2.0, cpus / busy):.2f}x on {cpus} CPUs")
            check(two >= 1.7 * one, text)
    worst: List[Tuple[float, str]] = []
    for (case, op, peer, t) in med:
        if peer != "senju-auto" or t < 2 or (case, op, "senju-hold", t) not in med:
            continue
        m, lo, hi = paired(case, op, t)
        worst.append((m, f"{case} {op} {t} threads: auto/hold {m:.2f} [{lo:.2f}-{hi:.2f}]"))
    worst.sort()
    bad = [w for w in worst if w[0] < 0.9]
    if worst:
        check(
            not bad,
            "auto never > 10% slower than hold at 2-8 threads (median of per-round ratios): "
            "worst " + worst[0][1]
            + ("" if not bad else f"; {len(bad)} below 0.90")
            + ("" if len(bad) < 2 else ", also: " + "; ".join(b[1] for b in bad[1:])),
        )
    for op in ("get", "set"):
        for t in sorted({k[3] for k in med if k[0] == "convoy" and k[3] > 1}):
            if ("convoy", op, "senju-hold", t) not in raw:
                continue
            m, lo, hi = paired("convoy", op, t)
            check(m >= 1.0, f"convoy {op} {t} threads: auto/hold {m:.2f} [{lo:.2f}-{hi:.2f}] (>= 1)")
    for ok, text in lines:
        print(("PASS " if ok else "FAIL ") + text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
