import sys, statistics, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    v, t, q = l.split(); d[(v, int(t))].append(float(q))
for v in sorted({k[0] for k in d}):
    a, b = d[(v, 1)], d[(v, 2)]
    pr = sorted(y / x for x, y in zip(a, b))
    print(f"{v}: 1T {statistics.median(a)/1e6:.2f}M [{min(a)/1e6:.2f}-{max(a)/1e6:.2f}]  2T {statistics.median(b)/1e6:.2f}M [{min(b)/1e6:.2f}-{max(b)/1e6:.2f}]  x{statistics.median(b)/statistics.median(a):.2f}  paired {statistics.median(pr):.2f} [{pr[0]:.2f}-{pr[-1]:.2f}]")
