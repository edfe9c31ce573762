# Medians of the large-case A/B runs: python3 med.py DIR
import json, glob, statistics as st, sys
d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/abpy"
res = {}
for f in sorted(glob.glob(f"{d}/*-*.json")):
    v, r = f.split("/")[-1][:-5].split("-")
    for row in json.load(open(f))["rows"]:
        res.setdefault((v, row["op"], row["peer"], row["threads"]), []).append((int(r), row["median"], row["cores"]))
for op in ("set", "get"):
    print(f"## large {op}")
    for t in (1, 2, 4, 8):
        line = [f"T={t}"]
        for v in ("old", "new"):
            a = [m for _, m, _ in sorted(res[(v, op, "senju-auto", t)])]
            h = [m for _, m, _ in sorted(res[(v, op, "senju-hold", t)])]
            rat = [x / y for x, y in zip(a, h)]
            line.append(f"{v}: auto {st.median(a)/1e3:.1f}k hold {st.median(h)/1e3:.1f}k auto/hold {st.median(rat):.2f} [{min(rat):.2f}-{max(rat):.2f}]")
        print(" | ".join(line))
    for v in ("old", "new"):
        a1 = [m for _, m, _ in sorted(res[(v, op, "senju-auto", 1)])]
        a2 = [m for _, m, _ in sorted(res[(v, op, "senju-auto", 2)])]
        r = [y / x for x, y in zip(a1, a2)]
        print(f"{v}: auto 2T/1T per run median x{st.median(r):.2f} [{min(r):.2f}-{max(r):.2f}]")
