#!/usr/bin/env bash
# Ruby lab 0004: builds the extension, installs the peers (bindings/ruby/bench/setup.sh),
# and runs bindings/ruby/bench/bench_threads.rb with ROUNDS rounds (default 3) into out/:
#   run-STAMP.md       the tables and target checks as printed
#   report-STAMP.json  every round of every cell
#   machine-STAMP.txt  nproc, lscpu, kernel, commit, load
# Extra arguments go to bench_threads.rb (e.g. `--threads 1,2,4,8,16` on a larger machine).
# About 2 minutes per round on 2 cores; run it on a quiet machine.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$here/out"
mkdir -p "$out"

"$root/bindings/ruby/bench/setup.sh"
CARGO_TARGET_DIR="$root/target/rb" cargo build --release -q --manifest-path "$root/Cargo.toml" -p senju-ruby
cp "$root/target/rb/release/libsenju.so" "$root/bindings/ruby/lib/senju/senju.so"

commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
  commit="$commit (dirty tree)"
fi
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
{
  echo "date: $stamp"
  echo "commit: $commit"
  echo "nproc: $(nproc)"
  lscpu | grep -E '^(Model name|Architecture|Thread\(s\) per core|Hypervisor vendor):' || true
  echo "kernel: $(uname -r)"
  echo "ruby: $(ruby -v)"
  echo "load before run: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine-$stamp.txt"
cat "$out/machine-$stamp.txt"

cd "$root"
ruby -I bindings/ruby/lib bindings/ruby/bench/bench_threads.rb --rounds "${ROUNDS:-3}" \
  --json "$out/report-$stamp.json" "$@" | tee "$out/run-$stamp.md"
echo "load after run: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine-$stamp.txt"
