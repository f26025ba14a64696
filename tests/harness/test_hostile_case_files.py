"""Hostile case files beyond tests/harness/test_hostile_cases.py (issue 30): files that would hang
the YAML reader, buffers bound to several tensors, a verdict a file's `expect` line could steer,
and a run asked for more examples than it could ever finish. Each gets a clear error (exit 2 on
the command line) and no traceback, or the validator's verdict whatever the file claims."""
from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.judge.diff import judge
from harness.judge.status import Status
from harness.model.backend import Crashed
from harness.model.descriptor import Case, CaseFormatError
from harness.model.wellformed import check_case
from harness.run.case import _explain_failure
from harness.run.registry import expectations_for
from tests.helpers import SPECS

ROOT = Path(__file__).resolve().parents[2]
# what the runner reports of DirectML 1.15.4's crash (the expectation's reason_contains)
CRASH = Crashed("the runner died: wine: Unhandled page fault on read access to 0000000000000008")
QUANTIZE_CRASH = ROOT / "docs" / "cases" / "directml-QUANTIZE-missing-input-crashes.yaml"


def _replay(path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness.cli", "replay", str(path), "--backend", "numpy"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_file_of_millions_of_tiny_nodes_is_refused_fast(tmp_path):
    path = tmp_path / "tiny-nodes.yaml"
    path.write_text("format: 1\noperator: ELEMENT_WISE_ADD\nnoise: [" + ",".join(["0"] * 3_000_000) + "]\n")
    start = time.perf_counter()
    with pytest.raises(CaseFormatError, match=r"line 3: more than 100,000 YAML nodes"):
        Case.load(path)
    assert time.perf_counter() - start < 5
    proc = _replay(path)
    assert proc.returncode == 2 and "more than 100,000 YAML nodes" in proc.stderr and "Traceback" not in proc.stderr


def test_an_alias_bomb_is_refused_without_expanding_it(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    with pytest.raises(CaseFormatError, match="an alias counting as what it names"):
        Case.load(path)
    assert time.perf_counter() - start < 1


def test_the_harness_own_case_files_with_anchors_still_load():
    """Case files the harness writes use anchors for repeated lists: they load as before."""
    with_anchors = [p for p in (ROOT / "docs" / "cases").glob("*.yaml") if "&id0" in p.read_text()]
    assert with_anchors
    for path in with_anchors:
        Case.load(path)


def test_two_outputs_bound_to_one_input_buffer_are_refused():
    """ADAM_OPTIMIZER allows each output in place on each input, but two outputs on one input would
    write one buffer: no verdict could be drawn on a backend, so the case is malformed."""
    spec = SPECS.operator("ADAM_OPTIMIZER")
    case = _adam_case(spec)
    case.descriptor.aliases = {"OutputParametersTensor": "InputParametersTensor",
                               "OutputFirstMomentTensor": "InputParametersTensor"}
    with pytest.raises(CaseFormatError, match="both alias InputParametersTensor: two outputs would write one buffer"):
        check_case(case, spec)


def _adam_case(spec):
    from harness.generate.cases import example_case
    return example_case(spec, spec.examples[0])


@pytest.mark.parametrize("claim", ["valid", "invalid: constraint.some_other_rule", "invalid: tensor.missing"])
def test_a_known_crash_is_explained_by_the_validator_not_by_the_file_claim(claim):
    """DirectML 1.15.4 crashes on QUANTIZE without an InputTensor (an expectation with rule
    tensor.missing). The validator finds tensor.missing broken in this descriptor, so the crash is
    the known divergence whatever the file's `expect` line says; and a valid descriptor claiming
    that rule is not explained by it."""
    spec = SPECS.operator("QUANTIZE")
    case = Case.load(QUANTIZE_CRASH)
    case.expect_valid, case.broken_rule = (True, None) if claim == "valid" else (False, claim.split(": ")[1])
    known = expectations_for("directml")
    level = case.feature_level
    diff = judge(spec, case, CRASH, True, level)
    assert _explain_failure(spec, case, diff, Status(diff.status), known, level) is not None

    valid = copy.deepcopy(case)
    valid.descriptor.tensors["InputTensor"] = copy.deepcopy(valid.descriptor.tensors["OutputTensor"])
    valid.descriptor.tensors["InputTensor"].data_type = "FLOAT32"
    valid.expect_valid, valid.broken_rule = False, "tensor.missing"
    diff = judge(spec, valid, CRASH, True, level)
    assert _explain_failure(spec, valid, diff, Status(diff.status), known, level) is None


def test_max_examples_beyond_the_bound_is_a_usage_error(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backend", "numpy", "--operator", "ELEMENT_WISE_ADD",
                           "--max-examples", "100000000000000000000", "--reports-dir", str(tmp_path / "r")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "a whole number from 1 to 100,000" in proc.stderr
    assert not (tmp_path / "r").exists()
