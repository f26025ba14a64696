"""Every command-line input error is one clear line and exit 2, and never costs the last report.

Inputs tried: an unknown backend, level, operator or data type; a negative or zero
--max-examples; a --workers that is not a number; a --reports-dir that is a file; a --specs-dir
that is missing or holds a broken spec; reports commands on a missing reports directory. And
--specs-dir is honoured by `run`."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.run.results import record_dicts
from harness.spec.load import DEFAULT_SPECS_DIR
from tests.helpers import plan_file, read_plan

ROOT = Path(__file__).resolve().parents[2]


def _previous_run(reports: Path) -> Path:
    """A reports directory holding the results of an earlier run, which a bad command must not touch."""
    results = reports / "results"
    results.mkdir(parents=True)
    kept = results / "results-main.jsonl"
    kept.write_text('{"earlier": "run"}\n')
    return kept


@pytest.mark.parametrize("args, message", [
    (["--backend", "nope"], "--backend 'nope': installed backends: "),
    (["--feature-level", "9.9"], "--feature-level '9.9': allowed: 1.0, "),
    (["--operator", "ELEMENT_WISE_NOPE"], "--operator 'ELEMENT_WISE_NOPE': allowed: "),
    (["--dtype", "FLOAT8"], "--dtype 'FLOAT8': allowed: "),
    (["--max-examples", "-1"], "--max-examples -1: a whole number from 1 to 100,000"),
    (["--max-examples", "0"], "--max-examples 0: a whole number from 1 to 100,000"),
    (["--max-examples", "100001"], "--max-examples 100001: a whole number from 1 to 100,000"),
    (["--workers", "many"], "--workers many: 'auto' or a whole number >= 0"),
    (["--directml-timeout", "0"], "--directml-timeout 0.0: seconds, more than 0 and at most 3600"),
    (["--directml-timeout", "nan"], "--directml-timeout nan: seconds, more than 0 and at most 3600"),
])
def test_bad_run_argument_is_one_line_exit_2_and_keeps_the_last_report(tmp_path, capsys, args, message):
    kept = _previous_run(tmp_path)
    assert main(["run", "--reports-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert kept.read_text() == '{"earlier": "run"}\n'


def test_reports_dir_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["run", "--reports-dir", str(target)]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


def test_broken_specs_dir_stops_run_with_file_line_and_key(tmp_path, capsys):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    sign = specs / "ELEMENT_WISE_SIGN.yaml"
    text = sign.read_text()
    assert 'expression: "where(x < 0, -1, where(x > 0, 1, 0))"' in text
    sign.write_text(text.replace('expression: "where(x < 0, -1, where(x > 0, 1, 0))"', 'expression: "where(x <"'))
    kept = _previous_run(tmp_path / "reports")
    assert main(["--specs-dir", str(specs), "run", "--reports-dir", str(tmp_path / "reports")]) == 2
    err = capsys.readouterr().err
    assert "ELEMENT_WISE_SIGN.yaml:" in err and "formula.expression" in err and "Traceback" not in err
    assert kept.exists()


@pytest.mark.parametrize("command", [["run"], ["backends"], ["spec", "show", "ELEMENT_WISE_SIGN"]])
def test_missing_specs_dir(tmp_path, capsys, command):
    assert main(["--specs-dir", str(tmp_path / "none"), *command]) == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["gate", "matrix", "report"])
def test_reports_commands_on_a_missing_directory(tmp_path, capsys, command):
    assert main([command, "--reports-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "Traceback" not in err


def test_run_honours_specs_dir(tmp_path):
    """A specs directory with SIGN alone: the run plans and records SIGN and nothing else."""
    specs = tmp_path / "specs"
    specs.mkdir()
    for name in ("_data_types.yaml", "_feature_levels.yaml", "_arithmetic.yaml", "_enums.yaml", "_structs.yaml", "ELEMENT_WISE_SIGN.yaml"):
        shutil.copy(DEFAULT_SPECS_DIR / name, specs / name)
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "--specs-dir", str(specs), "run", "--backend", "numpy",
                           "--workers", "0", "--max-examples", "2", "--reports-dir", str(reports), "-k", "test_example"],
                          capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    plan = read_plan(plan_file(reports / "results"))
    assert plan["cells"] and {c["operator"] for c in plan["cells"]} == {"ELEMENT_WISE_SIGN"}
    operators = {r["operator"] for r in record_dicts(reports / "results")}
    assert operators == {"ELEMENT_WISE_SIGN"}


@pytest.mark.parametrize("command", [["gate"], ["run"]])
def test_missing_expectations_dir(tmp_path, capsys, command):
    (tmp_path / "results").mkdir()
    assert main(["--expectations-dir", str(tmp_path / "none"), *command, "--reports-dir", str(tmp_path)]) == 2
    assert "--expectations-dir" in capsys.readouterr().err


def test_expectations_dir_replaces_the_backends_own(tmp_path, capsys):
    """With an empty expectations directory, ONNX Runtime's known Sign(NaN) divergence is a mismatch again."""
    import numpy as np

    from harness.generate.cases import case_from_arrays
    from tests.helpers import SPECS
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.array([np.nan, 1.0], np.float32)})
    path = case.save(tmp_path / "case.yaml")
    assert main(["replay", str(path), "--backend", "onnxruntime"]) == 0
    assert "known divergence ort-sign-nan-propagates" in capsys.readouterr().out
    empty = tmp_path / "expectations"
    empty.mkdir()
    assert main(["--expectations-dir", str(empty), "replay", str(path), "--backend", "onnxruntime"]) == 1
    assert ": mismatch: " in capsys.readouterr().out


def test_replay_refuses_a_directml_timeout_that_is_not_seconds(tmp_path, capsys):
    """--directml-timeout: more than 0 and at most an hour (checked before any backend starts)."""
    import numpy as np

    from harness.generate.cases import case_from_arrays
    from tests.helpers import SPECS
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.array([1.0], np.float32)})
    path = case.save(tmp_path / "case.yaml")
    assert main(["replay", str(path), "--directml-timeout", "-5"]) == 2
    err = capsys.readouterr().err
    assert "--directml-timeout -5.0: seconds, more than 0 and at most 3600" in err and len(err.strip().splitlines()) == 1

