"""GATHER on ONNX Runtime (the `gather` builder: Gather on the indices reshaped to their index
dims, then a Reshape to the output's Sizes). Outputs worked out by hand from the page; an index
outside the axis, where ONNX Runtime fails the run but DirectML promises no failure, must come
back unsupported with a reason: never a crash, never a pass."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.model.backend import Outputs, Unsupported
from harness.model.descriptor import TensorDesc
from tests.helpers import SPECS

GATHER = SPECS.operator("GATHER")


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


def _case(x, x_sizes, indices, index_sizes, out_sizes, axis, index_dims, index_type="UINT32", dtype="FLOAT32"):
    layouts = {"InputTensor": TensorDesc(dtype, x_sizes), "IndicesTensor": TensorDesc(index_type, index_sizes),
               "OutputTensor": TensorDesc(dtype, out_sizes)}
    return case_from_arrays(GATHER, "6.4", {"InputTensor": dtype, "IndicesTensor": index_type, "OutputTensor": dtype},
                            {"InputTensor": np.array(x).reshape(x_sizes), "IndicesTensor": np.array(indices).reshape(index_sizes)},
                            attributes={"Axis": axis, "IndexDimensions": index_dims}, layouts=layouts)


def test_nested_indices_with_a_cropped_leading_one(ort):
    """The page's Example 5: input {1,3,2} rows [1,2],[3,4],[5,6], Axis 1, indices {1,2,2}
    [[0,1],[1,2]]: rows 0,1,1,2 in a {2,2,2} output."""
    case = _case([1, 2, 3, 4, 5, 6], [1, 3, 2], [0, 1, 1, 2], [1, 2, 2], [2, 2, 2], 1, 2)
    result = ort.run(case)
    assert isinstance(result, Outputs), result
    assert output_values(GATHER, case, result.buffers)["OutputTensor"].reshape(-1).tolist() == [1, 2, 3, 4, 3, 4, 5, 6]


def test_negative_int64_indices_and_a_scalar_index(ort):
    case = _case([11, 12, 13, 14], [4], [-1, -4, 2], [3], [3], 0, 1, "INT64", "INT16")
    result = ort.run(case)
    assert output_values(GATHER, case, result.buffers)["OutputTensor"].tolist() == [14, 11, 13]
    scalar = _case([7, 8, 9, 10, 11, 12], [3, 2], [1], [1, 1], [1, 2], 0, 0, "UINT32", "UINT8")
    result = ort.run(scalar)
    assert output_values(GATHER, scalar, result.buffers)["OutputTensor"].reshape(-1).tolist() == [9, 10]


@pytest.mark.parametrize("index", [4, -5])
def test_an_index_outside_the_axis_is_unsupported(ort, index):
    case = _case([11, 12, 13, 14], [4], [0, index], [2], [2], 0, 1, "INT32")
    result = ort.run(case)
    assert isinstance(result, Unsupported) and "outside [-4, 3]" in result.reason, result
