"""set_many 1T/2T: pairs built inside the timed loop (as bench_threads does) vs prebuilt."""
import os, sys, statistics, tempfile, time, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../bindings/python/bench"))
import bench_threads as bt
import senju

def cell(threads, total, pre, gil="auto"):
    d = tempfile.mkdtemp(dir="/tmp")
    db = senju.open(os.path.join(d, "b.sj"), truncate=True, gil=gil)
    batches = max(1, total // 1000 // threads)
    ks = [[bt.keys_for(i * 1000 + b, 1000) for b in range(batches)] for i in range(threads)]
    v = b"v" * 8
    if pre:
        ps = [[[(k, v) for k in b] for b in ks[i]] for i in range(threads)]
        def work(i):
            sm = db.set_many
            for p in ps[i]:
                sm(p)
            return batches * 1000
    else:
        def work(i):
            sm = db.set_many
            for b in ks[i]:
                sm([(k, v) for k in b])
            return batches * 1000
    t0 = time.monotonic()
    run = bt.run_threads(threads, work)
    if os.environ.get("LAB_WINDOWS"):
        # For offcpu.py: the cell's span on CLOCK_MONOTONIC (perf record -k CLOCK_MONOTONIC);
        # `run.wall` is its timed part, which ends where the span ends.
        end = time.monotonic()
        print("WIN", end - run.wall, end, file=sys.stderr)
    db.close()
    for f in os.listdir(d): os.unlink(os.path.join(d, f))
    os.rmdir(d)
    return run.rate()

total = int(sys.argv[1]); rounds = int(sys.argv[2])
res = {}
for r in range(rounds):
    for pre in (False, True):
        for t in (1, 2):
            ops, cores = cell(t, total, pre)
            res.setdefault((pre, t), []).append((ops, cores))
for pre in (False, True):
    r1 = [o for o, _ in res[(pre, 1)]]; r2 = [o for o, _ in res[(pre, 2)]]
    paired = sorted(b / a for a, b in zip(r1, r2))
    print(f"{'pre ' if pre else 'loop'} total={total}: 1T {statistics.median(r1)/1e6:.2f}M [{min(r1)/1e6:.2f}-{max(r1)/1e6:.2f}] "
          f"cores {statistics.median(c for _, c in res[(pre,1)]):.2f}; 2T {statistics.median(r2)/1e6:.2f}M [{min(r2)/1e6:.2f}-{max(r2)/1e6:.2f}] "
          f"cores {statistics.median(c for _, c in res[(pre,2)]):.2f}; x{statistics.median(r2)/statistics.median(r1):.2f} paired med x{statistics.median(paired):.2f} [{paired[0]:.2f}-{paired[-1]:.2f}]")
