import sys,re,statistics
# Paired ratios of an alternating A/B run (lab/0009-write-instructions/ab.sh output: one line
# per run, `NAME qps=SET qps=GET qps=REMOVE`): for each op, the median over rounds of B/A, how
# many rounds B won, and the range. A and B are the first two names in order of appearance.
# usage: python3 paired.py FILE...
rows=[]
for f in sys.argv[1:]:
    for line in open(f):
        q=[int(x) for x in re.findall(r'qps=(\d+)',line)]
        if len(q)>=3: rows.append((line.split()[0],q[:3]))
names=sorted(set(r[0] for r in rows),key=[r[0] for r in rows].index)
A=[r[1] for r in rows if r[0]==names[0]]; B=[r[1] for r in rows if r[0]==names[1]]
for i,op in enumerate(['set','get','remove']):
    rs=[b[i]/a[i] for a,b in zip(A,B) if a[i]]
    if not rs: continue
    print(op,'B/A median %.3f'%statistics.median(rs),'wins %d/%d'%(sum(r>1 for r in rs),len(rs)),'range %.2f-%.2f'%(min(rs),max(rs)))
