#!/usr/bin/env bash
# Side-by-side `perf sequence` of senju and Tkrzw's HashDBM (issue 3's benchmark).
#
# For T in THREADS, ROUNDS rounds, alternating senju and tkrzw, 10M records in total
# (--iter = 10000000 / T), 8-byte values, a file database under $DIR:
#   /usr/bin/time -f '%M' senju perf sequence --path $DIR/s.sj --iter N --threads T
#   /usr/bin/time -f '%M' tkrzw_dbm_perf sequence --path $DIR/t.tkh --iter N --threads T \
#       --buckets 20000000
# The database file is deleted between runs (its size recorded first). Prints a markdown
# table: per thread count and phase, the median QPS with min-max, senju/tkrzw ratios of the
# medians, file sizes and peak RSS (max RSS from /usr/bin/time, KiB).
#
# Environment: SENJU (default target/engine/release/senju), TKRZW (tkrzw_dbm_perf),
# DIR (/tmp/b), TOTAL (10000000), THREADS ("1 2 4 8"), ROUNDS (3), KEEP_LOGS (unset: the
# per-run logs are deleted at the end), LOG_DIR (where the logs go, kept; default a fresh
# temporary directory), TIME_BIN (GNU time, default /usr/bin/time),
# SENJU_ARGS (extra flags for senju only, e.g. "--buckets 20000000" to give senju the same
# flags as Tkrzw; senju takes --buckets as a capacity hint).
set -euo pipefail

SENJU=${SENJU:-target/engine/release/senju}
TKRZW=${TKRZW:-tkrzw_dbm_perf}
DIR=${DIR:-/tmp/b}
TOTAL=${TOTAL:-10000000}
THREADS=${THREADS:-"1 2 4 8"}
ROUNDS=${ROUNDS:-3}

mkdir -p "$DIR"
TIME_BIN=${TIME_BIN:-/usr/bin/time}
if [ -n "${LOG_DIR:-}" ]; then
    LOG=$LOG_DIR
    mkdir -p "$LOG"
else
    LOG=$(mktemp -d)
    trap '[ -n "${KEEP_LOGS:-}" ] || rm -rf "$LOG"' EXIT
fi

# run ENGINE T ROUND: one run; leaves "$LOG/ENGINE-T-ROUND.{out,size,rss}".
run() {
    local engine=$1 t=$2 r=$3 iter=$((TOTAL / $2)) db
    local base="$LOG/$engine-$t-$r"
    if [ "$engine" = senju ]; then
        db="$DIR/s.sj"
        rm -f "$db"
        "$TIME_BIN" -o "$base.rss" -f '%M' "$SENJU" perf sequence --path "$db" \
            --iter "$iter" --threads "$t" ${SENJU_ARGS:-} >"$base.out" 2>&1
    else
        db="$DIR/t.tkh"
        rm -f "$db"
        "$TIME_BIN" -o "$base.rss" -f '%M' "$TKRZW" sequence --path "$db" \
            --iter "$iter" --threads "$t" --buckets 20000000 >"$base.out" 2>&1
    fi
    stat -c %s "$db" >"$base.size"
    rm -f "$db"
}

# qps FILE PHASE: the qps of "PHASE done:" lines (Setting, Getting, Removing).
qps() {
    sed -n "s/^$2 done:.* qps=\([0-9]*\).*/\1/p" "$1"
}

# stats VALUES...: "median min max" (integers).
stats() {
    printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {
        m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
        printf "%d %d %d\n", m, v[1], v[NR] }'
}

for t in $THREADS; do
    for r in $(seq 1 "$ROUNDS"); do
        echo "threads=$t round=$r" >&2
        run senju "$t" "$r"
        run tkrzw "$t" "$r"
    done
done

op() { case $1 in Setting) echo set ;; Getting) echo get ;; *) echo remove ;; esac; }
m() { awk -v x="$1" 'BEGIN { printf "%.2fM", x / 1e6 }'; }
mb() { awk -v x="$1" 'BEGIN { printf "%.0f MB", x / 1e6 }'; }

echo "| T | op | senju QPS median (min-max) | tkrzw QPS median (min-max) | senju/tkrzw |"
echo "|---|---|---|---|---|"
for t in $THREADS; do
    for phase in Setting Getting Removing; do
        declare -A med=()
        cells=()
        for e in senju tkrzw; do
            vals=()
            for r in $(seq 1 "$ROUNDS"); do
                vals+=("$(qps "$LOG/$e-$t-$r.out" "$phase")")
            done
            read -r md lo hi < <(stats "${vals[@]}")
            med[$e]=$md
            cells+=("$(m "$md") ($(m "$lo")-$(m "$hi"))")
        done
        ratio=$(awk -v a="${med[senju]}" -v b="${med[tkrzw]}" 'BEGIN { printf "%.2f", a / b }')
        echo "| $t | $(op "$phase") | ${cells[0]} | ${cells[1]} | ${ratio}x |"
        unset med
    done
done

echo
echo "| T | senju file | tkrzw file | senju peak RSS median (min-max) | tkrzw peak RSS median (min-max) | RSS ratio |"
echo "|---|---|---|---|---|---|"
for t in $THREADS; do
    declare -A rmed=()
    cells=()
    for e in senju tkrzw; do
        sizes=() rss=()
        for r in $(seq 1 "$ROUNDS"); do
            sizes+=("$(cat "$LOG/$e-$t-$r.size")")
            rss+=("$(tail -n 1 "$LOG/$e-$t-$r.rss")")
        done
        read -r smd _ _ < <(stats "${sizes[@]}")
        read -r rmd rlo rhi < <(stats "${rss[@]}")
        rmed[$e]=$rmd
        cells+=("$(mb "$smd")" "$((rmd / 1024)) MiB ($((rlo / 1024))-$((rhi / 1024)))")
    done
    ratio=$(awk -v a="${rmed[senju]}" -v b="${rmed[tkrzw]}" 'BEGIN { printf "%.2f", a / b }')
    echo "| $t | ${cells[0]} | ${cells[2]} | ${cells[1]} | ${cells[3]} | ${ratio}x |"
    unset rmed
done

echo
echo "senju QPS at 8 threads / at 2 threads (medians):"
for phase in Setting Getting Removing; do
    for t in 2 8; do
        vals=()
        for r in $(seq 1 "$ROUNDS"); do
            [ -f "$LOG/senju-$t-$r.out" ] && vals+=("$(qps "$LOG/senju-$t-$r.out" "$phase")")
        done
        [ ${#vals[@]} -gt 0 ] || continue 2
        read -r md _ _ < <(stats "${vals[@]}")
        eval "q$t=$md"
    done
    awk -v a="$q8" -v b="$q2" -v p="$(op "$phase")" 'BEGIN { printf "- %s: %.2f\n", p, a / b }'
done

echo
echo "QPS at T threads / at 1 thread (medians; issue 3's 16-core goal: 16 threads >= 10x for set and get):"
echo "| engine | op | $(for t in $THREADS; do printf 'T=%s | ' "$t"; done)"
echo "|---|---|$(for _ in $THREADS; do printf -- '---|'; done)"
for e in senju tkrzw; do
    for phase in Setting Getting Removing; do
        row=""
        q1=""
        for t in $THREADS; do
            vals=()
            for r in $(seq 1 "$ROUNDS"); do
                vals+=("$(qps "$LOG/$e-$t-$r.out" "$phase")")
            done
            read -r md _ _ < <(stats "${vals[@]}")
            [ -n "$q1" ] || q1=$md
            row+="$(awk -v a="$md" -v b="$q1" 'BEGIN { printf "%.2fx", a / b }') | "
        done
        echo "| $e | $(op "$phase") | $row"
    done
done
