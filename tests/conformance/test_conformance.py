"""The conformance suite: generated valid and invalid cases, worked examples and exhaustive sweeps,
run on every chosen backend and judged against the NumPy reference under the specs' rules."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from harness.cases import example_case
from harness.diff import FAILURES, UNSPECIFIED, UNSUPPORTED
from harness.expectations import EXPECTED_DIVERGENCE
from harness.strategies import invalid_cases, valid_cases
from harness.suite import run_case
from harness.sweeps import sweep_case
from tests.conftest import SPECS

pytestmark = pytest.mark.conformance


class _Tally:
    """What happened over the cases of one test, for its final outcome."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.unsupported_reason = ""
        self.notes: list[str] = []

    def add(self, outcome) -> None:
        self.counts[outcome.status] = self.counts.get(outcome.status, 0) + 1
        if outcome.status == UNSUPPORTED:
            self.unsupported_reason = outcome.diff.summary
        if outcome.status in (UNSPECIFIED, EXPECTED_DIVERGENCE) and len(self.notes) < 3:
            self.notes.append(outcome.message)

    def finish(self) -> None:
        total = sum(self.counts.values())
        if self.counts.get(EXPECTED_DIVERGENCE):
            pytest.xfail(f"known divergence in {self.counts[EXPECTED_DIVERGENCE]} of {total} case(s):\n" + "\n".join(self.notes))
        if self.counts.get(UNSUPPORTED):
            pytest.skip(f"unsupported ({self.counts[UNSUPPORTED]} of {total} case(s)): {self.unsupported_reason}")


def _run(request, backend_name, spec, case, kind, tally):
    config = request.config
    outcome = run_case(config.dml_backends[backend_name], spec, case, kind,
                       expectations=config.dml_expectations.get(backend_name), writer=config.dml_writer,
                       cases_dir=config.dml_cases_dir, test_id=request.node.nodeid)
    tally.add(outcome)
    if outcome.failed:
        pytest.fail(outcome.message, pytrace=False)
    return outcome


def _settings(request):
    n = request.config.getoption("max_examples")
    return settings(max_examples=n) if n else settings()


def test_valid(request, valid_cell):
    backend, op, level, dtype = valid_cell
    spec = SPECS.operator(op)
    tally = _Tally()

    @_settings(request)
    @given(valid_cases(spec, level, dtype))
    def check(case):
        _run(request, backend, spec, case, "valid", tally)
    check()
    tally.finish()


def test_invalid(request, invalid_cell):
    backend, op, level, rule = invalid_cell
    spec = SPECS.operator(op)
    tally = _Tally()

    @_settings(request)
    @given(invalid_cases(spec, level, rule))
    def check(case):
        _run(request, backend, spec, case, "invalid", tally)
    check()
    tally.finish()


def test_example(request, example_cell):
    backend, op, name = example_cell
    spec = SPECS.operator(op)
    example = next(e for e in spec.examples if e.name == name)
    case = example_case(spec, example)
    tally = _Tally()
    outcome = _run(request, backend, spec, case, "example", tally)
    tally.finish()
    # the worked example's own expected values, not only the reference's
    if outcome.status not in FAILURES and outcome.diff.expected is not None:
        import numpy as np
        for tensor, values in example.expected.items():
            got = outcome.diff.expected.outputs[tensor].ravel()
            assert np.array_equal(got, np.asarray(values, dtype=got.dtype)), "the reference disagrees with the spec example"


def test_sweep(request, sweep_cell):
    backend, sweep = sweep_cell
    spec = SPECS.operator(sweep.operator)
    case = sweep_case(SPECS, sweep)
    tally = _Tally()
    _run(request, backend, spec, case, "sweep", tally)
    tally.finish()
