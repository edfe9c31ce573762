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

.PHONY: all setup run test lint unit loom smoke bench-locks bench-locks-quick clean

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
test: setup lint unit loom smoke
	@echo "make test: all suites passed"

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -q -- -D warnings

unit:
	$(CARGO) test --workspace -q

loom:
	$(LOOM_ENV) $(CARGO) test -q -p senju-sync --release --test 'loom_*'

smoke:
	$(CARGO) build --release -q -p senju-bench --bin senju-lockbench
	$(BIN)/senju-lockbench --quick --threads 1,2 --no-checks
	$(CARGO) build --release -q -p senju-cli --bin senju -p senju-bench --bin senju-allocbench
	$(BIN)/senju perf sequence --iter 5000 --threads 2 --validate
	$(BIN)/senju perf sequence --dbm memory --iter 5000 --threads 2 --random_key --random_value
	$(BIN)/senju perf parallel --iter 5000 --threads 2 --random_key --validate
	$(BIN)/senju perf parallel --dbm memory --iter 5000 --threads 4 --keys 1000 --validate
	$(BIN)/senju perf wicked --iter 5000 --threads 2 --iterator --sync --validate
	$(BIN)/senju perf wicked --dbm memory --iter 5000 --threads 4 --iterator --clear --validate
	$(BIN)/senju-allocbench --quick --threads 1,2

## The full lock benchmark of lab/0001-locks (minutes; not part of `make test`).
bench-locks: setup
	lab/0001-locks/run.sh

clean:
	$(CARGO) clean
