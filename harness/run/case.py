"""Running one case on one backend and turning the result into a verdict, a record and a message.

Shared by the pytest conformance suite, `dmlconform replay` and the benchmarks, so every entry
point classifies results the same way.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from harness.generate.types import primary_input
from harness.judge.diff import DiffResult, judge
from harness.judge.expectations import ExpectationSet, descriptor_holds
from harness.judge.status import FAILURES, Status
from harness.model.backend import Backend, Capabilities, Crashed, RunResult
from harness.model.validator import case_verdict
from harness.model.descriptor import Case
from harness.model.layout import read_tensor
from harness.model.wellformed import check_case
from harness.reference.prefetch import start_reference
from harness.run.results import CaseRecord, ResultWriter, recording
from harness.spec.model import OperatorSpec, SpecSet


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


def _run_once(backend: Backend, case: Case) -> RunResult:
    try:
        return backend.run(case)
    except Exception as exc:  # noqa: BLE001 - a backend bug is a result, the run goes on
        return Crashed(f"{type(exc).__name__}: {exc}")


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


def _known_crash(spec: OperatorSpec, case: Case, result: Crashed, capabilities: Capabilities, level: str,
                 expectations: ExpectationSet | None) -> bool:
    """Whether an expectation already explains this crash (DirectML's null-tensor dereferences):
    its one run is the observation, and the rerun that tells a flaky crash from a repeatable one
    is not paid (a runner restart costs a second or more per case)."""
    if expectations is None:
        return False
    diff = judge(spec, case, result, capabilities.validates_descriptors, level)
    return diff.status in FAILURES and _explain_failure(spec, case, diff, diff.status, expectations, level) is not None


def run_case(backend: Backend, spec: OperatorSpec, case: Case, kind: str, *,
             expectations: ExpectationSet | None = None, writer: ResultWriter | None = None,
             cases_dir: Path | None = None, test_id: str = "") -> Outcome:
    """Run, judge, explain, record. Never raises for a backend failure: that is a `crashed` result."""
    check_case(case, spec)  # CaseFormatError: nothing malformed reaches a backend (harness/model/wellformed.py)
    result: RunResult | None = None
    try:
        capabilities = backend.capabilities()
    except Exception as exc:  # noqa: BLE001 - e.g. a runner that cannot be restarted: this case crashed
        capabilities = Capabilities()
        result = Crashed(f"the backend could not report its capabilities: {type(exc).__name__}: {exc}")
    # a real device is judged at its own maximum level (a descriptor invalid only at a lower level
    # must be accepted); a backend that emulates any level is judged at the case's level
    level = capabilities.max_feature_level or case.feature_level
    if result is None:
        if not capabilities.is_reference:  # the reference backend computes it in its own call
            start_reference(spec, case, level)  # large cases: the reference is computed during the backend call
        result = _run_once(backend, case)
    flaky_crash = None
    if isinstance(result, Crashed) and not capabilities.is_reference and not _known_crash(
            spec, case, result, capabilities, level, expectations):
        # once more, on a restarted runner: a crash that repeats is the case's result; one that does
        # not is reported beside the rerun's verdict (tag `crashed-once`, the summary, the case file),
        # never dropped, and the verdict is the rerun's (DirectML under Wine crashed 1 case
        # of 2,735 once in CI, and not on replay)
        first = result
        result = _run_once(backend, case)
        flaky_crash = None if isinstance(result, Crashed) else first.reason
    diff = judge(spec, case, result, capabilities.validates_descriptors, level)
    status = diff.status
    expectation = None
    data_type = case_data_type(spec, case)
    if status == Status.MISMATCH and expectations is not None:
        out_desc = case.descriptor.tensors.get(spec.formula.output)
        explained = expectations.explain(spec.name, out_desc.data_type if out_desc else None, diff, data_type)
        if explained is not None:
            status, expectation = Status.EXPECTED_DIVERGENCE, explained.id
    elif expectations is not None and status in FAILURES:
        expectation = _explain_failure(spec, case, diff, status, expectations, level)
        if expectation is not None:
            status = Status.EXPECTED_DIVERGENCE
    case_file = None
    if (status in FAILURES or status == Status.EXPECTED_DIVERGENCE or flaky_crash) and cases_dir is not None:
        target = cases_dir / f"{backend.name}-{spec.name}-{case.case_id}.yaml"
        with recording(target):
            case_file = case.save(target, previews(spec, case))
    record = CaseRecord(backend=backend.name, operator=spec.name, feature_level=level, data_type=data_type, kind=kind,
                        status=status, case_id=case.case_id, summary=diff.summary[:500], test_id=test_id,
                        rule=case.broken_rule, tags=list(case.tags), case_file=str(case_file) if case_file else None,
                        expectation=expectation, elements=diff.elements, mismatches=diff.mismatch_count,
                        unspecified=diff.unspecified_count, liberties=dict(diff.liberties))
    if flaky_crash:
        record.tags.append("crashed-once")
        record.summary = f"crashed once, then ran ({flaky_crash[:200]}); the rerun: {diff.summary}"[:500]
    if writer is not None:
        writer.write(record)
    lines = [f"{spec.name} on {backend.name} at FL {level} ({kind}, {data_type}): {diff.render()}"]
    if flaky_crash:
        lines.append(f"crashed once, not on a rerun: {flaky_crash}")
    if expectation:
        lines.append(f"known divergence {expectation}")
    if case_file is not None:
        lines.append(f"case file: {case_file}")
        lines.append(f"replay:    {replay_command(case_file, backend)}")
    return Outcome(status, diff, record, case_file, "\n".join(lines))

