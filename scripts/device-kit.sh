#!/usr/bin/env bash
# Packs what issue 3's thread-scaling run needs on a lent machine that reaches no network
# (the 16-core `device` of DEVELOPERS.md: no apt, no cargo registry), into target/device-kit:
#
#   bin/senju            the release build of `senju` (stripped)
#   bin/senju-lockbench  the lock lab's benchmark (stripped; `WHAT=locks`, below)
#   bin/tkrzw_dbm_perf   Debian's tkrzw-utils binary (installed here with apt if missing)
#   bin/time             GNU time (peak RSS), which scripts/bench-vs-tkrzw.sh calls
#   lib/                 the shared libraries those need beyond glibc (libtkrzw, libstdc++, ...)
#   run.sh               runs the comparison there and writes into $OUT (see below)
#   commit.txt           the commit and whether the tree was dirty
#
# Then, from this machine (the tool's `carry` takes the kit there, 64 MiB at most):
#
#   scripts/device-kit.sh
#   run(command="target/device-kit/run.sh", carry=["target/device-kit"])
#
# On the device, run.sh records the machine (nproc, lscpu, kernel, load) and runs
# scripts/bench-vs-tkrzw.sh: `perf sequence`, senju and Tkrzw alternating, 10M records in
# total (TOTAL), THREADS (default "1 2 4 8 16"), ROUNDS (default 3); then `perf parallel
# --random_key` at 2 threads, PAR_ITER per thread (default 5M), 3 rounds of each. About 6
# minutes on 16 cores; the tool's limit is 10 minutes a command, so pass THREADS or ROUNDS
# to cut it. Everything lands in $OUT (tables, raw logs, machine file).
#
# `WHAT=locks` runs lab 0001's lock matrix instead (issue 2): `senju-lockbench --full` at
# LOCK_THREADS (default 1,2,4,8,16), ROUNDS rounds (default 3, about 2.5 minutes each), into
# $OUT/locks-report.json, locks-run.md and locks-summary.md (the PASS/FAIL checks); LOCK_ARGS
# adds arguments (`--quick` for a smoke run):
#
#   run(command="WHAT=locks target/device-kit/run.sh", carry=["target/device-kit"])
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
kit="$root/target/device-kit"

if ! command -v tkrzw_dbm_perf >/dev/null; then
    echo "device-kit: installing tkrzw-utils (apt)" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get install -y -q tkrzw-utils >/dev/null
fi
[ -x /usr/bin/time ] || {
    echo "device-kit: /usr/bin/time is missing (apt install time)" >&2
    exit 1
}

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/engine}"
cargo build --release --manifest-path "$root/Cargo.toml" -p senju-cli
# The lock lab's binary (issue 2), for `WHAT=locks` on the device.
CARGO_TARGET_DIR="$root/target/bench" \
    cargo build --release --manifest-path "$root/Cargo.toml" -p senju-bench --bin senju-lockbench

rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib"
cp "$CARGO_TARGET_DIR/release/senju" "$kit/bin/senju"
strip "$kit/bin/senju"
cp "$root/target/bench/release/senju-lockbench" "$kit/bin/senju-lockbench"
strip "$kit/bin/senju-lockbench"
cp "$(command -v tkrzw_dbm_perf)" "$kit/bin/tkrzw_dbm_perf"
cp /usr/bin/time "$kit/bin/time"

# Every library the binaries load except glibc's own (the device has a glibc; the others may
# be missing or of other versions there).
for b in "$kit"/bin/*; do
    ldd "$b" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
        *) cp -L "$lib" "$kit/lib/" ;;
    esac
done

{
    echo "commit: $(git -C "$root" rev-parse --short HEAD)"
    if [ -n "$(git -C "$root" status --porcelain)" ]; then echo "tree: dirty"; else echo "tree: clean"; fi
    echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs"
} >"$kit/commit.txt"

cat >"$kit/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs on the lent machine from the repository root; see scripts/device-kit.sh.
set -euo pipefail
kit="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/device-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$kit/bin:$PATH"
dir="${DIR:-/tmp/senju-device}"
mkdir -p "$dir"
{
    cat "$kit/commit.txt"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    lscpu | grep -E '^(Model name|Socket\(s\)|Core\(s\) per socket|Thread\(s\) per core|NUMA node\(s\)):' || true
    echo "kernel: $(uname -r)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    df -h "$dir" | tail -n 1
} >"$out/machine.txt"
if [ "${WHAT:-engine}" = locks ]; then
    # Lab 0001's whole matrix at 1-16 threads (about 2.5 minutes a round), then its summary
    # with the PASS/FAIL checks; copy both into lab/0001-locks/results/.
    "$kit/bin/senju-lockbench" --full --rounds "${ROUNDS:-3}" --detail \
        --threads "${LOCK_THREADS:-1,2,4,8,16}" --json "$out/locks-report.json" \
        --note "$(head -n 1 "$kit/commit.txt"), $(nproc) CPUs, lent machine" \
        ${LOCK_ARGS:-} >"$out/locks-run.md"
    "$kit/bin/senju-lockbench" summarize --detail "$out/locks-report.json" >"$out/locks-summary.md"
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
    sed -n '/^## Targets/,$p' "$out/locks-summary.md"
    exit 0
fi
TIME_BIN="$kit/bin/time" SENJU="$kit/bin/senju" TKRZW="$kit/bin/tkrzw_dbm_perf" DIR="$dir" \
    THREADS="${THREADS:-1 2 4 8 16}" ROUNDS="${ROUNDS:-3}" LOG_DIR="$out/sequence-logs" \
    scripts/bench-vs-tkrzw.sh >"$out/sequence.md" 2>"$out/sequence.err"
# `perf parallel --random_key` at 2 threads (issue 3), alternating; the sizes of BENCHMARKS.md.
n="${PAR_ITER:-5000000}"
for r in 1 2 3; do
    rm -f "$dir/p.sj" "$dir/p.tkh"
    "$kit/bin/senju" perf parallel --path "$dir/p.sj" --iter "$n" --threads 2 --random_key \
        >"$out/parallel-senju-$r.txt" 2>&1
    rm -f "$dir/p.sj"
    tkrzw_dbm_perf parallel --path "$dir/p.tkh" --iter "$n" --threads 2 --random_key \
        --buckets 20000000 >"$out/parallel-tkrzw-$r.txt" 2>&1
    rm -f "$dir/p.tkh"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
cat "$out/sequence.md"
for f in "$out"/parallel-*.txt; do echo "$(basename "$f"): $(grep "^Done:" "$f")"; done
EOF
chmod +x "$kit/run.sh"
du -sh "$kit"
