"""100 set_many calls of one input shape: list (of 2-tuples), dict, small (a list of 10)."""
import senju, os, tempfile, sys
d=tempfile.mkdtemp()
db=senju.open(os.path.join(d,"g.sj"), truncate=True, gil="hold")
v=b"v"*8
shape=sys.argv[1]; N=100
n=10 if shape=="small" else 1000
ks=[[b"%02d%08d"%(b%100, j + 1000*b) for j in range(n)] for b in range(N)]
pairs=[dict.fromkeys(b, v) if shape=="dict" else [(k,v) for k in b] for b in ks]
for p in pairs: db.set_many(p)
