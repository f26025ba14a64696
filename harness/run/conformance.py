"""The conformance suite: generated valid and invalid cases, worked examples and exhaustive sweeps,
run on every chosen backend and judged against the NumPy reference under the specs' rules.

A failing case never stops its cell: every case of the cell runs and is recorded (a crash costs
one case), and the test fails at the end with the first failure and the count. Each test writes
its cell's completion marker with the number of cases it ran, which the gate checks against the
plan and the records."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from harness.run.case import Outcome
    from harness.run.plugin import DmlConfig

import pytest
from hypothesis import settings

from harness.judge.status import Status, severity, status_tag
from harness.report.allure import add_tags, attach_liberties, attach_outcome, label_status, label_test
from harness.generate.cases import example_case
from harness.generate.types import primary_type
from harness.judge.diff import FAILURES, UNSPECIFIED, UNSUPPORTED
from harness.judge.expectations import EXPECTED_DIVERGENCE
from harness.generate.breakers import invalid_cases
from harness.generate.strategies import valid_case_batches
from harness.run.case import case_data_type, hang_probe_limit, run_case, run_cases
from harness.run.results import CaseRecord
from harness.run.drawn import already_drawn, drawn_cases
from harness.run.ladder import data_sets_per_descriptor, invalid_examples
from harness.generate.sweeps import sweep_case

pytestmark = pytest.mark.conformance
CASES_PER_CALL = 256  # a cell's cases handed to the backend at a time (DirectML batches them: backends/directml)
HUNG = "did not answer within"  # a runner's hang, as backends.directml.process words it
MAX_ATTACHED = 5  # failures per test whose case file, table and plot are attached to the Allure result (every
# one has its case file in reports/cases/ and its record); as many passes' liberties with --report-detail full
MAX_ATTACHED_DIVERGENCES = 1  # expected divergences and divergences on unspecified elements: one example per
# test (MAX_ATTACHED with --report-detail full); their records and case files hold every one
# The liberties that mask a probe (ids of specs/_arithmetic.yaml's liberties): those some devices
# take and others never (a GPU flushes fp32 denormals and divides through the reciprocal; lavapipe
# does neither). A probe that conforms only through rounding, which every device may take, is
# stale: the divergence is gone.
DEVICE_LIBERTIES = ("reciprocal_division", "fp32_input_flush", "fp32_attribute_flush", "fp32_result_flush")


def _config(request: pytest.FixtureRequest) -> DmlConfig:
    """The session's config, with the attributes harness.run.plugin's pytest_configure sets on it."""
    return cast("DmlConfig", request.config)


class _Tally:
    """What happened over the cases of one test, for its final outcome."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.unsupported_reason = ""
        self.notes: list[str] = []
        self.liberty_examples = 0  # passes that needed a liberty, attached to the report (a few)
        self.attached = {True: 0, False: 0}  # attached to the report: failures (True) and divergences (False)
        self.tags: set[str] = set()
        self.failures: list = []
        self.divergence_files: dict[str, int] = {}  # expectation id -> case files kept (harness.run.case)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.status] = self.counts.get(outcome.status, 0) + 1
        self.tags.update(outcome.record.tags)
        if outcome.status == UNSPECIFIED:
            self.tags.add(UNSPECIFIED)
        for liberty in getattr(outcome.diff, "liberties", {}):  # a vendor filters the report by the liberties taken
            self.tags.add(f"liberty: {liberty}")
        if outcome.status == UNSUPPORTED:
            self.unsupported_reason = outcome.diff.summary
        if outcome.status in (UNSPECIFIED, EXPECTED_DIVERGENCE) and len(self.notes) < 3:
            self.notes.append(outcome.message if not self.notes else _headline(outcome.message))
        if outcome.failed:
            self.failures.append(outcome)

    def worst(self) -> Status:
        """The worst status of the cell's cases (its Allure category)."""
        return min((Status(s) for s in self.counts), key=severity, default=Status.PASS)

    def finish(self, request: pytest.FixtureRequest) -> None:
        """Mark the cell finished (with its case count), then give the test its outcome; each
        message starts with the status tag of its category."""
        _config(request).dml_cells.finished(request.node.nodeid, self.total)
        add_tags(self.tags)
        label_status(self.worst())
        total = self.total
        if self.failures:
            by_status: dict[str, int] = {}
            for outcome in self.failures:
                by_status[outcome.status] = by_status.get(outcome.status, 0) + 1
            counts = ", ".join(f"{n} {status}" for status, n in sorted(by_status.items()))
            pytest.fail(f"{status_tag(self.worst())} {len(self.failures)} of {total} case(s) failed ({counts}); "
                        f"the first:\n{self.failures[0].message}", pytrace=False)
        if self.counts.get(EXPECTED_DIVERGENCE):
            pytest.xfail(f"{status_tag(EXPECTED_DIVERGENCE)} known divergence in {self.counts[EXPECTED_DIVERGENCE]} of "
                         f"{total} case(s):\n" + "\n".join(self.notes))
        if self.counts.get(UNSUPPORTED):
            pytest.skip(f"{status_tag(UNSUPPORTED)} unsupported ({self.counts[UNSUPPORTED]} of {total} case(s)): "
                        f"{self.unsupported_reason}")


def _headline(message: str) -> str:
    """A divergence's message without its element table: its first line and where to find and
    replay it. A cell's message shows the first divergence whole and two more by these lines: the
    tables of expected divergences were most of the HTML report's bytes (a 22 KB message per
    test), and each case file holds its case whole."""
    lines = message.splitlines()
    return "\n".join(lines[:1] + [line for line in lines[1:] if line.startswith(("known divergence", "case file:", "replay:"))])


def _run(request, backend_name, spec, case, kind, tally):
    return _run_many(request, backend_name, spec, [case], kind, tally)[0]


def _run_many(request, backend_name, spec, cases, kind, tally) -> list[Outcome]:
    """Run a cell's cases (in batches on a backend that batches), then tally and attach each."""
    config = request.config
    full = config.getoption("report_detail", default="failures") == "full"
    outcomes = run_cases(config.dml_backends[backend_name], spec, cases, kind,
                         expectations=config.dml_expectations.get(backend_name), writer=config.dml_writer,
                         cases_dir=config.dml_cases_dir, test_id=request.node.nodeid,
                         divergence_files=None if full else tally.divergence_files)
    for case, outcome in zip(cases, outcomes):
        tally.add(outcome)
        _attach(config, tally, outcome, spec, case)
    return outcomes


def _attach(config: pytest.Config, tally: _Tally, outcome: Outcome, spec, case) -> None:
    """Allure attachments where a reader looks: a test's failures (crashed, flaky, ...), the first
    MAX_ATTACHED of them, and its divergences (expected, on unspecified elements), the first
    MAX_ATTACHED_DIVERGENCES. The liberties a passing case took only with --report-detail full:
    attachments of passing cases were most of the files a run left, and the records and matrix
    already count every liberty."""
    full = config.getoption("report_detail", default="failures") == "full"
    if outcome.failed or outcome.status in (EXPECTED_DIVERGENCE, UNSPECIFIED):
        failed = bool(outcome.failed)
        if tally.attached[failed] < (MAX_ATTACHED if failed or full else MAX_ATTACHED_DIVERGENCES):
            tally.attached[failed] += 1
            attach_outcome(outcome, spec, case)
    elif outcome.diff.legal_count and tally.liberty_examples < MAX_ATTACHED and full:
        tally.liberty_examples += 1
        attach_liberties(outcome)


def _settings(request):
    n = request.config.getoption("max_examples")
    return settings(max_examples=n) if n else settings()


def _run_generated(request, backend, spec, cell: tuple, strategy, kind, tally, examples: int | None = None) -> None:
    """Hypothesis draws cases (or batches of cases) from `strategy()` (once per cell for all the
    backends that run it: harness.run.drawn); each case is run and judged; the tally decides the
    outcome. `examples` caps the draws below the profile's."""
    cases = drawn_cases((id(spec), kind) + cell, strategy, _chosen(request, examples))
    _run_cases(request, backend, spec, cases, kind, tally)


def _chosen(request, examples: int | None) -> settings:
    """The Hypothesis settings of a cell: the profile's, with `examples` draws where given."""
    return settings(max_examples=examples) if examples else _settings(request)


def _run_cases(request, backend, spec, cases: list, kind, tally) -> None:
    """Run and judge `cases` on `backend`, CASES_PER_CALL at a time; the tally decides the outcome."""
    for start in range(0, len(cases), CASES_PER_CALL):
        _run_many(request, backend, spec, cases[start:start + CASES_PER_CALL], kind, tally)
    tally.finish(request)


def test_valid(request: pytest.FixtureRequest, valid_cell: tuple[str, str, str, str]) -> None:
    backend, op, level, dtype = valid_cell
    spec = _config(request).dml_specs.operator(op)
    label_test(backend, op, level, dtype, "valid", spec.path, {"backend": backend, "operator": op, "feature level": level, "data type": dtype})
    per = data_sets_per_descriptor(request.config, backend, level)  # one below the own level on the ladder
    _run_generated(request, backend, spec, (level, dtype, per), lambda: valid_case_batches(spec, level, dtype, per_descriptor=per),
                   "valid", _Tally())


def test_invalid(request: pytest.FixtureRequest, invalid_cell: tuple[str, str, str, str]) -> None:
    backend, op, level, rule = invalid_cell
    spec = _config(request).dml_specs.operator(op)
    label_test(backend, op, level, None, "invalid", spec.path, {"backend": backend, "operator": op, "feature level": level, "rule": rule})
    # A backend that does not validate descriptors (ONNX Runtime) reports every invalid case
    # unsupported, whatever is drawn: one case records that in the matrix; more would only cost time.
    instance = _config(request).dml_backends.get(backend)
    checks = instance is None or instance.capabilities().validates_descriptors
    examples = invalid_examples(request.config, backend, level, _settings(request).max_examples)
    strategy = lambda: invalid_cases(spec, level, rule)  # noqa: E731
    if not checks:  # the first of the cases a validating backend drew for the cell (its neighbour), else one drawn
        drawn = already_drawn((id(spec), "invalid", level, rule), _chosen(request, examples))
        if drawn:
            _run_cases(request, backend, spec, drawn[:1], "invalid", _Tally())
            return
        examples = 1
    _run_generated(request, backend, spec, (level, rule), strategy, "invalid", _Tally(), examples)


def test_example(request: pytest.FixtureRequest, example_cell: tuple[str, str, str]) -> None:
    backend, op, name = example_cell
    spec = _config(request).dml_specs.operator(op)
    example = next(e for e in spec.examples if e.name == name)
    case = example_case(spec, example)
    tally = _Tally()
    label_test(backend, op, case.feature_level, primary_type(spec, example.types), "example", spec.path,
               {"backend": backend, "operator": op, "feature level": case.feature_level, "example": name})
    outcome = _run(request, backend, spec, case, "example", tally)
    tally.finish(request)
    # the worked example's own expected values, not only the reference's
    if outcome.status not in FAILURES and outcome.diff.expected is not None:
        import numpy as np
        for tensor, values in example.expected.items():
            got = outcome.diff.expected.outputs[tensor].ravel()
            want = np.asarray(values, dtype=got.dtype)  # NaN expects NaN (any payload), zeros their sign
            same = np.array_equal(got, want, equal_nan=got.dtype.kind == "f")
            if same and got.dtype.kind == "f":
                same = bool(np.all(np.signbit(got[got == 0]) == np.signbit(want[want == 0])))
            assert same, "the reference disagrees with the spec example"


def test_sweep(request: pytest.FixtureRequest, sweep_cell: tuple) -> None:
    backend, sweep = sweep_cell
    specs = _config(request).dml_specs
    spec = specs.operator(sweep.operator)
    case = sweep_case(specs, sweep)
    tally = _Tally()
    label_test(backend, sweep.operator, sweep.level, sweep.data_type, "exhaustive", spec.path,
               {"backend": backend, "operator": sweep.operator, "data type": sweep.data_type})
    _run(request, backend, spec, case, "sweep", tally)
    tally.finish(request)


def _before_a_hang_probe(request: pytest.FixtureRequest, backend_name: str, spec, case, item) -> None:
    """A known hang's probe: not sent at all under --hang-probes skip (recorded unsupported: not
    probed, never a pass); otherwise sent once every other cell of the run has finished
    (harness.run.hang_probes), so that the hung channel's teardown stalls nothing else."""
    from harness.run.hang_probes import barrier_dir, wait_for_other_cells
    config = _config(request)
    if request.config.getoption("hang_probes") == "skip":
        record = CaseRecord(backend=backend_name, operator=spec.name, feature_level=case.feature_level,
                            data_type=case_data_type(spec, case), kind="probe", status=UNSUPPORTED, case_id=case.case_id,
                            summary=(f"the probe of {item.id} (a known hang) was not sent: --hang-probes skip; whether "
                                     "this device still hangs there is not checked in this run"),
                            test_id=request.node.nodeid, tags=["not-run"], expectation=item.id)
        config.dml_writer.write(record)
        config.dml_cells.finished(request.node.nodeid, 1)
        label_status(record.status)
        pytest.skip(f"{status_tag(UNSUPPORTED)} {record.summary}")
    others: frozenset[str] = getattr(config, "dml_before_hang_probes", frozenset())
    missing, waited = wait_for_other_cells(barrier_dir(Path(request.config.getoption("reports_dir")), config.dml_run_id), others)
    if missing:
        warnings.warn(f"{item.id}: {missing} other cell(s) had not finished after {waited:.0f} s (a worker stopped in "
                      "one?): its probe is sent anyway")


def hung_both_times(known_hang: bool, status: str, summary: str) -> bool:
    """Whether a known hang's probe came out flaky only because it hung in different stages: the
    known hangs' probes run together at the end, and one probe's earlier stage can pass the limit
    behind another's hung work on the same GPU (on an NVIDIA H200 a mean-variance normalization hung
    in initialize, then in execute). It hung both times it was sent: the hang shows, not stale."""
    return known_hang and status == Status.FLAKY and summary.count(HUNG) >= 2


def test_expectation_probe(request: pytest.FixtureRequest, probe_cell: tuple) -> None:
    """Each known divergence must still reproduce on its probe; if it no longer does, it is stale."""
    from harness.judge.expectations import STALE, probe_case
    from harness.run.case import device_level
    backend_name, expectation_id = probe_cell
    config = _config(request)
    backend = config.dml_backends[backend_name]
    expectations = config.dml_expectations[backend_name]
    item = next(i for i in expectations.items if i.id == expectation_id)
    specs = config.dml_specs
    spec = specs.operator(item.operator)
    case = probe_case(item, specs, device_level(backend, specs))
    assert case is not None  # a probe cell is an expectation with a probe (harness.run.plugin)
    label_test(backend_name, item.operator, case.feature_level, None, "probe", spec.path, {"backend": backend_name, "expectation": item.id})
    if item.hangs:
        _before_a_hang_probe(request, backend_name, spec, case, item)
    with hang_probe_limit(backend, item.hangs):
        # a known hang's own probe is what runs its descriptor; another divergence's probe whose
        # descriptor this device hangs on is not sent (it would only show the hang, and each hang
        # stalls the other runners on the GPU while its channel is torn down)
        outcome = run_case(backend, spec, case, "probe", expectations=expectations, cases_dir=config.dml_cases_dir,
                           test_id=request.node.nodeid, run_known_hangs=item.hangs)
    explained = outcome.record.expectation == item.id
    hang_masked = not explained and "not-run" in outcome.record.tags
    hung_by = outcome.record.expectation
    record = outcome.record
    record.kind, record.expectation = "probe", item.id
    # A probe that conforms only through D3D liberties the device took on it (a GPU flushes the
    # denormal a probe of 'denormal read as normal' feeds it) cannot show the divergence here: masked
    # on this device, not fixed; a device that keeps denormals (lavapipe in CI) still judges it.
    masking = {specs.catalog.arithmetic.liberty_names[lib] for lib in DEVICE_LIBERTIES}
    taken_here = {name: n for name, n in record.liberties.items() if name in masking}
    masked = hang_masked or (not explained and outcome.status in (Status.PASS, UNSPECIFIED) and bool(taken_here))
    if hang_masked:
        record.status = UNSUPPORTED
        record.summary = (f"the probe of {item.id} cannot run on this device: its descriptor is a known hang here "
                          f"({hung_by}), so it is not sent; masked here, not stale")
    elif masked:
        taken = ", ".join(f"{name} x{count}" for name, count in sorted(taken_here.items()))
        record.status = UNSUPPORTED
        record.summary = (f"the probe of {item.id} cannot show the divergence on this device: it conforms through the "
                          f"D3D liberties the device took on it ({taken}); masked here, not stale")
    elif not explained and hung_both_times(item.hangs, outcome.status, outcome.record.summary):
        record.status = Status.EXPECTED_DIVERGENCE
        record.summary = f"the hang of {item.id} shows (it hung both times it was sent): {outcome.record.summary}"
    elif not explained and outcome.status in (Status.CRASHED, Status.UNSUPPORTED) and item.status != outcome.status:
        # the probe did not run to a verdict (a runner crash loop, a backend that cannot express it):
        # that says nothing of the divergence, so the run fails with the cause, never advising the
        # expectation's removal
        record.status = outcome.status
        record.summary = (f"the probe of {item.id} did not run ({outcome.status}: {outcome.record.summary}): "
                          "the divergence is neither confirmed nor gone")
    elif not explained:
        record.status = STALE
        record.summary = f"the probe of {item.id} no longer shows the divergence ({outcome.status}): it may be fixed; remove it from backends/expectations/{backend_name}.yaml"
    config.dml_writer.write(record)
    config.dml_cells.finished(request.node.nodeid, 1)
    label_status(record.status)
    if masked:
        pytest.skip(f"{status_tag(UNSUPPORTED)} {record.summary}")
    if not explained and record.status != Status.EXPECTED_DIVERGENCE:  # a known hang that hung both times shows
        pytest.fail(f"{status_tag(record.status)} {record.summary}\n{outcome.message}", pytrace=False)
