#!/bin/bash
# usage: sleeps.sh [VAR=VALUE ...]: one `senju perf sequence --batch 1000 --set_only` run of
# 2M records at 2 threads under a sched_switch trace with stacks (the environment given
# first, for the A/B patches); prints the run's QPS and the workers' sleeps in `by_shard`:
# parks on a shard lock ("lock") and any other sleep there ("other"), count, total, p50, max.
bin=$(cd "$(dirname "$0")/../../.." && pwd)/target/bench/release/senju
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd /tmp
env "$@" perf record -q -e sched:sched_switch --call-graph dwarf,8192 -o "$work/sw.data" -- \
  "$bin" perf sequence --batch 1000 --set_only --iter 1000000 --threads 2 2>&1 | grep -o "qps=[0-9]*"
perf script -i "$work/sw.data" -F comm,tid,time,trace,ip,sym 2>/dev/null > "$work/sw.txt"
python3 - "$work/sw.txt" <<'PY'
import re, sys
blocks = open(sys.argv[1]).read().split('\n\n')
out = {}; d = {'lock': [], 'other': []}
for b in blocks:
    L = b.strip().split('\n')
    m = re.search(r'(\d+\.\d+):\s.*prev_comm=(\S+) prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)', L[0])
    if not m:
        continue
    t = float(m.group(1)); pc, pp, st, np = m.group(2), m.group(3), m.group(4), m.group(6)
    if np in out:
        t0, why = out.pop(np); d[why].append((t - t0) * 1e3)
    if pc == 'senju' and st.startswith('S') and 'by_shard' in b:
        out[pp] = (t, 'lock' if 'lock_exclusive_slow' in b else 'other')
for k, v in d.items():
    v.sort()
    if v:
        print(k, len(v), 'sleeps, total %.1f ms, p50 %.2f max %.2f' % (sum(v), v[len(v) // 2], v[-1]))
PY
