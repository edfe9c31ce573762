import os, sys, statistics
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "smab.py")).read().split("total = int")[0])
total = int(sys.argv[1]); rounds = int(sys.argv[2]); pre = sys.argv[3] == "pre"
res = {}
for r in range(rounds):
    for var in ("A", "B"):
        if var == "B": os.environ["SENJU_PREFAULT_IDLE"] = "1"
        else: os.environ.pop("SENJU_PREFAULT_IDLE", None)
        for t in (1, 2):
            res.setdefault((var, t), []).append(cell(t, total, pre))
for var in ("A", "B"):
    r1 = [o for o, _ in res[(var, 1)]]; r2 = [o for o, _ in res[(var, 2)]]
    pr = sorted(b / a for a, b in zip(r1, r2))
    print(f"{var} {total}: 1T {statistics.median(r1)/1e6:.2f}M [{min(r1)/1e6:.2f}-{max(r1)/1e6:.2f}] cores {statistics.median(c for _, c in res[(var,1)]):.2f}; "
          f"2T {statistics.median(r2)/1e6:.2f}M [{min(r2)/1e6:.2f}-{max(r2)/1e6:.2f}] cores {statistics.median(c for _, c in res[(var,2)]):.2f}; "
          f"x{statistics.median(r2)/statistics.median(r1):.2f} paired {statistics.median(pr):.2f} [{pr[0]:.2f}-{pr[-1]:.2f}]")
