"""Allure integration: labels that make the report navigable, attachments on failure, and the
run-level files (environment.properties, categories.json).

Labels: parent suite = backend, epic = operator, feature = feature level, story = data type,
tags = layout features (strided, broadcast, in-place, ...) and the case kind. allure-pytest turns
the calls into result files when pytest runs with --alluredir; without it they do nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.model.descriptor import Case
    from harness.run.case import Outcome
    from harness.spec.model import OperatorSpec

import io
import json
import re
from pathlib import Path

import numpy as np
import yaml

from harness.judge.status import DESCRIPTIONS, Status, status_tag

STATUS_LABEL = "dmlconform.status"  # the worst status of a test's cases, set by the suite
_CATEGORY_STATUSES = {  # Allure's own result statuses that each of ours shows up as
    Status.MISMATCH: ["failed"], Status.REJECTED_VALID: ["failed"], Status.ACCEPTED_INVALID: ["failed"],
    Status.CRASHED: ["failed", "broken"], Status.FLAKY: ["failed"], Status.STALE: ["failed"], Status.EXPECTED_DIVERGENCE: ["skipped"],
    Status.UNSUPPORTED: ["skipped"], Status.UNSPECIFIED: ["passed", "skipped"],
}


def category_rules() -> list[dict]:
    """Allure 3 categories (the report's config): one per status, matched on the status label
    the suite sets, never on message text, and grouped by backend and operator. Not by message
    (Allure's default): every test's message is its own (its cases, its tables), so the grouping
    gave one group per test and held every message twice more (a third of a report's bytes)."""
    return [{"id": status.value, "name": status.value, "description": DESCRIPTIONS[status],
             "matchers": {"labels": {STATUS_LABEL: f"^{status.value}$"}},
             "groupBy": [{"label": "parentSuite"}, {"label": "epic"}], "groupByMessage": False}
            for status in _CATEGORY_STATUSES]


def _compat_categories() -> list[dict]:
    """categories.json for Allure 2-style readers: the same categories, on the status tag that starts
    the suite's messages after pytest's `Failed: ` / `Skipped: ` (plain regexes: JavaScript has no
    inline flags such as `(?s)`)."""
    return [{"name": status.value, "description": DESCRIPTIONS[status], "matchedStatuses": statuses,
             "messageRegex": "^(\\w+: )?" + re.escape(status_tag(status)) + "[\\s\\S]*"} for status, statuses in _CATEGORY_STATUSES.items()]


def label_status(status: str) -> None:
    """The worst status of the test's cases, as the label the categories match on."""
    allure = _allure()
    if allure is not None:
        allure.dynamic.label(STATUS_LABEL, str(status))


def _allure():
    try:
        import allure
        return allure
    except ImportError:  # pragma: no cover - allure-pytest is a dependency
        return None


def label_test(backend: str, operator: str, level: str | None, data_type: str | None, kind: str,
               spec_path: Path, parameters: dict[str, str]) -> None:
    allure = _allure()
    if allure is None:
        return
    allure.dynamic.parent_suite(backend)
    allure.dynamic.suite(operator)
    allure.dynamic.epic(operator)
    if level:
        allure.dynamic.feature(f"FL {level}")
    if data_type:
        allure.dynamic.story(data_type)
    allure.dynamic.tag(kind)
    allure.dynamic.link(spec_path.resolve().as_uri(), name=f"spec {spec_path.name}")
    for name, value in parameters.items():
        allure.dynamic.parameter(name, value)


def add_tags(tags: set[str]) -> None:
    allure = _allure()
    if allure is None:
        return
    for tag in sorted(tags):
        allure.dynamic.tag(tag)


def _small_png(png: bytes, colors: int = 32) -> bytes:
    """The chart as a 32-colour palette PNG: the same picture in a quarter of the bytes (17 KB to
    4.5 KB), which counts where every divergence of a run carries one; the RGBA original when
    Pillow (matplotlib's own dependency) cannot do it."""
    try:
        from PIL import Image
        image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT)
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=True)
    except Exception:  # noqa: BLE001 - a smaller picture is an optimisation, never a failure
        return png
    return out.getvalue() if len(out.getvalue()) < len(png) else png


def ulp_histogram_png(ulps: np.ndarray, title: str) -> bytes:
    """A PNG bar chart of how many elements are off by how many ULPs (log-2 buckets)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ulps = np.asarray(ulps, dtype=np.int64)
    edges = [0, 1, 2, 3, 5, 9, 17, 65, 257, 1025, 1 << 16, 1 << 62]
    labels = ["0", "1", "2", "3-4", "5-8", "9-16", "17-64", "65-256", "257-1024", "1025-65535", ">=65536"]
    counts = [int(((ulps >= lo) & (ulps < hi)).sum()) for lo, hi in zip(edges[:-1], edges[1:])]
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=90)
    ax.bar(labels, counts, color=["#4caf50"] + ["#ff9800"] * 2 + ["#f44336"] * (len(labels) - 3))
    ax.set_yscale("symlog")
    ax.set_xlabel("ULP distance from the reference")
    ax.set_ylabel("elements")
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return _small_png(out.getvalue())


def attach_outcome(outcome: Outcome, spec: OperatorSpec, case: Case) -> None:
    """On a failure or divergence: the case file, the mismatch table, the descriptor, the ULP picture
    (the suite attaches a few per test: harness.run.conformance.MAX_ATTACHED)."""
    allure = _allure()
    if allure is None:
        return
    t = allure.attachment_type
    if outcome.case_file is not None:
        allure.attach.file(str(outcome.case_file), name="case file (replay)", attachment_type=t.YAML)
    allure.attach(outcome.message, name="result", attachment_type=t.TEXT)
    table = outcome.diff.table()
    if table:
        allure.attach(table, name="mismatch table", attachment_type=t.TEXT)
    allure.attach(yaml.safe_dump(case.descriptor.to_dict(), sort_keys=False), name="descriptor", attachment_type=t.YAML)
    ulps = outcome.diff.ulp_errors
    if ulps is not None and outcome.diff.data_type and spec.catalog.dtype(outcome.diff.data_type).is_float:
        png = ulp_histogram_png(ulps, f"{spec.name} {outcome.diff.data_type}: {outcome.status}")
        allure.attach(png, name="ULP error distribution", attachment_type=t.PNG)


def attach_liberties(outcome: Outcome) -> None:
    """On a pass that needed liberties of the precision model: which, and the elements that took them
    (with --report-detail full only: the records and the matrix count every liberty anyway)."""
    allure = _allure()
    if allure is None:
        return
    allure.attach(outcome.message, name="liberties taken (D3D precision model)", attachment_type=allure.attachment_type.TEXT)


def write_run_files(alluredir: Path, environment: dict[str, str]) -> None:
    """environment.properties and categories.json of the run."""
    alluredir.mkdir(parents=True, exist_ok=True)
    lines = [f"{k.replace(' ', '.')}={str(v).replace(chr(10), ' ')}" for k, v in sorted(environment.items())]
    (alluredir / "environment.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (alluredir / "categories.json").write_text(json.dumps(_compat_categories(), indent=2), encoding="utf-8")
