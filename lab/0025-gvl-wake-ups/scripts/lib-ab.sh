#!/bin/bash
# Alternating A/B of two builds of the Ruby extension, each a copy of bindings/ruby/lib
# (/tmp/rb-old and /tmp/rb-new: `cp -rL bindings/ruby/lib /tmp/rb-new` after `make ruby`),
# one round of bench_threads.rb each; CASES, THREADS and PEERS pick the cells. Writes
# OUT/{old,new}-ROUND.json; `python3 pair.py CASE OUT...` prints the paired new/old ratios,
# `python3 sum_ab.py OUT [CASE]` the 2T/1T ratios.
#   OUT=/tmp/ab ROUNDS=12 CASES=batch THREADS=1,2 lab/0025-gvl-wake-ups/scripts/lib-ab.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p "$OUT"
for r in $(seq 1 "${ROUNDS:-12}"); do
  for v in old new; do
    ruby -I "/tmp/rb-$v" bindings/ruby/bench/bench_threads.rb --cases "${CASES:-batch}" \
      --threads "${THREADS:-1,2}" --peers "${PEERS:-senju-auto,senju-release}" --rounds 1 \
      --json "$OUT/$v-$r.json" > /dev/null 2>&1
  done
  echo "round $r $(date +%T)"
done
