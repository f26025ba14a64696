"""A probe that cannot run says so; it never advises removing its expectation (issue 30: after a
runner crash loop the gate listed three valid expectations as 'may be fixed'). A backend that
crashes on every case runs a probe of a known mismatch: the record is `crashed` with the cause,
the gate fails on it, and no line calls the expectation stale."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from harness.run.results import record_dicts

ROOT = Path(__file__).resolve().parents[2]
EXPECTATIONS = """backend: broken-crash
expectations:
  - id: crash-sign-nan-propagates
    operator: ELEMENT_WISE_SIGN
    data_types: [FLOAT32]
    when: "isnan(x)"
    why: "A known mismatch of this (test) backend, whose probe cannot run on a backend that crashes on every case."
    probe:
      types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}
      inputs: {InputTensor: [.nan, 1.0]}
"""


def test_a_probe_that_crashed_is_not_called_stale(tmp_path):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "broken-crash.yaml").write_text(EXPECTATIONS)
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "DMLCONFORM_EXTRA_BACKENDS": "broken-crash=tests.plugins.broken_backend:CrashingBackend"}
    reports = tmp_path / "reports"
    run = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backend", "broken-crash", "--operator", "ELEMENT_WISE_SIGN",
                          "--max-examples", "1", "--workers", "0", "--expectations-dir", str(tmp_path / "exp"),
                          "--reports-dir", str(reports)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    probes = [r for r in record_dicts(reports / "results") if r["kind"] == "probe"]
    assert len(probes) == 1
    assert probes[0]["status"] == "crashed" and "did not run" in probes[0]["summary"], probes[0]
    gate = subprocess.run([sys.executable, "-m", "harness.cli", "gate", "--reports-dir", str(reports)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 1 and "GATE: FAIL" in gate.stdout
    assert "may be fixed" not in gate.stdout and "stale" not in gate.stdout.lower(), gate.stdout
