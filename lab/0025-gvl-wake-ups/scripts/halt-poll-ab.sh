#!/bin/bash
# Alternating A/B of the guest's halt polling (haltpoll.guest_halt_poll_ns 0, as the kernel
# command line sets it, against 200000) on the Ruby and Python batch cells at 1 and 2
# threads, one round each; needs root, puts 0 back on exit. OUT: where the JSON goes
# ({rb,py}-NS-ROUND.json); summarize with `python3 sum_halt_poll.py OUT`.
#   OUT=/tmp/hp ROUNDS=20 lab/0025-gvl-wake-ups/scripts/halt-poll-ab.sh
set -u
P=/sys/module/haltpoll/parameters/guest_halt_poll_ns
cd "$(dirname "$0")/../../.."
root=$PWD
mkdir -p "$OUT"
trap 'echo 0 > $P' EXIT
for r in $(seq 1 "${ROUNDS:-8}"); do
  for ns in 0 200000; do
    echo $ns > $P
    ruby -I bindings/ruby/lib bindings/ruby/bench/bench_threads.rb --cases batch --threads 1,2 \
      --peers senju-auto,senju-release --rounds 1 --json "$OUT/rb-$ns-$r.json" > /dev/null 2>&1
    (cd /tmp && "$root/target/pybench/bin/python" "$root/bindings/python/bench/bench_threads.py" \
      --cases batch --threads 1,2 --peers senju-auto,senju-release --rounds 1 \
      --json "$OUT/py-$ns-$r.json" > /dev/null 2>&1)
    echo "round $r ns $ns done $(date +%T)"
  done
done
