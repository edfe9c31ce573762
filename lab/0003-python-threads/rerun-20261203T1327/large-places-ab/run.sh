#!/bin/bash
# Alternating A/B of the Python large case (64 KiB set and get), senju auto and hold,
# between two builds installed with `pip install --target` in /tmp/py-old and /tmp/py-new.
cd /work/main
for r in $(seq 1 ${ROUNDS:-6}); do
  for v in old new; do
    PYTHONPATH=/tmp/py-$v target/pybench/bin/python bindings/python/bench/bench_threads.py \
      --cases large --threads 1,2,4,8 --peers senju-auto,senju-hold --rounds 3 \
      --json /tmp/abpy/$v-$r.json > /dev/null 2>&1
  done
done
