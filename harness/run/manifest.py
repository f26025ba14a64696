"""What a run planned and what it finished: the evidence the gate needs to refuse an unfinished run.

Records of cases alone cannot tell a finished run from one cut short: an interrupted run, a
killed pytest-xdist worker or a Hypothesis test aborted by an exception all leave fewer records
and nothing else. So a run also writes, under its results directory:

- `plan-<worker>.json`: every cell (one pytest test: backend, operator, level, data type or rule)
  it collected, with how many cases the cell should produce (exact for examples, sweeps and
  probes; an upper bound for Hypothesis cells, which stop early once a strategy's space is
  exhausted) or why it will not run (its backend is unavailable);
- `cells-<worker>.jsonl`: one line per finished cell, with the number of cases it ran;
- `complete.json`: written last by the controlling process, only when the session ended normally.

`load_manifest` reads them back and `check_completeness` says what is missing, in words.
"""
from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from harness.run.results import CaseRecord

PLAN_GLOB, CELLS_GLOB, COMPLETE_FILE = "plan-*.json", "cells-*.jsonl", "complete.json"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class PlannedCell:
    """One test of the conformance suite, as planned at collection."""

    test_id: str
    backend: str
    operator: str
    level: str
    subject: str          # the data type, rule, example name or sweep id the cell is about
    kind: str             # valid | invalid | example | sweep | probe
    planned_cases: int    # exact, or an upper bound when `exact` is False
    exact: bool
    skip: str | None = None  # why the cell will not run (its backend is unavailable, ...)


@dataclass(frozen=True)
class FinishedCell:
    test_id: str
    cases: int


@dataclass
class Manifest:
    """A run's plan, its finished cells and whether it ended normally."""

    run_id: str | None
    cells: dict[str, PlannedCell] = field(default_factory=dict)
    finished: dict[str, FinishedCell] = field(default_factory=dict)
    backends: dict[str, dict] = field(default_factory=dict)   # name -> {"available", "reason", "requested"}
    complete: dict | None = None
    problems: list[str] = field(default_factory=list)          # unreadable or inconsistent files

    @property
    def has_plan(self) -> bool:
        return self.run_id is not None


def write_plan(directory: Path, worker: str, run_id: str, cells: list[PlannedCell], backends: dict[str, dict]) -> Path:
    """The plan of one process (every xdist worker collects the same cells; the gate checks that)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"plan-{worker}.json"
    body = {"version": MANIFEST_VERSION, "run_id": run_id, "backends": backends, "cells": [asdict(c) for c in cells]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, sort_keys=True))
    tmp.replace(path)
    return path


class CellWriter:
    """Appends one line per finished cell to `cells-<worker>.jsonl`, flushed at once."""

    def __init__(self, directory: Path, worker: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"cells-{worker}.jsonl"
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8")

    def finished(self, test_id: str, cases: int) -> None:
        with self._lock:
            self._file.write(json.dumps({"test_id": test_id, "cases": cases}) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def write_complete(directory: Path, run_id: str, exitstatus: int) -> Path:
    """The completion marker: the controlling process saw the whole session end normally."""
    path = directory / COMPLETE_FILE
    path.write_text(json.dumps({"version": MANIFEST_VERSION, "run_id": run_id, "exitstatus": exitstatus}))
    return path


def clear_run_files(directory: Path) -> None:
    """A new run's results directory starts empty: records, plans, cell markers, completion."""
    if not directory.is_dir():
        return
    for pattern in ("results-*.jsonl", PLAN_GLOB, CELLS_GLOB, COMPLETE_FILE, "*.tmp"):
        for path in directory.glob(pattern):
            path.unlink()


def _read_json(path: Path, problems: list[str]) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name}: unreadable ({exc})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name}: not a JSON object")
        return None
    return data


def load_manifest(directory: Path) -> Manifest:
    """Plans, finished cells and the completion marker of the run in `directory`."""
    problems: list[str] = []
    manifest = Manifest(run_id=None, problems=problems)
    for path in sorted(directory.glob(PLAN_GLOB)):
        data = _read_json(path, problems)
        if data is None:
            continue
        try:
            cells = {c["test_id"]: PlannedCell(**c) for c in data["cells"]}
            run_id = str(data["run_id"])
        except (KeyError, TypeError) as exc:
            problems.append(f"{path.name}: malformed plan ({exc})")
            continue
        if manifest.run_id is None:
            manifest.run_id, manifest.cells, manifest.backends = run_id, cells, dict(data.get("backends") or {})
        elif run_id != manifest.run_id:
            problems.append(f"{path.name}: plan of another run ({run_id}, expected {manifest.run_id})")
        elif set(cells) != set(manifest.cells):
            problems.append(f"{path.name}: planned {len(cells)} cells, another process planned {len(manifest.cells)}")
    for path in sorted(directory.glob(CELLS_GLOB)):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                raw = json.loads(line)
                cell = FinishedCell(str(raw["test_id"]), int(raw["cases"]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line: that cell counts as unfinished
            manifest.finished[cell.test_id] = cell
    complete = directory / COMPLETE_FILE
    if complete.exists():
        manifest.complete = _read_json(complete, problems)
    return manifest


@dataclass
class Completeness:
    """What the gate says about a run's completeness; `ok` only when nothing is missing."""

    lines: list[str]
    ok: bool


def check_completeness(manifest: Manifest, records: Iterable[CaseRecord]) -> Completeness:
    """Every planned cell finished, every finished cell's cases recorded, the session ended normally."""
    records = list(records)
    if not manifest.has_plan:
        return Completeness(["incomplete run: no run plan in the results directory "
                             "(the run did not start, or its results were written by something else)"], False)
    lines: list[str] = []
    ok = True
    for problem in manifest.problems:
        lines.append(f"run files: {problem}")
        ok = False
    to_run = {tid: c for tid, c in manifest.cells.items() if c.skip is None}
    finished = {tid: f for tid, f in manifest.finished.items() if tid in to_run}
    recorded = Counter(r.test_id for r in records)
    if len(finished) < len(to_run):
        ok = False
        cause = ("the run was interrupted" if manifest.complete is None
                 else "their tests ended without finishing (a worker died or a test errored)")
        lines.append(f"incomplete run: {len(finished)} of {len(to_run)} cells have results; {cause}")
        missing = sorted(set(to_run) - set(finished))
        lines += [f"  unfinished: {tid}" for tid in missing[:10]]
        if len(missing) > 10:
            lines.append(f"  ... and {len(missing) - 10} more")
    short = [(tid, f.cases, recorded.get(tid, 0)) for tid, f in finished.items() if recorded.get(tid, 0) < f.cases]
    if short:
        ok = False
        lines.append(f"lost records: {len(short)} finished cell(s) have fewer records than the cases they ran")
        lines += [f"  {tid}: ran {ran}, recorded {rec}" for tid, ran, rec in short[:10]]
    if manifest.complete is None:
        ok = False
        if len(finished) == len(to_run):
            lines.append("incomplete run: no completion marker (the session did not end normally)")
    elif manifest.complete.get("run_id") != manifest.run_id:
        ok = False
        lines.append("incomplete run: the completion marker belongs to another run")
    for name, info in sorted(manifest.backends.items()):
        cells = [c for c in to_run.values() if c.backend == name]
        planned = sum(c.planned_cases for c in cells)
        exact = all(c.exact for c in cells)
        got = sum(1 for r in records if r.backend == name and r.test_id in to_run)
        if not info.get("available", True):
            state = f"not run: {info.get('reason') or 'not available'}"
            if info.get("requested"):
                ok = False
                state += " (requested explicitly: the gate cannot pass what it did not see)"
            lines.append(f"{name}: {state}")
            continue
        bound = "" if exact else "at most "
        done = sum(1 for tid in finished if manifest.cells[tid].backend == name)
        lines.append(f"{name}: {done} of {len(cells)} cells finished; {got} case(s) recorded of {bound}{planned} planned")
    return Completeness(lines, ok)
