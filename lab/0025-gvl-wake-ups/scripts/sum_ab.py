import json, glob, statistics as st, sys
d = sys.argv[1]; case = sys.argv[2] if len(sys.argv) > 2 else 'batch'
res = {}
for f in glob.glob(d + '/*.json'):
    v, r = f.rsplit('/', 1)[1][:-5].split('-')
    for k, x in json.load(open(f))['cases'][case].items():
        peer, t = k.split('/')
        res.setdefault((peer, v), {}).setdefault(r, {})[int(t)] = x['totals'][0]
for (peer, v) in sorted(res):
    rows = res[(peer, v)].values()
    ts = sorted({t for x in rows for t in x})
    line = [peer, v, 'n=%d' % len(rows)]
    for t in ts:
        line.append('%dT %.2fM [%.2f-%.2f]' % (t, st.median(x[t] for x in rows) / 1e6, min(x[t] for x in rows) / 1e6, max(x[t] for x in rows) / 1e6))
    if 1 in ts and 2 in ts:
        line.append('2T/1T medians %.2f paired %.2f' % (st.median(x[2] for x in rows) / st.median(x[1] for x in rows), st.median(x[2] / x[1] for x in rows)))
    print(*line)
