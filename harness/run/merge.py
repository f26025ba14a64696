"""`dmlconform merge DIR... --output OUT`: the reports directories of a run's shards (`--shard I/N`,
harness.run.shard) joined into one reports directory that `gate`, `matrix` and `report` read as
they read any run.

A green gate on the merged directory must mean what it means for one machine: every planned
case ran and conformed. So before anything is written, the shards are checked against each other
and against the full plan each of them recorded, and every problem is one line (exit 2):

- `foreign shard`: a shard of another run: split into another number of shards, other options,
  other code, specs or expectation files (another commit), or another full plan;
- `duplicated shard`: the same shard index given twice (a copy of one run, or two runs of it);
- `missing shard`: an index of 1..N that no directory holds;
- `interrupted shard`: no completion marker, or a planned cell that did not finish;
- `duplicated cell` / `missing cell`: a cell planned by two shards, or by none (shards split
  with different durations files);
- `uneven shards`: a backend that ran on some shards and was unavailable on others;
- `foreign results` and the other lines of a shard's own manifest: records of another run or of
  a cell the shard did not plan, torn files (harness.run.manifest).

Every file is read through the strict readers (harness.run.record_schema). The merged run gets
a run id of its own, derived from the shards' (merging the same shards twice gives the same id):
its plan holds the full plan's cells (each as its shard planned it) and lists the shards (index,
run id, host, backend versions); its records, finished cells and completion marker carry its id.
Records are written worst outcome first within each case (harness.run.results.worst_per_case
keeps the first of the worst), the durations files are joined, and the case files and Allure
result files (uuid names; a shard's allure-results/ or the allure-results.zip `dmlconform report`
packs it into) are copied together, with one environment.properties.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.judge.status import severity
from harness.run.manifest import (CellWriter, FinishedCell, Manifest, PlannedCell, load_manifest, record_problems,
                                  write_complete, write_plan)
from harness.run.record_schema import RunFileError
from harness.run.results import CaseRecord, ResultWriter, read_records
from harness.run.shard import DURATIONS_FILE, plan_digest, read_durations, write_durations

ALLURE_DIR, CASES_DIR, RESULTS_DIR = "allure-results", "cases", "results"
ALLURE_ENVIRONMENT, ALLURE_CATEGORIES = "environment.properties", "categories.json"


class MergeError(Exception):
    """The shards cannot be merged: one line per problem (exit 2)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass
class ShardRun:
    """One shard's reports directory, read and checked on its own."""

    directory: Path
    manifest: Manifest
    records: list[CaseRecord]
    index: int
    total: int
    full: list[str]                    # the test ids of the full (unsharded) plan
    identity: dict[str, object]        # what shards of one run share (harness.run.record_schema.check_shard)
    durations: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.directory} (shard {self.index}/{self.total})"

    @property
    def run_id(self) -> str:
        assert self.manifest.run_id is not None
        return self.manifest.run_id

    def available(self) -> dict[str, bool]:
        return {name: bool(info.get("available", True)) for name, info in self.manifest.backends.items()}


# --- reading ---------------------------------------------------------------------------------------

def _identity(manifest: Manifest) -> tuple[int, int, list[str], dict[str, object]]:
    """index, total, full plan and identity of a shard; a run made without --shard is shard 1/1
    of itself."""
    shard = manifest.shard
    if shard is None:
        cells = [dataclasses.asdict(c) for c in manifest.cells.values()]
        return 1, 1, list(manifest.cells), {"total": 1, "digest": plan_digest(cells), "source": "", "options": {},
                                           "durations": ""}
    return (shard["index"], shard["total"], list(shard["cells"]),
            {key: shard[key] for key in ("total", "digest", "source", "options", "durations")})


def load_shard(directory: Path) -> ShardRun:
    """A shard's plan, finished cells, completion marker, records and durations, through the strict
    readers; MergeError with its lines when the directory is not a shard or its files disagree."""
    results = directory / RESULTS_DIR
    if not directory.is_dir():
        raise MergeError([f"not a reports directory: {directory} (no such directory)"])
    try:
        manifest = load_manifest(results)
        records = list(read_records(results))
        durations = read_durations(results / DURATIONS_FILE) if (results / DURATIONS_FILE).exists() else {}
    except RunFileError as exc:
        raise MergeError([f"unreadable shard: {exc.render()}"]) from None
    if not manifest.has_plan:
        raise MergeError([f"not a run: {directory} has no run plan in {results} (the run did not start there)"])
    if manifest.merged:
        raise MergeError([f"not a shard: {directory} is already a merged run (of {len(manifest.merged)} shards); "
                          f"merge the shards themselves"])
    index, total, full, identity = _identity(manifest)
    shard = ShardRun(directory, manifest, records, index, total, full, identity, durations)
    lines = [f"{shard.label}: {line}" for line in manifest.problems + record_problems(manifest, records)]
    if lines:
        raise MergeError(lines)
    return shard


# --- checking --------------------------------------------------------------------------------------

def _key(identity: dict[str, object]) -> str:
    return json.dumps({k: v for k, v in identity.items() if k != "durations"}, sort_keys=True)


def _difference(shard: ShardRun, reference: ShardRun) -> str:
    """How a foreign shard's run differs from the others', in words (the first difference)."""
    mine, theirs = shard.identity, reference.identity
    if mine["total"] != theirs["total"]:
        return f"split into {mine['total']} shard(s), the others into {theirs['total']}"
    options_mine, options_theirs = mine["options"], theirs["options"]
    assert isinstance(options_mine, dict) and isinstance(options_theirs, dict)
    if options_mine != options_theirs and options_mine and options_theirs:
        differing = sorted(k for k in set(options_mine) | set(options_theirs) if options_mine.get(k) != options_theirs.get(k))
        name = differing[0]
        return (f"other options: {name} {str(options_mine.get(name, '(none)'))[:120]!r} here, "
                f"{str(options_theirs.get(name, '(none)'))[:120]!r} in the others"
                + (f" ({len(differing)} options differ)" if len(differing) > 1 else ""))
    if mine["source"] != theirs["source"]:
        return "other code, specs or expectation files than the others (another commit, or local changes)"
    return (f"another full plan: {len(shard.full)} cell(s) here, {len(reference.full)} in the others "
            f"({len(set(shard.full) ^ set(reference.full))} differ)")


def _foreign(shards: list[ShardRun]) -> tuple[list[ShardRun], list[str]]:
    """The shards of the run most of them belong to (the first directory's on a tie), and a line
    for each of the others."""
    votes = Counter(_key(s.identity) for s in shards)
    top = max(votes.values())
    chosen = next(_key(s.identity) for s in shards if votes[_key(s.identity)] == top)
    reference = next(s for s in shards if _key(s.identity) == chosen)
    lines = [f"foreign shard: {s.label} is not part of the same run as the others: {_difference(s, reference)}"
             for s in shards if _key(s.identity) != chosen]
    return [s for s in shards if _key(s.identity) == chosen], lines


def _duplicates(shards: list[ShardRun]) -> tuple[list[ShardRun], list[str]]:
    """One shard per index (the first given), and a line for each index given twice."""
    first: dict[int, ShardRun] = {}
    lines = []
    for s in shards:
        seen = first.get(s.index)
        if seen is None:
            first[s.index] = s
        elif seen.run_id == s.run_id:
            lines.append(f"duplicated shard: shard {s.index}/{s.total} is given twice: {seen.directory} and {s.directory} "
                         f"are copies of one run (run id {s.run_id})")
        else:
            lines.append(f"duplicated shard: shard {s.index}/{s.total} is given twice: {seen.directory} (run id "
                         f"{seen.run_id}) and {s.directory} (run id {s.run_id}); each cell must run once")
    return sorted(first.values(), key=lambda s: s.index), lines


def _missing(shards: list[ShardRun], total: int) -> list[str]:
    seen = {s.index for s in shards}
    return [f"missing shard: shard {i}/{total} is in none of the directories given" for i in range(1, total + 1)
            if i not in seen]


def _first_and_count(items: list[str]) -> list[str]:
    """One line for many of a kind: the first named, and how many in all."""
    if not items:
        return []
    return [items[0] + (f"; {len(items)} such cells in all" if len(items) > 1 else "")]


def _cells(shards: list[ShardRun], any_missing: bool) -> list[str]:
    """Every cell of the full plan in exactly one shard's plan."""
    full = shards[0].full
    owner: dict[str, ShardRun] = {}
    twice: list[str] = []
    stranger: list[str] = []
    known = set(full)
    for s in shards:
        for test_id in s.manifest.cells:
            if test_id not in known:
                stranger.append(f"foreign shard: {s.label} plans {test_id[:200]}, a cell its full plan lacks")
            elif test_id in owner:
                twice.append(f"duplicated cell: {test_id[:200]} is planned by shard {owner[test_id].index} "
                             f"({owner[test_id].directory}) and shard {s.index} ({s.directory})")
            else:
                owner[test_id] = s
    lines = _first_and_count(stranger) + _first_and_count(twice)
    if not any_missing:
        unowned = [f"missing cell: {t[:200]} of the full plan is planned by no shard" for t in full if t not in owner]
        lines += _first_and_count(unowned)
    if lines and len({s.identity["durations"] for s in shards}) > 1:
        lines.append("  (the shards were split with different --shard-durations files: give every shard the same one)")
    return lines


def _interrupted(shard: ShardRun) -> list[str]:
    manifest = shard.manifest
    to_run = [t for t, c in manifest.cells.items() if c.skip is None]
    unfinished = [t for t in to_run if t not in manifest.finished]
    done = f"{len(to_run) - len(unfinished)} of {len(to_run)} cells finished"
    example = f"; e.g. {unfinished[0][:200]} did not" if unfinished else ""
    if manifest.complete is None:
        return [f"interrupted shard: {shard.label}: no completion marker (the session did not end normally); {done}{example}"]
    if manifest.complete.get("run_id") != manifest.run_id:
        return [f"interrupted shard: {shard.label}: its completion marker belongs to another run; {done}{example}"]
    if unfinished:
        return [f"interrupted shard: {shard.label}: {done} (a worker died or a test errored){example}"]
    return []


def _uneven(shards: list[ShardRun]) -> list[str]:
    """A backend that ran on some shards and not on others: the merged run would be neither."""
    lines = []
    names = sorted({name for s in shards for name in s.manifest.backends})
    for name in names:
        states = {s.index: s.available().get(name) for s in shards}
        if len(set(states.values())) > 1:
            missing = [s for s in shards if not states[s.index]]
            reason = missing[0].manifest.backends.get(name, {}).get("reason") or "not available"
            ran = ", ".join(str(s.index) for s in shards if states[s.index])
            lines.append(f"uneven shards: backend {name} did not run on {missing[0].label} ({reason[:200]}) "
                         f"but did on shard(s) {ran}")
    return lines


def check_shards(shards: list[ShardRun]) -> tuple[list[ShardRun], list[str]]:
    """The shards to merge, one per index in index order, and every problem found (none: mergeable)."""
    kept, lines = _foreign(shards)
    kept, duplicated = _duplicates(kept)
    lines += duplicated
    total = kept[0].total
    missing = _missing(kept, total)
    lines += missing
    lines += _cells(kept, bool(missing))
    for s in kept:
        lines += _interrupted(s)
    lines += _uneven(kept)
    return kept, lines


# --- writing ---------------------------------------------------------------------------------------

def merged_run_id(shards: list[ShardRun]) -> str:
    """The merged run's id: from the shards' (the same shards merged twice: the same id)."""
    return hashlib.sha256(("merge:" + ",".join(sorted(s.run_id for s in shards))).encode()).hexdigest()[:32]


def worst_first(records: list[CaseRecord]) -> list[CaseRecord]:
    """The records, each case's together and its worst first (in first-seen order of cases; stable
    among records of one severity): worst_per_case keeps the first of the worst, so what the merged
    run counts is what the shards' records say, and nothing is dropped."""
    groups: dict[tuple, list[CaseRecord]] = {}
    for r in records:
        groups.setdefault((r.backend, r.case_id, r.kind, r.feature_level), []).append(r)
    return [r for group in groups.values() for r in sorted(group, key=lambda r: severity(r.status))]


def _backends(shards: list[ShardRun]) -> dict[str, dict]:
    """The merged plan's backends: available where every shard had it (check_shards refuses
    uneven ones), requested where any asked for it, the versions the shards reported."""
    out: dict[str, dict] = {}
    for s in shards:
        for name, info in s.manifest.backends.items():
            entry = out.setdefault(name, {"available": True, "requested": False, "reason": "", "versions": []})
            entry["available"] = entry["available"] and bool(info.get("available", True))
            entry["requested"] = entry["requested"] or bool(info.get("requested"))
            entry["reason"] = entry["reason"] or info.get("reason", "")
            if info.get("version") and info["version"] not in entry["versions"]:
                entry["versions"].append(info["version"])
    for entry in out.values():
        versions = entry.pop("versions")
        if versions:
            entry["version"] = " | ".join(versions)
    return out


def _case_file(path: str | None, out: Path, copied: set[str]) -> str | None:
    """A record's case file, pointed at its copy in the merged directory."""
    if path is None or Path(path).name not in copied:
        return path
    return str(out / CASES_DIR / Path(path).name)


def _copy_files(source: Path, target: Path, skip: tuple[str, ...] = ()) -> set[str]:
    """The regular files of `source` (not links) copied into `target` under their names; a name
    already there keeps the first shard's file (Allure's are uuids; case files are named by
    content hash, so the same name is the same case)."""
    copied: set[str] = set()
    if not source.is_dir():
        return copied
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.name in skip or path.is_symlink() or not path.is_file():
            continue
        if not (target / path.name).exists():
            shutil.copyfile(path, target / path.name)
        copied.add(path.name)
    return copied


def _read_properties(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith(("#", "!")):
            out[key.strip()] = value.strip()
    return out


def _environment(shards: list[tuple[ShardRun, dict[str, str]]]) -> dict[str, str]:
    """One environment.properties for the merged Allure report: what every shard agrees on as it
    is, what differs per shard (`KEY.shardI`), and each shard's host and run id."""
    keys = sorted({k for _, props in shards for k in props})
    env: dict[str, str] = {"shards": str(len(shards))}
    for key in keys:
        values = {props.get(key) for _, props in shards}
        if len(values) == 1 and None not in values:
            env[key] = next(iter(values)) or ""
            continue
        for s, props in shards:
            if key in props:
                env[f"{key}.shard{s.index}"] = props[key]
    for s, _ in shards:
        env[f"shard{s.index}.host"] = s.manifest.host or "unknown"
        env[f"shard{s.index}.run_id"] = s.run_id
    return env


def _write_allure(shards: list[ShardRun], out: Path) -> None:
    """Every shard's Allure result files in one folder: its allure-results/, or the archive
    `dmlconform report` packs them into (harness.report.html.allure_results reads either)."""
    from harness.report.html import allure_results
    target = out / ALLURE_DIR
    target.mkdir(parents=True, exist_ok=True)
    environments = []
    for s in shards:
        with allure_results(s.directory) as folder:
            if folder is None:
                continue
            environments.append((s, _read_properties(folder / ALLURE_ENVIRONMENT)))
            _copy_files(folder, target, skip=(ALLURE_ENVIRONMENT,))
    lines = [f"{k}={v.replace(chr(10), ' ')}" for k, v in sorted(_environment(environments).items())]
    (target / ALLURE_ENVIRONMENT).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_merged(shards: list[ShardRun], out: Path, build: Path) -> str:
    """The merged reports directory, written in `build` with paths that name `out` (where it goes
    once complete); returns the merged run id."""
    run_id = merged_run_id(shards)
    results = build / RESULTS_DIR
    copied: set[str] = set()
    for s in shards:
        copied |= _copy_files(s.directory / CASES_DIR, build / CASES_DIR)
    owner = {t: s for s in shards for t in s.manifest.cells}
    cells: list[PlannedCell] = [owner[t].manifest.cells[t] for t in shards[0].full if t in owner]
    shard_list = [{"index": s.index, "total": s.total, "run_id": s.run_id, "host": s.manifest.host or "",
                   "directory": str(s.directory),
                   "backends": {n: i.get("version", "") for n, i in s.manifest.backends.items() if i.get("version")}}
                  for s in shards]
    write_plan(results, "main", run_id, cells, _backends(shards), merged=shard_list)
    writer = ResultWriter(results, "main", run_id=run_id)
    try:
        for r in worst_first([r for s in shards for r in s.records]):
            writer.write(dataclasses.replace(r, run_id=run_id, case_file=_case_file(r.case_file, out, copied)))
    finally:
        writer.close()
    finished = CellWriter(results, "main", run_id=run_id)
    try:
        for cell in cells:
            done: FinishedCell | None = owner[cell.test_id].manifest.finished.get(cell.test_id)
            if done is not None:
                finished.finished(done.test_id, done.cases)
    finally:
        finished.close()
    durations = {t: d for s in shards for t, d in s.durations.items()}
    if durations:
        write_durations(results / DURATIONS_FILE, durations)
    _write_allure(shards, build)
    exitstatus = max(int((s.manifest.complete or {}).get("exitstatus", 0)) for s in shards)
    write_complete(results, run_id, exitstatus)  # last, as in a run
    return run_id


def _output_problem(out: Path, directories: list[Path]) -> str | None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        return f"--output {out}: exists and is not a directory"
    if out.is_dir() and any(out.iterdir()):
        return f"--output {out}: exists and is not empty (merge writes a new reports directory)"
    if any(out.resolve() == d.resolve() for d in directories if d.exists()):
        return f"--output {out}: is one of the shards"
    return None


def merge_shards(directories: list[Path], out: Path) -> tuple[list[ShardRun], str]:
    """Check the shards in `directories` and write the merged reports directory `out`; MergeError
    with every problem (nothing written) when they do not make one complete run."""
    problem = _output_problem(out, directories)
    if problem:
        raise MergeError([problem])
    shards: list[ShardRun] = []
    lines: list[str] = []
    for directory in directories:
        try:
            shards.append(load_shard(directory))
        except MergeError as exc:
            lines += exc.lines
    if not shards:
        raise MergeError(lines or ["no shard directories given"])
    kept, problems = check_shards(shards)
    lines += problems
    if lines:
        raise MergeError(lines)
    build = out.parent / f".{out.name}.merging-{os.getpid()}"
    shutil.rmtree(build, ignore_errors=True)
    try:
        run_id = write_merged(kept, out, build)
        if out.is_dir():
            out.rmdir()  # empty (checked above)
        build.rename(out)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return kept, run_id

