#!/bin/bash
# B = /tmp/rbB/lib (HEAD), C = /tmp/rbC/lib (variant); alternating rounds
R=${1:-3}; shift
cd /work/main
for r in $(seq $R); do
  for v in B C; do
    ruby -I /tmp/rb$v/lib bindings/ruby/bench/bench_threads.rb --rounds 1 "$@" 2>&1 |
      awk -v r=$r -v v=$v '/^## [a-z]+ \(/{c=$2} /^## convoy/{c="convoy"} /^\| senju-/{printf "%s %s %s", r, v, c; n=split($0,f,"|"); for(i=2;i<n;i++){split(f[i],w," "); printf " %s", w[1]} print ""}'
  done
done
