#!/usr/bin/env bash
# Lab 0002: builds senju-allocbench in release and runs the allocator comparison, writing
# out/run-<time>.md (the tables) and out/machine-<time>.txt (machine, commit, load).
#   lab/0002-allocators/run.sh                    # ROUNDS=5, threads 1,2,4,8, 1M pairs/thread
#   ROUNDS=7 lab/0002-allocators/run.sh --split   # extra args go to senju-allocbench
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}
target=${CARGO_TARGET_DIR:-target/bench}
CARGO_TARGET_DIR=$target ${CARGO:-cargo} build --release -q -p senju-bench --bin senju-allocbench
out=lab/0002-allocators/out
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
{
  echo "date: $(date -u)"
  echo "commit: $(git rev-parse HEAD)$(git status --porcelain | grep -q . && echo ' (with uncommitted changes)' || true)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
  echo "kernel: $(uname -sr); $(getconf GNU_LIBC_VERSION); $(rustc --version)"
  echo "load before: $(cat /proc/loadavg)"
} >"$out/machine-$stamp.txt"
"$target/release/senju-allocbench" --rounds "$ROUNDS" "$@" | tee "$out/run-$stamp.md"
echo "load after: $(cat /proc/loadavg)" >>"$out/machine-$stamp.txt"
ln -sf "run-$stamp.md" "$out/latest.md"
ln -sf "machine-$stamp.txt" "$out/latest-machine.txt"
