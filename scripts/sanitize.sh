#!/usr/bin/env bash
# Runs the Rust code under the nightly toolchain's checkers, which `make test` (stable only)
# cannot: ThreadSanitizer and AddressSanitizer over the engine's tests, ThreadSanitizer over
# the `senju perf` workloads, and Miri over senju-sync's tests and the engine's unit tests
# that need no mapped file. Not part of `make test`: it needs nightly with `rust-src` and
# `miri` (added with rustup if missing) and takes about 30-40 minutes on 2 cores.
#
#   scripts/sanitize.sh [tsan|asan|miri|all]     (default: all)
#
# Builds go to /tmp/senju-sanitize/<kind> (CARGO_TARGET_DIR is not shared with the stable
# builds: -Zbuild-std rebuilds the standard library instrumented). Logs go to
# /tmp/senju-sanitize/logs; the script prints one line per test binary or run and exits
# non-zero if any reported an error. Results of past runs: lab/0017-sanitizers.
#
# Left out on purpose:
# - tests/address_space.rs and tests/out_of_memory.rs under the sanitizers: they cap the
#   address space (RLIMIT_AS), and the sanitizers' shadow memory needs terabytes of it.
# - Leaks of the handles that tests drop with `mem::forget` to stand for a power cut
#   (tests/hidden_chunks.rs, tests/recycle.rs): suppressed by test name ($root/lsan.supp).
# - mimalloc under ThreadSanitizer: its C code is not instrumented, so memory it hands from
#   one thread to another looks like a race. The perf runs use SENJU_ALLOC=system.
# - The engine under Miri beyond its unit tests: Miri cannot map files or call memfd_create.
#
# Allocations too large to serve return NULL under both sanitizers
# (`allocator_may_return_null=1`), as they do from the system allocator: the engine turns
# them into errors, and unit tests check that it does.
set -euo pipefail

cd "$(dirname "$0")/.."
what=${1:-all}
root=/tmp/senju-sanitize
logs=$root/logs
mkdir -p "$logs"
target=x86_64-unknown-linux-gnu
failed=0

need_nightly() {
    local have
    have=$(rustup +nightly component list --installed 2>/dev/null || true)
    for c in rust-src miri; do
        if ! grep -q "^$c" <<<"$have"; then
            rustup component add "$c" --toolchain nightly
        fi
    done
}

# check NAME LOG PATTERN RC: one line per run; a run fails on a non-zero status or a report.
check() {
    local name=$1 log=$2 pattern=$3 rc=$4 reports
    reports=$(grep -c "$pattern" "$log" || true)
    # Passed and failed tests summed over the log's test binaries (a Miri log has several).
    printf '%-40s rc=%s reports=%s %s\n' "$name" "$rc" "$reports" "$(awk '
        /^test result/ { p += $4; f += $6; n++ }
        END { if (n) printf "tests: %d passed, %d failed", p, f }' "$log")"
    if [ "$rc" != 0 ] || [ "$reports" != 0 ]; then
        failed=1
        echo "  see $log"
    fi
}

# engine_tests KIND RUSTFLAGS PATTERN: builds the senju crate's test binaries with RUSTFLAGS
# into $root/KIND and runs each one cargo names (so stale binaries of older builds stay out),
# all but address_space and out_of_memory.
engine_tests() {
    local kind=$1 flags=$2 pattern=$3 t n rc
    if ! CARGO_TARGET_DIR=$root/$kind RUSTFLAGS=$flags cargo +nightly test -Zbuild-std \
        --target $target -p senju --tests --no-run >"$logs/$kind-build.log" 2>&1; then
        cat "$logs/$kind-build.log" >&2
        return 1
    fi
    for t in $(sed -n 's/^ *Executable .* (\(.*\))$/\1/p' "$logs/$kind-build.log"); do
        n=$(basename "$t")
        case $n in address_space-* | out_of_memory-*) continue ;; esac
        rc=0
        timeout 1800 "$t" --test-threads=2 >"$logs/$kind-$n.log" 2>&1 || rc=$?
        check "$kind $n" "$logs/$kind-$n.log" "$pattern" "$rc"
    done
}

tsan() {
    local dir=$root/tsan flags="-Zsanitizer=thread"
    export TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 allocator_may_return_null=1"
    engine_tests tsan "$flags" 'WARNING: ThreadSanitizer'
    CARGO_TARGET_DIR=$dir RUSTFLAGS=$flags cargo +nightly build -q -Zbuild-std --target $target \
        -p senju-cli
    local senju=$dir/$target/debug/senju work rc i
    work=$(mktemp -d)
    local runs=(
        "perf wicked --path $work/w.sj --iter 20000 --threads 4 --iterator --clear --rebuild --validate"
        "perf wicked --dbm memory --iter 20000 --threads 4 --iterator --clear --rebuild --validate"
        "perf parallel --path $work/p.sj --iter 20000 --threads 4 --random_key --validate"
        "perf sequence --path $work/s.sj --iter 20000 --threads 4 --random_key --validate"
        "perf parallel --path $work/a.sj --iter 50000 --threads 4 --auto_rebuild 4096"
    )
    i=0
    for r in "${runs[@]}"; do
        i=$((i + 1))
        rc=0
        # shellcheck disable=SC2086 # the run's words are its arguments
        SENJU_ALLOC=system timeout 1800 "$senju" $r >"$logs/tsan-cli-$i.log" 2>&1 || rc=$?
        check "tsan senju ${r%% --*} #$i" "$logs/tsan-cli-$i.log" \
            'WARNING: ThreadSanitizer' "$rc"
    done
    rm -rf "$work"
}

asan() {
    export ASAN_OPTIONS="detect_leaks=1 allocator_may_return_null=1"
    # The simulated power cuts: each test forgets an open handle, and with it its memory.
    printf '%s\n' 'leak:hidden_chunks::' 'leak:recycle::reuse_after_a_sync_then_cut' \
        >"$root/lsan.supp"
    export LSAN_OPTIONS="suppressions=$root/lsan.supp"
    engine_tests asan -Zsanitizer=address 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer'
}

miri() {
    local dir=$root/miri rc
    rc=0
    CARGO_TARGET_DIR=$dir cargo +nightly miri test -q -p senju-sync >"$logs/miri-sync.log" 2>&1 ||
        rc=$?
    check "miri senju-sync" "$logs/miri-sync.log" 'Undefined Behavior' "$rc"
    rc=0
    CARGO_TARGET_DIR=$dir cargo +nightly miri test -q -p senju --lib -- epoch:: free_space:: \
        format::tests::record format::tests::header format::tests::chunk \
        >"$logs/miri-engine.log" 2>&1 || rc=$?
    check "miri senju (epoch, free_space, format)" "$logs/miri-engine.log" 'Undefined Behavior' \
        "$rc"
}

need_nightly
case $what in
    tsan) tsan ;;
    asan) asan ;;
    miri) miri ;;
    all) tsan; asan; miri ;;
    *) echo "usage: $0 [tsan|asan|miri|all]" >&2; exit 2 ;;
esac
exit $failed
