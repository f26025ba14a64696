"""`--feature-level ladder`: each operator at every level where its tables change (up to a
device's own level, at which the device judges every descriptor), instead of each backend at
its own level only; `own` is the default; a keyword stands alone."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.run.options import option_problem
from tests.helpers import SPECS

ROOT = Path(__file__).resolve().parents[2]


def test_keywords_are_options_of_their_own():
    assert option_problem(SPECS, levels=["ladder"]) is None and option_problem(SPECS, levels=["own"]) is None
    assert "a keyword stands alone" in option_problem(SPECS, levels=["ladder", "5.0"])
    assert option_problem(SPECS, levels=["newest"]) is None
    assert option_problem(SPECS, levels=["every"]).endswith("or own or newest or ladder")


def test_the_ladder_runs_each_level_where_the_tables_change(tmp_path):
    gather = SPECS.operator("GATHER")
    assert gather.table_change_levels == ("1.0", "2.0", "2.1", "3.0", "4.0", "4.1", "6.4")  # tables 1.0, 2.1, 3.0, 4.1 (hand-read)
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backend", "numpy", "--operator", "GATHER",
                           "--feature-level", "ladder", "--max-examples", "1", "--workers", "0", "--reports-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for path in (tmp_path / "results").glob("results-*.jsonl") for line in path.read_text().splitlines()]
    for kind in ("valid", "invalid"):
        assert {r["feature_level"] for r in records if r["kind"] == kind} == set(gather.table_change_levels), kind
    gate = subprocess.run([sys.executable, "-m", "harness.cli", "gate", "--reports-dir", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 0 and "GATE: PASS" in gate.stdout
