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


# --- scatter_elements and scatter_nd (SCATTER_ELEMENTS, SCATTER_ND) -----------------------------------

_SE = {"InputTensor": "FLOAT32", "IndicesTensor": "INT32", "UpdatesTensor": "FLOAT32", "OutputTensor": "FLOAT32"}


def _scatter_elements(x: list, indices: list, updates: list, axis: int = 0, shape: tuple | None = None):
    """The plug-in's result for SCATTER_ELEMENTS on a 1-D (or `shape`d) case of FLOAT32 values."""
    spec = SPECS.operator("SCATTER_ELEMENTS")
    xs, ix = list(shape or [len(x)]), [len(indices)] if shape is None else list(np.asarray(indices).shape)
    d = Descriptor("SCATTER_ELEMENTS", {"InputTensor": TensorDesc("FLOAT32", xs), "IndicesTensor": TensorDesc("INT32", ix),
                                        "UpdatesTensor": TensorDesc("FLOAT32", ix), "OutputTensor": TensorDesc("FLOAT32", xs)},
                   {"Axis": float(axis)})
    return compute(spec, d, {"x": np.asarray(x, dtype=np.float32).reshape(xs), "i": np.asarray(indices, dtype=np.int32).reshape(ix),
                             "u": np.asarray(updates, dtype=np.float32).reshape(ix)})


def test_scatter_elements_writes_along_the_axis_from_a_strided_input():
    # input {2,3} rows [1,2,3],[4,5,6] read through a transposed view (not C-ordered: the plug-in must
    # still write its copy), Axis 1, indices [[2],[0]], updates [[7],[8]]: [1,2,7] and [8,5,6]
    spec = SPECS.operator("SCATTER_ELEMENTS")
    x = np.asarray([[1, 4], [2, 5], [3, 6]], dtype=np.float32).T
    d = Descriptor("SCATTER_ELEMENTS", {"InputTensor": TensorDesc("FLOAT32", [2, 3]), "IndicesTensor": TensorDesc("INT32", [2, 1]),
                                        "UpdatesTensor": TensorDesc("FLOAT32", [2, 1]), "OutputTensor": TensorDesc("FLOAT32", [2, 3])},
                   {"Axis": 1.0})
    result = compute(spec, d, {"x": x, "i": np.asarray([[2], [0]], dtype=np.int32), "u": np.asarray([[7], [8]], dtype=np.float32)})
    assert result.outputs["OutputTensor"].reshape(-1).tolist() == [1, 2, 7, 8, 5, 6]
    assert not result.unspecified["OutputTensor"]


def test_scatter_duplicates_mark_only_elements_written_with_different_values():
    # input [0,0,0,0], indices [1,1,3,3,-4], updates [5,6,7,7,9]: element 1 gets 5 and 6 (open), element 3
    # gets 7 twice (determined: 7), element 0 gets 9 (-4 + 4), element 2 keeps 0
    result = _scatter_elements([0, 0, 0, 0], [1, 1, 3, 3, -4], [5, 6, 7, 7, 9])
    masks = result.unspecified["OutputTensor"]
    assert set(masks) == {"duplicate_index"}
    assert masks["duplicate_index"].tolist() == [False, True, False, False]
    out = result.outputs["OutputTensor"].tolist()
    assert [out[0], out[2], out[3]] == [9, 0, 7] and out[1] in (5, 6)


def test_scatter_an_index_outside_leaves_the_whole_output_open():
    # input [1,2,3], indices [0,3]: 3 is outside [-3, 3); where its update goes is unknown
    masks = _scatter_elements([1, 2, 3], [0, 3], [8, 9]).unspecified["OutputTensor"]
    assert masks["index_out_of_range"].tolist() == [True, True, True]


def test_scatter_nd_tuples_write_slices_and_duplicates_are_marked():
    # input {2,2,2} = 0..7, I 3; INT32 2-tuples {1,3,2} [[1,0],[0,-1],[1,0]] (J 3... here 2 meaningful: {3,2}),
    # updates {1,3,2} [[10,11],[20,21],[10,12]]: x[1,0,:] <- [10,11] then [10,12] (element 5 open, 4 is 10),
    # x[0,1,:] <- [20,21]; x[0,0,:] and x[1,1,:] kept
    spec = SPECS.operator("SCATTER_ND")
    d = Descriptor("SCATTER_ND", {"InputTensor": TensorDesc("FLOAT32", [2, 2, 2]), "IndicesTensor": TensorDesc("INT32", [1, 3, 2]),
                                  "UpdatesTensor": TensorDesc("FLOAT32", [1, 3, 2]), "OutputTensor": TensorDesc("FLOAT32", [2, 2, 2])},
                   {"InputDimensionCount": 3.0, "IndicesDimensionCount": 2.0})
    result = compute(spec, d, {"x": np.arange(8, dtype=np.float32).reshape(2, 2, 2),
                               "i": np.asarray([1, 0, 0, -1, 1, 0], dtype=np.int32).reshape(1, 3, 2),
                               "u": np.asarray([10, 11, 20, 21, 10, 12], dtype=np.float32).reshape(1, 3, 2)})
    out = result.outputs["OutputTensor"].reshape(-1).tolist()
    assert out[:4] == [0, 1, 20, 21] and out[4] == 10 and out[6:] == [6, 7]
    assert result.unspecified["OutputTensor"]["duplicate_index"].reshape(-1).tolist() == [False] * 5 + [True, False, False]


def test_a_scatter_mode_needs_updates():
    with pytest.raises(ValueError, match="needs updates"):
        check_mode(FamilySpec("gather", {"mode": "scatter_elements", "input": "InputTensor", "indices": "IndicesTensor", "axis": "Axis"}))


@pytest.mark.parametrize("indices, updates, axis, rules", [
    ([2, 2], [2, 2], 1, set()),
    ([2, 4], [2, 4], 1, set()),                                   # more than the axis' 3: valid by the page
    ([1, 2], [1, 2], 1, {"constraint.indices_sizes"}),            # dim 0 is not the axis: must be the input's 2
    ([2, 2], [2, 3], 1, {"constraint.updates_sizes"}),
])
def test_scatter_elements_rules(indices, updates, axis, rules):
    d = Descriptor("SCATTER_ELEMENTS", {"InputTensor": TensorDesc("FLOAT32", [2, 3]), "IndicesTensor": TensorDesc("UINT32", indices),
                                        "UpdatesTensor": TensorDesc("FLOAT32", updates), "OutputTensor": TensorDesc("FLOAT32", [2, 3])},
                   {"Axis": float(axis)})
    assert validate(SPECS.operator("SCATTER_ELEMENTS"), d, "6.4").rule_ids == rules


@pytest.mark.parametrize("indices, updates, attrs, rules", [
    ([1, 2, 1], [2, 3, 4], (3, 2), set()),                         # two 1-tuples into dim 0 of {2,3,4}: {2} + {3,4}
    ([1, 2, 2], [1, 2, 4], (3, 2), set()),                         # two 2-tuples: {2} + {4}, a leading 1
    ([1, 2, 2], [1, 1, 2], (3, 2), {"constraint.updates_sizes"}),
    ([1, 2, 4], [1, 1, 2], (3, 2), {"constraint.tuple_size"}),     # 4 coordinates for 3 dims
])
def test_scatter_nd_rules(indices, updates, attrs, rules):
    i, j = attrs
    d = Descriptor("SCATTER_ND", {"InputTensor": TensorDesc("FLOAT32", [2, 3, 4]), "IndicesTensor": TensorDesc("UINT32", indices),
                                  "UpdatesTensor": TensorDesc("FLOAT32", updates), "OutputTensor": TensorDesc("FLOAT32", [2, 3, 4])},
                   {"InputDimensionCount": float(i), "IndicesDimensionCount": float(j)})
    assert validate(SPECS.operator("SCATTER_ND"), d, "6.4").rule_ids == rules


def test_distinct_lines_never_repeat_a_position():
    # lines of 3 along axis 1 of a {2,3} tensor (a leading data-set axis of 4), range [-3, 2] modulo 3:
    # each line names three different elements, negative spellings included somewhere
    from harness.generate.data import distinct_lines
    rng = np.random.default_rng(7)
    out = distinct_lines(np.zeros((4, 2, 3), dtype=np.int32), 1, -3, 2, 3, rng)
    assert all(sorted((out[s, r] % 3).tolist()) == [0, 1, 2] for s in range(4) for r in range(2))
    assert out.min() >= -3 and out.max() <= 2 and (out < 0).any()


def test_distinct_tuples_are_pairwise_different():
    # six 2-tuples into dims of sizes 2 and 3 (all six positions), unsigned range [0, 2]: coordinate 0
    # modulo 2 has positions {0, 1}, so every tuple of the space appears once
    from harness.generate.data import distinct_tuples
    rng = np.random.default_rng(3)
    out = distinct_tuples(np.zeros((2, 6, 2), dtype=np.uint32), 1, 0, 2, [2, 3], rng)
    for s in range(2):
        assert sorted(map(tuple, out[s].tolist())) == [(a, b) for a in range(2) for b in range(3)]


def test_scatter_generation_draws_no_duplicates():
    # SCATTER_ELEMENTS's generated valid data: where each line is no longer than the axis, no
    # element is written twice, so nothing is marked duplicate_index
    from harness.generate.data import make_input_batch
    from harness.model.descriptor import Descriptor as D
    spec = SPECS.operator("SCATTER_ELEMENTS")
    d = D("SCATTER_ELEMENTS", {"InputTensor": TensorDesc("INT8", [3, 4]), "IndicesTensor": TensorDesc("INT64", [3, 4]),
                               "UpdatesTensor": TensorDesc("INT8", [3, 4]), "OutputTensor": TensorDesc("INT8", [3, 4])}, {"Axis": 1.0})
    for buffers in make_input_batch(spec, d, seed=11, count=6, level="6.4"):
        indices = np.frombuffer(buffers["IndicesTensor"], dtype=np.int64)[:12].reshape(3, 4)
        if ((indices < -4) | (indices > 3)).any():
            continue  # a data set given values just outside the range
        assert all(sorted((row % 4).tolist()) == [0, 1, 2, 3] for row in indices)


def test_onnx_runtime_scatter_elements(ort):
    # the page's Example 2: a zero {3,3}, Axis 0, indices [[1,0,2],[0,2,1]], updates [[10,11,12],[20,21,22]]
    types = {"InputTensor": "FLOAT32", "IndicesTensor": "UINT32", "UpdatesTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    sizes = {"InputTensor": [3, 3], "IndicesTensor": [2, 3], "UpdatesTensor": [2, 3], "OutputTensor": [3, 3]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": [0] * 9, "IndicesTensor": [1, 0, 2, 0, 2, 1],
                                         "UpdatesTensor": [10, 11, 12, 20, 21, 22]}, {"Axis": 0})
    result, out = _ort_run(ort, "SCATTER_ELEMENTS", t, arrays, kw)
    assert result.kind == "outputs", result
    assert out == [20, 11, 0, 10, 0, 22, 0, 21, 12]


def test_onnx_runtime_scatter_nd_below_a_leading_one(ort):
    # input {1,3,2} = [[1,2],[3,4],[5,6]], I 2; 1-tuples {1,2,1} [[2],[-3]], J 2; updates {1,2,2}: rows 2 and 0
    types = {"InputTensor": "INT16", "IndicesTensor": "INT64", "UpdatesTensor": "INT16", "OutputTensor": "INT16"}
    sizes = {"InputTensor": [1, 3, 2], "IndicesTensor": [1, 2, 1], "UpdatesTensor": [1, 2, 2], "OutputTensor": [1, 3, 2]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": range(1, 7), "IndicesTensor": [2, -3], "UpdatesTensor": [10, 11, 12, 13]},
                          {"InputDimensionCount": 2, "IndicesDimensionCount": 2})
    result, out = _ort_run(ort, "SCATTER_ND", t, arrays, kw)
    assert result.kind == "outputs", result
    assert out == [12, 13, 3, 4, 10, 11]


def test_onnx_runtime_scatter_index_outside_is_unsupported(ort):
    types = {"InputTensor": "FLOAT32", "IndicesTensor": "INT32", "UpdatesTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    sizes = {"InputTensor": [3], "IndicesTensor": [2], "UpdatesTensor": [2], "OutputTensor": [3]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": [1, 2, 3], "IndicesTensor": [0, -4], "UpdatesTensor": [5, 6]}, {"Axis": 0})
    result, _ = _ort_run(ort, "SCATTER_ELEMENTS", t, arrays, kw)
    assert result.kind == "unsupported" and "outside [-3, 2]" in result.reason, result


# --- scatter_flat (the inverse of a pooling's flat indices) ----------------------------------------

def _scatter_flat(x: list, indices: list, in_sizes: list, out_sizes: list):
    """The plug-in's result for MAX_UNPOOLING: FLOAT32 values, UINT32 flat indices into the whole output."""
    spec = SPECS.operator("MAX_UNPOOLING")
    d = Descriptor("MAX_UNPOOLING", {"InputTensor": TensorDesc("FLOAT32", in_sizes), "IndicesTensor": TensorDesc("UINT32", in_sizes),
                                     "OutputTensor": TensorDesc("FLOAT32", out_sizes)}, {})
    return compute(spec, d, {"x": np.asarray(x, dtype=np.float32).reshape(in_sizes),
                             "i": np.asarray(indices, dtype=np.uint32).reshape(in_sizes)})


def test_scatter_flat_writes_into_zeros_across_channels():
    # x {1,2,1,1} [3, 4], indices [3, 0] into {1,2,1,2} (channel 0 at 0..1, channel 1 at 2..3):
    # element 3 (channel 1) = 3, element 0 = 4, elements 1 and 2 untouched: 0
    result = _scatter_flat([3, 4], [3, 0], [1, 2, 1, 1], [1, 2, 1, 2])
    assert result.outputs["OutputTensor"].reshape(-1).tolist() == [4, 0, 0, 3]
    assert not result.unspecified["OutputTensor"]


def test_scatter_flat_duplicates_and_indices_outside():
    # indices [1, 1] with values 5 and 6 into 3 elements: element 1 open, 0 and 2 are 0; an index 3
    # (the element count) leaves the whole output open
    masks = _scatter_flat([5, 6], [1, 1], [1, 1, 1, 2], [1, 1, 1, 3]).unspecified["OutputTensor"]
    assert masks["duplicate_index"].reshape(-1).tolist() == [False, True, False]
    masks = _scatter_flat([5, 6], [0, 3], [1, 1, 1, 2], [1, 1, 1, 3]).unspecified["OutputTensor"]
    assert masks["index_out_of_range"].reshape(-1).tolist() == [True, True, True]


def test_scatter_flat_takes_no_updates():
    check_mode(FamilySpec("gather", {"mode": "scatter_flat", "input": "InputTensor", "indices": "IndicesTensor"}))
    with pytest.raises(ValueError, match="axis"):
        check_mode(FamilySpec("gather", {"mode": "scatter_flat", "input": "InputTensor", "indices": "IndicesTensor", "axis": "Axis"}))


def test_distinct_blocks_from_axis_0_never_repeat_in_the_whole_tensor():
    # a {2,3} tensor (a leading data-set axis of 4), range [0, 5], the whole tensor one block: its six
    # values are 0..5 in some order, in every data set
    from harness.generate.data import _apply_distinct
    from harness.spec.model import Distinct
    from harness.spec.shape_expr import parse_shape_expr
    rng = np.random.default_rng(5)
    rule = Distinct("blocks", parse_shape_expr("0", set(), set()), parse_shape_expr("6", set(), set()))
    out = _apply_distinct(rule, np.zeros((4, 2, 3), dtype=np.uint32), 0, 5, {}, {}, rng)
    assert all(sorted(out[s].reshape(-1).tolist()) == [0, 1, 2, 3, 4, 5] for s in range(4))


def test_unpooling_generation_draws_no_duplicates():
    # MAX_UNPOOLING's generated data: 6 indices into 12 output elements, never one twice
    from harness.generate.data import make_input_batch
    spec = SPECS.operator("MAX_UNPOOLING")
    d = Descriptor("MAX_UNPOOLING", {"InputTensor": TensorDesc("INT8", [1, 2, 1, 3]), "IndicesTensor": TensorDesc("UINT32", [1, 2, 1, 3]),
                                     "OutputTensor": TensorDesc("INT8", [1, 2, 2, 3])}, {})
    for buffers in make_input_batch(spec, d, seed=4, count=6, level="6.4"):
        indices = np.frombuffer(buffers["IndicesTensor"], dtype=np.uint32)[:6]
        if (indices > 11).any():
            continue  # a data set given values just outside the range
        assert len(set(indices.tolist())) == 6


def test_onnx_runtime_max_unpool(ort):
    # x {1,1,1,2} [7, 8], indices [3, 0] into {1,1,2,2}: [8, 0, 0, 7]; an INT8 input or an output with
    # other channels is unsupported (ONNX Runtime's MaxUnpool)
    types = {"InputTensor": "FLOAT32", "IndicesTensor": "UINT32", "OutputTensor": "FLOAT32"}
    sizes = {"InputTensor": [1, 1, 1, 2], "IndicesTensor": [1, 1, 1, 2], "OutputTensor": [1, 1, 2, 2]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": [7, 8], "IndicesTensor": [3, 0]}, {})
    assert _ort_run(ort, "MAX_UNPOOLING", t, arrays, kw)[1] == [8, 0, 0, 7]
    sizes = {**sizes, "OutputTensor": [1, 2, 1, 2]}
    t, arrays, kw = _case(types, sizes, {"InputTensor": [7, 8], "IndicesTensor": [3, 0]}, {})
    assert _ort_run(ort, "MAX_UNPOOLING", t, arrays, kw)[0].kind == "unsupported"
