import sys, statistics as st, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, v, t, x = line.split(); d[(v, t)].append(float(x.rstrip("M")))
for v in "AB":
    a, b = st.median(d[(v, "1T")]), st.median(d[(v, "2T")])
    print(v, f"1T {a:.2f}M [{min(d[(v,'1T')]):.2f}-{max(d[(v,'1T')]):.2f}]  2T {b:.2f}M [{min(d[(v,'2T')]):.2f}-{max(d[(v,'2T')]):.2f}]  x{b/a:.2f}")
for t in ("1T", "2T"):
    rs = [b / a for a, b in zip(d[("A", t)], d[("B", t)])]
    print(t, "B/A median", round(st.median(rs), 3), "won", sum(x > 1 for x in rs), "of", len(rs))
