#!/bin/bash
# Alternating A/B of bench_threads.rb cells between two builds of the extension, each in a
# copy of bindings/ruby/lib: OLD_LIB and NEW_LIB (directories holding senju.rb and
# senju/senju.so). CASES, THREADS and PEERS pick the cells (default: the 1-thread `[]=` and
# `[]` cells of senju `gvl: :auto` with Kyoto Cabinet in the same runs); BENCH_ROUNDS is
# bench_threads.rb's --rounds in each run (default 3). Writes OUT/{old,new}-ROUND.json and a
# line per round on stdout; `python3 med.py OUT` prints the single-call medians and ratios.
#   OLD_LIB=/tmp/rb-old NEW_LIB=/tmp/rb-new OUT=/tmp/abrb ROUNDS=7 lab/0004-ruby-threads/single-call/ab.sh
# The batch A/B of ../batch-places-20261203/ (summarized by its med.py):
#   CASES=batch THREADS=1,2,4,8 PEERS=senju-auto,senju-hold ROUNDS=6 OUT=... ab.sh
# The A/B of ../../0025-gvl-wake-ups/ (summarized by its pair.py and sum_ab.py):
#   CASES=batch THREADS=1,2,4,8 PEERS=senju-auto,senju-release,senju-hold BENCH_ROUNDS=1 ROUNDS=10 OUT=... ab.sh
set -eu
cd "$(dirname "$0")/../../.."
mkdir -p "$OUT"
for r in $(seq 1 "${ROUNDS:-7}"); do
  for v in old new; do
    lib=$OLD_LIB; [ "$v" = new ] && lib=$NEW_LIB
    ruby -I "$lib" bindings/ruby/bench/bench_threads.rb --cases "${CASES:-set,get}" \
      --threads "${THREADS:-1}" --peers "${PEERS:-senju-auto,kyotocabinet}" --rounds "${BENCH_ROUNDS:-3}" \
      --json "$OUT/$v-$r.json" > /dev/null 2>&1
  done
  echo "round $r $(date +%T)"
done
