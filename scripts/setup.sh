#!/usr/bin/env bash
# Installs what `make run` and `make test` need on a fresh Debian 12 machine. Idempotent: each
# step checks first and does nothing when the tool is already there, so running it again is
# cheap. Prints one line per step.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Debian packages, installed only when missing (apt-get update runs at most once per call).
apt_updated=0
need_apt() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $apt_updated -eq 0 ]; then
    say "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  say "installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Rust: the toolchain pinned in rust-toolchain.toml, with rustfmt and clippy.
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    say "installing rustup (Rust toolchain)"
    need_apt curl ca-certificates
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain none
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
if command -v rustup >/dev/null 2>&1; then
  if ! rustup toolchain list | grep -q "^$toolchain"; then
    say "installing Rust $toolchain"
    rustup toolchain install "$toolchain" --profile minimal --component rustfmt,clippy
  fi
  for comp in rustfmt clippy; do
    rustup component list --toolchain "$toolchain" --installed 2>/dev/null | grep -q "^$comp" \
      || { say "adding $comp"; rustup component add --toolchain "$toolchain" "$comp"; }
  done
fi
say "rust $(rustc --version | cut -d' ' -f2) ready"

# GNU time reports the peak resident set of `make run`'s perf runs.
need_apt time

# The Ruby binding (bindings/ruby): Debian's Ruby 3.1 with its headers, and libclang for
# rb-sys's bindgen.
need_apt ruby ruby-dev libclang-dev
say "ruby $(ruby -e 'print RUBY_VERSION') ready"

# The Python binding (bindings/python): a venv under target/ with maturin, pytest, hypothesis
# and mypy, made from the python3 on PATH (Debian's needs python3-venv for that).
pyenv=target/pyenv
if ! "$pyenv/bin/python" -c 'import maturin, pytest, hypothesis, mypy' >/dev/null 2>&1; then
  python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt python3-venv
  say "creating the Python venv $pyenv (maturin, pytest, hypothesis, mypy)"
  python3 -m venv "$pyenv"
  "$pyenv/bin/pip" install -q --disable-pip-version-check 'maturin>=1.16,<2' pytest hypothesis mypy
fi
say "python $("$pyenv/bin/python" -c 'import platform; print(platform.python_version())') venv ready"
say "tools ready"
