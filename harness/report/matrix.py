"""The conformance matrix: per backend, operator x feature level x data type, each cell pass / fail /
unsupported / not run with the counts behind it; written as JSON (machines), Markdown (CI summaries)
and a self-contained HTML page (colour, no network). `compare_matrices` diffs two runs' matrix.json,
read by `load_matrix` (bounded and checked: harness.run.record_schema)."""
from __future__ import annotations

import html
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.judge.status import Status, is_failure
# matrix.json is read (bounded, checked) with the other run files; imported from here as before
from harness.run.record_schema import MAX_MATRIX_BYTES, MATRIX_CELL_FIELDS, check_matrix, load_matrix  # noqa: F401
from harness.run.results import CaseRecord, worst_per_case
from harness.spec.model import OperatorSpec, SpecSet
from harness.generate.types import coverage_plan, primary_type

STATES = ["fail", "expected", "pass", "unsupported", "not run"]
INVALID_COLUMN = "invalid descriptors"
COLOURS = {"fail": "#e53935", "expected": "#fb8c00", "pass": "#43a047", "unsupported": "#9e9e9e", "not run": "#eeeeee"}


def cell_state(counts: dict[str, int]) -> str:
    if any(n and is_failure(s) for s, n in counts.items()):
        return "fail"
    if counts.get(Status.EXPECTED_DIVERGENCE):
        return "expected"
    if any(counts.get(s) for s in (Status.PASS, Status.REJECTED_INVALID, Status.UNSPECIFIED)):
        return "pass"
    if counts.get(Status.UNSUPPORTED):
        return "unsupported"
    return "not run"


@dataclass
class Cell:
    backend: str
    operator: str
    level: str
    data_type: str
    counts: dict[str, int]

    @property
    def state(self) -> str:
        return cell_state(self.counts)

    @property
    def key(self) -> str:
        return f"{self.backend}|{self.operator}|{self.level}|{self.data_type}"


def _plan_type(spec: OperatorSpec, types: dict[str, str | None]) -> str:
    """The primary type of a coverage-plan cell: never None (a valid cell's output has a type)."""
    t = primary_type(spec, types)
    assert t is not None
    return t


def build_matrix(records: list[CaseRecord], specs: SpecSet) -> list[Cell]:
    """Cells of every (backend, level) that ran, over every data type of each operator's table there.
    Invalid cases count in the cell of their primary input type; a case is counted once, as its worst record."""
    counts: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    levels: dict[str, set[str]] = defaultdict(set)
    for r in worst_per_case(records):
        column = INVALID_COLUMN if r.kind == "invalid" else r.data_type
        counts[(r.backend, r.operator, r.feature_level, column)][r.status] += 1
        levels[r.backend].add(r.feature_level)
    cells = []
    for backend in sorted(levels):
        for level in sorted(levels[backend], key=specs.catalog.level_order):
            for op in sorted(specs.operators):
                spec = specs.operator(op)
                types: set[str] = set()
                if spec.has_table_at(level):
                    types = {_plan_type(spec, plan[0]) for plan in coverage_plan(spec, level)}
                types |= {k[3] for k in counts if k[:3] == (backend, op, level) and k[3] != "?"}
                for t in sorted(types, key=lambda n: specs.catalog.dtype(n).enum if n in specs.catalog.data_types else 99):  # invalid column last
                    cells.append(Cell(backend, op, level, t, dict(counts.get((backend, op, level, t), {}))))
    return cells


def liberty_totals(records: list[CaseRecord]) -> dict[str, dict[str, dict[str, int]]]:
    """Per backend, per precision-model liberty: how many cases and result elements needed it
    (what a vendor reads to see which D3D liberties a device takes)."""
    totals: dict[str, dict[str, dict[str, int]]] = {}
    for r in worst_per_case(records):
        for liberty, elements in (r.liberties or {}).items():
            entry = totals.setdefault(r.backend, {}).setdefault(liberty, {"cases": 0, "elements": 0})
            entry["cases"] += 1
            entry["elements"] += int(elements)
    return totals


def matrix_json(cells: list[Cell], liberties: dict | None = None) -> dict:
    totals: dict[str, int] = defaultdict(int)
    for c in cells:
        totals[c.state] += 1
    return {"format": 1, "totals": dict(totals), "liberties": liberties or {},
            "cells": [{"backend": c.backend, "operator": c.operator, "feature_level": c.level, "data_type": c.data_type,
                       "state": c.state, "counts": c.counts} for c in cells]}


def _columns(group: list[Cell]) -> list[str]:
    names = {c.data_type for c in group}
    return sorted(names - {INVALID_COLUMN}) + ([INVALID_COLUMN] if INVALID_COLUMN in names else [])


def _grouped(cells: list[Cell]):
    by: dict[tuple[str, str], list[Cell]] = defaultdict(list)
    for c in cells:
        by[(c.backend, c.level)].append(c)
    return by


def matrix_markdown(cells: list[Cell]) -> str:
    symbols = {"fail": "FAIL", "expected": "known", "pass": "pass", "unsupported": "n/s", "not run": "-"}
    out = ["# Conformance matrix", ""]
    totals = matrix_json(cells)["totals"]
    out.append("Cells: " + ", ".join(f"{s} {totals.get(s, 0)}" for s in STATES))
    for (backend, level), group in sorted(_grouped(cells).items()):
        types = _columns(group)
        ops = sorted({c.operator for c in group})
        out += ["", f"## {backend}, FL {level}", "", "| operator | " + " | ".join(types) + " |", "|---|" + "---|" * len(types)]
        index = {(c.operator, c.data_type): c for c in group}
        for op in ops:
            row = []
            for t in types:
                c = index.get((op, t))
                if c is None:
                    row.append(" ")
                else:
                    n = sum(c.counts.values())
                    row.append(f"{symbols[c.state]} ({n})" if n else symbols[c.state])
            out.append(f"| {op} | " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


def matrix_html(cells: list[Cell], title: str = "dmlconform conformance matrix") -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>",
             "body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}",
             "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:center}th{background:#f5f5f5}",
             "td.op{text-align:left;font-family:monospace}.legend span{display:inline-block;padding:2px 8px;margin-right:6px}",
             "</style></head><body>", f"<h1>{html.escape(title)}</h1><p class='legend'>"]
    for s in STATES:
        parts.append(f"<span style='background:{COLOURS[s]}'>{s}</span>")
    totals = matrix_json(cells)["totals"]
    parts.append("</p><p>" + ", ".join(f"{s}: {totals.get(s, 0)}" for s in STATES) + " cells</p>")
    for (backend, level), group in sorted(_grouped(cells).items()):
        types = _columns(group)
        index = {(c.operator, c.data_type): c for c in group}
        parts.append(f"<h2>{html.escape(backend)} &middot; FL {html.escape(level)}</h2><table><tr><th>operator</th>")
        parts += [f"<th>{html.escape(t)}</th>" for t in types]
        parts.append("</tr>")
        for op in sorted({c.operator for c in group}):
            parts.append(f"<tr><td class='op'>{html.escape(op)}</td>")
            for t in types:
                c = index.get((op, t))
                if c is None:
                    parts.append("<td></td>")
                    continue
                tip = html.escape(", ".join(f"{k}: {v}" for k, v in sorted(c.counts.items())) or "no cases")
                n = sum(c.counts.values())
                parts.append(f"<td style='background:{COLOURS[c.state]}' title='{tip}'>{c.state}{f' ({n})' if n else ''}</td>")
            parts.append("</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


def liberties_markdown(liberties: dict[str, dict[str, dict[str, int]]]) -> str:
    """The liberties section: per backend, each D3D liberty its results needed (cases, elements)."""
    out = ["", "## Liberties taken (D3D precision model)", ""]
    if not liberties:
        return "\n".join(out + ["No result needed a liberty of the precision model: every result equals the exact one.", ""])
    out += ["| backend | liberty | cases | elements |", "|---|---|---|---|"]
    for backend in sorted(liberties):
        for liberty, n in sorted(liberties[backend].items()):
            out.append(f"| {backend} | {liberty} | {n['cases']} | {n['elements']} |")
    return "\n".join(out) + "\n"


def write_matrix(cells: list[Cell], out_dir: Path, liberties: dict | None = None) -> dict[str, Path]:
    """matrix.json, matrix.md and matrix.html of the cells (and the liberties each backend took)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "matrix.json", "md": out_dir / "matrix.md", "html": out_dir / "matrix.html"}
    paths["json"].write_text(json.dumps(matrix_json(cells, liberties), indent=1, sort_keys=True))
    paths["md"].write_text(matrix_markdown(cells) + liberties_markdown(liberties or {}))
    page = matrix_html(cells)
    if liberties:
        rows = "".join(f"<tr><td>{html.escape(b)}</td><td class='op'>{html.escape(lib)}</td><td>{n['cases']}</td><td>{n['elements']}</td></tr>"
                       for b in sorted(liberties) for lib, n in sorted(liberties[b].items()))
        page = page.replace("</body>", "<h2>Liberties taken (D3D precision model)</h2><table><tr><th>backend</th>"
                            f"<th>liberty</th><th>cases</th><th>elements</th></tr>{rows}</table></body>")
    paths["html"].write_text(page)
    return paths


def _state_known(state: str) -> bool:
    return state in STATES


def _failing(state: str) -> bool:
    """A cell that fails: `fail`, or a state this version does not know (never read as a pass)."""
    return state == "fail" or not _state_known(state)


def compare_matrices(base: dict, new: dict) -> dict[str, list[str]]:
    """New failures, fixed cells, cells that disappeared or appeared, between two matrix.json files.

    A new failure is a cell failing in `new` that was absent from `base` or not failing there. A
    state outside the matrix's vocabulary (STATES) in either file is listed with the new failures
    too (`dmlconform compare` exits 1 on them): a state this version cannot read is never a pass."""
    def index(m: dict) -> dict[str, str]:
        return {f"{c['backend']} {c['operator']} FL{c['feature_level']} {c['data_type']}": c["state"] for c in m.get("cells", [])}
    a, b = index(base), index(new)
    out: dict[str, list[str]] = {"new failures": [], "fixed": [], "disappeared": [], "appeared": [], "other changes": []}
    known = ", ".join(STATES)
    for key in sorted(set(a) | set(b)):
        was, now = a.get(key), b.get(key)
        unknown = [f"{name} matrix has unknown state {state[:40]!r}" for name, state in (("the base", was), ("the new", now))
                   if state is not None and not _state_known(state)]
        if unknown:
            out["new failures"].append(f"{key}: {'; '.join(unknown)} (known states: {known}): counted as a failure")
        elif now is None:
            out["disappeared"].append(f"{key} (was {was})")
        elif _failing(now) and (was is None or not _failing(was)):
            out["new failures"].append(f"{key}: {was or 'absent'} -> {now}")
        elif was is None:
            out["appeared"].append(f"{key} ({now})")
        elif was != now:
            if _failing(was):
                out["fixed"].append(f"{key}: {was} -> {now}")
            else:
                out["other changes"].append(f"{key}: {was} -> {now}")
    return out
