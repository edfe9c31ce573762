#!/bin/bash
# A/B of the big case's cost under automatic rebuilds: two builds of the Ruby extension
# (each a copy of bindings/ruby/lib with its own senju.so), alternating, one process per
# cell, plus the second build with rebuilds off as the reference.
#   R=10 SECS=1 lab/0004-ruby-threads/control/big-ab.sh /tmp/lib-base /tmp/lib-new
# Prints every cell with the MB the disk holding the temporary directory wrote meanwhile
# (sectors from /sys/block, the close's sync included; a count, not a time), then each
# column's medians.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
a=$1 b=$2
out=$(mktemp)
part=$(basename "$(df --output=source "${TMPDIR:-/tmp}" | tail -1)")
dev=$(basename "$(readlink -f "/sys/class/block/$part/..")")
[ -r "/sys/block/$dev/stat" ] || dev=$part
written() { awk '{print $7}' "/sys/block/$dev/stat"; }
for _ in $(seq "${R:-10}"); do
  for v in A B off; do
    case $v in A) lib=$a ar=on ;; B) lib=$b ar=on ;; off) lib=$b ar=off ;; esac
    sync
    s0=$(written)
    cell=$(SECS=${SECS:-1} AR=$ar ruby -I "$lib" "$here/big-cell.rb")
    echo "$v $cell written=$((($(written) - s0) * 512 >> 20))MiB" | tee -a "$out"
  done
done
median() {
  sort -n | awk '{x[NR]=$1} END {m = NR % 2 ? x[(NR+1)/2] : (x[NR/2]+x[NR/2+1])/2;
    printf "median %.0f (min %d, max %d, n %d)", m, x[1], x[NR], NR}'
}
for v in A B off; do
  ops=$(grep "^$v " "$out" | awk '{print $2}' | median)
  mib=$(grep "^$v " "$out" | sed 's/.*written=\([0-9]*\)MiB/\1/' | median)
  echo "$v: ops/s $ops; disk MiB written $mib"
done
rm -f "$out"
