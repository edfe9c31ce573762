#!/bin/bash
# usage: run.sh ROUNDS N T bin...
R=$1; N=$2; T=$3; shift 3
for r in $(seq $R); do for b in "$@"; do
  rm -f /tmp/pb/*
  printf "%s " $(basename $b)
  if [ "$b" = tkrzw ]; then tkrzw_dbm_perf sequence --path /tmp/pb/t.tkh --iter $((N/T)) --threads $T --buckets 20000000 2>&1
  else $b perf sequence --path /tmp/pb/s.sj --iter $((N/T)) --threads $T 2>&1; fi | grep -i "done:" | grep -v Iterat | grep -o "qps=[0-9]*" | tr '\n' ' '
  echo
done; done
