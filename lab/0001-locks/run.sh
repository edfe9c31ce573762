#!/usr/bin/env bash
# Lock lab 0001: builds senju-lockbench in release and runs the full matrix (throughput,
# reader flood, release-and-reacquire) with ROUNDS rounds (default 5), then writes into out/:
#   report-STAMP.json   every round of every cell (senju-lockbench --json)
#   run-STAMP.md        the tables as printed during the run
#   summary-STAMP.md    the tables plus the PASS/FAIL target checks, recomputed from the JSON
#   machine-STAMP.txt   nproc, lscpu, kernel, commit
# and points out/latest.* at them. Extra arguments go to senju-lockbench (e.g.
# `--threads 1,2,4,8,16,32` on a larger machine). Run it on a quiet machine: about 2.5
# minutes per round on 2 cores.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$here/out"
rounds="${ROUNDS:-5}"
mkdir -p "$out"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/bench}"
cargo build --release --manifest-path "$root/Cargo.toml" -p senju-bench --bin senju-lockbench
bin="$CARGO_TARGET_DIR/release/senju-lockbench"

commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
    commit="$commit (dirty tree)"
fi
stamp="$(date -u +%Y%m%dT%H%M%SZ)"

{
    echo "date: $stamp"
    echo "commit: $commit"
    echo "nproc: $(nproc)"
    lscpu | grep -E '^(Model name|Architecture|Socket\(s\)|Core\(s\) per socket|Thread\(s\) per core|CPU max MHz|Hypervisor vendor|NUMA node\(s\)):' || true
    echo "kernel: $(uname -r)"
    echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
    echo "rustc: $(rustc --version)"
    echo "load before run: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine-$stamp.txt"
cat "$out/machine-$stamp.txt"

"$bin" --full --rounds "$rounds" --detail \
    --json "$out/report-$stamp.json" \
    --note "commit $commit, $(nproc) CPUs, $rounds rounds" \
    "$@" > "$out/run-$stamp.md"
echo "load after run: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine-$stamp.txt"

"$bin" summarize --detail "$out/report-$stamp.json" > "$out/summary-$stamp.md"

for kind in report.json run.md summary.md machine.txt; do
    ln -sfn "${kind%%.*}-$stamp.${kind#*.}" "$out/latest.$kind"
done
echo
sed -n '/^## Targets/,$p' "$out/summary-$stamp.md"
echo "wrote $out/summary-$stamp.md and $out/report-$stamp.json"
