import os, sys, statistics, tempfile, time, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../bindings/python/bench"))
import bench_threads as bt
import senju
def cell(threads, total):
    d = tempfile.mkdtemp(dir="/tmp")
    db = senju.open(os.path.join(d, "b.sj"), truncate=True, gil="auto")
    batches = max(1, total // 1000 // threads)
    ks = [[bt.keys_for(i * 1000 + b, 1000) for b in range(batches)] for i in range(threads)]
    v = b"v" * 8
    ps = [[[(k, v) for k in b] for b in ks[i]] for i in range(threads)]
    barrier = threading.Barrier(threads + 1)
    durs = [[] for _ in range(threads)]
    def body(i):
        barrier.wait()
        sm = db.set_many; pc = time.perf_counter; out = durs[i]
        for p in ps[i]:
            a = pc(); sm(p); out.append(pc() - a)
    ts = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in ts: t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts: t.join()
    wall = time.perf_counter() - t0
    db.close()
    return wall, [x for d in durs for x in d]
for t in (1, 2):
    allc = []; walls = []
    for r in range(8):
        w, c = cell(t, 160000); allc += c; walls.append(w)
    allc.sort(); n = len(allc)
    q = lambda f: allc[int(f * (n - 1))] * 1e6
    print(f"T={t}: wall med {statistics.median(walls)*1e3:.1f} ms; per call us: p10 {q(.1):.0f} p50 {q(.5):.0f} p90 {q(.9):.0f} p99 {q(.99):.0f} max {q(1):.0f}; sum of calls >500us: {sum(x for x in allc if x > 5e-4)*1e3/8:.1f} ms/run; sum all {sum(allc)*1e3/8:.1f} ms/run")
