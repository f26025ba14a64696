"""Writes the files of a finished (or deliberately unfinished) run for the gate's tests."""
from __future__ import annotations

from pathlib import Path

from harness.run.results import CaseRecord, ResultWriter
from harness.run.manifest import CellWriter, PlannedCell, write_complete, write_plan

RUN_ID = "test-run"


def write_run(reports: Path, records: list[CaseRecord], *, unfinished: set[str] = frozenset(), complete: bool = True,
              extra_cells: list[PlannedCell] = (), backends: dict | None = None, ran: dict[str, int] | None = None) -> None:
    """Records under reports/results plus a plan with one cell per test id of the records (or
    the record's backend/operator when it has none), cell markers for every cell except
    `unfinished`, and the completion marker when `complete`. `ran` overrides a cell's case count."""
    results = reports / "results"
    writer = ResultWriter(results, run_id=RUN_ID)
    for r in records:
        if not r.test_id:
            r.test_id = f"cell[{r.backend}-{r.operator}-{r.feature_level}-{r.data_type}-{r.kind}]"
        writer.write(r)
    writer.close()
    counts: dict[str, int] = {}
    cells: dict[str, PlannedCell] = {}
    for r in records:
        counts[r.test_id] = counts.get(r.test_id, 0) + 1
        cells[r.test_id] = PlannedCell(r.test_id, r.backend, r.operator, r.feature_level, r.data_type, r.kind, 25, False)
    for c in extra_cells:
        cells[c.test_id] = c
    names = backends or {c.backend: {"available": True, "requested": False, "reason": ""} for c in cells.values()}
    write_plan(results, "main", RUN_ID, list(cells.values()), names)
    markers = CellWriter(results, "main", run_id=RUN_ID)
    for tid, cell in cells.items():
        if tid not in unfinished and cell.skip is None:
            markers.finished(tid, (ran or {}).get(tid, counts.get(tid, 0)))
    markers.close()
    if complete:
        write_complete(results, RUN_ID, 0)
