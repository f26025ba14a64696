"""The list of every known divergence, from the expectation files: docs/divergences.md.

Each backend's expectation files (backends/expectations/BACKEND.yaml, BACKEND/*.yaml and an older
DLL's BACKEND@VERSION.yaml) are the record of what a backend does that the pages do not say, each
with its reason, its probe and usually a case file. This renders them as one document, by backend
and operator, so that a driver or spec reader sees them without reading YAML; a test keeps the
document equal to what the files say (`python -m harness.report.divergences > docs/divergences.md`).
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from harness.judge.expectations import Expectation, load_expectations

CASE_FILES = re.compile(r"docs/(?:gpu-)?cases/[\w./@+-]+?\.yaml")


def _names(directory: Path) -> list[str]:
    """The backends (and DLL instances) that have expectation files in `directory`."""
    names = {p.stem for p in directory.glob("*.yaml")} | {p.name for p in directory.iterdir() if p.is_dir()}
    return sorted(names, key=lambda n: (n.partition("@")[0], n))


def _line(item: Expectation) -> str:
    kind = item.status if item.status != "mismatch" else "wrong values"
    facts = [kind] + ([f"rule {item.rule}"] if item.rule else []) + ([", ".join(item.data_types)] if item.data_types else [])
    if item.devices:
        facts.append("only on " + ", ".join(item.devices))
    if item.probe is None:
        facts.append("no probe")
    cases = sorted(set(CASE_FILES.findall(item.why)))
    why = " ".join(item.why.split())
    return f"- `{item.id}` ({'; '.join(facts)}){': ' + ', '.join(cases) if cases else ''}  \n  {why}"


def divergence_document(directory: Path) -> str:
    """Markdown: every expectation of every backend in `directory`, grouped by backend and operator."""
    out = ["# Known divergences", "",
           "Generated from `backends/expectations/` by `python -m harness.report.divergences` (a test keeps it",
           "current). Each entry is an expectation: what the backend does where the page says otherwise,",
           "why, on which devices, and its case files; each with a probe unless marked (the gate fails",
           "when a probe stops reproducing). An older DLL's entries add to its backend's."]
    counts = []
    for name in _names(directory):
        own = load_expectations(name, directory)
        if not own.items:
            continue
        counts.append(f"{name} {len(own.items)}")
        out += [f"## {name}", ""]
        by_operator: dict[str, list[Expectation]] = defaultdict(list)
        for item in own.items:
            by_operator[item.operator].append(item)
        for operator in sorted(by_operator):
            out += [f"### {operator}", ""] + [_line(item) for item in by_operator[operator]] + [""]
    out[6:6] = ["", "Expectations per backend: " + ", ".join(counts) + ".", ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    from harness.run.registry import expectations_dir
    directory = expectations_dir("directml")
    assert directory is not None  # the directml backend ships its expectation files
    print(divergence_document(directory), end="")
