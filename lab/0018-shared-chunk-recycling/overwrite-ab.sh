#!/usr/bin/env bash
# Lab 0018: lab 0014's overwrite load (values rewritten over 256 keys, set then get, no
# sync) against two builds of it, alternating, for several value sizes.
#   [SYNC=n] overwrite-ab.sh A_BIN B_BIN [ROUNDS=3] [SECONDS=4] [SIZES="100 1000 8192 65536"]
# (SYNC=n: a hard sync after every n sets, passed on to the tool)
# Build a binary for a checkout with
#   CARGO_TARGET_DIR=/tmp/ow-X cargo build --release \
#     --manifest-path lab/0014-urgent-rebuilds/overwrite/Cargo.toml
# (the tool uses the senju of the checkout it is built in). Prints one line per run:
#   round bin size pairs/s file-after-close
set -euo pipefail
a=$1; b=$2; rounds=${3:-3}; secs=${4:-4}; sizes=${5:-100 1000 8192 65536}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for size in $sizes; do
  for r in $(seq "$rounds"); do
    for bin in "$a" "$b"; do
      out=$(SIZE=$size "$bin" "$dir/o.sj" "$secs")
      rate=$(grep -o '^[0-9]* set+get pairs/s' <<<"$out" | cut -d' ' -f1)
      file=$(grep -o 'file after close: .*' <<<"$out" | cut -d' ' -f4-)
      echo "$r $bin $size $rate $file"
    done
  done
done
