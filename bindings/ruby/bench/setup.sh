#!/usr/bin/env bash
# Installs the peers of bench_threads.rb that Debian 12 packages for its Ruby 3.1 (each only
# when missing): Kyoto Cabinet's binding, dbm (GDBM's ndbm interface) and sqlite3.
# Ruby's gdbm extension is not packaged for 3.1, so dbm stands for it. Not part of
# `make test`.
set -euo pipefail

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for pkg in ruby-kyotocabinet ruby-dbm ruby-sqlite3; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench setup: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "bench setup: peers ready"
