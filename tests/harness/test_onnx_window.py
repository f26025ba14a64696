"""CONVOLUTION on ONNX Runtime (the `window` builder of backends/onnxruntime_ops.yaml).

Hand-computed (as tests/golden/CONVOLUTION.yaml): x [[1,2,3],[4,5,6],[7,8,9]], w [[1,2],[3,4]],
stride 2, StartPadding 1 (a zero first row and column): cross-correlation [4, 18, 36, 77]; Mode
CONVOLUTION reads w flipped, [[4,3],[2,1]]: [1, 7, 19, 63] (ONNX's Conv alone would give the first
for both: the builder feeds the filter reversed). Backward, stride 2, x [[1,2],[3,4]], w [[1,2],[3,4]]:
the full 4x4 result holds x[i][j] * w at {2i, 2j}; StartPadding 1 crops its first row and column and
OutputPadding 1 adds a zero row and column: [[4,6,8,0],[6,4,8,0],[12,12,16,0],[0,0,0,0]]. Groups: x
{1, 2, 2, 2} [1..8], GroupCount 2, w [2, -1], bias [10, 20]: [12, 14, 16, 18, 15, 14, 13, 12].
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


def _run(ort, arrays: dict, out_sizes: list[int], attributes: dict, dtype: str = "FLOAT32"):
    spec = SPECS.operator("CONVOLUTION")
    types = {name: dtype for name in arrays} | {"OutputTensor": dtype}
    layouts = {name: TensorDesc(dtype, list(a.shape)) for name, a in arrays.items()} | {"OutputTensor": TensorDesc(dtype, out_sizes)}
    case = case_from_arrays(spec, "6.4", types, arrays, layouts=layouts, attributes=attributes)
    result = ort.run(case)
    assert result.kind == "outputs", getattr(result, "reason", "")
    return output_values(spec, case, result.buffers)["OutputTensor"].ravel().tolist()


def _attrs(mode, direction=0, strides=(1, 1), start=(0, 0), output_padding=(0, 0), groups=1):
    return {"Mode": float(mode), "Direction": float(direction), "Strides": list(strides), "Dilations": [1, 1],
            "StartPadding": list(start), "EndPadding": [0, 0], "OutputPadding": list(output_padding), "GroupCount": float(groups)}


X33 = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
W22 = np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 2, 2)


@pytest.mark.parametrize("mode, want", [(1, [4, 18, 36, 77]), (0, [1, 7, 19, 63])])
def test_forward_both_modes(ort, mode, want):
    got = _run(ort, {"InputTensor": X33, "FilterTensor": W22}, [1, 1, 2, 2], _attrs(mode, strides=(2, 2), start=(1, 1)))
    assert got == want


def test_backward_cropped_with_output_padding(ort):
    x = np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 2, 2)
    got = _run(ort, {"InputTensor": x, "FilterTensor": W22}, [1, 1, 4, 4],
               _attrs(1, direction=1, strides=(2, 2), start=(1, 1), output_padding=(1, 1)))
    assert got == [4, 6, 8, 0, 6, 4, 8, 0, 12, 12, 16, 0, 0, 0, 0, 0]


def test_groups_and_bias(ort):
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 2, 2)
    w = np.array([2, -1], np.float32).reshape(2, 1, 1, 1)
    b = np.array([10, 20], np.float32).reshape(1, 2, 1, 1)
    got = _run(ort, {"InputTensor": x, "FilterTensor": w, "BiasTensor": b}, [1, 2, 2, 2], _attrs(1, groups=2))
    assert got == [12, 14, 16, 18, 15, 14, 13, 12]


def test_forward_output_padding_is_a_pad_of_zeros(ort):
    """Forward, x [1, 2], w [3], OutputPadding 1: [3, 6] and a zero at the end, then bias 5 on every element: [8, 11, 5]."""
    x = np.array([1, 2], np.float32).reshape(1, 1, 2)
    w = np.array([3], np.float32).reshape(1, 1, 1)
    b = np.array([5], np.float32).reshape(1, 1, 1)
    attrs = {"Mode": 1.0, "Direction": 0.0, "Strides": [1], "Dilations": [1], "StartPadding": [0], "EndPadding": [0],
             "OutputPadding": [1], "GroupCount": 1.0}
    assert _run(ort, {"InputTensor": x, "FilterTensor": w, "BiasTensor": b}, [1, 1, 3], attrs) == [8, 11, 5]
