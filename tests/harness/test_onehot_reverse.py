"""The data movement family's modes `one_hot` and `reverse_prefix`, through the specs that use them
(ONE_HOT, REVERSE_SUBSEQUENCES): the reference's values, the element variables the unspecified rules
read, the validator's rules and ONNX Runtime's builders.

Every expected value below was worked out by hand from the pages (an index counts within its
sequence along Axis, a negative one from the end, one beyond the size selects none; a length
reverses that many leading elements of its sequence, clamped to the size), not taken from the
reference.
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.validator import validate
from harness.reference.families.data_movement import compute
from tests.helpers import SPECS, from_bits, run_reference


def _layouts(types: dict, sizes: dict) -> dict:
    return {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}


def _one_hot_case(index_type: str, value_type: str, indices: list[int], values: list, sizes: dict, axis: int):
    types = {"IndicesTensor": index_type, "ValuesTensor": value_type, "OutputTensor": value_type}
    arrays = {"IndicesTensor": np.array(indices).reshape(sizes["IndicesTensor"]),
              "ValuesTensor": np.asarray(values).reshape(sizes["ValuesTensor"])}
    return types, arrays, {"attributes": {"Axis": axis}, "layouts": _layouts(types, sizes)}


# --- one_hot ---------------------------------------------------------------------------------------

def test_one_hot_along_the_first_axis():
    # Output {3, 2}, Axis 0: column 0's index 2 -> rows [off, off, on]; column 1's index 0 -> [on, off, off];
    # values {1, 2} [10, 20]: off 10, on 20. Row-major: r0 [10, 20], r1 [10, 10], r2 [20, 10]
    sizes = {"IndicesTensor": [1, 2], "ValuesTensor": [1, 2], "OutputTensor": [3, 2]}
    types, arrays, kw = _one_hot_case("UINT32", "INT16", [2, 0], [10, 20], sizes, 0)
    out = run_reference("ONE_HOT", types, arrays, **kw)
    assert out.reshape(-1).tolist() == [10, 20, 10, 10, 20, 10]


def test_one_hot_on_value_is_the_second_element_row_major():
    # values {2, 1} [5, 7]: the fastest-changing dimension of size > 1 is dim 0; its 1st element is 7
    sizes = {"IndicesTensor": [2, 1], "ValuesTensor": [2, 1], "OutputTensor": [2, 2]}
    types, arrays, kw = _one_hot_case("INT32", "UINT8", [1, -2], [5, 7], sizes, 1)
    out = run_reference("ONE_HOT", types, arrays, **kw)
    assert out.reshape(-1).tolist() == [5, 7, 7, 5]   # 1 -> position 1; -2 + 2 = 0 -> position 0


def test_one_hot_index_at_size_and_below_minus_size():
    # Output {4, 3}, Axis 1, INT64 indices [3, -4, -3, 2]: 3 = size selects none; -4 < -3 selects none in the
    # reference and is open (negative_index_beyond_sequence); -3 + 3 = 0; 2.
    spec = SPECS.operator("ONE_HOT")
    sizes = {"IndicesTensor": [4, 1], "ValuesTensor": [1, 2], "OutputTensor": [4, 3]}
    types, arrays, kw = _one_hot_case("INT64", "FLOAT32", [3, -4, -3, 2], [0, 1], sizes, 1)
    out = run_reference("ONE_HOT", types, arrays, **kw)
    assert out.reshape(-1).tolist() == [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    d = Descriptor("ONE_HOT", {n: TensorDesc(types[n], sizes[n]) for n in types}, {"Axis": 1.0})
    result = compute(spec, d, {"i": arrays["IndicesTensor"].astype(np.int64), "x": np.array([[0, 1]], dtype=np.float32)})
    mask = result.unspecified["OutputTensor"]["negative_index_beyond_sequence"]
    assert mask.tolist() == [[False] * 3, [True] * 3, [False] * 3, [False] * 3]   # the -4 row only
    assert result.summaries["index"][:, 0].tolist() == [3, -4, -3, 2]
    assert int(result.summaries["axis_size"][0, 0]) == 3


def test_one_hot_writes_bits_as_they_are():
    # off NaN with payload 0x7fc00123, on -0.0 (0x80000000); index 0 on a sequence of 2
    sizes = {"IndicesTensor": [1], "ValuesTensor": [2], "OutputTensor": [2]}
    types, arrays, kw = _one_hot_case("UINT32", "FLOAT32", [0], from_bits([0x7FC00123, 0x80000000], np.float32), sizes, 0)
    out = run_reference("ONE_HOT", types, arrays, **kw)
    assert out.view(np.uint32).tolist() == [0x80000000, 0x7FC00123]


# --- reverse_prefix --------------------------------------------------------------------------------

def _reverse_case(value_type: str, length_type: str, x: np.ndarray, lengths: list[int], axis: int):
    lengths_shape = [1 if k == axis else n for k, n in enumerate(x.shape)]
    types = {"InputTensor": value_type, "SequenceLengthsTensor": length_type, "OutputTensor": value_type}
    sizes = {"InputTensor": list(x.shape), "SequenceLengthsTensor": lengths_shape, "OutputTensor": list(x.shape)}
    arrays = {"InputTensor": x, "SequenceLengthsTensor": np.array(lengths).reshape(lengths_shape)}
    return types, arrays, {"attributes": {"Axis": axis}, "layouts": _layouts(types, sizes)}


def test_reverse_prefix_along_a_middle_axis():
    # {2, 3, 1}: batch 0 [1, 2, 3], batch 1 [4, 5, 6] along axis 1; lengths [2, 3]: [2, 1, 3] and [6, 5, 4]
    x = np.array([1, 2, 3, 4, 5, 6]).reshape(2, 3, 1)
    types, arrays, kw = _reverse_case("INT32", "UINT32", x, [2, 3], 1)
    assert run_reference("REVERSE_SUBSEQUENCES", types, arrays, **kw).reshape(-1).tolist() == [2, 1, 3, 6, 5, 4]


def test_reverse_prefix_clamps_a_length_beyond_the_axis():
    # rows [1, 2, 3], [4, 5, 6] along axis 1; UINT64 lengths [2^63 + 5, 1]: the first whole [3, 2, 1], the second unchanged
    x = np.array([1, 2, 3, 4, 5, 6]).reshape(2, 3)
    types, arrays, kw = _reverse_case("UINT16", "UINT64", x, [2**63 + 5, 1], 1)
    arrays["SequenceLengthsTensor"] = arrays["SequenceLengthsTensor"].astype(np.uint64)
    assert run_reference("REVERSE_SUBSEQUENCES", types, arrays, **kw).reshape(-1).tolist() == [3, 2, 1, 4, 5, 6]


# --- the rules the specs state ----------------------------------------------------------------------

@pytest.mark.parametrize("sizes, axis, rules", [
    ({"IndicesTensor": [2, 1], "ValuesTensor": [1, 2], "OutputTensor": [2, 5]}, 1, set()),
    ({"IndicesTensor": [2, 5], "ValuesTensor": [1, 2], "OutputTensor": [2, 5]}, 1, {"constraint.indices_sizes"}),
    ({"IndicesTensor": [2, 1], "ValuesTensor": [1, 1], "OutputTensor": [2, 5]}, 1, {"constraint.values_two_elements"}),
    ({"IndicesTensor": [2, 1], "ValuesTensor": [2], "OutputTensor": [2, 5]}, 1, {"constraint.values_dimension_count"}),
    ({"IndicesTensor": [2, 1], "ValuesTensor": [1, 2], "OutputTensor": [2, 5]}, 2, {"constraint.axis_in_range"}),
])
def test_one_hot_rules(sizes, axis, rules):
    types = {"IndicesTensor": "UINT32", "ValuesTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    d = Descriptor("ONE_HOT", {n: TensorDesc(types[n], sizes[n]) for n in types}, {"Axis": float(axis)})
    assert validate(SPECS.operator("ONE_HOT"), d, "6.4").rule_ids == rules


@pytest.mark.parametrize("lengths, out, rules", [
    ([2, 1, 4], [2, 3, 4], set()),
    ([2, 3, 4], [2, 3, 4], {"constraint.lengths_sizes"}),
    ([2, 1, 4], [2, 3, 5], {"constraint.output_sizes"}),
])
def test_reverse_subsequences_rules(lengths, out, rules):
    d = Descriptor("REVERSE_SUBSEQUENCES", {"InputTensor": TensorDesc("FLOAT32", [2, 3, 4]),
                                            "SequenceLengthsTensor": TensorDesc("UINT32", lengths),
                                            "OutputTensor": TensorDesc("FLOAT32", out)}, {"Axis": 1.0})
    assert validate(SPECS.operator("REVERSE_SUBSEQUENCES"), d, "6.4").rule_ids == rules


# --- ONNX Runtime ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


def _ort_run(ort, op: str, types: dict, arrays: dict, kw: dict):
    spec = SPECS.operator(op)
    case = case_from_arrays(spec, "6.4", types, arrays, **kw)
    result = ort.run(case)
    return result, (output_values(spec, case, result.buffers)[spec.formula.output].reshape(-1).tolist()
                    if result.kind == "outputs" else None)


@pytest.mark.parametrize("value_type", ["FLOAT32", "INT32"])   # INT32 values: ORT's kernel takes a float depth
def test_onnx_runtime_one_hot(ort, value_type):
    # Output {2, 3}, Axis 1, INT32 indices [-1, 5]: -1 -> position 2; 5 beyond 3 -> none; values [1, 9]
    sizes = {"IndicesTensor": [2, 1], "ValuesTensor": [1, 2], "OutputTensor": [2, 3]}
    types, arrays, kw = _one_hot_case("INT32", value_type, [-1, 5], [1, 9], sizes, 1)
    result, out = _ort_run(ort, "ONE_HOT", types, arrays, kw)
    assert result.kind == "outputs", result
    assert out == [1, 1, 9, 1, 1, 1]


def test_onnx_runtime_one_hot_without_a_kernel_is_unsupported(ort):
    sizes = {"IndicesTensor": [1], "ValuesTensor": [2], "OutputTensor": [3]}
    types, arrays, kw = _one_hot_case("UINT32", "UINT8", [1], [0, 1], sizes, 0)
    result, _ = _ort_run(ort, "ONE_HOT", types, arrays, kw)
    assert result.kind == "unsupported" and "cannot build" in result.reason


def test_onnx_runtime_reverse_sequence_on_a_middle_axis(ort):
    # {2, 3, 2}: along axis 1, (b, w) sequences [1,3,5] [2,4,6] [7,9,11] [8,10,12]; lengths {2,1,2} [3, 1, 2, 0]
    x = np.arange(1, 13).reshape(2, 3, 2).astype(np.float32)
    types, arrays, kw = _reverse_case("FLOAT32", "UINT32", x, [3, 1, 2, 0], 1)
    result, out = _ort_run(ort, "REVERSE_SUBSEQUENCES", types, arrays, kw)
    assert result.kind == "outputs", result
    # b0: w0 [5,3,1], w1 [2,4,6]; b1: w0 [9,7,11], w1 [8,10,12]; row-major (b, t, w)
    assert out == [5, 2, 3, 4, 1, 6, 9, 8, 7, 10, 11, 12]


def test_onnx_runtime_reverse_sequence_length_beyond_the_axis_is_unsupported(ort):
    types, arrays, kw = _reverse_case("INT8", "UINT32", np.array([1, 2, 3]), [4], 0)
    result, _ = _ort_run(ort, "REVERSE_SUBSEQUENCES", types, arrays, kw)
    assert result.kind == "unsupported" and "clamps" in result.reason


def test_onnx_runtime_one_hot_of_one_dimension(ort):
    # Output {3}, Axis 0, the one index 2 (ONNX's OneHot takes no rank-0 indices): [off, off, on]
    sizes = {"IndicesTensor": [1], "ValuesTensor": [2], "OutputTensor": [3]}
    types, arrays, kw = _one_hot_case("UINT32", "FLOAT32", [2], [-1, 4], sizes, 0)
    result, out = _ort_run(ort, "ONE_HOT", types, arrays, kw)
    assert result.kind == "outputs", result
    assert out == [-1, -1, 4]
