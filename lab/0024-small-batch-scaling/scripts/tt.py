import os, sys, statistics, tempfile, time, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../bindings/python/bench"))
import bench_threads as bt
import senju
def cell(threads, total, gil="auto"):
    d = tempfile.mkdtemp(dir="/tmp")
    db = senju.open(os.path.join(d, "b.sj"), truncate=True, gil=gil)
    batches = max(1, total // 1000 // threads)
    ks = [[bt.keys_for(i * 1000 + b, 1000) for b in range(batches)] for i in range(threads)]
    v = b"v" * 8
    ps = [[[(k, v) for k in b] for b in ks[i]] for i in range(threads)]
    barrier = threading.Barrier(threads + 1)
    info = [None] * threads
    def body(i):
        barrier.wait()
        s, c = time.perf_counter(), time.thread_time()
        sm = db.set_many
        for p in ps[i]: sm(p)
        info[i] = (s, time.perf_counter(), time.thread_time() - c)
    ts = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in ts: t.start()
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for t in ts: t.join()
    wall = time.perf_counter() - t0; cpu = time.process_time() - c0
    db.close()
    return wall, cpu, [((s - t0) * 1e3, (e - t0) * 1e3, c * 1e3) for s, e, c in info]
total = int(sys.argv[1])
for r in range(int(sys.argv[2])):
    for t in (1, 2):
        w, c, inf = cell(t, total)
        print(f"T={t} wall {w*1e3:6.1f} ms cpu {c*1e3:6.1f} ({c/w:.2f} cores) rate {total/w/1e6:.2f}M  threads: " + "  ".join(f"[{s:.1f}-{e:.1f} cpu {cc:.1f}]" for s, e, cc in inf))
