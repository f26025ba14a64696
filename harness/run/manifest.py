"""What a run planned and what it finished: the evidence the gate needs to refuse an unfinished run.

Records of cases alone cannot tell a finished run from one cut short: an interrupted run, a
killed pytest-xdist worker or a Hypothesis test aborted by an exception all leave fewer records
and nothing else. So a run also writes, under its results directory:

- `plan-<worker>.json.gz`: every cell (one pytest test: backend, operator, level, data type or rule)
  it collected, with how many cases the cell should produce (exact for examples, sweeps and
  probes; an upper bound for Hypothesis cells, which stop early once a strategy's space is
  exhausted) or why it will not run (its backend is unavailable);
- `cells-<worker>.jsonl`: one line per finished cell, with the number of cases it ran (gzip-compressed,
  `.jsonl.gz`, once the run has ended normally, as the records are);
- `complete.json`: written last by the controlling process, only when the session ended normally.

A shard of a run split across machines (`--shard I/N`, harness.run.shard) plans only its own
cells, and its plan says which shard it is, on which host, with which backend versions, and what
the full plan was (its test ids and digests), so that `dmlconform merge` (harness.run.merge) can
check that the shards together ran the full plan exactly once; a merged run's plan lists the
shards it was made of.

Each of them, and every record, carries the run's id (a uuid4 made once by the controlling process
and handed to the xdist workers), so that files of two runs cannot be mixed unnoticed.

`load_manifest` reads them back (through harness.run.record_schema: a malformed file or line is a
RunFileError) and `check_completeness` says what is missing or foreign, in words.
"""
from __future__ import annotations

import gzip
import json
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from harness.run.record_schema import (MAX_COMPLETE_BYTES, MAX_PLAN_BYTES, check_complete, check_finished, check_plan,
                                       read_checked, read_lines, torn_tail)
from harness.run.results import COMPRESSED_GLOB, RESULTS_GLOB, CaseRecord, jsonl_files, note_run_id, planned_run_id, recording

PLAN_GLOB, CELLS_GLOB, COMPLETE_FILE = "plan-*.json*", "cells-*.jsonl", "complete.json"
PLAN_SUFFIXES = (".json", ".json.gz")  # written gzip-compressed (every worker writes the same plan: 5.7 MB each
#                                         for make run, 0.3 MB compressed); a plain one is read as well
MANIFEST_VERSION = 1
OLDER_RESULTS = "results from an older dmlconform (no run id)"
SHOWN = 10  # lines named per kind of problem


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
    backends: dict[str, dict] = field(default_factory=dict)   # name -> {"available", "reason", "requested"[, "version"]}
    complete: dict | None = None
    problems: list[str] = field(default_factory=list)          # foreign, duplicated or torn files and lines
    host: str | None = None                                    # where the run ran (None: an older plan)
    shard: dict | None = None                                  # a shard's index, total and full plan (check_shard)
    merged: list[dict] = field(default_factory=list)           # the shards a merged run was made of

    @property
    def has_plan(self) -> bool:
        return self.run_id is not None


def plan_files(directory: Path) -> list[Path]:
    """The plans in `directory` (`plan-W.json.gz` as written, or a plain `plan-W.json`), sorted."""
    return sorted(p for p in directory.glob(PLAN_GLOB) if p.name.endswith(PLAN_SUFFIXES))


def write_plan(directory: Path, worker: str, run_id: str, cells: list[PlannedCell], backends: dict[str, dict], *,
               host: str | None = None, shard: dict | None = None, merged: list[dict] | None = None) -> Path:
    """The plan of one process (every xdist worker collects the same cells; the gate checks that).
    The process's record and cell writers in `directory` stamp this run id from now on. A shard's
    plan carries `shard` (record_schema.check_shard), a merged run's `merged`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"plan-{worker}.json.gz"
    body: dict[str, object] = {"version": MANIFEST_VERSION, "run_id": run_id, "backends": backends,
                               "cells": [asdict(c) for c in cells]}
    if host is not None:
        body["host"] = host
    if shard is not None:
        body["shard"] = shard
    if merged:
        body["merged"] = merged
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as packed:
        packed.write(json.dumps(body, sort_keys=True).encode())
    tmp.replace(path)
    note_run_id(directory, run_id)
    return path


class CellWriter:
    """Appends one line per finished cell to `cells-<worker>.jsonl`, flushed at once, with the run
    id (`run_id` if given, else the one this process planned under: harness.run.results.planned_run_id)."""

    def __init__(self, directory: Path, worker: str, run_id: str | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.run_id = run_id
        self.path = directory / f"cells-{worker}.jsonl"
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8")

    def finished(self, test_id: str, cases: int) -> None:
        body: dict[str, object] = {"test_id": test_id, "cases": cases}
        run_id = self.run_id or planned_run_id(self.directory)
        if run_id is not None:
            body["run_id"] = run_id
        with self._lock, recording(self.path):
            self._file.write(json.dumps(body) + "\n")
            self._file.flush()

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass  # a write that failed has been reported (RecordingError)


def write_complete(directory: Path, run_id: str, exitstatus: int) -> Path:
    """The completion marker: the controlling process saw the whole session end normally."""
    path = directory / COMPLETE_FILE
    path.write_text(json.dumps({"version": MANIFEST_VERSION, "run_id": run_id, "exitstatus": exitstatus}))
    return path


def clear_run_files(directory: Path) -> None:
    """A new run's results directory starts empty: records, plans, cell markers, completion."""
    if not directory.is_dir():
        return
    for pattern in (RESULTS_GLOB, COMPRESSED_GLOB, PLAN_GLOB, CELLS_GLOB, CELLS_GLOB + ".gz", COMPLETE_FILE, "*.tmp"):
        for path in directory.glob(pattern):
            path.unlink()


def _first_and_count(places: list[tuple[str, str]], what: str, unit: str) -> list[str]:
    """One problem line for many: the first place (`file:line`, and what is wrong there) named,
    and how many in all."""
    if not places:
        return []
    where, detail = places[0]
    return [what.format(where=where) + (f" ({detail})" if detail else "")
            + (f"; {len(places)} {unit} in all" if len(places) > 1 else "")]


def load_manifest(directory: Path) -> Manifest:
    """Plans, finished cells and the completion marker of the run in `directory`. A malformed file
    or line raises RunFileError (`file:line: message`); files of another run, an older dmlconform's
    lines without a run id, cells finished twice or not planned and torn last lines are `problems`."""
    problems: list[str] = []
    manifest = Manifest(run_id=None, problems=problems)
    complete_path = directory / COMPLETE_FILE
    if complete_path.exists():
        manifest.complete = read_checked(complete_path, MAX_COMPLETE_BYTES, check_complete)
    plans = [(path, read_checked(path, MAX_PLAN_BYTES, check_plan)) for path in plan_files(directory)]
    # the run: the one most plans name (one plan per xdist worker), the completion marker's on a tie
    votes = Counter(plan["run_id"] for _, plan in plans)
    marker = manifest.complete["run_id"] if manifest.complete else None
    if votes:
        top = max(votes.values())
        leaders = [run for run, n in votes.items() if n == top]
        manifest.run_id = marker if marker in leaders else leaders[0]
    for path, plan in plans:
        cells = {c["test_id"]: PlannedCell(**c) for c in plan["cells"]}
        if plan["run_id"] != manifest.run_id:
            problems.append(f"foreign results: {path}:1 is the plan of another run (run id {plan['run_id'][:64]}; "
                            f"this run is {manifest.run_id})")
        elif not manifest.cells and not manifest.backends:
            manifest.cells, manifest.backends = cells, plan["backends"]
            manifest.host, manifest.shard, manifest.merged = plan["host"], plan["shard"], plan["merged"]
        elif set(cells) != set(manifest.cells):
            problems.append(f"inconsistent plans: {path}:1 plans {len(cells)} cells, another process of the run "
                            f"{len(manifest.cells)} ({len(set(cells) ^ set(manifest.cells))} differ)")
    older: list[tuple[str, str]] = []
    foreign: list[tuple[str, str]] = []
    unplanned: list[tuple[str, str]] = []
    twice: list[tuple[str, str]] = []
    for path in jsonl_files(directory, "cells"):
        for number, line in read_lines(path, check_finished):
            where = f"{path}:{number}"
            if line["run_id"] is None:
                older.append((where, ""))
            elif line["run_id"] != manifest.run_id:
                foreign.append((where, f"run id {line['run_id'][:64]}; this run is {manifest.run_id}"))
            elif line["test_id"] not in manifest.cells:
                unplanned.append((where, line["test_id"][:200]))
            elif line["test_id"] in manifest.finished:
                twice.append((where, line["test_id"][:200]))
            else:
                manifest.finished[line["test_id"]] = FinishedCell(line["test_id"], line["cases"])
    problems += _first_and_count(older, OLDER_RESULTS + ": {where} is a finished-cell line without one", "such lines")
    problems += _first_and_count(foreign, "foreign results: {where} is a finished cell of another run", "such lines")
    problems += _first_and_count(unplanned, "foreign results: {where} finishes a cell the plan does not have", "such lines")
    problems += _first_and_count(twice, "foreign results: {where} finishes a cell a second time", "such lines")
    torn = [(str(p), "") for pattern in (RESULTS_GLOB, CELLS_GLOB) for p in sorted(directory.glob(pattern)) if torn_tail(p)]
    problems += _first_and_count(torn, "interrupted write: {where} ends inside a line (its last line was cut short)", "such files")
    return manifest


@dataclass
class Completeness:
    """What the gate says about a run's completeness; `ok` only when nothing is missing."""

    lines: list[str]
    ok: bool


def _record_identity(manifest: Manifest, records: list[CaseRecord]) -> tuple[list[str], list[CaseRecord]]:
    """Problem lines for records that are not this run's own (no run id, another run's, a cell the
    plan lacks or skips, another backend or kind than the cell's), and the records that are."""
    older: list[tuple[str, str]] = []
    foreign: list[tuple[str, str]] = []
    unplanned: list[tuple[str, str]] = []
    own: list[CaseRecord] = []
    for r in records:
        where = r.source or f"record {r.case_id[:40]}"
        if r.run_id is None:
            older.append((where, ""))
            continue
        if r.run_id != manifest.run_id:
            foreign.append((where, f"run id {r.run_id[:64]}; this run is {manifest.run_id}"))
            continue
        cell = manifest.cells.get(r.test_id)
        if cell is None:
            unplanned.append((where, f"test id {r.test_id[:200] or '(none)'}, backend {r.backend[:80]}"))
        elif cell.skip is not None:
            unplanned.append((where, f"test id {r.test_id[:200]}: planned as skipped"))
        elif cell.backend != r.backend or cell.kind != r.kind or (cell.operator and cell.operator != r.operator):
            unplanned.append((where, f"test id {r.test_id[:200]}: a {r.kind[:20]} case of {r.backend[:80]} {r.operator[:80]}; "
                                     f"the plan has a {cell.kind} cell of {cell.backend} {cell.operator}".rstrip()))
        else:
            own.append(r)
    lines = _first_and_count(older, OLDER_RESULTS + ": {where} is a record without one", "such records")
    lines += _first_and_count(foreign, "foreign results: {where} is a record of another run", "such records")
    lines += _first_and_count(unplanned, "foreign results: {where} is a record of a cell the run did not plan", "such records")
    return lines, own


def record_problems(manifest: Manifest, records: list[CaseRecord]) -> list[str]:
    """The lines for records that are not the run's own (another run's, none, a cell it did not
    plan): what `dmlconform merge` refuses before it stamps the merged run's id on the records."""
    return _record_identity(manifest, records)[0]


def check_completeness(manifest: Manifest, records: Iterable[CaseRecord]) -> Completeness:
    """Every record this run's and of a planned cell; every planned cell finished, within its case
    budget, with as many records as cases; the session ended normally."""
    records = list(records)
    if not manifest.has_plan:
        return Completeness(["incomplete run: no run plan in the results directory "
                             "(the run did not start, or its results were written by something else)"], False)
    lines: list[str] = []
    ok = True
    if manifest.problems:
        lines += manifest.problems
        ok = False
    identity, own = _record_identity(manifest, records)
    if identity:
        ok = False
        lines += identity
    to_run = {tid: c for tid, c in manifest.cells.items() if c.skip is None}
    finished = {tid: f for tid, f in manifest.finished.items() if tid in to_run}
    recorded = Counter(r.test_id for r in own)
    if len(finished) < len(to_run):
        ok = False
        cause = ("the run was interrupted" if manifest.complete is None
                 else "their tests ended without finishing (a worker died or a test errored)")
        lines.append(f"incomplete run: {len(finished)} of {len(to_run)} cells have results; {cause}")
        missing = sorted(set(to_run) - set(finished))
        lines += [f"  unfinished: {tid}" for tid in missing[:SHOWN]]
        if len(missing) > SHOWN:
            lines.append(f"  ... and {len(missing) - SHOWN} more")
    short = [(tid, f.cases, recorded.get(tid, 0)) for tid, f in finished.items() if recorded.get(tid, 0) < f.cases]
    if short:
        ok = False
        lines.append(f"lost records: {len(short)} finished cell(s) have fewer records than the cases they ran")
        lines += [f"  {tid}: ran {ran}, recorded {rec}" for tid, ran, rec in short[:SHOWN]]
    extra = [(tid, f.cases, recorded.get(tid, 0)) for tid, f in finished.items() if recorded.get(tid, 0) > f.cases]
    if extra:
        ok = False
        lines.append(f"extra records: {len(extra)} finished cell(s) have more records than the cases they ran")
        lines += [f"  {tid}: ran {ran}, recorded {rec}" for tid, ran, rec in extra[:SHOWN]]
    over = [(tid, f.cases, to_run[tid]) for tid, f in finished.items()
            if f.cases > to_run[tid].planned_cases or (to_run[tid].exact and f.cases != to_run[tid].planned_cases)]
    if over:
        ok = False
        lines.append(f"outside the plan: {len(over)} cell(s) ran another number of cases than their plan allows")
        lines += [f"  {tid}: ran {ran}, planned {'exactly' if cell.exact else 'at most'} {cell.planned_cases}"
                  for tid, ran, cell in over[:SHOWN]]
    if manifest.complete is None:
        ok = False
        if len(finished) == len(to_run):
            lines.append("incomplete run: no completion marker (the session did not end normally)")
    elif manifest.complete.get("run_id") != manifest.run_id:
        ok = False
        lines.append("incomplete run: the completion marker belongs to another run")
    by_backend: dict[str, int] = Counter(r.backend for r in own if r.test_id in to_run)
    for name, info in sorted(manifest.backends.items()):
        cells = [c for c in to_run.values() if c.backend == name]
        planned = sum(c.planned_cases for c in cells)
        exact = all(c.exact for c in cells)
        got = by_backend.get(name, 0)
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
