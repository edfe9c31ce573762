# senju: `make run` builds and runs the main job; `make test` builds and passes every test.
# Both install what they need first (scripts/setup.sh, idempotent).

SHELL := /bin/bash
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

# loom builds the lock crate with `--cfg loom`; a separate target directory keeps the two
# builds from invalidating each other.
# Release binaries land here (honours an exported CARGO_TARGET_DIR).
BIN := $(or $(CARGO_TARGET_DIR),target)/release

LOOM_ENV := RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom

.PHONY: all setup run test lint unit loom smoke ruby python bench-locks bench-locks-quick clean

all: test

setup:
	@scripts/setup.sh

## The main job: `senju perf sequence` at 1, 2 and 4 threads (1,000,000 records each), one table.
run: setup
	scripts/run-main-job.sh

## The lock benchmark's short showcase at 1, 2, 4 and 8 threads.
bench-locks-quick: setup
	$(CARGO) build --release -q -p senju-bench --bin senju-lockbench
	$(BIN)/senju-lockbench --threads 1,2,4,8

## Every test: formatting, lints, unit and integration tests, loom models, perf smoke runs.
test: setup lint unit loom smoke python ruby
	@echo "make test: all suites passed"

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -q -- -D warnings
	@# `cargo doc --workspace` builds without a warning (broken, ambiguous or private links,
	@# output names that collide).
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps -q

unit:
	$(CARGO) test --workspace -q

loom:
	$(LOOM_ENV) $(CARGO) test -q -p senju-sync --release --test 'loom_*'

smoke:
	$(CARGO) build --release -q -p senju-bench --bin senju-lockbench
	$(BIN)/senju-lockbench --quick --threads 1,2 --no-checks
	$(CARGO) build --release -q -p senju-cli --bin senju -p senju-bench --bin senju-allocbench
	$(BIN)/senju perf sequence --iter 5000 --threads 2 --validate
	$(BIN)/senju perf sequence --iter 5000 --threads 2 --batch 100 --validate
	$(BIN)/senju perf sequence --dbm memory --iter 5000 --threads 2 --random_key --random_value
	$(BIN)/senju perf parallel --iter 5000 --threads 2 --random_key --validate
	$(BIN)/senju perf parallel --dbm memory --iter 5000 --threads 4 --keys 1000 --validate
	$(BIN)/senju perf wicked --iter 5000 --threads 2 --iterator --sync --validate
	$(BIN)/senju perf wicked --dbm memory --iter 5000 --threads 4 --iterator --clear --validate
	rm -rf $(BIN)/smoke-cli && mkdir -p $(BIN)/smoke-cli
	$(BIN)/senju perf sequence --path $(BIN)/smoke-cli/a.sj --iter 5000 --set_only --random_value
	$(BIN)/senju check $(BIN)/smoke-cli/a.sj
	$(BIN)/senju export $(BIN)/smoke-cli/a.sj $(BIN)/smoke-cli/a.jsonl --sort
	$(BIN)/senju import $(BIN)/smoke-cli/b.sj $(BIN)/smoke-cli/a.jsonl
	$(BIN)/senju export $(BIN)/smoke-cli/b.sj - --format jsonl --sort | cmp - $(BIN)/smoke-cli/a.jsonl
	$(BIN)/senju stats $(BIN)/smoke-cli/b.sj --json
	$(BIN)/senju-allocbench --quick --threads 1,2

## The Python binding: build its wheel (for the venv's CPython), install it into the venv of scripts/setup.sh, run
## the pytest suite, `mypy --strict` on a sample that uses the whole API, and a benchmark smoke run;
## then build the abi3 wheel (`--features abi3`) and run the pytest suite against it.
PYENV := $(CURDIR)/target/pyenv
PY_TARGET := $(CURDIR)/target/py
python: setup
	rm -f $(PY_TARGET)/wheels/senju-*.whl
	cd bindings/python && PATH=$(PYENV)/bin:$$PATH CARGO_TARGET_DIR=$(PY_TARGET) \
	  maturin build --release -q -i $(PYENV)/bin/python -o $(PY_TARGET)/wheels
	$(PYENV)/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps $(PY_TARGET)/wheels/senju-*.whl
	cd bindings/python && $(PYENV)/bin/python -m pytest -q -p no:cacheprovider tests
	cd bindings/python && $(PYENV)/bin/mypy --strict --cache-dir $(PY_TARGET)/mypy-cache tests/typing_sample.py python/senju
	$(PYENV)/bin/python bindings/python/bench/bench_threads.py --quick --threads 1,2 \
	  --peers senju-auto,senju-release,senju-hold > /dev/null
	@# The same suite against the one-wheel-for-all build (the stable ABI, `--features abi3`).
	rm -rf $(PY_TARGET)/wheels-abi3 $(PY_TARGET)/abi3-site
	cd bindings/python && PATH=$(PYENV)/bin:$$PATH CARGO_TARGET_DIR=$(PY_TARGET) \
	  maturin build --release -q --features abi3 -i $(PYENV)/bin/python -o $(PY_TARGET)/wheels-abi3
	$(PYENV)/bin/pip install -q --disable-pip-version-check --no-deps --target $(PY_TARGET)/abi3-site \
	  $(PY_TARGET)/wheels-abi3/senju-*-abi3-*.whl
	cd bindings/python && PYTHONPATH=$(PY_TARGET)/abi3-site $(PYENV)/bin/python -c \
	  'import senju._senju as m, sys; sys.exit(0 if m.__file__.endswith(".abi3.so") else "not the abi3 build: " + m.__file__)'
	cd bindings/python && PYTHONPATH=$(PY_TARGET)/abi3-site $(PYENV)/bin/python -m pytest -q -p no:cacheprovider tests

## The Ruby binding: build the extension (its own target directory), copy it where
## `ruby -I bindings/ruby/lib -e 'require "senju"'` finds it, run its minitest suite.
RUBY_TARGET := target/rb
ruby: setup
	CARGO_TARGET_DIR=$(RUBY_TARGET) $(CARGO) build --release -q -p senju-ruby
	cp $(RUBY_TARGET)/release/libsenju.so bindings/ruby/lib/senju/senju.so
	ruby -I bindings/ruby/lib -I bindings/ruby/test \
	  -e 'Dir["bindings/ruby/test/test_*.rb"].sort.each { |f| require File.expand_path(f) }'

## The full lock benchmark of lab/0001-locks (minutes; not part of `make test`).
bench-locks: setup
	lab/0001-locks/run.sh

clean:
	$(CARGO) clean
