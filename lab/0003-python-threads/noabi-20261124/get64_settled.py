import senju, tempfile, os, threading, time, sys
n = 8000; T = int(sys.argv[1]); mode = sys.argv[2] if len(sys.argv) > 2 else "auto"
d = tempfile.mkdtemp(); db = senju.open(os.path.join(d, "a.sj"), gil=mode)
v = os.urandom(65536)
db.set_many({b"k%06d" % i: v for i in range(n)})
keys = [b"k%06d" % i for i in range(n)]
def work(ks):
    g = db.get
    for _ in range(4):
        for k in ks: g(k)
parts = [keys[i::T] for i in range(T)]
th = [threading.Thread(target=work, args=(p,)) for p in parts]
c0 = time.process_time(); w0 = time.perf_counter()
for t in th: t.start()
for t in th: t.join()
w = time.perf_counter() - w0; c = time.process_time() - c0
print(f"T={T} {mode}: {4*n/w:,.0f} gets/s, CPU {c/w:.2f} cores")
db.close()
