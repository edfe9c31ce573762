"""A/B of an engine switch read from the environment, in one process: for each round, cells
with VAR unset (A) and set to VALUE (B), 1 and 2 threads each; set_many of 1000 fresh pairs.
Usage: envab.py TOTAL ROUNDS VAR VALUE [pre]   (pre: pairs built before the clock starts)"""
import os, sys, statistics
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "smab.py")).read().split("total = int")[0])
total, rounds, var, value = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
pre = len(sys.argv) > 5 and sys.argv[5] == "pre"
res = {}
for r in range(rounds):
    for v in ("A", "B"):
        if v == "B":
            os.environ[var] = value
        else:
            os.environ.pop(var, None)
        for t in (1, 2):
            res.setdefault((v, t), []).append(cell(t, total, pre))
for v in ("A", "B"):
    r1 = [o for o, _ in res[(v, 1)]]; r2 = [o for o, _ in res[(v, 2)]]
    pr = sorted(b / a for a, b in zip(r1, r2))
    print(f"{v} {total}: 1T {statistics.median(r1)/1e6:.2f}M [{min(r1)/1e6:.2f}-{max(r1)/1e6:.2f}] "
          f"cores {statistics.median(c for _, c in res[(v, 1)]):.2f}; "
          f"2T {statistics.median(r2)/1e6:.2f}M [{min(r2)/1e6:.2f}-{max(r2)/1e6:.2f}] "
          f"cores {statistics.median(c for _, c in res[(v, 2)]):.2f}; "
          f"x{statistics.median(r2)/statistics.median(r1):.2f} paired {statistics.median(pr):.2f} [{pr[0]:.2f}-{pr[-1]:.2f}]")
