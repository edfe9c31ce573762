import os, sys, threading, time, statistics, tempfile, senju
N = 1_600_000
def run(T, hint):
    d = tempfile.mkdtemp(dir="/tmp/hint")
    kw = {"capacity_hint": N} if hint else {}
    pass
    db = senju.open(None, memory=True, **kw) if os.environ.get("MEM") else senju.open(os.path.join(d, "b.sj"), truncate=True, **kw)
    per = N // T
    batches = [[[(b"%02d%08d" % (t, i), b"%08d" % i) for i in range(s, s + 1000)] for s in range(0, per, 1000)] for t in range(T)]
    bar = threading.Barrier(T + 1)
    def w(t):
        bar.wait()
        for b in batches[t]:
            db.set_many(b)
    ths = [threading.Thread(target=w, args=(t,)) for t in range(T)]
    for th in ths: th.start()
    bar.wait(); t0 = time.perf_counter()
    for th in ths: th.join()
    dt = time.perf_counter() - t0
    db.close(); import shutil; shutil.rmtree(d)
    return N / dt
res = {}
for r in range(int(sys.argv[1])):
    for hint in (False, True):
        for T in (1, 2):
            res.setdefault((hint, T), []).append(run(T, hint))
for hint in (False, True):
    m1 = statistics.median(res[(hint, 1)]); m2 = statistics.median(res[(hint, 2)])
    print(f"hint={hint}: 1T {m1/1e6:.2f}M 2T {m2/1e6:.2f}M x{m2/m1:.2f}  ratios/round", [round(b/a,2) for a,b in zip(res[(hint,1)],res[(hint,2)])])
