# The two commands of the README: `make run` (conformance run with reports) and `make test`.
# Both set everything up first, idempotently: the Python packages, then the DirectML stack
# (Wine + lavapipe + DirectML.dll + runner; skipped with a message where it cannot work).
.PHONY: setup setup-directml run test bench

setup:
	@bash scripts/setup.sh
	@bash scripts/setup_directml.sh || echo "make: the DirectML stack is not set up here; the directml backend will be reported unavailable"

run: setup
	@bash scripts/run.sh $(RUN_ARGS)

test: setup
	@.venv/bin/python -m pytest -q -n 2 tests --reports-dir reports/test-run $(PYTEST_ARGS)

bench: setup
	@.venv/bin/python benchmarks/bench_reference.py
	@.venv/bin/python benchmarks/bench_pipeline.py
	@.venv/bin/python benchmarks/bench_directml.py
