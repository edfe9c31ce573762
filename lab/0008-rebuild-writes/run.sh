#!/bin/bash
# Lab 0008: what automatic rebuilds write to the disk, two builds of `senju` alternating.
#   lab/0008-rebuild-writes/run.sh BASE_BINARY NEW_BINARY [ROUNDS]
# Each run: `perf parallel` on a file with automatic rebuilds at 64 MiB (2 threads, 100k
# keys, 100-byte values, 5M operations per thread), one process per run, the file deleted
# and the page cache synced before it. "written" is what the disk holding the file wrote
# during the run (sectors from /sys/block; the close's sync included): a count, not a time.
set -eu
base=$1 new=$2 rounds=${3:-5}
dir=${TMPDIR:-/tmp}/senju-lab-0008
mkdir -p "$dir"
part=$(basename "$(df --output=source "$dir" | tail -1)")
dev=$(basename "$(readlink -f "/sys/class/block/$part/..")")
[ -r "/sys/block/$dev/stat" ] || dev=$part
written() { awk '{print $7}' "/sys/block/$dev/stat"; }
echo "# $(date -u +%FT%TZ) nproc=$(nproc) cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) disk=$dev"
out=$(mktemp)
for _ in $(seq "$rounds"); do
  for v in base new; do
    bin=$base; [ $v = new ] && bin=$new
    rm -f "$dir/p.sj"; sync
    s0=$(written)
    r=$("$bin" perf parallel --path "$dir/p.sj" --iter 5000000 --threads 2 --size 100 \
      --keys 100000 --auto_rebuild 67108864 2>&1 |
      grep -oE "qps=[0-9]+|file_size=[0-9]+|auto_rebuilds=[0-9]+" | tr '\n' ' ')
    echo "$v written_mb=$((($(written) - s0) * 512 / 1000000)) $r" | tee -a "$out"
  done
done
rm -rf "$dir"
median() {
  sort -n | awk '{x[NR]=$1} END {m = NR % 2 ? x[(NR+1)/2] : (x[NR/2]+x[NR/2+1])/2;
    printf "median %.0f (min %d, max %d)", m, x[1], x[NR]}'
}
for v in base new; do
  for f in written_mb qps file_size; do
    echo "$v $f $(grep "^$v " "$out" | grep -oE "$f=[0-9]+" | cut -d= -f2 | median)"
  done
done
rm -f "$out"
