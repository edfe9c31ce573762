#!/usr/bin/env bash
# Reproduces lab 0003: builds the senju wheel, makes a venv from Debian's python3 that also
# sees Debian's python3-tkrzw and python3-gdbm, installs lmdb and the wheel into it, and runs
# bindings/python/bench/bench_threads.py. Arguments go to the benchmark (default: 5 rounds).
# Writes out/results-<date>.txt and .json, out/machine-<date>.txt, out/control-<date>.txt (can
# two Python threads run in parallel here at all?) and out/targets-<date>.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
scripts/setup.sh
missing=()
for pkg in python3-tkrzw python3-gdbm python3-venv; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "run.sh: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
venv=target/pybench
[ -x $venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages $venv
# The wheel is built for this interpreter (it is not an abi3 wheel).
rm -f target/py/wheels/senju-*.whl
(cd bindings/python && PATH=$root/target/pyenv/bin:$PATH CARGO_TARGET_DIR=$root/target/py \
  maturin build --release -q -i /usr/bin/python3 -o "$root/target/py/wheels")
$venv/bin/pip install -q --disable-pip-version-check lmdb
$venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps target/py/wheels/senju-*.whl
out=lab/0003-python-threads/out
mkdir -p $out
stamp=$(date -u +%Y%m%d-%H%M%S)
{
  echo "start: $(date -u)"; echo "load: $(cat /proc/loadavg)"; echo "nproc: $(nproc)"
  lscpu | grep -E 'Model name|^CPU\(s\)'
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- bindings/python crates || echo ' (with uncommitted changes)')"
} > $out/machine-$stamp.txt
(cd /tmp && "$root/$venv/bin/python" "$root/bindings/python/bench/bench_threads.py" --rounds 5 \
  --json "$root/$out/results-$stamp.json" "$@") | tee $out/results-$stamp.txt
echo "end: $(date -u) load: $(cat /proc/loadavg)" >> $out/machine-$stamp.txt
# The control: do two threads run in parallel at all on this machine now?
$venv/bin/python bindings/python/bench/parallel_control.py 7 | tee $out/control-$stamp.txt
$venv/bin/python bindings/python/bench/check_targets.py $out/results-$stamp.json | tee $out/targets-$stamp.txt
