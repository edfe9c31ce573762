import os, sys, threading, time, tempfile, senju, shutil
N = 1_600_000
T = int(sys.argv[1]); R = int(sys.argv[2]); mem = len(sys.argv) > 3
batches = [[[(b"%02d%08d" % (t, i), b"%08d" % i) for i in range(s, s + 1000)] for s in range(0, N // T, 1000)] for t in range(T)]
for r in range(R):
    d = tempfile.mkdtemp(dir="/tmp/hint")
    db = senju.open(None, memory=True) if mem else senju.open(os.path.join(d, "b.sj"), truncate=True)
    bar = threading.Barrier(T + 1)
    def w(t):
        bar.wait()
        for b in batches[t]:
            db.set_many(b)
    ths = [threading.Thread(target=w, args=(t,)) for t in range(T)]
    for th in ths: th.start()
    bar.wait(); t0 = time.perf_counter(); import resource; ru0 = resource.getrusage(resource.RUSAGE_SELF)
    for th in ths: th.join()
    dt = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    extra = f" cpu {cpu/dt:.2f} cores, {cpu*1e9/N:.0f} ns/pair (sys {(ru1.ru_stime-ru0.ru_stime)*1e9/N:.0f}), vcsw {ru1.ru_nvcsw-ru0.ru_nvcsw} ivcsw {ru1.ru_nivcsw-ru0.ru_nivcsw} flt {ru1.ru_minflt-ru0.ru_minflt}" if os.environ.get("CPU") else ""
    db.close(); shutil.rmtree(d)
    print(f"{T}T {N/dt/1e6:.2f}M{extra}")
