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


def test_a_flushed_denormal_reaches_the_fused_activation():
    """The same dot product with Alpha -3 and a fused HARD_SIGMOID (Alpha -0.3, Beta 0.5): exactly,
    -3 * inf = -inf, -0.3 * -inf + 0.5 = inf, clamped to 1. With the denormal read as 0 the dot
    product is NaN, and HARD_SIGMOID's min/max meeting a NaN is what its spec leaves unspecified:
    the H100's 0 there is not a mismatch (its NaN input is named), while 0 stays one where no
    NaN can arise (B = [[2], [1]]: 2 * inf + 1 = inf, clamped to 1)."""
    spec = SPECS.operator("GEMM")
    fused = {"TransA": 0.0, "TransB": 0.0, "Alpha": -3.0, "Beta": 0.0, "FusedActivation": 37.0,
             "FusedActivation.Alpha": -0.30000001192092896, "FusedActivation.Beta": 0.5}
    layouts = {"ATensor": TensorDesc("FLOAT32", [1, 2]), "BTensor": TensorDesc("FLOAT32", [2, 1]),
               "OutputTensor": TensorDesc("FLOAT32", [1, 1])}
    types = {"ATensor": "FLOAT32", "BTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    a = np.array([[np.inf, 1.0]], np.float32)
    for b, actual, mismatches in ((np.array([[DENORMAL], [1.0]], np.float32), 0.0, 0),
                                  (np.array([[2.0], [1.0]], np.float32), 0.0, 1),
                                  (np.array([[2.0], [1.0]], np.float32), 1.0, 0)):
        case = case_from_arrays(spec, "6.4", types, {"ATensor": a, "BTensor": b}, layouts=layouts, attributes=fused)
        out = np.array([[actual]], np.float32)
        diff = judge(spec, case, Outputs({"OutputTensor": pack_buffer(out, case.descriptor.tensors["OutputTensor"],
                                                                       SPECS.catalog.dtype("FLOAT32"))}), True)
        assert diff.mismatch_count == mismatches, (b.ravel(), actual)
