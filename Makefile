# senju: `make run` builds and runs the main job; `make test` builds and passes every test.
# Both install what they need first (scripts/setup.sh, idempotent).

SHELL := /bin/bash
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

# loom builds the lock crate with `--cfg loom`; a separate target directory keeps the two
# builds from invalidating each other.
LOOM_ENV := RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom

.PHONY: all setup run test lint unit loom smoke bench-locks clean

all: test

setup:
	@scripts/setup.sh

## The main job: the lock benchmark at 1, 2, 4 and 8 threads (until the database lands).
run: setup
	$(CARGO) build --release -q -p senju-bench --bin senju-lockbench
	target/release/senju-lockbench --threads 1,2,4,8

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
	target/release/senju-lockbench --quick --threads 1,2

## The full lock benchmark of lab/0001-locks (minutes; not part of `make test`).
bench-locks: setup
	lab/0001-locks/run.sh

clean:
	$(CARGO) clean
