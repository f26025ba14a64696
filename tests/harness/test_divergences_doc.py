"""docs/divergences.md is what the expectation files say (harness.report.divergences), and every
case file an expectation names exists: a reader who follows a divergence to its case can replay it."""
from __future__ import annotations

from pathlib import Path

from harness.report.divergences import CASE_FILES, divergence_document
from harness.run.registry import expectations_dir

ROOT = Path(__file__).resolve().parents[2]


def test_the_divergence_list_is_current():
    want = divergence_document(expectations_dir("directml"))
    assert (ROOT / "docs" / "divergences.md").read_text() == want, \
        "docs/divergences.md is stale: python -m harness.report.divergences > docs/divergences.md"


def test_every_case_file_an_expectation_names_exists():
    directory = expectations_dir("directml")
    named = {path for f in directory.rglob("*.yaml") for path in CASE_FILES.findall(f.read_text())}
    assert named, "the expectation files name case files"
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, missing
