"""Time set_many on one input shape: dict of 1000, list of 1000 pairs, list of 10 (prebuilt), fresh store."""
import senju, os, tempfile, sys, time, shutil
shape=sys.argv[1]
n=10 if shape=="small" else 1000
N=20000 if shape=="small" else 400
v=b"v"*8
ks=[[b"%03d%08d"%(b%1000, j + 1000*b) for j in range(n)] for b in range(N)]
pairs=[dict.fromkeys(b, v) if shape=="dict" else [(k,v) for k in b] for b in ks]
d=tempfile.mkdtemp()
db=senju.open(os.path.join(d,"g.sj"), truncate=True, gil="hold")
t=time.perf_counter()
for p in pairs: db.set_many(p)
dt=time.perf_counter()-t
db.close(); shutil.rmtree(d)
print(f"{dt/(N*n)*1e9:.1f}")
