"""Known hangs' probes run after every other cell of the run, or not at all on request.

A `hangs` expectation's cases are never sent (harness.run.case); only its probe is, to show whether
the device still hangs. On a GPU a hung probe is not harmless to its neighbours: while the driver
tears the hung channel down, every other process on the GPU stalls, and on an NVIDIA H200 with ten
such probes spread through the run, a FLOAT16 sweep and another divergence's probe running beside
them hung too and came out `flaky` and `stale` (docs/gpu-results.md, call 11). Probes of known
hangs can only hang or, where the hang is fixed, finish: running them together cannot change their
verdicts, only others'. So they are moved behind every other test of the session and, before
sending its case, each waits until every other planned cell of the run has finished (each
pytest-xdist worker notes the cells it has finished, skipped ones too, in a file of its own under
the reports directory). Or `--hang-probes skip`
leaves them out, as deqp-runner's skip lists do, each recorded `unsupported` with that reason:
not probed, never a pass.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

HANG_PROBE_CHOICES = ("last", "skip")
STALL_SECONDS = 300.0  # no other cell finished for this long: a worker died in a test; wait no longer
POLL_SECONDS = 0.5


def hang_probe_expectation(item: pytest.Item, expectations: dict[str, Any]) -> str | None:
    """The expectation id of a known hang's probe cell, or None for any other test."""
    callspec = getattr(item, "callspec", None)
    cell = callspec.params.get("probe_cell") if callspec is not None else None
    if not isinstance(cell, tuple):  # another test, or an empty parameter set (no probe to run)
        return None
    backend, expectation_id = cell
    found = expectations.get(backend)
    if found is None:
        return None
    return expectation_id if any(e.id == expectation_id and e.hangs for e in found.items) else None


def move_hang_probes_last(items: list[pytest.Item], is_hang_probe: Callable[[pytest.Item], bool]) -> int:
    """Reorder `items` in place: the known hangs' probes after every other test, each group in its
    own order (the same answer on every xdist worker, which must collect one list). Returns how
    many were moved. pytest-xdist's load scheduler hands out tests in this order, so a worker
    reaches a hang probe only once every other test has been handed out. (Placed right after the
    last conformance cell instead, in a session that also runs other tests, a worker reaching a
    probe could wait for the other worker's queue of cells, hundreds at a time: the clean-clone CI
    with that order took 25 minutes against 20, part of it other work on the machine.)"""
    probes = [item for item in items if is_hang_probe(item)]
    if probes:
        rest = [item for item in items if not is_hang_probe(item)]
        items[:] = rest + probes
    return len(probes)


def barrier_dir(reports_dir: Path, run_id: str) -> Path:
    """Where this run's workers note their finished cells (removed at the run's end)."""
    return reports_dir / ".finished-cells" / run_id


def note_finished(directory: Path, worker: str, test_id: str) -> None:
    """One finished cell of this worker, appended and flushed at once (one line, one write)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{worker}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(test_id) + "\n")


def finished_test_ids(directory: Path) -> set[str]:
    """The cells finished so far, across every worker's file (a line being written when read is
    skipped: the next poll reads it whole)."""
    done: set[str] = set()
    for path in directory.glob("*.jsonl"):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            try:
                test_id = json.loads(line)
            except ValueError:
                continue
            if isinstance(test_id, str):
                done.add(test_id)
    return done


def wait_for_other_cells(directory: Path, others: Iterable[str], stall_seconds: float = STALL_SECONDS,
                         poll_seconds: float = POLL_SECONDS, clock: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], None] = time.sleep) -> tuple[int, float]:
    """Block until every test id in `others` has a cell marker, or until none has been added for
    `stall_seconds` (a worker that died in a test never writes its marker; the run goes on and
    reports that cell missing). Returns (how many were still missing, seconds waited)."""
    waiting = set(others)
    start = last_progress = clock()
    missing = len(waiting)
    while waiting:
        waiting -= finished_test_ids(directory)
        now = clock()
        if len(waiting) < missing:
            missing, last_progress = len(waiting), now
        if not waiting or now - last_progress >= stall_seconds:
            break
        sleep(poll_seconds)
    return len(waiting), clock() - start
