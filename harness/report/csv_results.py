"""deqp-runner style results files, and the run's slowest cases.

Mesa's CI and the tools around it read a run as two CSV files (deqp-runner, RunnerResults::
write_results and write_failures): `results.csv`, one line per test, `test,status,duration`
(seconds), sorted by test name, no header; `failures.csv`, `test,status` for every test that
did not succeed, the form a baseline of known failures is checked in as. A run writes both
under its reports directory (results.csv gzip-compressed, as Mesa's CI keeps it), so that whatever
reads deqp-runner's files (baselines, flake trackers, result dashboards) reads a conformance run too:

- test: `<test>::<case id>`, the pytest test of the case without its file (`test_valid[ADD-FL6.4-
  FLOAT32-directml]`: the same whether the suite ran as `dmlconform run` or from tests/) and the
  case's id. deqp-runner reads a line as `^([^,]+),([^,]+)`, so a comma in a name becomes `;`.
- status: the record's status, our own words (`pass`, `mismatch`, `expected-divergence`, ...).
- duration: the record's `duration_s`, the backend's wall seconds on the case.

A case recorded twice under one name (a case drawn twice in a cell) is one line, its worst
outcome (harness.run.results.worst_per_case's order), as deqp-runner keeps one result per test.
`failures.csv` holds the cases whose status fails the gate (harness.judge.status.is_failure).
"""
from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from harness.judge.status import is_failure, severity
from harness.run.results import CaseRecord

# results.csv is gzip-compressed, as Mesa's CI keeps deqp-runner's (`results.csv.zst`): one line per
# case is 23 MB for `make run`, 1.5 MB packed (`zcat reports/results.csv.gz`); failures.csv, the
# baseline form people diff and check in, stays plain.
RESULTS_CSV, FAILURES_CSV = "results.csv.gz", "failures.csv"
SLOWEST = 10  # cases the run's terminal summary names
_UNSAFE = re.compile(r"[,\r\n]")


def case_name(record: CaseRecord) -> str:
    """The case's stable name: its test (no file path) and case id, fit for a CSV field."""
    test = record.test_id.rsplit("::", 1)[-1] if record.test_id else (
        f"{record.kind}[{record.operator}-FL{record.feature_level}-{record.data_type}-{record.backend}]")
    return _UNSAFE.sub(lambda m: ";" if m.group() == "," else " ", f"{test}::{record.case_id}")


def by_name(records: Iterable[CaseRecord]) -> dict[str, CaseRecord]:
    """One record per case name, the worst (first seen on a tie), sorted by name as deqp-runner sorts."""
    chosen: dict[str, CaseRecord] = {}
    for record in records:
        name = case_name(record)
        current = chosen.get(name)
        if current is None or severity(record.status) < severity(current.status):
            chosen[name] = record
    return dict(sorted(chosen.items()))


def seconds(value: float) -> str:
    """A duration as deqp-runner writes one: decimal seconds, never an exponent."""
    return f"{value:.6f}"


def results_lines(chosen: dict[str, CaseRecord]) -> list[str]:
    """results.csv: `test,status,duration` per case."""
    return [f"{name},{r.status},{seconds(r.duration_s)}" for name, r in chosen.items()]


def failure_lines(chosen: dict[str, CaseRecord]) -> list[str]:
    """failures.csv: `test,status` per case whose status fails the gate."""
    return [f"{name},{r.status}" for name, r in chosen.items() if is_failure(r.status)]


def _write_lines(path: Path, lines: list[str]) -> None:
    """The file written whole under a temporary name, then renamed: a reader never sees half. A name
    ending in `.gz` is gzip-compressed, with no name or time in its header (the same lines give the
    same bytes)."""
    partial = path.with_name(path.name + ".tmp")
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if path.name.endswith(".gz"):
        with partial.open("wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as packed:
            packed.write(data)
    else:
        partial.write_bytes(data)
    os.replace(partial, path)


def read_lines(path: Path) -> list[str]:
    """The lines of a results file this module wrote (`results.csv.gz` or `failures.csv`)."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode("utf-8").splitlines()


def write_csv_results(reports: Path, records: Iterable[CaseRecord]) -> tuple[Path, Path]:
    """`reports/results.csv.gz` and `reports/failures.csv` from the run's records."""
    chosen = by_name(records)
    reports.mkdir(parents=True, exist_ok=True)
    results, failures = reports / RESULTS_CSV, reports / FAILURES_CSV
    _write_lines(results, results_lines(chosen))
    _write_lines(failures, failure_lines(chosen))
    return results, failures


@dataclass(frozen=True)
class SlowCase:
    """One of the run's slowest cases, as the terminal summary prints it."""

    name: str
    backend: str
    operator: str
    status: str
    duration_s: float
    stages: dict[str, float]

    def line(self) -> str:
        stages = ", ".join(f"{stage} {value:.3f}" for stage, value in self.stages.items())
        return (f"{self.duration_s:9.3f} s  {self.status:<20} {self.backend:<16} {self.operator:<28} {self.name}"
                + (f"  [{stages}]" if stages else ""))


def slowest(records: Iterable[CaseRecord], count: int = SLOWEST) -> list[SlowCase]:
    """The `count` cases that took longest on their backend, slowest first (ties by name)."""
    ranked = sorted(((r.duration_s, case_name(r), r) for r in records), key=lambda t: (-t[0], t[1]))
    return [SlowCase(name, r.backend, r.operator, r.status, duration, dict(r.stages))
            for duration, name, r in ranked[:count]]


def slowest_lines(cases: list[SlowCase]) -> list[str]:
    """The terminal summary's lines for the slowest cases (header first; nothing when none ran)."""
    if not cases:
        return []
    header = f"{'seconds':>11}  {'status':<20} {'backend':<16} {'operator':<28} case  [stages, seconds]"
    return [header, *(case.line() for case in cases)]
