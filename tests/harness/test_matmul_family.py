"""The matmul family's judgement of a D3D device's liberties (GEMM).

Hand-computed: A = [[inf, 1]] and B = [[1e-39], [1]] (1e-39 is an fp32 denormal) give the dot
product inf * 1e-39 + 1 * 1 = inf exactly. A D3D device may read the denormal as +0 (fp32 input
flush), and then computes inf * 0 + 1 = NaN: both inf and NaN are legal, anything else is not.
An NVIDIA H100 returned NaN there (docs/gpu-results.md)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import pack_buffer
from tests.helpers import SPECS

DENORMAL = np.float32(1e-39)


def _judged(actual: float):
    spec = SPECS.operator("GEMM")
    a = np.array([[np.inf, 1.0]], np.float32)
    b = np.array([[DENORMAL], [1.0]], np.float32)
    layouts = {"ATensor": TensorDesc("FLOAT32", [1, 2]), "BTensor": TensorDesc("FLOAT32", [2, 1]),
               "OutputTensor": TensorDesc("FLOAT32", [1, 1])}
    case = case_from_arrays(spec, "6.4", {"ATensor": "FLOAT32", "BTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"ATensor": a, "BTensor": b}, layouts=layouts,
                            attributes={"TransA": 0.0, "TransB": 0.0, "Alpha": 1.0, "Beta": 0.0})
    out = np.array([[actual]], np.float32)
    return judge(spec, case, Outputs({"OutputTensor": pack_buffer(out, case.descriptor.tensors["OutputTensor"],
                                                                   SPECS.catalog.dtype("FLOAT32"))}), True)


def test_the_denormal_is_one():
    assert DENORMAL != 0 and abs(DENORMAL) < np.finfo(np.float32).tiny


@pytest.mark.parametrize("actual, legal", [(np.inf, True), (np.nan, True), (1.0, False), (-np.inf, False)])
def test_an_infinite_factor_times_a_flushed_denormal_may_be_nan(actual, legal):
    diff = _judged(actual)
    assert (diff.mismatch_count == 0) == legal, diff.summary if hasattr(diff, "summary") else diff
