import senju, os, tempfile, time, sys, threading
gil=sys.argv[1]; T=int(sys.argv[2]); secs=float(sys.argv[3]) if len(sys.argv)>3 else 1.5
d=tempfile.mkdtemp()
db=senju.open(os.path.join(d,"g.sj"), truncate=True, gil=gil)
keys=[[[b"%d%02d%08d"%(t,b,j) for j in range(1000)] for b in range(40)] for t in range(T)]
v=b"v"*8
for t in range(T):
    for ks in keys[t]: db.set_many([(k,v) for k in ks])
time.sleep(0.2)
counts=[0]*T
bar=threading.Barrier(T+1)
stop=[False]
def body(t):
    bar.wait(); n=0; g=db.get_many
    while not stop[0]:
        for ks in keys[t]:
            g(ks); n+=1000
            if stop[0]: break
    counts[t]=n
ts=[threading.Thread(target=body,args=(t,)) for t in range(T)]
for th in ts: th.start()
bar.wait(); t0=time.perf_counter(); c0=time.process_time()
time.sleep(secs); stop[0]=True
for th in ts: th.join()
w=time.perf_counter()-t0; c=time.process_time()-c0
print(f"{sum(counts)/w/1e6:.3f} {c/w:.2f}")
