import json, glob, statistics as st, sys
case = sys.argv[1]; dirs = sys.argv[2:]
for peer in ['senju-auto', 'senju-release', 'senju-hold']:
  for t in [1, 2, 4, 8]:
    rs = []
    for d in dirs:
        for f in glob.glob(d + '/new-*.json'):
            o = f.replace('/new-', '/old-')
            try:
                a = json.load(open(o))['cases'][case]['%s/%d' % (peer, t)]['totals'][0]
                b = json.load(open(f))['cases'][case]['%s/%d' % (peer, t)]['totals'][0]
            except (KeyError, FileNotFoundError):
                continue
            rs.append(b / a)
    if rs:
        rs.sort(); print(peer, t, 'n=%d new/old median %.3f [q1 %.3f q3 %.3f] wins %d/%d' % (len(rs), st.median(rs), rs[len(rs)//4], rs[3*len(rs)//4], sum(r > 1 for r in rs), len(rs)))
