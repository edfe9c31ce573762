#!/usr/bin/env bash
# Instructions per `set` of `senju perf sequence` (8-byte keys and values, 1 thread), counted
# with valgrind's callgrind: a count, so it does not drift with the machine's load.
#
#   lab/0009-write-instructions/run.sh BINARY...
#
# For each binary: two runs, N1 and N2 sets (default 200000 and 400000) on a fresh file;
# instructions per set = (I(N2) - I(N1)) / (N2 - N1), which cancels the fixed cost of
# starting, opening and closing. Prints one line per binary.
# Needs valgrind (apt: valgrind) and a senju that opens under valgrind (since f08dbc7).
set -euo pipefail
N1=${N1:-200000}
N2=${N2:-400000}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

count() { # count BINARY N -> total instructions of the process
    rm -f "$DIR/s.sj" "$DIR/cg.out"
    valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.out" "$1" perf sequence \
        --path "$DIR/s.sj" --iter "$2" --threads 1 --set_only >/dev/null 2>"$DIR/err" ||
        { cat "$DIR/err" >&2; exit 1; }
    sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$DIR/err"
}

printf '%-40s %14s %14s %10s\n' binary "I($N1)" "I($N2)" per-set
for bin in "$@"; do
    a=$(count "$bin" "$N1")
    b=$(count "$bin" "$N2")
    printf '%-40s %14d %14d %10d\n' "$bin" "$a" "$b" $(((b - a) / (N2 - N1)))
done
