"""What a shard's writer was doing while it held the shard for a long time.

usage: python3 holders.py holds.txt sw.txt [N]

holds.txt: the stderr of `senju perf sequence` built with hold-trace.patch (HOLD lines:
duration, shard, rebuilds/growths inside, thread, CLOCK_MONOTONIC end time).
sw.txt: `perf script -F comm,tid,cpu,time,event,trace,ip,sym` of a `perf record -k
CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_wakeup --call-graph dwarf` of the same
run. Prints a summary over every hold, then the N longest holds (default 8) with each
switch of the holding thread inside them: who took its CPU, and the thread's stack.
"""
import re
import sys
from collections import Counter


def holds(path):
    out = []
    for line in open(path):
        m = re.match(r"HOLD (\d+) us shard (\d+) what (\d+) tid (\d+) end ([\d.]+)", line)
        if m:
            us, shard, what, tid, end = m.groups()
            out.append((int(us), int(shard), int(what), tid, float(end)))
    return out


def events(path):
    out = []
    for block in open(path).read().split("\n\n"):
        lines = block.strip().split("\n")
        m = re.match(r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)", lines[0])
        if not m:
            continue
        comm, tid, cpu, t, ev, trace = m.groups()
        frames = [x.strip().split(None, 1)[1] for x in lines[1:] if len(x.strip().split(None, 1)) > 1]
        out.append((float(t), comm, tid, cpu, ev, trace, frames))
    return out


def main():
    hs = holds(sys.argv[1])
    evs = events(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    cause = Counter()
    lost = Counter()
    for us, _, _, tid, end in hs:
        t0 = end - us * 1e-6
        outs = [e for e in evs if t0 <= e[0] <= end and e[4].endswith("sched_switch")
                and f"prev_pid={tid} " in e[5]]
        if not outs:
            cause["never switched out (on CPU throughout)"] += 1
            lost["never switched out (on CPU throughout)"] += us
            continue
        e = outs[0]
        state = re.search(r"prev_state=(\S+)", e[5]).group(1)
        nxt = re.search(r"next_comm=(\S+)", e[5]).group(1)
        key = f"switched out ({state}) for {nxt}"
        cause[key] += 1
        lost[key] += us
    print(f"{len(hs)} holds over 300 us, {sum(h[0] for h in hs) / 1000:.1f} ms in all")
    for k, n in cause.most_common():
        print(f"  {n:4d} holds, {lost[k] / 1000:6.1f} ms: {k}")
    for us, shard, what, tid, end in sorted(hs, reverse=True)[:top]:
        t0 = end - us * 1e-6
        print(f"== hold {us} us, thread {tid}, shard {shard}, rebuilds+1000*growths {what}")
        for t, comm, etid, cpu, ev, trace, frames in evs:
            if not t0 <= t <= end:
                continue
            if ev.endswith("sched_switch") and f"prev_pid={tid} " in trace:
                state = re.search(r"prev_state=(\S+)", trace).group(1)
                nxt = trace.split("==>")[1].strip()[:40]
                stack = [f[:45] for f in frames if "senju" in f][:3]
                print(f"  {(t - t0) * 1e6:+7.0f} us cpu{cpu} out ({state}) -> {nxt} | {stack}")
            elif ev.endswith("sched_switch") and f"next_pid={tid} " in trace:
                print(f"  {(t - t0) * 1e6:+7.0f} us cpu{cpu} back on CPU")
            elif ev.endswith("sched_wakeup") and etid == tid:
                print(f"  {(t - t0) * 1e6:+7.0f} us it wakes {trace[:50]}")


if __name__ == "__main__":
    main()
