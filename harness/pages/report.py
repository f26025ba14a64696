"""The check-docs report: JSON (for tools) and Markdown (for people): per operator, the pages
read, tables and cells compared, each difference with what the spec and each page say, the
differences the spec records with their resolution, and the pages' own defects."""
from __future__ import annotations

from harness.pages.drift import OperatorCheck


def report_json(checks: list[OperatorCheck], without_spec: list[str], without_page: list[str], skipped: list[str],
                defects: list[str]) -> dict:
    """`defects`: every page's own defects, of checked operators or not (a docs regression report
    wants them all)."""
    drift = sum(len(c.unrecorded) for c in checks)
    return {
        "summary": {"operators": len(checks), "pages": sum(len(c.pages) for c in checks),
                    "tables": sum(c.tables for c in checks), "cells": sum(c.cells for c in checks),
                    "drift": drift, "recorded": sum(len(c.drift) - len(c.unrecorded) for c in checks),
                    "page_defects": len(defects)},
        "operators": [{"operator": c.operator, "pages": c.pages, "tables": c.tables, "cells": c.cells,
                       "drift": [{"key": k, "spec": d["spec"], "pages": d["pages"]} for k, d in c.drift.items() if not d["recorded"]],
                       "recorded": [{"key": k, "spec": d["spec"], "pages": d["pages"], "resolution": d["recorded"]}
                                    for k, d in c.drift.items() if d["recorded"]],
                       } for c in checks],
        "pages_without_spec": without_spec,
        "specs_without_page": without_page,
        "skipped_files": skipped,
        "page_defects": defects,
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "(empty)"


def report_markdown(data: dict) -> str:
    s = data["summary"]
    lines = ["# Spec drift against the API pages", "",
             f"{s['operators']} operator(s), {s['pages']} page(s), {s['tables']} table(s), {s['cells']} cell(s) compared: "
             f"**{s['drift']} drift**, {s['recorded']} recorded difference(s), {s['page_defects']} page defect(s).", ""]
    for op in data["operators"]:
        if not (op["drift"] or op["recorded"]):
            continue
        lines += [f"## {op['operator']}", "", f"Pages: {', '.join(op['pages'])}.", ""]
        if op["drift"]:
            lines += ["| drift | spec | page(s) |", "| --- | --- | --- |"]
            for d in op["drift"]:
                says = "<br>".join(f"{label}: {_cell(value)}" for label, value in d["pages"].items())
                lines.append(f"| `{d['key']}` | {_cell(d['spec'])} | {says} |")
            lines.append("")
        for d in op["recorded"]:
            reasons = "; ".join(sorted(set(d["resolution"].values())))
            lines.append(f"- recorded `{d['key']}`: spec {d['spec']!r}, page(s) "
                         f"{', '.join(f'{k}: {v!r}' for k, v in d['pages'].items())}. {reasons}")
        lines.append("")
    if data["page_defects"]:
        lines += ["## Page defects (not drift)", ""] + [f"- {d}" for d in data["page_defects"]] + [""]
    if data["pages_without_spec"]:
        lines += [f"Pages of operators without a spec (not checked): {len(data['pages_without_spec'])}: "
                  + ", ".join(data["pages_without_spec"]), ""]
    if data["specs_without_page"]:
        lines += ["Specs without a page among the inputs: " + ", ".join(data["specs_without_page"]), ""]
    if data["skipped_files"]:
        lines += [f"{len(data['skipped_files'])} file(s) skipped: no operator's API page (enum and helper-struct pages).", ""]
    return "\n".join(lines)
