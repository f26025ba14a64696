# The two commands of the README: `make run` (conformance run with reports) and `make test`.
# Both set everything up first, idempotently: the Python packages, then the DirectML stack
# (Wine + lavapipe + DirectML.dll + runner; skipped with a message where it cannot work).
.PHONY: setup setup-directml run test bench

setup:
	@bash scripts/setup.sh
	@bash scripts/setup_directml.sh || echo "make: the DirectML stack is not set up here; the directml backend will be reported unavailable"

run: setup
	@bash scripts/run.sh $(RUN_ARGS)

# The conformance suite inside `make test` draws 3 cases per cell (every cell still runs; `make run`,
# the conformance job, keeps the ci profile's 10): it keeps make test under its 20-minute budget
# on 2 cores at 177 operators (docs/performance.md). TEST_EXAMPLES=10 gives the run's draws.
# The reachability answers the memo lacks (new generation code, a fresh machine) are searched
# first over both cores, not by each xdist worker again (harness/run/reachability_prefetch.py).
TEST_EXAMPLES ?= 3
test: setup
	@.venv/bin/python -m harness.run.reachability_prefetch --processes 2
	@.venv/bin/python -m pytest -q -n 2 tests --reports-dir reports/test-run --max-examples $(TEST_EXAMPLES) $(PYTEST_ARGS)

bench: setup
	@.venv/bin/python benchmarks/bench_reference.py
	@.venv/bin/python benchmarks/bench_pipeline.py
	@.venv/bin/python benchmarks/bench_directml.py
