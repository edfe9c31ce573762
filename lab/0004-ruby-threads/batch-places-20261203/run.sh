#!/bin/bash
cd /work/main
for r in $(seq 1 ${ROUNDS:-6}); do
  for v in old new; do
    ruby -I /tmp/rb-$v bindings/ruby/bench/bench_threads.rb --cases batch --threads 1,2,4,8 \
      --peers senju-auto,senju-hold --rounds 3 --json /tmp/abb/$v-$r.json > /dev/null 2>&1
  done
done
