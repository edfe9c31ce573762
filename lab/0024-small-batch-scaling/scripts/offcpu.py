"""Off-CPU time of a process's threads inside the cells' windows, by reason.
Usage: offcpu.py PERF_SCRIPT_OUTPUT WINDOWS (the WIN lines smab.py prints with LAB_WINDOWS=1)."""
import re, collections, sys
wins = [tuple(map(float, l.split()[1:3])) for l in open(sys.argv[2]) if l.startswith("WIN")]
def inwin(t):
    for a, b in wins:
        if a <= t <= b: return True
    return False
blocks = open(sys.argv[1]).read().split("\n\n")
# The main thread (the first thread seen, whose tid is the pid) waits in join for the whole
# cell: only the workers' and the store's own threads are counted.
main = int(blocks[0].split()[1])
out = {}  # tid -> (t, reason)
tot = collections.Counter(); cnt = collections.Counter()
wall = sum(b - a for a, b in wins)
for b in blocks:
    lines = b.strip().split("\n")
    if not lines or not lines[0].strip(): continue
    h = lines[0]
    m = re.match(r"\s*(\S+)\s+(\d+)\s+([\d.]+):\s+(\S+):", h)
    if not m: continue
    comm, tid, t, ev = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4)
    syms = [l.split()[1].split("+")[0] for l in lines[1:] if len(l.split()) > 1]
    if ev == "sched:sched_switch":
        mm = re.search(r"prev_comm=(.+?) prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.+?) next_pid=(\d+)", h)
        pc, pp, st, nc, np_ = mm.group(1), int(mm.group(2)), mm.group(3), mm.group(4), int(mm.group(5))
        k = [s for s in syms if not s.startswith(("__schedule", "schedule", "io_schedule", "preempt_schedule"))]
        reason = ("preempt" if st.startswith("R") else " < ".join(k[:4]))
        if pc.startswith(("python", "senju")):
            out[pp] = (t, pc, reason)
        if np_ in out:
            t0, c, r = out.pop(np_)
            if inwin(t0) and np_ != main:
                tot[(c, r)] += t - t0; cnt[(c, r)] += 1
print(f"windows {len(wins)} wall {wall*1e3:.1f} ms")
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:20]:
    print(f"{v*1e3:8.2f} ms {cnt[k]:5d}  {k}")
