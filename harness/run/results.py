"""Result records of a run: one JSON line per case, appended and flushed as soon as it is known,
so that an interrupted run keeps everything it finished."""
from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from harness.judge.status import severity


@dataclass
class CaseRecord:
    backend: str
    operator: str
    feature_level: str
    data_type: str
    kind: str          # valid | invalid | example | sweep
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


class ResultWriter:
    """Appends records to `<dir>/results-<worker>.jsonl` (one file per pytest-xdist worker)."""

    def __init__(self, directory: Path, worker: str = "main") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"results-{worker}.jsonl"
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, record: CaseRecord) -> None:
        line = json.dumps(asdict(record), sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()  # survives an interrupted or killed run (not a power cut)

    def close(self) -> None:
        self._file.close()


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


def read_records(directory: Path) -> Iterator[CaseRecord]:
    """Every record of a run directory; a torn last line (interrupted write) is skipped."""
    for path in sorted(directory.glob("results-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                yield CaseRecord(**json.loads(line))
            except (json.JSONDecodeError, TypeError):
                continue
