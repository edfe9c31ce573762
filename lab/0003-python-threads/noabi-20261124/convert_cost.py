import sys, time, senju, tempfile, os, statistics
N = 1000
pairs_bad = [(b"%010d" % i, b"v%07d" % i) for i in range(N - 1)] + [(b"x", 1)]
pairs = [(b"%010d" % i, b"v%07d" % i) for i in range(N)]
d = tempfile.mkdtemp()
db = senju.Db(os.path.join(d, "a.sj"))
res = []
for r in range(7):
    t = time.perf_counter_ns()
    for _ in range(2000):
        try:
            db.set_many(pairs_bad)
        except TypeError:
            pass
    res.append((time.perf_counter_ns() - t) / 2000 / N)
t = time.perf_counter_ns()
for _ in range(2000):
    db.set_many(pairs)
full = (time.perf_counter_ns() - t) / 2000 / N
print("convert ns/pair median %.1f min %.1f; overwrite set_many ns/pair %.1f" % (statistics.median(res), min(res), full))
