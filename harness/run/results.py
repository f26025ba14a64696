"""Result records of a run: one JSON line per case, appended and flushed as soon as it is known,
so that an interrupted run keeps everything it finished, and gzip-compressed once the run has
ended normally (compress_records; every reader takes both forms: record_files).

Every record carries the run id of the run that wrote it (the id of its plan, harness.run.manifest),
so that the gate can refuse records of another run mixed into a results directory. Records are read
back through harness.run.record_schema: a malformed line is a RunFileError `file:line: message`."""
from __future__ import annotations

from contextlib import contextmanager

import gzip
import json
import os
import shutil
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from harness.judge.status import severity
from harness.run.record_schema import GZIP_SUFFIX, RUN_ID_ENV, check_record, read_lines, torn_tail

RESULTS_GLOB = "results-*.jsonl"            # being written (or an interrupted run's)
COMPRESSED_GLOB = "results-*.jsonl.gz"      # a finished run's, compressed (compress_records)
CELLS_PLAIN_GLOB = "cells-*.jsonl"          # finished-cell markers (harness.run.manifest), compressed with the records


@dataclass
class CaseRecord:
    backend: str
    operator: str
    feature_level: str
    data_type: str
    kind: str          # valid | invalid | example | sweep | probe
    status: str        # a diff status, or expected-divergence
    case_id: str
    summary: str
    test_id: str = ""
    rule: str | None = None
    tags: list[str] = field(default_factory=list)
    case_file: str | None = None
    expectation: str | None = None
    elements: int = 0
    mismatches: int = 0
    unspecified: int = 0
    liberties: dict[str, int] = field(default_factory=dict)  # precision-model liberty -> elements that needed it
    duration_s: float = 0.0  # wall seconds the backend took on the case (both runs of a rerun case)
    stages: dict[str, float] = field(default_factory=dict)  # backend stage -> seconds (DirectML: create, compile, ...)
    max_ulps: int | None = None  # the largest ULP distance of an accepted element (harness.judge.diff._error_seen)
    max_abs: float | None = None  # the largest |got - expected| of an accepted element
    bound_use: float | None = None  # the largest share of an explicit bound an accepted element used
    run_id: str | None = None  # the run that wrote it (None: read from an older dmlconform's results)
    source: str = field(default="", compare=False, repr=False)  # `file:line` it was read from (never written)


# The run id of the plan each results directory got in this process (harness.run.manifest.write_plan):
# a writer created before the plan (the plugin makes its writers at configure, the plan at collection)
# stamps the run id its process planned under.
_PLANNED_RUNS: dict[Path, str] = {}


def note_run_id(directory: Path, run_id: str) -> None:
    """The run id this process wrote a plan under in `directory` (write_plan calls it)."""
    _PLANNED_RUNS[Path(directory).resolve()] = run_id


def planned_run_id(directory: Path) -> str | None:
    """The run id records written to `directory` by this process belong to: its plan's, else
    DMLCONFORM_RUN_ID, else None (unknown: the records are written without one)."""
    return _PLANNED_RUNS.get(Path(directory).resolve()) or os.environ.get(RUN_ID_ENV) or None


class RecordingError(RuntimeError):
    """The run could not write what it found (a results folder made read-only or full mid-run):
    it stops at once, one line says why, and without its completion marker the gate fails."""


@contextmanager
def recording(path: Path) -> Iterator[None]:
    """Writes to `path` inside: an OSError is a RecordingError naming the file and the cause."""
    try:
        yield
    except OSError as exc:
        raise RecordingError(f"cannot write {path}: {exc.strerror or exc}") from None


class ResultWriter:
    """Appends records to `<dir>/results-<worker>.jsonl` (one file per pytest-xdist worker), each
    with the run id: `run_id` if given, else the one this process planned under (planned_run_id)."""

    def __init__(self, directory: Path, worker: str = "main", run_id: str | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.run_id = run_id
        self.path = directory / f"results-{worker}.jsonl"
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, record: CaseRecord) -> None:
        body = asdict(record)
        del body["source"]
        for unmeasured in ("max_ulps", "max_abs", "bound_use"):  # most cases: nothing differed (read back as None)
            if body[unmeasured] is None:
                del body[unmeasured]
        run_id = record.run_id or self.run_id or planned_run_id(self.directory)
        if run_id is None:
            del body["run_id"]
        else:
            body["run_id"] = run_id
        line = json.dumps(body, sort_keys=True)
        with self._lock, recording(self.path):
            self._file.write(line + "\n")
            self._file.flush()  # survives an interrupted or killed run (not a power cut)

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass  # a write that failed has been reported (RecordingError): closing adds nothing


def worst_per_case(records: list[CaseRecord]) -> list[CaseRecord]:
    """One record per (backend, case, kind, level): the worst one (harness.judge.status.SEVERITY),
    in first-seen order, so that no later crash or mismatch of a case retried can vanish."""
    chosen: dict[tuple, CaseRecord] = {}
    for r in records:
        key = (r.backend, r.case_id, r.kind, r.feature_level)
        current = chosen.get(key)
        if current is None or severity(r.status) < severity(current.status):
            chosen[key] = r
    return list(chosen.values())


def record_files(directory: Path) -> list[Path]:
    """The records files of a run directory, one per worker, in worker order: `results-W.jsonl`
    (being written, or left by an interrupted run) or `results-W.jsonl.gz` (compressed at the run's
    end). Where both exist (a compression cut short between its rename and its unlink) the
    `.jsonl` is read: it is the whole of what the worker wrote, and the records are never read twice."""
    return jsonl_files(directory, "results")


def jsonl_files(directory: Path, kind: str) -> list[Path]:
    """`kind-W.jsonl` or, where there is none, `kind-W.jsonl.gz`, one per worker, in worker order
    (record_files; the finished-cell markers `cells-W.jsonl` are compressed at the run's end too)."""
    plain = {path.name: path for path in directory.glob(f"{kind}-*.jsonl")}
    compressed = [path for path in directory.glob(f"{kind}-*.jsonl{GZIP_SUFFIX}") if path.name[:-len(GZIP_SUFFIX)] not in plain]
    return sorted([*plain.values(), *compressed], key=lambda path: path.name.removesuffix(GZIP_SUFFIX))


def read_records(directory: Path) -> Iterator[CaseRecord]:
    """Every record of a run directory (`.jsonl` or `.jsonl.gz`: record_files), each knowing the
    `file:line` it came from. A malformed line or a damaged gzip stream is a RunFileError
    (harness.run.record_schema); a torn last line (an interrupted write) is skipped, and
    load_manifest notes it."""
    for path in record_files(directory):
        for number, fields in read_lines(path, check_record):
            yield CaseRecord(**fields, source=f"{path}:{number}")


def record_dicts(directory: Path) -> list[dict]:
    """Every record of a run directory as the JSON object it was written as (without `source`),
    read and checked as read_records reads them: for scripts and tests that read the .jsonl files
    line by line before a finished run's records were compressed."""
    out = []
    for record in read_records(directory):
        body = asdict(record)
        del body["source"]
        out.append(body)
    return out


def compress_records(directory: Path) -> list[Path]:
    """gzip each `results-W.jsonl` of a finished run into `results-W.jsonl.gz` (records compress
    about 25 to 1; `make run` writes 140 MB of them), and each `cells-W.jsonl` of finished-cell
    markers likewise (4.6 MB for `make run`: a test id and the run id a line). Records are appended line by line
    while the run goes (an interrupted run keeps them), so this runs once it has ended: the
    controller's session end, or `dmlconform report`. A file that ends inside a line (an
    interrupted write) is left as it is, so that the gate still names it. The `.gz` is written
    under a temporary name and renamed before the `.jsonl` goes: nothing is lost at any point.
    Returns the compressed files."""
    done: list[Path] = []
    for path in sorted([*directory.glob(RESULTS_GLOB), *directory.glob(CELLS_PLAIN_GLOB)]):
        if path.is_symlink() or not path.is_file() or torn_tail(path):
            continue
        target = path.with_name(path.name + GZIP_SUFFIX)
        _gzip_file(path, target)
        try:
            path.unlink()
        except OSError:  # still open elsewhere (Windows): the plain file stays the one read
            target.unlink(missing_ok=True)
            continue
        done.append(target)
    return done


def _gzip_file(source: Path, target: Path) -> None:
    """`source` gzip-compressed into `target` (a temporary name, then a rename); the header holds
    no name and no time, so that the same records give the same bytes."""
    partial = target.with_name(target.name + ".tmp")
    with source.open("rb") as raw, partial.open("wb") as out:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as packed:
            shutil.copyfileobj(raw, packed, 1 << 20)
    os.replace(partial, target)
