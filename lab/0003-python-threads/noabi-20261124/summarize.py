import sys, statistics as st, collections
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 5: continue
    r, v, case = p[0], p[1], p[2] + " " + p[3]
    vals = [float(x.replace(",", "")) for x in p[4:]]
    d[(case)].setdefault(v, {})[r] = vals
for case, vv in d.items():
    A, B = vv["A"], vv["B"]
    n = len(A["1"])
    for t in range(n):
        a = [A[r][t] for r in A]; b = [B[r][t] for r in B]
        ratios = [B[r][t] / A[r][t] for r in A if r in B]
        print(f"{case:12} T{t+1}: A {st.median(a)/1e6:.2f}M [{min(a)/1e6:.2f}-{max(a)/1e6:.2f}]  B {st.median(b)/1e6:.2f}M [{min(b)/1e6:.2f}-{max(b)/1e6:.2f}]  B/A median of paired {st.median(ratios):.3f} ({sum(x>1 for x in ratios)}/{len(ratios)} won)")
    if n == 2:
        print(f"{'':12} 2T/1T: A x{st.median([A[r][1]/A[r][0] for r in A]):.2f}  B x{st.median([B[r][1]/B[r][0] for r in B]):.2f} (median of per-round); of medians A x{st.median([A[r][1] for r in A])/st.median([A[r][0] for r in A]):.2f} B x{st.median([B[r][1] for r in B])/st.median([B[r][0] for r in B]):.2f}")
