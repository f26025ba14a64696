"""The gather family's modes `elements` and `nd` (with and without batch dims), through the specs
that use them (GATHER_ELEMENTS, GATHER_ND, GATHER_ND1): the reference's values, the element
variables the `index_out_of_range` rule reads (`index`, `axis_size`; in mode nd those of a tuple's
first coordinate outside its dimension), the mode's parameter check, the validator's rules and
ONNX Runtime's builders (GatherElements, GatherND with batch_dims).

Every expected value below was worked out by hand from the pages (an index counts within the
dimension it indexes, a negative one from its end), not taken from the reference.
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.validator import validate
from harness.reference.families.gather import check_mode, compute
from harness.spec.families import FamilySpec
from tests.helpers import SPECS, run_reference


def _case(types: dict, sizes: dict, values: dict, attributes: dict) -> tuple[dict, dict, dict]:
    arrays = {n: np.asarray(v).reshape(sizes[n]) for n, v in values.items()}
    return types, arrays, {"attributes": attributes, "layouts": {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}}


# --- elements -----------------------------------------------------------------------------------------

def test_elements_along_the_middle_axis():
    # input {2,3,2} = 1..12 (x[a,b,c] = 1 + 6a + 2b + c), Axis 1, indices {2,1,2} [[[2,0]],[[1,-1]]]:
    # out[a,0,c] = x[a, idx, c]: a0: x[0,2,0] = 5, x[0,0,1] = 2; a1: x[1,1,0] = 9, x[1,2,1] = 12 (-1 + 3 = 2)
    types = {"InputTensor": "INT32", "IndicesTensor": "INT32", "OutputTensor": "INT32"}
    sizes = {"InputTensor": [2, 3, 2], "IndicesTensor": [2, 1, 2], "OutputTensor": [2, 1, 2]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": range(1, 13), "IndicesTensor": [2, 0, 1, -1]}, {"Axis": 1})
    assert run_reference("GATHER_ELEMENTS", t, arrays, **kw).reshape(-1).tolist() == [5, 2, 9, 12]


def test_elements_out_of_range_marks_only_its_element():
    # input {3} = [7,8,9], indices [3,-4,-3,2]: 3 and -4 are outside [-3, 3); -3 -> 7, 2 -> 9
    spec = SPECS.operator("GATHER_ELEMENTS")
    d = Descriptor("GATHER_ELEMENTS", {"InputTensor": TensorDesc("FLOAT32", [3]), "IndicesTensor": TensorDesc("INT64", [4]),
                                       "OutputTensor": TensorDesc("FLOAT32", [4])}, {"Axis": 0.0})
    result = compute(spec, d, {"x": np.array([7, 8, 9], dtype=np.float32), "i": np.array([3, -4, -3, 2], dtype=np.int64)})
    assert result.outputs["OutputTensor"][2:].tolist() == [7, 9]
    assert result.unspecified["OutputTensor"]["index_out_of_range"].tolist() == [True, True, False, False]


# --- nd -------------------------------------------------------------------------------------------------

def test_nd_two_coordinate_tuples_copy_rows():
    # input {2,2,3} = 0..11 (x[a,b,:] = 6a + 3b + [0,1,2]), InputDimensionCount 3; indices {1,2,2} [[1,0],[0,-1]],
    # IndicesDimensionCount 2 (two 2-tuples): x[1,0,:] = [6,7,8], x[0,1,:] = [3,4,5]; Sizes {2} + {3}, a leading 1
    types = {"InputTensor": "FLOAT32", "IndicesTensor": "INT32", "OutputTensor": "FLOAT32"}
    sizes = {"InputTensor": [2, 2, 3], "IndicesTensor": [1, 2, 2], "OutputTensor": [1, 2, 3]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": range(12), "IndicesTensor": [1, 0, 0, -1]},
                          {"InputDimensionCount": 3, "IndicesDimensionCount": 2})
    assert run_reference("GATHER_ND", t, arrays, **kw).reshape(-1).tolist() == [6, 7, 8, 3, 4, 5]


def test_nd1_batches_pick_within_their_own_block():
    # input {2,2,2} = 0..7, InputDimensionCount 3, BatchDimensionCount 1: batch 0 rows [0,1],[2,3], batch 1 [4,5],[6,7];
    # indices {2,1,2} batch 0 tuple [1,0] -> 2, batch 1 tuple [0,1] -> 5; Sizes {2,1} + {}, a leading 1: {1,2,1}
    types = {"InputTensor": "UINT8", "IndicesTensor": "UINT32", "OutputTensor": "UINT8"}
    sizes = {"InputTensor": [2, 2, 2], "IndicesTensor": [2, 1, 2], "OutputTensor": [1, 2, 1]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": range(8), "IndicesTensor": [1, 0, 0, 1]},
                          {"InputDimensionCount": 3, "IndicesDimensionCount": 3, "BatchDimensionCount": 1})
    assert run_reference("GATHER_ND1", t, arrays, **kw).reshape(-1).tolist() == [2, 5]


def _with_rules(op: str, *rules: tuple[str, str]):
    """The spec with throw-away unspecified rules (id, when) that read the family's element variables."""
    from dataclasses import replace

    from harness.spec.expr import parse_formula
    spec = SPECS.operator(op)
    return replace(spec, unspecified=tuple(replace(spec.unspecified[0], id=rid, when=parse_formula(when)) for rid, when in rules))


def test_nd_first_offending_coordinate_per_element():
    # input {3,2} rows [10,11],[12,13],[14,15], InputDimensionCount 2; 2-tuples [0,5] (its second coordinate
    # outside [-2,2)), [4,9] (both outside: the first counts, 4 on the size-3 dim), [-3,-2] (x[0,0] = 10),
    # [2,1] (x[2,1] = 15); Sizes {4} + {}, a leading 1: {1,4}
    spec = _with_rules("GATHER_ND", ("index_out_of_range", "(index < -axis_size) | (index >= axis_size)"),
                       ("second_coordinate", "(index == 5) & (axis_size == 2)"),
                       ("first_coordinate", "(index == 4) & (axis_size == 3)"),
                       ("valid_reads_first", "(index == -3) & (axis_size == 3)"))
    d = Descriptor("GATHER_ND", {"InputTensor": TensorDesc("INT16", [3, 2]), "IndicesTensor": TensorDesc("INT64", [4, 2]),
                                 "OutputTensor": TensorDesc("INT16", [1, 4])},
                   {"InputDimensionCount": 2.0, "IndicesDimensionCount": 2.0})
    x = np.array([[10, 11], [12, 13], [14, 15]], dtype=np.int16)
    result = compute(spec, d, {"x": x, "i": np.array([[0, 5], [4, 9], [-3, -2], [2, 1]], dtype=np.int64)})
    assert result.outputs["OutputTensor"][0, 2:].tolist() == [10, 15]
    masks = {k: v.tolist() for k, v in result.unspecified["OutputTensor"].items()}
    assert masks == {"index_out_of_range": [[True, True, False, False]], "second_coordinate": [[True, False, False, False]],
                     "first_coordinate": [[False, True, False, False]], "valid_reads_first": [[False, False, True, False]]}


def test_nd_index_and_axis_size_spread_over_the_copied_rows():
    # 1-tuples [1], [2] into input {3,2} (rows copied: Sizes {2} + {2}): `index == 1` holds on the first row's
    # two elements only, `axis_size == 3` on all four
    spec = _with_rules("GATHER_ND", ("picked_row_one", "index == 1"), ("dim_of_three", "axis_size == 3"))
    d = Descriptor("GATHER_ND", {"InputTensor": TensorDesc("FLOAT32", [3, 2]), "IndicesTensor": TensorDesc("UINT32", [2, 1]),
                                 "OutputTensor": TensorDesc("FLOAT32", [2, 2])},
                   {"InputDimensionCount": 2.0, "IndicesDimensionCount": 2.0})
    result = compute(spec, d, {"x": np.arange(6, dtype=np.float32).reshape(3, 2), "i": np.array([[1], [2]], dtype=np.uint32)})
    assert result.outputs["OutputTensor"].reshape(-1).tolist() == [2, 3, 4, 5]
    masks = result.unspecified["OutputTensor"]
    assert masks["picked_row_one"].tolist() == [[True, True], [False, False]]
    assert masks["dim_of_three"].tolist() == [[True, True], [True, True]]


@pytest.mark.parametrize("params, message", [
    ({"mode": "elements", "axis": "Axis", "index_dimensions": "N"}, "takes no index_dimensions"),
    ({"mode": "nd", "index_dimensions": "N"}, "needs input_dimensions"),
    ({"axis": "Axis"}, "needs index_dimensions"),                       # no mode: take, as GATHER
])
def test_a_mode_reads_exactly_its_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        check_mode(FamilySpec("gather", {"input": "InputTensor", "indices": "IndicesTensor", **params}))


def test_gather_without_a_mode_is_take():
    assert check_mode(SPECS.operator("GATHER").formula.family) == "take"  # type: ignore[arg-type]


# --- the rules the specs state --------------------------------------------------------------------------

@pytest.mark.parametrize("indices, out, axis, rules", [
    ([2, 5], [2, 5], 1, set()),
    ([3, 5], [3, 5], 1, {"constraint.indices_sizes"}),          # dim 0 is not the axis: must be the input's 2
    ([2, 5], [2, 4], 1, {"constraint.output_sizes"}),
    ([2, 5], [2, 5], 2, {"constraint.axis_in_range"}),
])
def test_gather_elements_rules(indices, out, axis, rules):
    d = Descriptor("GATHER_ELEMENTS", {"InputTensor": TensorDesc("FLOAT32", [2, 3]), "IndicesTensor": TensorDesc("UINT32", indices),
                                       "OutputTensor": TensorDesc("FLOAT32", out)}, {"Axis": float(axis)})
    assert validate(SPECS.operator("GATHER_ELEMENTS"), d, "6.4").rule_ids == rules


@pytest.mark.parametrize("x, indices, out, attrs, rules", [
    # input {2,3,4}: 1-tuples into dim 0 over a {2} index dim: {2} + {3,4}
    ([2, 3, 4], [1, 2, 1], [2, 3, 4], (3, 2, 0), set()),
    ([2, 3, 4], [1, 2, 4], [2, 3, 4], (3, 2, 0), {"constraint.tuple_size"}),        # 4 coordinates for 3 dims
    ([2, 3, 4], [2, 2, 1], [2, 3, 4], (3, 2, 0), {"constraint.indices_sizes"}),     # a leading index size not 1
    ([2, 3, 4], [2, 2, 1], [2, 3, 4], (3, 3, 0), {"constraint.output_rank"}),       # {2,2} + {3,4}: 4 dims for 3
    ([2, 3, 4], [2, 2, 1], [2, 2, 4], (3, 3, 1), set()),            # batch {2}, two 1-tuples into dim 1: {2,2} + {4}
    # input {1,2,3} with InputDimensionCount 2 (batch = its dim 1, size 2), indices {2,4,1} with all 3 dims
    # meaningful (batch = its dim 0): four 1-tuples per batch into the size-3 dim: {2,4} + {}, a leading 1
    ([1, 2, 3], [2, 4, 1], [1, 2, 4], (2, 3, 1), set()),
    ([1, 2, 3], [1, 4, 1], [1, 1, 4], (2, 3, 1), {"constraint.indices_sizes"}),   # its batch size is not the input's 2
    ([2, 3, 4], [3, 2, 1], [3, 2, 4], (3, 3, 1), {"constraint.indices_sizes"}),     # batch sizes differ (3 vs 2)
    ([2, 3, 4], [2, 2, 1], [1, 2, 2], (3, 3, 3), {"constraint.batch_dimension_count_in_range"}),
    ([2, 3, 4], [1, 2, 1], [1, 2, 2], (3, 2, 2), {"constraint.batch_within_index_dimensions"}),
])
def test_gather_nd1_rules(x, indices, out, attrs, rules):
    i, j, b = attrs
    d = Descriptor("GATHER_ND1", {"InputTensor": TensorDesc("FLOAT32", x), "IndicesTensor": TensorDesc("UINT32", indices),
                                  "OutputTensor": TensorDesc("FLOAT32", out)},
                   {"InputDimensionCount": float(i), "IndicesDimensionCount": float(j), "BatchDimensionCount": float(b)})
    assert validate(SPECS.operator("GATHER_ND1"), d, "6.4").rule_ids == rules


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


def test_onnx_runtime_gather_elements(ort):
    # the page's example: input {3,3} = 1..9, Axis 0, indices {2,3} [[1,2,0],[2,0,0]] -> [[4,8,3],[7,2,3]]
    types = {"InputTensor": "FLOAT32", "IndicesTensor": "UINT32", "OutputTensor": "FLOAT32"}
    sizes = {"InputTensor": [3, 3], "IndicesTensor": [2, 3], "OutputTensor": [2, 3]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": range(1, 10), "IndicesTensor": [1, 2, 0, 2, 0, 0]}, {"Axis": 0})
    result, out = _ort_run(ort, "GATHER_ELEMENTS", t, arrays, kw)
    assert result.kind == "outputs", result
    assert out == [4, 8, 3, 7, 2, 3]


def test_onnx_runtime_gather_nd1_with_batches_and_leading_ones(ort):
    # GATHER_ND1's page Example 2: input {1,3,2,2} = 0..11, I 3, J 3, B 1 -> [0,3, 7,4, 9,10] in {1,1,3,2}
    types = {"InputTensor": "FLOAT32", "IndicesTensor": "UINT32", "OutputTensor": "FLOAT32"}
    sizes = {"InputTensor": [1, 3, 2, 2], "IndicesTensor": [1, 3, 2, 2], "OutputTensor": [1, 1, 3, 2]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": range(12), "IndicesTensor": [0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0]},
                          {"InputDimensionCount": 3, "IndicesDimensionCount": 3, "BatchDimensionCount": 1})
    result, out = _ort_run(ort, "GATHER_ND1", t, arrays, kw)
    assert result.kind == "outputs", result
    assert out == [0, 3, 7, 4, 9, 10]


def test_onnx_runtime_gather_nd_negative_coordinates(ort):
    # input {2,3} rows [1,2,3],[4,5,6], 2-tuples [-1,-1], [0,-3] -> 6, 1; Sizes {2}, a leading 1: {1,2}
    types = {"InputTensor": "INT16", "IndicesTensor": "INT64", "OutputTensor": "INT16"}
    sizes = {"InputTensor": [2, 3], "IndicesTensor": [2, 2], "OutputTensor": [1, 2]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": range(1, 7), "IndicesTensor": [-1, -1, 0, -3]},
                          {"InputDimensionCount": 2, "IndicesDimensionCount": 2})
    result, out = _ort_run(ort, "GATHER_ND", t, arrays, kw)
    assert result.kind == "outputs", result
    assert out == [6, 1]


@pytest.mark.parametrize("op, indices, bound", [
    ("GATHER_ELEMENTS", [0, 3], "outside [-3, 2]"),
    ("GATHER_ND", [0, 3], "outside [-3, 2]"),        # the second 2-tuple's second coordinate, on the size-3 dim
])
def test_onnx_runtime_index_outside_is_unsupported(ort, op, indices, bound):
    types = {"InputTensor": "FLOAT32", "IndicesTensor": "INT32", "OutputTensor": "FLOAT32"}
    if op == "GATHER_ELEMENTS":
        sizes = {"InputTensor": [1, 3], "IndicesTensor": [1, 2], "OutputTensor": [1, 2]}
        attrs: dict = {"Axis": 1}
    else:
        sizes = {"InputTensor": [1, 3], "IndicesTensor": [1, 2], "OutputTensor": [1, 1]}
        attrs = {"InputDimensionCount": 2, "IndicesDimensionCount": 1}
    t, arrays, kw = _case(types, sizes, {"InputTensor": [1, 2, 3], "IndicesTensor": indices}, attrs)
    result, _ = _ort_run(ort, op, t, arrays, kw)
    assert result.kind == "unsupported" and bound in result.reason, result
