import senju, os, tempfile, sys
d=tempfile.mkdtemp()
db=senju.open(os.path.join(d,"g.sj"), truncate=True, gil="hold")
keys=[[b"%02d%08d"%(b,j) for j in range(1000)] for b in range(20)]
v=b"v"*8
for ks in keys: db.set_many([(k,v) for k in ks])
for _ in range(5):
    for ks in keys: db.get_many(ks)
