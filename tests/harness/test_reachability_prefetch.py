"""harness.run.reachability_prefetch: the answers a run will ask for are searched over processes
before its workers start, land in the memo, and equal what a search in the process gives."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from pathlib import Path
from harness.run.reachability_prefetch import missing_answers, prefetch
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
ops = ["ELEMENT_WISE_SIGN", "GATHER"]
specs = load_specs(DEFAULT_SPECS_DIR)
before = missing_answers(specs, ops, ladder=True)
first = prefetch(DEFAULT_SPECS_DIR, ops, ladder=True, processes=2)
again = prefetch(DEFAULT_SPECS_DIR, ops, ladder=True, processes=2)
print(json.dumps({"before": len(before), "first": first, "again": again,
                  "serial": prefetch(DEFAULT_SPECS_DIR, ["ARGMAX"], ladder=False, processes=1),
                  "tasks": before}))
"""


def test_prefetch_fills_the_memo_once_with_the_searchs_own_answers(tmp_path):
    env = {**os.environ, "DMLCONFORM_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] > 0 and got["first"] == got["before"] and got["again"] == 0
    assert got["serial"] == 0  # one process: nothing to spread; the collecting process searches
    lines = [json.loads(line) for f in tmp_path.glob("reachable-*.jsonl") for line in f.read_text().splitlines()]
    assert len(lines) >= got["first"]
    # each answer the children appended is the one an in-process search gives
    from harness.generate.breakers import _search_members
    from tests.helpers import SPECS
    answers = {(a["operator"], a["level"], a["rule"]): a["members"] for a in lines}
    for operator, level, rule in [tuple(t) for t in got["tasks"]][::7]:
        assert answers[(operator, level, rule)] == _search_members(SPECS.operator(operator), level, rule), (operator, level, rule)
