#!/bin/bash
# alternating A (target/pybench) / B (/tmp/pfab/venv): p2.py T 1 per round
R=${1:-5}; shift
for r in $(seq $R); do for v in A B; do for T in 1 2; do
  if [ $v = A ]; then PY=/work/main/target/pybench/bin/python; else PY=/tmp/pfab/venv/bin/python; fi
  echo "$r $v $($PY "$(dirname "$0")"/set_many_probe.py run $T 1 "$@")"
done; done; done
