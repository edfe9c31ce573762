import json, glob, statistics as st, sys
d = sys.argv[1] if len(sys.argv) > 1 else '/tmp/hp2'
res = {}
for f in glob.glob(d + '/rb-*.json'):
    _, ns, r = f.rsplit('/', 1)[1][:-5].split('-')
    for k, v in json.load(open(f))['cases']['batch'].items():
        res.setdefault(('rb', 'batch', k.split('/')[0], ns, r), {})[int(k.split('/')[1])] = v['totals'][0]
for f in glob.glob(d + '/py-*.json'):
    _, ns, r = f.rsplit('/', 1)[1][:-5].split('-')
    for row in json.load(open(f))['rows']:
        res.setdefault(('py', row['op'], row['peer'], ns, r), {})[row['threads']] = row['median']
out = {}
for (lang, op, peer, ns, r), t in res.items():
    out.setdefault((lang, op, peer, ns), []).append((t[1], t[2], t[2] / t[1]))
for k in sorted(out):
    v = out[k]
    print(*k, 'n=%d' % len(v), '1T %.2fM' % (st.median(x[0] for x in v) / 1e6), '2T %.2fM' % (st.median(x[1] for x in v) / 1e6),
          'ratio-of-medians %.2f' % (st.median(x[1] for x in v) / st.median(x[0] for x in v)),
          'paired %.2f [%.2f-%.2f]' % (st.median(x[2] for x in v), min(x[2] for x in v), max(x[2] for x in v)))
