# Each target sets up what it needs (idempotently) and then runs. `make help` lists them.
.PHONY: help setup demo lint test test-fast bench clean

PYTEST = .venv/bin/python -m pytest
# Python's default, whatever the shell says: each module compiled once, into __pycache__. With
# PYTHONDONTWRITEBYTECODE set (as many container images have it) every process compiled our
# sources again, half a second of CPU per command and ~1,000 commands in `make test`
# (docs/contributing.md). Node (Playwright's driver, started by every browser command) keeps its
# compiled code too.
unexport PYTHONDONTWRITEBYTECODE
export NODE_COMPILE_CACHE ?= $(CURDIR)/.cache/node-compile
# Three pytest-xdist workers on the 2-core machine, a test file (or a group of files) at a time,
# longest first (tests/conftest.py): one more than the cores, since a test often waits on a browser,
# a server or a timeout, and the third worker fills that time (docs/contributing.md, measured).
WORKERS ?= 3
XDIST = -n $(WORKERS) --dist loadfile --no-loadscope-reorder

help:
	@echo "make setup      the .venv with webfreeze and everything the tests need (idempotent)"
	@echo "make demo       the whole loop on the shipped demo (no local model needed)"
	@echo "make lint       ruff check . and the type check, mypy (pyproject.toml [tool.ruff], [tool.mypy])"
	@echo "make test       ruff, then the whole suite on 3 workers with the type check beside it (what .ci/run runs)"
	@echo "                WORKERS=0 runs it in this one process; WORKERS=N for another count"
	@echo "make test-fast  the inner loop: no tests marked slow (crawls, test bed, local model, Ray, pywb)"
	@echo "                one stage: .venv/bin/python -m pytest tests/archives -q  (see docs/contributing.md)"
	@echo "make bench      the benchmarks (docs/benchmarks.md)"
	@echo "make clean      remove the .venv and what the demo and benchmarks wrote"

setup:
	@scripts/bootstrap.sh test

# The demo replays its LLM run from a shipped cassette: it needs no local model.
demo:
	@scripts/bootstrap.sh demo
	.venv/bin/python -m webfreeze.demo

lint: setup
	.venv/bin/python -m ruff check .
	scripts/typecheck.sh

# The slowest tests are listed at the end, so a test that grows slow is seen where it is run.
# `make lint` in full: ruff first, then the type check beside the tests (its verdict, printed at the
# end, fails `make test` as the tests do).
test: setup
	.venv/bin/python -m ruff check .
	@mkdir -p .cache; scripts/typecheck.sh > .cache/typecheck.log 2>&1 & typecheck=$$!; \
	$(PYTEST) -q $(XDIST) --durations=25; status=$$?; \
	if wait $$typecheck; then echo "type check (scripts/typecheck.sh): $$(tail -n 1 .cache/typecheck.log)"; \
	else cat .cache/typecheck.log; echo "make test: the type check failed (scripts/typecheck.sh)"; status=1; fi; \
	exit $$status

# Tests marked slow are left out: whole runs on the local model, Ray clusters, studies, bundles of
# LLM runs, and the files tests/conftest.py lists in SLOW_FILES (crawls, the test bed, pywb, load).
test-fast: setup
	$(PYTEST) -q $(XDIST) -m "not slow"

bench:
	@WEBFREEZE_BENCH=1 scripts/bootstrap.sh test
	.venv/bin/python -m benchmarks

clean:
	rm -rf .venv demo-out bench-out runs/demo .pytest_cache
	rmdir runs 2>/dev/null || true
