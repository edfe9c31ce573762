# Medians of single-call/ab.sh runs: python3 med.py OUT
import json, glob, statistics as st, sys
d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/abrb"
res = {}
for f in sorted(glob.glob(f"{d}/*-*.json")):
    v, r = f.split("/")[-1][:-5].split("-")
    j = json.load(open(f))
    for case in ("set", "get"):
        for peer in ("senju-auto", "kyotocabinet"):
            res.setdefault((case, peer, v), []).append((int(r), st.median(j["cases"][case][f"{peer}/1"]["totals"])))
for case in ("set", "get"):
    print(f"## {case}")
    for v in ("old", "new"):
        s = [x for _, x in sorted(res[(case, "senju-auto", v)])]
        k = [x for _, x in sorted(res[(case, "kyotocabinet", v)])]
        ratio = [a / b for a, b in zip(s, k)]
        print(f"{v}: senju {st.median(s)/1e3:.0f}k [{min(s)/1e3:.0f}-{max(s)/1e3:.0f}] kyoto {st.median(k)/1e3:.0f}k [{min(k)/1e3:.0f}-{max(k)/1e3:.0f}] senju/kyoto per run median {st.median(ratio):.2f} [{min(ratio):.2f}-{max(ratio):.2f}]")
    so = [x for _, x in sorted(res[(case, "senju-auto", "old")])]
    sn = [x for _, x in sorted(res[(case, "senju-auto", "new")])]
    pr = [b / a for a, b in zip(so, sn)]
    print(f"new/old paired: median {st.median(pr):.3f} [{min(pr):.3f}-{max(pr):.3f}]")
