#!/bin/bash
# usage: sleeps.sh [VAR=VALUE ...]: one `senju perf sequence --batch 1000 --set_only` run of
# 2M records at 2 threads under a sched_switch trace with stacks (the environment given
# first, for the A/B patches); prints the run's QPS and the workers' sleeps in `by_shard`:
# parks on a shard lock ("lock") and any other sleep there ("other"), count, total, p50, max.
# The trace is parsed by holders.py's `events`.
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../../../target/bench/release/senju
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd /tmp
env "$@" perf record -q -e sched:sched_switch --call-graph dwarf,8192 -o "$work/sw.data" -- \
  "$bin" perf sequence --batch 1000 --set_only --iter 1000000 --threads 2 2>&1 | grep -o "qps=[0-9]*"
perf script -i "$work/sw.data" -F comm,tid,cpu,time,event,trace,ip,sym 2>/dev/null > "$work/sw.txt"
PYTHONPATH=$here python3 - "$work/sw.txt" <<'PY'
import re, sys
from holders import events
out = {}; d = {'lock': [], 'other': []}
for t, comm, tid, cpu, ev, trace, frames in events(sys.argv[1]):
    m = re.search(r'prev_comm=(\S+) prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)', trace)
    if not m:
        continue
    pc, pp, st, np = m.groups()
    if np in out:
        t0, why = out.pop(np); d[why].append((t - t0) * 1e3)
    stack = ' '.join(frames)
    if pc == 'senju' and st.startswith('S') and 'by_shard' in stack:
        out[pp] = (t, 'lock' if 'lock_exclusive_slow' in stack else 'other')
for k, v in d.items():
    v.sort()
    if v:
        print(k, len(v), 'sleeps, total %.1f ms, p50 %.2f max %.2f' % (sum(v), v[len(v) // 2], v[-1]))
PY
