#!/usr/bin/env bash
# The main job of `make run`: builds `senju` in release, runs `senju perf sequence` (the
# workload of `tkrzw_dbm_perf sequence`: set, get, iterate, remove) on a file database in a
# temporary directory at 1, 2 and 4 threads, the same number of records each time, and
# prints one table: QPS per phase, the file size after setting, the peak resident set.
#
#   scripts/run-main-job.sh                      # 1,000,000 records, threads 1 2 4
#   RECORDS=200000 THREADS="1 2" scripts/run-main-job.sh
#   VERBOSE=1 scripts/run-main-job.sh            # also print senju's own lines
set -euo pipefail
cd "$(dirname "$0")/.."

RECORDS=${RECORDS:-1000000}
THREADS=${THREADS:-"1 2 4"}
CARGO=${CARGO:-cargo}
bin="${CARGO_TARGET_DIR:-target}/release/senju"

$CARGO build --release -q -p senju-cli --bin senju

# Peak RSS comes from GNU time (Debian package `time`), which scripts/setup.sh installs;
# without it that column says n/a.

tmp=$(mktemp -d "${TMPDIR:-/tmp}/senju-main-job.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The value of NAME=... on the first line starting with PREFIX in file FILE.
field() { # FILE PREFIX NAME
  awk -v p="$2" -v n="$3" 'index($0, p) == 1 { for (i = 1; i <= NF; i++) if (index($i, n "=") == 1) { print substr($i, length(n) + 2); exit } }' "$1"
}
# The value of NAME=... on the line after the first line starting with PREFIX.
next_field() { # FILE PREFIX NAME
  awk -v p="$2" -v n="$3" 'f { for (i = 1; i <= NF; i++) if (index($i, n "=") == 1) { print substr($i, length(n) + 2); exit } } index($0, p) == 1 { f = 1 }' "$1"
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

rows=()
for t in $THREADS; do
  iter=$((RECORDS / t))
  out="$tmp/out-$t"
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$tmp/rss-$t" "$bin" perf sequence --path "$tmp/casket-$t.sj" --iter "$iter" --threads "$t" >"$out"
    peak=$(mib $(( $(tail -n 1 "$tmp/rss-$t") * 1024 )))
  else
    "$bin" perf sequence --path "$tmp/casket-$t.sj" --iter "$iter" --threads "$t" >"$out"
    peak="n/a (needs /usr/bin/time)"
  fi
  [ -n "${VERBOSE:-}" ] && cat "$out"
  set_qps=$(field "$out" "Setting done:" qps)
  get_qps=$(field "$out" "Getting done:" qps)
  rem_qps=$(field "$out" "Removing done:" qps)
  size=$(next_field "$out" "Setting done:" file_size)
  rows+=("| $t | $((iter * t)) | $set_qps | $get_qps | $rem_qps | $(mib "$size") | $peak |")
  rm -f "$tmp/casket-$t.sj"
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -q . && echo "+changes" || true)
echo "senju perf sequence: $RECORDS records per run, 8-byte values, file database in a temporary directory"
echo "machine: $(nproc) CPUs, $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg); commit $commit$dirty"
echo
echo "| threads | records | set QPS | get QPS | remove QPS | file size after set | peak RSS |"
echo "|--------:|--------:|--------:|--------:|-----------:|--------------------:|---------:|"
printf '%s\n' "${rows[@]}"
echo
echo "QPS = records / elapsed seconds, clock from before the threads start to after the final sync"
echo "(as tkrzw_dbm_perf). Compare: tkrzw_dbm_perf sequence --path casket.tkh --iter N --threads T"
