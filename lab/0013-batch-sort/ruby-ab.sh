#!/bin/bash
# A = /tmp/rbA/lib (HEAD), B = /tmp/rbB/lib (change); alternating rounds
R=${1:-3}; shift
cd /work/main
for r in $(seq $R); do
  for v in A B; do
    lib=/tmp/rb$v/lib
    ruby -I $lib bindings/ruby/bench/bench_threads.rb --rounds 1 --peers senju-auto "$@" 2>&1 |
      awk -v r=$r -v v=$v '/^## [a-z]+ \(/{c=$2} /^\| senju-auto/{printf "%s %s %s x", r, v, c; n=split($0,f,"|"); for(i=3;i<n;i++){split(f[i],w," "); printf " %s", w[1]} print ""}'
  done
done
