# Each target sets up what it needs (idempotently) and then runs.
.PHONY: setup demo test bench clean

setup:
	@scripts/bootstrap.sh test

demo: setup
	.venv/bin/python -m webfreeze.demo

test: setup
	.venv/bin/python -m pytest -q

bench:
	@WEBFREEZE_BENCH=1 scripts/bootstrap.sh test
	.venv/bin/python -m benchmarks

clean:
	rm -rf .venv demo-out bench-out runs/demo .pytest_cache
	rmdir runs 2>/dev/null || true
