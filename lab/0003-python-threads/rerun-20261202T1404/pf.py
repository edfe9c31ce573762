import senju, os, time, tempfile, glob
def pf_cpu():
    tot=0
    for t in glob.glob('/proc/self/task/*'):
        try:
            if open(t+'/comm').read().strip()=='senju-prefault':
                f=open(t+'/stat').read().rsplit(')',1)[1].split()
                tot+=int(f[11])+int(f[12])
        except OSError: pass
    return tot*10  # ms (CLK_TCK 100)
d=tempfile.mkdtemp()
for n in (1600,4000):
  db=senju.open(os.path.join(d,"x.sj"), truncate=True)
  v=os.urandom(64<<10)
  t0=time.perf_counter()
  for j in range(n): db[b"%08d"%j]=v
  t1=time.perf_counter()
  print(n,"sets took %.1f ms, prefault cpu so far %d ms"%((t1-t0)*1e3,pf_cpu()))
  for dt in (0.005,0.01,0.02,0.05,0.1,0.3):
    time.sleep(dt- (time.perf_counter()-t1) if dt>(time.perf_counter()-t1) else 0)
    print("  +%3d ms prefault cpu %d ms"%(dt*1e3,pf_cpu()))
  print(db.stats())
  db.close()
