"""Paired new/old ratios of the convoy cells (store thread's ops/s) of runs of
../../0004-ruby-threads/single-call/ab.sh: python3 convoy_pair.py OUT..."""
import glob, json, statistics as st, sys
cells = {}
for d in sys.argv[1:]:
    for f in glob.glob(d + '/new-*.json'):
        new, old = json.load(open(f))['convoy'], json.load(open(f.replace('/new-', '/old-')))['convoy']
        for k in new:
            if k in old:
                cells.setdefault(k, []).append((new[k]['ops_per_s'][0], old[k]['ops_per_s'][0]))
for k, v in sorted(cells.items()):
    r = sorted(a / b for a, b in v)
    print(k, 'n=%d new %.0f old %.0f new/old median %.3f [%.3f-%.3f]' % (
        len(v), st.median(a for a, _ in v), st.median(b for _, b in v), st.median(r), r[0], r[-1]))
