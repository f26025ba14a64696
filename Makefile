# The two commands of the README: `make run` (conformance run with reports) and `make test`.
# Both set everything up first, idempotently.
.PHONY: setup run test bench

setup:
	@bash scripts/setup.sh

run: setup
	@bash scripts/run.sh

test: setup
	@.venv/bin/python -m pytest -q tests $(PYTEST_ARGS)

bench: setup
	@.venv/bin/python benchmarks/run_benchmarks.py
