# Each target sets up what it needs (idempotently) and then runs.
.PHONY: setup demo test bench clean

setup:
	@scripts/bootstrap.sh test

# The demo replays its LLM run from a shipped cassette: it needs neither the local model nor its compile.
demo:
	@scripts/bootstrap.sh demo
	.venv/bin/python -m webfreeze.demo

test: setup
	.venv/bin/python -m pytest -q

bench:
	@WEBFREEZE_BENCH=1 scripts/bootstrap.sh test
	.venv/bin/python -m benchmarks

clean:
	rm -rf .venv demo-out bench-out runs/demo .pytest_cache
	rmdir runs 2>/dev/null || true
