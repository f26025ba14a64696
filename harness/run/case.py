"""Running one case on one backend and turning the result into a verdict, a record and a message.

Shared by the pytest conformance suite, `dmlconform replay` and the benchmarks, so every entry
point classifies results the same way.
"""
from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.generate.types import primary_input
from harness.judge.diff import DiffResult, judge
from harness.judge.expectations import ExpectationSet, descriptor_holds
from harness.judge.status import FAILURES, Status
from harness.model.backend import Backend, BatchBackend, Capabilities, Crashed, RunResult, TimedResult, Timing
from harness.model.validator import case_verdict
from harness.model.descriptor import Case
from harness.model.layout import read_tensor
from harness.model.wellformed import check_case
from harness.reference.prefetch import start_reference
from harness.run.results import CaseRecord, ResultWriter, recording
from harness.spec.model import OperatorSpec, SpecSet


# DMLCONFORM_KEEP_CASES=all keeps the case file of every case, passes too: for a census of which
# descriptors bring on a device's failure or hang (docs/gpu-results.md), not for everyday runs
_KEEP_EVERY_CASE = os.environ.get("DMLCONFORM_KEEP_CASES", "") == "all"
# case files kept per test and expectation for expected divergences (one case file per known
# divergence was 7,400 of a make run's files; a failure's case file is always kept)
DIVERGENCE_FILES = 1


@dataclass
class Outcome:
    """What one case on one backend came to: its status, the judge's diff, the record written,
    the case file saved for a failure (None otherwise) and the message people read."""

    status: Status
    diff: DiffResult
    record: CaseRecord
    case_file: Path | None
    message: str

    @property
    def failed(self) -> bool:
        return self.status in FAILURES


def device_level(backend: Backend, specs: SpecSet) -> str:
    """The level a backend's device reports; backends that emulate any level report the newest."""
    level = backend.capabilities().max_feature_level
    return level or specs.catalog.newest_level.name


def case_data_type(spec: OperatorSpec, case: Case) -> str:
    t = case.descriptor.tensors.get(primary_input(spec)) or case.descriptor.tensors.get(spec.formula.output)
    return t.data_type if t is not None else "?"


def replay_command(case_file: Path, backend: Backend) -> str:
    """The command that reruns a case exactly as the run did: the backend with the options that
    change what it computes (a DirectML backend's DLL, adapter, flags), as `replay_args()` names them."""
    options: list[str] = getattr(backend, "replay_args", lambda: [])()
    words = ["dmlconform", "replay", str(case_file), "--backend", backend.name, *options]
    return " ".join(shlex.quote(w) for w in words)


def previews(spec: OperatorSpec, case: Case, limit: int = 16) -> dict[str, list]:
    """The first logical values of every input, for people reading a case file."""
    out = {}
    for f in spec.input_fields:
        desc = case.descriptor.tensors.get(f.name)
        if desc is None or f.name not in case.inputs or desc.data_type not in spec.catalog.data_types:
            continue
        dtype = spec.catalog.dtype(desc.data_type)
        try:
            values = read_tensor(case.inputs[f.name], desc, dtype).ravel()[:limit]
        except Exception:  # noqa: BLE001 - malformed invalid case: no preview
            continue
        out[f.name] = [repr(v.item()) if isinstance(v.item(), float) else v.item() for v in values]
    return out


HANG_PROBE_SECONDS = 15.0  # how long a known hang's probe (one tiny case) is waited for


@contextmanager
def hang_probe_limit(backend: Backend, hangs: bool) -> Iterator[None]:
    """While a known hang's probe runs: the backend's per-case limit cut to HANG_PROBE_SECONDS
    where it is longer. The probe is one case of a few elements that the device never finishes;
    waiting the run's whole limit for it (60 s by default on lavapipe) only delays the verdict,
    which is the same after 15 s, and each such probe was a minute of a 2-core run."""
    limit = getattr(backend, "timeout", None)
    if not hangs or not isinstance(limit, (int, float)) or limit <= HANG_PROBE_SECONDS:
        yield
        return
    backend.timeout = HANG_PROBE_SECONDS  # type: ignore[attr-defined]
    try:
        yield
    finally:
        backend.timeout = limit  # type: ignore[attr-defined]


def _run_once(backend: Backend, case: Case) -> TimedResult:
    start = time.perf_counter()
    try:
        result: RunResult = backend.run(case)
    except Exception as exc:  # noqa: BLE001 - a backend bug is a result, the run goes on
        result = Crashed(f"{type(exc).__name__}: {exc}")
    return result, Timing(time.perf_counter() - start)


def execute_cases(backend: Backend, cases: list[Case]) -> list[TimedResult]:
    """Each case's result and timing, in order: in batches where the backend runs them so
    (BatchBackend: DirectML compiles each descriptor once and submits many cases at a time),
    else one by one, timed here."""
    if isinstance(backend, BatchBackend) and len(cases) > 1:
        try:
            return backend.run_batch(cases)
        except Exception:  # noqa: BLE001 - a backend bug: every case gets its own try, one by one
            pass
    return [_run_once(backend, case) for case in cases]


def _explain_failure(spec: OperatorSpec, case: Case, diff: DiffResult, status: Status,
                     expectations: ExpectationSet, level: str) -> str | None:
    """The id of the expectation that explains a failing status (not a mismatch), or None. An
    expectation naming a rule explains a case whose descriptor the validator finds breaking that
    rule at `level`, whatever the case file's `expect` line claims (a hand-edited claim must not
    turn a failure into a known divergence, nor the reverse)."""
    rules: list[str | None] = [*sorted(case_verdict(spec, case, level).rule_ids)] or [None]
    tensor_types = tuple(t.data_type for t in case.descriptor.tensors.values() if t is not None)
    for rule in rules:
        explained = expectations.explain_status(spec.name, status, rule, diff.summary, case_data_type(spec, case),
                                                case.descriptor.attributes, tensor_types,
                                                lambda expr: descriptor_holds(expr, spec, case.descriptor))
        if explained is not None:
            return explained.id
    return None


def run_case(backend: Backend, spec: OperatorSpec, case: Case, kind: str, *,
             expectations: ExpectationSet | None = None, writer: ResultWriter | None = None,
             cases_dir: Path | None = None, test_id: str = "", run_known_hangs: bool = False) -> Outcome:
    """Run, judge, explain, record one case. Never raises for a backend failure: that is a
    `crashed` result."""
    return run_cases(backend, spec, [case], kind, expectations=expectations, writer=writer, cases_dir=cases_dir,
                     test_id=test_id, run_known_hangs=run_known_hangs)[0]


def run_cases(backend: Backend, spec: OperatorSpec, cases: list[Case], kind: str, *,
              expectations: ExpectationSet | None = None, writer: ResultWriter | None = None,
              cases_dir: Path | None = None, test_id: str = "", run_known_hangs: bool = False,
              divergence_files: dict[str, int] | None = None) -> list[Outcome]:
    """Run the cases on the backend (in batches where it can), then judge, explain and record each
    one, in order. Nothing malformed reaches a backend: every case is checked first. A case of an
    expectation marked `hangs` (this device hangs on it) is not sent, unless `run_known_hangs`
    (the expectation's probe): it is recorded as that known divergence, not run. `divergence_files`
    (expectation id -> case files kept so far, the caller's per test): an expected divergence's case
    file is kept only for the first of its expectation (DIVERGENCE_FILES); None keeps every one."""
    for case in cases:
        check_case(case, spec)  # CaseFormatError (harness/model/wellformed.py)
    try:
        capabilities = backend.capabilities()
    except Exception as exc:  # noqa: BLE001 - e.g. a runner that cannot be restarted: these cases crashed
        why = Crashed(f"the backend could not report its capabilities: {type(exc).__name__}: {exc}")
        return [_settle(backend, spec, case, kind, (why, Timing()), Capabilities(), case.feature_level, expectations,
                        writer, cases_dir, test_id) for case in cases]
    # a real device is judged at its own maximum level (a descriptor invalid only at a lower level
    # must be accepted); a backend that emulates any level is judged at the case's level
    hangs = {} if run_known_hangs or expectations is None else {
        i: item for i, case in enumerate(cases)
        if (item := _known_hang(spec, case, expectations, capabilities.max_feature_level or case.feature_level)) is not None}
    sent = [case for i, case in enumerate(cases) if i not in hangs]
    if not capabilities.is_reference:  # the reference backend computes it in its own call
        for case in sent:  # large cases: the reference is computed during the backend call
            start_reference(spec, case, capabilities.max_feature_level or case.feature_level)
    answers = iter(execute_cases(backend, sent) if sent else [])
    outcomes = []
    for i, case in enumerate(cases):
        level = capabilities.max_feature_level or case.feature_level
        if i in hangs:
            outcomes.append(_not_run(backend, spec, case, kind, hangs[i], level, writer, test_id))
        else:
            outcomes.append(_settle(backend, spec, case, kind, next(answers), capabilities, level, expectations, writer,
                                    cases_dir, test_id, divergence_files))
    return outcomes


def _known_hang(spec: OperatorSpec, case: Case, expectations: ExpectationSet, level: str):
    """The `hangs` expectation of this case on this device, or None. Invalid cases of such
    descriptors are not sent either: DirectML rejects most of them before anything executes, but one
    it accepts hangs as its valid twins do, and on an NVIDIA H200 each such hang cost its 10 s limit
    plus stalls of about 4.4 s in every other process on the GPU while the hung channel was torn
    down (14 invalid cases of one known hang in the first 300 s of the catalogue, docs/gpu-results.md). Rejection is DirectML's
    own validation, the same on every device: lavapipe runs still check it."""
    if not any(item.hangs for item in expectations.items):
        return None
    rules: list[str | None] = [*sorted(case_verdict(spec, case, level).rule_ids)] or [None]
    tensor_types = tuple(t.data_type for t in case.descriptor.tensors.values() if t is not None)
    for rule in rules:
        item = expectations.known_hang(spec.name, rule, case_data_type(spec, case), case.descriptor.attributes, tensor_types,
                                       lambda expr: descriptor_holds(expr, spec, case.descriptor))
        if item is not None:
            return item
    return None


def _not_run(backend: Backend, spec: OperatorSpec, case: Case, kind: str, item, level: str,
             writer: ResultWriter | None, test_id: str) -> Outcome:
    """A case of a known hang, recorded without running it: the known divergence (never a pass),
    tagged `not-run`; the expectation's probe shows in the same run whether the hang still happens."""
    summary = (f"not run: {item.id} says this device hangs on such descriptors (its probe runs in every run "
               f"and shows whether it still does)")
    diff = DiffResult(Status.EXPECTED_DIVERGENCE, summary)
    data_type = case_data_type(spec, case)
    record = CaseRecord(backend=backend.name, operator=spec.name, feature_level=level, data_type=data_type, kind=kind,
                        status=Status.EXPECTED_DIVERGENCE, case_id=case.case_id, summary=summary, test_id=test_id,
                        rule=case.broken_rule, tags=[*case.tags, "not-run"], expectation=item.id)
    if writer is not None:
        writer.write(record)
    message = f"{spec.name} on {backend.name} at FL {level} ({kind}, {data_type}): {summary}\nknown divergence {item.id}"
    return Outcome(Status.EXPECTED_DIVERGENCE, diff, record, None, message)


@dataclass
class _Verdict:
    """One run's judgement: the diff, the status after the expectations, the expectation used."""

    diff: DiffResult
    status: Status
    expectation: str | None


def _verdict(spec: OperatorSpec, case: Case, result: RunResult, capabilities: Capabilities, level: str,
             expectations: ExpectationSet | None) -> _Verdict:
    diff = judge(spec, case, result, capabilities.validates_descriptors, level)
    status, expectation = diff.status, None
    if status == Status.MISMATCH and expectations is not None:
        out_desc = case.descriptor.tensors.get(spec.formula.output)
        explained = expectations.explain(spec.name, out_desc.data_type if out_desc else None, diff, case_data_type(spec, case))
        if explained is not None:
            status, expectation = Status.EXPECTED_DIVERGENCE, explained.id
    elif expectations is not None and status in FAILURES:
        expectation = _explain_failure(spec, case, diff, status, expectations, level)
        if expectation is not None:
            status = Status.EXPECTED_DIVERGENCE
    return _Verdict(diff, status, expectation)


def _settle(backend: Backend, spec: OperatorSpec, case: Case, kind: str, answer: TimedResult,
            capabilities: Capabilities, level: str, expectations: ExpectationSet | None,
            writer: ResultWriter | None, cases_dir: Path | None, test_id: str,
            divergence_files: dict[str, int] | None = None) -> Outcome:
    """Judge one answer; an unexpected failure is run once more, alone, and a rerun that comes out
    otherwise makes the case `flaky` (a failure unless an expectation names it), never a pass:
    DirectML under Wine crashed one case of 2,735 once in CI and not on replay, and such a case
    must be seen, not hidden behind its rerun's pass."""
    result, timing = answer
    verdict = _verdict(spec, case, result, capabilities, level, expectations)
    seconds, stages = timing.seconds, dict(timing.stages)
    first: _Verdict | None = None
    never_sent = isinstance(result, Crashed) and not result.sent  # nothing to run again: the backend held it back
    if verdict.status in FAILURES and not capabilities.is_reference and not never_sent:  # the reference's answer cannot change
        rerun, again = _run_once(backend, case)
        first, verdict = verdict, _verdict(spec, case, rerun, capabilities, level, expectations)
        seconds += again.seconds
        for stage, secs in again.stages.items():
            stages[stage] = stages.get(stage, 0.0) + secs
        if verdict.status == first.status:
            first = None  # it repeats: the case's result
    status, diff, expectation = verdict.status, verdict.diff, verdict.expectation
    if first is not None:
        failing = first if first.status in FAILURES else verdict
        status, diff, expectation = Status.FLAKY, failing.diff, None
        if expectations is not None:
            expectation = _explain_failure(spec, case, failing.diff, Status.FLAKY, expectations, level)
            if expectation is not None:
                status = Status.EXPECTED_DIVERGENCE
    data_type = case_data_type(spec, case)
    case_file = None
    keep = status in FAILURES or _KEEP_EVERY_CASE
    if status == Status.EXPECTED_DIVERGENCE and not keep:  # a known divergence: a few examples are plenty
        kept = divergence_files.get(expectation or "", 0) if divergence_files is not None else -1
        keep = kept < DIVERGENCE_FILES
        if keep and divergence_files is not None:
            divergence_files[expectation or ""] = kept + 1
    if keep and cases_dir is not None:
        target = cases_dir / f"{backend.name}-{spec.name}-{case.case_id}.yaml"
        with recording(target):
            case_file = case.save(target, previews(spec, case))
    summary = diff.summary
    if first is not None:
        summary = f"flaky: first {first.status} ({first.diff.summary[:200]}); run again: {verdict.status} ({verdict.diff.summary[:200]})"
    record = CaseRecord(backend=backend.name, operator=spec.name, feature_level=level, data_type=data_type, kind=kind,
                        status=status, case_id=case.case_id, summary=summary[:500], test_id=test_id,
                        rule=case.broken_rule, tags=list(case.tags), case_file=str(case_file) if case_file else None,
                        expectation=expectation, elements=diff.elements, mismatches=diff.mismatch_count,
                        unspecified=diff.unspecified_count, liberties=dict(diff.liberties),
                        duration_s=round(seconds, 6), stages={k: round(v, 6) for k, v in stages.items()},
                        max_ulps=diff.max_ulps, max_abs=diff.max_abs,
                        bound_use=None if diff.bound_use is None else round(min(diff.bound_use, 1e6), 4))
    if first is not None:
        record.tags.append("flaky")
    if writer is not None:
        writer.write(record)
    lines = [f"{spec.name} on {backend.name} at FL {level} ({kind}, {data_type}): "
             + (summary if first is not None else diff.render())]
    if expectation:
        lines.append(f"known divergence {expectation}")
    if case_file is not None:
        lines.append(f"case file: {case_file}")
        lines.append(f"replay:    {replay_command(case_file, backend)}")
    return Outcome(status, diff, record, case_file, "\n".join(lines))
