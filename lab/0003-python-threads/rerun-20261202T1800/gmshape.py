import senju, os, tempfile, sys
d=tempfile.mkdtemp()
db=senju.open(os.path.join(d,"g.sj"), truncate=True, gil="hold")
v=b"v"*8
n=int(sys.argv[1]); N=100
ks=[[b"%02d%08d"%(b%100, j + 1000*b) for j in range(n)] for b in range(N)]
for b in ks: db.set_many([(k,v) for k in b])
for b in ks: db.get_many(b)
for b in ks: db.remove_many(b)
