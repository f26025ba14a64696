"""GEMM on ONNX Runtime (the `matmul` builder of backends/onnxruntime_ops.yaml).

Hand-computed: A = [[1, 2], [3, -4]], B = [[1], [1]] gives A x B = [1 + 2, 3 - 4] = [3, -1]; with Alpha = -0 the
products are -0 * 3 = -0 and -0 * -1 = +0 (IEEE signs), and an absent C adds nothing. The builder
once read Alpha through the shape-expression names, which give whole numbers as ints (-0.0 as 0),
so every Alpha of -0 ran as +0 and the zeros came back with the opposite signs.
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.model.descriptor import TensorDesc
from tests.helpers import SPECS


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


@pytest.mark.parametrize("alpha, signs", [(-0.0, [True, False]), (0.0, [False, True]), (1.0, [False, True])])
def test_alpha_keeps_its_sign(ort, alpha, signs):
    spec = SPECS.operator("GEMM")
    a = np.array([[1.0, 2.0], [3.0, -4.0]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    layouts = {"ATensor": TensorDesc("FLOAT32", [2, 2]), "BTensor": TensorDesc("FLOAT32", [2, 1]),
               "OutputTensor": TensorDesc("FLOAT32", [2, 1])}
    case = case_from_arrays(spec, "6.4", {"ATensor": "FLOAT32", "BTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"ATensor": a, "BTensor": b}, layouts=layouts,
                            attributes={"TransA": 0.0, "TransB": 0.0, "Alpha": alpha, "Beta": 1.0})
    result = ort.run(case)
    assert result.kind == "outputs", getattr(result, "reason", "")
    out = output_values(spec, case, result.buffers)["OutputTensor"].ravel()
    assert out.tolist() == [3.0 * alpha, -1.0 * alpha]  # zeros compare equal: the signs below decide
    assert np.signbit(out).tolist() == signs
