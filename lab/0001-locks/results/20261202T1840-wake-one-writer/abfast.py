import json,statistics as st,collections,sys,glob
pat=sys.argv[1]  # e.g. /tmp/ab-{v}-*.json
lim=float(sys.argv[2]) if len(sys.argv)>2 else 150
d=collections.defaultdict(list)
for v in 'AB':
    for f in glob.glob(pat.replace('{v}',v)):
        j=json.load(open(f))
        for row in j['throughput']['rows']:
            for x in row['runs']:
                if x['line_round_trip_ns']<lim:
                    d[(row['table'],row['read_percent'],row['cs_ns'],row['threads'],v)].append(sum(x['per_thread_ops'])/x['elapsed_ns']*1e3)
keys=sorted(set(k[:4] for k in d))
for k in keys:
    a=d.get(k+('A',),[]); b=d.get(k+('B',),[])
    if not a or not b: print(k,'missing'); continue
    print(f"{k[0][:6]} read {k[1]:3}% cs {k[2]:4} T={k[3]:2}  A {st.median(a):6.2f} n{len(a)} [{min(a):.2f}-{max(a):.2f}]  B {st.median(b):6.2f} n{len(b)} [{min(b):.2f}-{max(b):.2f}]  B/A {st.median(b)/st.median(a):.2f}")
