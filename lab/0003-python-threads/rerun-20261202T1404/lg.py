import senju, threading, time, os, sys, tempfile
d=tempfile.mkdtemp()
def run(gil, T, n=1600, rounds=2):
    db=senju.open(os.path.join(d,"x.sj"), truncate=True, gil=gil)
    v=os.urandom(64<<10)
    ks=[[b"%02d%08d"%(i,j) for j in range(n//T)] for i in range(T)]
    for i in range(T):
        for k in ks[i]: db[k]=v
    time.sleep(0.3)
    bar=threading.Barrier(T+1)
    def body(i):
        bar.wait()
        g=db.get
        for _ in range(rounds):
            for k in ks[i]: g(k)
    ts=[threading.Thread(target=body,args=(i,)) for i in range(T)]
    for t in ts: t.start()
    bar.wait(); t0=time.perf_counter(); c0=time.process_time()
    for t in ts: t.join()
    w=time.perf_counter()-t0; c=time.process_time()-c0
    db.close()
    return n*rounds/w, c/w
for r in range(3):
    for gil in ("auto","release","hold"):
        for T in (1,2):
            ops,cores=run(gil,T, int(sys.argv[1]) if len(sys.argv)>1 else 1600)
            print(r,gil,T,f"{ops/1e3:.0f}k cores {cores:.2f}")
