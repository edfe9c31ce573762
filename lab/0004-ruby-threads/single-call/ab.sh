#!/bin/bash
# Alternating A/B of the bench's 1-thread `[]=` and `[]` cells (senju `gvl: :auto` and Kyoto
# Cabinet in the same runs) between two builds of the extension, each in a copy of
# bindings/ruby/lib: OLD_LIB and NEW_LIB (directories holding senju.rb and senju/senju.so).
# Writes OUT/{old,new}-ROUND.json; `python3 med.py OUT` prints the medians and ratios.
#   OLD_LIB=/tmp/rb-old NEW_LIB=/tmp/rb-new OUT=/tmp/abrb ROUNDS=7 lab/0004-ruby-threads/single-call/ab.sh
set -eu
cd "$(dirname "$0")/../../.."
mkdir -p "$OUT"
for r in $(seq 1 "${ROUNDS:-7}"); do
  for v in old new; do
    lib=$OLD_LIB; [ "$v" = new ] && lib=$NEW_LIB
    ruby -I "$lib" bindings/ruby/bench/bench_threads.rb --cases set,get --threads 1 \
      --peers senju-auto,kyotocabinet --rounds 3 --json "$OUT/$v-$r.json" > /dev/null 2>&1
  done
done
