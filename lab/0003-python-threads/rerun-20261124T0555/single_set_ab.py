import senju, time, sys
db = senju.open(None, memory=True)
ks = [b"%010d" % i for i in range(400_000)]
v = b"v" * 8
best = []
for r in range(3):
    t0 = time.perf_counter()
    for k in ks: db[k] = v
    best.append(len(ks) / (time.perf_counter() - t0))
print(f"{max(best)/1e6:.2f}")
