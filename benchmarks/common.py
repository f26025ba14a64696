"""Helpers shared by the benchmark scripts."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.model.descriptor import Case  # noqa: E402


def fresh(case: Case) -> Case:
    """The same case as a new object. The reference is memoised per case object
    (harness.reference.ReferenceMemo), so a benchmark that runs one case repeatedly would time
    the memo; every timed run takes a fresh copy instead."""
    return Case(case.descriptor, case.feature_level, dict(case.inputs), case.expect_valid, case.broken_rule, case.origin)
