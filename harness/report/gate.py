"""The CI gate: yes or no, with the reason.

A green gate means every planned case ran and conformed. It fails on an incomplete run (no plan,
a planned cell without results, records lost, no completion marker: see harness.run.manifest), on
files that are not the run's own (records, plans or cell lines of another run id, records of a cell
the plan lacks, more records or cases than the plan allows, an older dmlconform's results without
a run id: the first such `file:line` is named), on any
unexpected failure (mismatch, rejected-valid, accepted-invalid, crashed, or a status it does not
know), and on stale expectations (an expectation that explained nothing although its operator ran
on its backend: the divergence may be fixed, the file must say so). Several records of one case
count as the worst of them. Prints a short summary first."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.judge.diff import UNSUPPORTED
from harness.judge.expectations import EXPECTED_DIVERGENCE, STALE
from harness.judge.status import is_failure
from harness.run.registry import expectations_for
from harness.run.results import CaseRecord, worst_per_case
from harness.run.manifest import Manifest, check_completeness


@dataclass
class GateResult:
    passed: bool
    summary: list[str] = field(default_factory=list)
    failures: list[CaseRecord] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)


def evaluate_gate(records: list[CaseRecord], manifest: Manifest | None, expectations_dir: Path | None = None) -> GateResult:
    """The verdict on a run's records and its manifest (None: no plan was found, which fails)."""
    completeness = check_completeness(manifest or Manifest(run_id=None), records)
    if not records:
        summary = ["no results: no case ran (reports/results/*.jsonl is empty)"] + completeness.lines
        return GateResult(False, summary + ["GATE: FAIL"])
    unique = worst_per_case(records)
    counts = Counter(r.status for r in unique)
    failures = [r for r in unique if is_failure(r.status) and r.status != STALE]
    stale = [f"{r.backend}:{r.expectation or r.test_id}: {r.summary}" for r in unique if r.status == STALE]
    explained = {(r.backend, part) for r in unique if r.expectation for part in r.expectation.split("+")}
    ran_per_operator = Counter((r.backend, r.operator) for r in unique)
    # an expectation about one rule's invalid cases is judged on that rule's cases: a ladder run asks
    # an older DLL (which inherits the newest DLL's expectations) only the rules a level gates
    ran_per_rule = Counter((r.backend, r.operator, r.rule) for r in unique if r.rule is not None)
    for backend in sorted({r.backend for r in unique}):
        exp = expectations_for(backend, expectations_dir)
        for item in exp.items:  # an expectation with a probe is judged by its probe record above
            # a known flake (status flaky) shows in some runs only: a run without it says nothing
            if item.probe is None and item.status != "flaky" and (backend, item.id) not in explained:
                ran = (ran_per_rule.get((backend, item.operator, item.rule), 0) if item.rule is not None
                       else ran_per_operator.get((backend, item.operator), 0))
                if ran:
                    stale.append(f"{backend}:{item.id} has no probe and explained none of {ran} case(s) this run")
    summary = list(completeness.lines)
    summary += [f"{len(unique)} case(s) on {', '.join(sorted({r.backend for r in unique}))}: "
               + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    if failures:
        summary.append(f"{len(failures)} unexpected failure(s):")
        by = Counter((r.backend, r.operator, r.feature_level, r.data_type, r.status) for r in failures)
        first: dict[tuple, CaseRecord] = {}
        for r in failures:
            first.setdefault((r.backend, r.operator, r.feature_level, r.data_type, r.status), r)
        for (backend, op, level, t, status), n in sorted(by.items()):
            example = first[(backend, op, level, t, status)]
            summary.append(f"  {status}: {backend} {op} FL {level} {t} x{n}; e.g. {example.summary[:150]}"
                           + (f" [{example.case_file}]" if example.case_file else ""))
    if stale:
        summary.append(f"{len(stale)} stale expectation(s):")
        summary += [f"  {s}" for s in stale]
    if counts.get(EXPECTED_DIVERGENCE):
        summary.append(f"{counts[EXPECTED_DIVERGENCE]} known divergence(s) explained by expectation files")
    unprobed = sorted(f"{r.backend}:{r.expectation}" for r in unique if r.kind == "probe" and "not-run" in r.tags
                      and r.status == UNSUPPORTED)
    if unprobed:  # --hang-probes skip, or a probe whose descriptor is another known hang here
        summary.append(f"{len(unprobed)} known divergence(s) not probed in this run (not confirmed, not stale): "
                       + ", ".join(unprobed[:8]) + (" ..." if len(unprobed) > 8 else ""))
    passed = completeness.ok and not failures and not stale
    summary.append("GATE: PASS" if passed else "GATE: FAIL")
    return GateResult(passed, summary, failures, stale)
