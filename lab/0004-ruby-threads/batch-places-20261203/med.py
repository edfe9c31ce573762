# Medians of the batch A/B (../single-call/ab.sh with CASES=batch): python3 med.py DIR
import json, glob, statistics as st, sys
d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/abb"
case = sys.argv[2] if len(sys.argv) > 2 else "batch"
res = {}
for f in sorted(glob.glob(f"{d}/*-*.json")):
    v, r = f.split("/")[-1][:-5].split("-")
    j = json.load(open(f))["cases"][case]
    for cell, x in j.items():
        res.setdefault((v, cell), []).append((int(r), st.median(x["totals"]), st.median(x["cores"])))
for t in (1, 2, 4, 8):
    line = [f"T={t}"]
    for v in ("old", "new"):
        a = [m for _, m, _ in sorted(res[(v, f"senju-auto/{t}")])]
        h = [m for _, m, _ in sorted(res[(v, f"senju-hold/{t}")])]
        c = [c for _, _, c in sorted(res[(v, f"senju-auto/{t}")])]
        rat = [x / y for x, y in zip(a, h)]
        line.append(f"{v}: auto {st.median(a)/1e6:.2f}M hold {st.median(h)/1e6:.2f}M auto/hold {st.median(rat):.2f} [{min(rat):.2f}-{max(rat):.2f}] cores {st.median(c):.2f}")
    print(" | ".join(line))
for v in ("old", "new"):
    a1 = [m for _, m, _ in sorted(res[(v, "senju-auto/1")])]
    a2 = [m for _, m, _ in sorted(res[(v, "senju-auto/2")])]
    r = [y / x for x, y in zip(a1, a2)]
    print(f"{v}: auto 2T/1T per run median x{st.median(r):.2f} [{min(r):.2f}-{max(r):.2f}]")
