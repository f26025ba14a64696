"""The window family (CONVOLUTION's reference) and its generation mechanism `free_in`.

Every expected value is worked out by hand in the test's docstring or comment; none is taken from
the reference's own output."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.generate.expression_breakers import break_alone
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.layout import pack_buffer
from harness.model.validator import validate
from harness.reference.families.windowing import Window, window_positions
from harness.spec.shape_expr import is_free, parse_shape_expr
from tests.helpers import REFERENCE, SPECS

X33 = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)  # [[1,2,3],[4,5,6],[7,8,9]]
W22 = np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 2, 2)  # [[1,2],[3,4]]: no symmetry a flip keeps


def _attrs(mode: int, direction: int = 0, strides=(1, 1), dilations=(1, 1), start=(0, 0), end=(0, 0), output_padding=(0, 0),
           groups: int = 1) -> dict:
    return {"Mode": float(mode), "Direction": float(direction), "Strides": list(strides), "Dilations": list(dilations),
            "StartPadding": list(start), "EndPadding": list(end), "OutputPadding": list(output_padding), "GroupCount": float(groups)}


def _case(x: np.ndarray, w: np.ndarray, out_sizes: list[int], attributes: dict, dtype: str = "FLOAT32"):
    spec = SPECS.operator("CONVOLUTION")
    types = {"InputTensor": dtype, "FilterTensor": dtype, "OutputTensor": dtype}
    layouts = {"InputTensor": TensorDesc(dtype, list(x.shape)), "FilterTensor": TensorDesc(dtype, list(w.shape)),
               "OutputTensor": TensorDesc(dtype, out_sizes)}
    return spec, case_from_arrays(spec, "6.4", types, {"InputTensor": x, "FilterTensor": w}, layouts=layouts, attributes=attributes)


def _reference(x: np.ndarray, w: np.ndarray, out_sizes: list[int], attributes: dict) -> list[float]:
    spec, case = _case(x, w, out_sizes, attributes)
    assert validate(spec, case.descriptor, "6.4").accepted, validate(spec, case.descriptor, "6.4").summary()
    result = REFERENCE.run(case)
    assert result.kind == "outputs"
    return output_values(spec, case, result.buffers)["OutputTensor"].ravel().tolist()


# --- windowing arithmetic ---------------------------------------------------------------------


def test_forward_positions_with_stride_and_start_padding():
    """in 3, kernel 2, stride 2, start 1: output o reads p = 2o - 1 + k: o = 0 reads -1 (padding) and
    0; o = 1 reads 1 and 2."""
    flat, valid = window_positions(Window((2,), (1,), (1,)), (3,), (2,), (2,))
    assert valid.tolist() == [[False, True], [True, True]]
    assert flat[valid].tolist() == [0, 1, 2]


def test_forward_positions_with_dilation():
    """in 3, kernel 2, dilation 2: the one output reads 0 and 2."""
    flat, valid = window_positions(Window((1,), (2,), (0,)), (3,), (1,), (2,))
    assert valid.all() and flat.tolist() == [[0, 2]]


def test_transposed_positions_are_the_adjoint():
    """Transposed, in 2, kernel 2, stride 2, start 1, 4 outputs: input p scatters to 2p - 1 + k, so
    output o reads p = (o + 1 - k) / 2 where whole and in [0, 2): o = 0: k = 1, p = 0; o = 1: k = 0,
    p = 1; o = 2: k = 1, p = 1; o = 3: k = 0 gives p = 2, past the input (the output padding)."""
    flat, valid = window_positions(Window((2,), (1,), (1,), transposed=True), (2,), (4,), (2,))
    assert valid.tolist() == [[False, True], [True, False], [False, True], [False, False]]
    assert flat[valid].tolist() == [0, 1, 1]


def test_positions_combine_row_major():
    """2-D: in 2x2, kernel 1x1, stride 1: output {r, c} reads flat input index 2r + c."""
    flat, valid = window_positions(Window((1, 1), (1, 1), (0, 0)), (2, 2), (2, 2), (1, 1))
    assert valid.all() and flat.ravel().tolist() == [0, 1, 2, 3]


# --- the reference through the spec --------------------------------------------------------------


def test_convolution_mode_flips_the_kernel():
    """The same input, filter and window (stride 2, StartPadding 1: P has a zero first row and
    column) in both modes. Cross-correlation, w [[1,2],[3,4]]: [0*1+0*2+0*3+1*4, 2*3+3*4, 4*2+7*4,
    5*1+6*2+8*3+9*4] = [4, 18, 36, 77]. Convolution flips w to [[4,3],[2,1]]: [1*1, 2*2+3*1, 4*3+7*1,
    5*4+6*3+8*2+9*1] = [1, 7, 19, 63]. A reference that ignored the flip gives the first for both."""
    window = dict(strides=(2, 2), start=(1, 1))
    assert _reference(X33, W22, [1, 1, 2, 2], _attrs(1, **window)) == [4, 18, 36, 77]
    assert _reference(X33, W22, [1, 1, 2, 2], _attrs(0, **window)) == [1, 7, 19, 63]


def test_backward_flip_follows_the_mode():
    """Backward, one impulse x [[1,0],[0,0]]: the output is the filter the mode reads, at the corner:
    cross-correlation [[1,2,0],[3,4,0],[0,0,0]], convolution the flipped [[4,3,0],[2,1,0],[0,0,0]]."""
    x = np.array([1, 0, 0, 0], np.float32).reshape(1, 1, 2, 2)
    assert _reference(x, W22, [1, 1, 3, 3], _attrs(1, direction=1)) == [1, 2, 0, 3, 4, 0, 0, 0, 0]
    assert _reference(x, W22, [1, 1, 3, 3], _attrs(0, direction=1)) == [4, 3, 0, 2, 1, 0, 0, 0, 0]


def test_groups_read_their_own_channels():
    """x {1, 4, 1, 1} [1, 2, 3, 4], GroupCount 2, filter {2, 2, 1, 1} [1, 10, 100, 1000]: output 0
    reads channels 0, 1: 1*1 + 2*10 = 21; output 1 reads channels 2, 3: 3*100 + 4*1000 = 4300."""
    x = np.array([1, 2, 3, 4], np.float32).reshape(1, 4, 1, 1)
    w = np.array([1, 10, 100, 1000], np.float32).reshape(2, 2, 1, 1)
    assert _reference(x, w, [1, 2, 1, 1], _attrs(1, groups=2)) == [21, 4300]


def test_three_d_tensors_at_fl4():
    """3D tensors (DimensionCount 1): x [1, 2, 3, 4], w [1, -1], stride 2: [1 - 2, 3 - 4] = [-1, -1]."""
    spec = SPECS.operator("CONVOLUTION")
    x = np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 4)
    w = np.array([1, -1], np.float32).reshape(1, 1, 2)
    types = {"InputTensor": "FLOAT32", "FilterTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    layouts = {"InputTensor": TensorDesc("FLOAT32", [1, 1, 4]), "FilterTensor": TensorDesc("FLOAT32", [1, 1, 2]),
               "OutputTensor": TensorDesc("FLOAT32", [1, 1, 2])}
    attributes = {"Mode": 1.0, "Direction": 0.0, "Strides": [2], "Dilations": [1], "StartPadding": [0], "EndPadding": [0],
                  "OutputPadding": [0], "GroupCount": 1.0}
    case = case_from_arrays(spec, "4.0", types, {"InputTensor": x, "FilterTensor": w}, layouts=layouts, attributes=attributes)
    assert validate(spec, case.descriptor, "4.0").accepted
    assert validate(spec, case.descriptor, "3.0").rule_ids == {"tensor.dimension_count"}  # FL 1.0's table: 4 to 5 dims
    result = REFERENCE.run(case)
    assert output_values(spec, case, result.buffers)["OutputTensor"].ravel().tolist() == [-1, -1]


# --- judgement: the bound and the fp32 flush, shared with the matmul family ----------------------


def _judged(x: np.ndarray, w: np.ndarray, actual: float, dtype: str = "FLOAT32"):
    spec, case = _case(x, w, [1, 1, 1, 1], _attrs(1), dtype)
    out = np.array([actual], SPECS.catalog.dtype(dtype).numpy).reshape(1, 1, 1, 1)
    return judge(spec, case, Outputs({"OutputTensor": pack_buffer(out, case.descriptor.tensors["OutputTensor"],
                                                                   SPECS.catalog.dtype(dtype))}), True)


@pytest.mark.parametrize("actual, legal", [(np.inf, True), (np.nan, True), (1.0, False)])
def test_an_infinite_input_times_a_flushed_denormal_may_be_nan(actual, legal):
    """x [inf], w [1e-39] (an fp32 denormal), 1x1: exactly inf * 1e-39 = inf; a D3D device may read
    the denormal as 0, and inf * 0 = NaN. Both are legal, 1 is not."""
    x = np.array([np.inf], np.float32).reshape(1, 1, 1, 1)
    w = np.array([1e-39], np.float32).reshape(1, 1, 1, 1)
    assert (_judged(x, w, actual).mismatch_count == 0) == legal


def test_the_sum_is_judged_within_its_bound():
    """FLOAT16, x {1, 4, 1, 1} [1, 2^-11, 2^-11, 2^-11], w [1, 1, 1, 1]: exactly 1 + 3 * 2^-11 =
    1.00146484375, between the FLOAT16 neighbours 1.0009765625 and 1.001953125. Summed in any order
    with one rounding per step, a device may land on either (1 + 2^-11 rounds to 1 or 1 + 2^-10),
    so both are legal; 1.5 is not: K = 4 terms, bound 2 K eps sum|x w| = 8 * 2^-10 * 1.0015 ~ 0.0078
    on xw, and 1.5 is no rounding of a value within 0.0079 of 1.0015."""
    x = np.array([1, 2 ** -11, 2 ** -11, 2 ** -11], np.float16).reshape(1, 4, 1, 1)
    w = np.ones((1, 4, 1, 1), np.float16)
    assert _judged(x, w, 1.0009765625, "FLOAT16").mismatch_count == 0
    assert _judged(x, w, 1.001953125, "FLOAT16").mismatch_count == 0
    assert _judged(x, w, 1.5, "FLOAT16").mismatch_count == 1


# --- free_in ---------------------------------------------------------------------------------------


def test_free_in_is_free_with_a_generation_domain():
    expr = parse_shape_expr("[free_in([G, 2 * G]), 3]", {"G"}, set())
    first, second = expr.evaluate({"G": 2}, {})
    assert is_free(first) and first.values == (2, 4) and second == 3


def test_free_in_filter_count_is_stepped_to_break_its_rule_alone():
    """The forward filter's FilterBatchCount is `free_in` multiples of GroupCount: any size passes
    filter_sizes, and the mutation search breaks groups_divide_output_channels alone by stepping it
    off (GroupCount 2, FilterBatchCount 2 -> 3 or 1, with the output and bias re-derived)."""
    spec = SPECS.operator("CONVOLUTION")
    t = lambda sizes: TensorDesc("FLOAT32", sizes)
    d = Descriptor("CONVOLUTION", {"InputTensor": t([1, 2, 3, 3]), "FilterTensor": t([2, 1, 2, 2]), "BiasTensor": t([1, 2, 1, 1]),
                                   "OutputTensor": t([1, 2, 2, 2])}, _attrs(1, groups=2))
    assert validate(spec, d, "6.4").accepted
    found = break_alone(spec, "6.4", d, "constraint.groups_divide_output_channels")
    assert found is not None
    broken, what = found
    assert "FilterTensor.Sizes[0]" in what and broken.tensors["FilterTensor"].sizes[0] in (1, 3)


@pytest.mark.parametrize("inf_at, actual, mismatches, open_", [(0, 2.0, 0, 0), (0, np.nan, 0, 1), (4, 2.0, 1, 0), (4, np.inf, 0, 0)])
def test_padding_meeting_an_infinite_filter_element_is_open(inf_at, actual, mismatches, open_):
    """x [[1]] padded by 1 on every side, w a 3x3 filter of zeros with w[1][1] = 2 and an inf at flat
    position `inf_at`. At 0 (a corner, on padding): the one output's only term on the input is
    1 * 2 = 2; skipping padded terms gives 2, multiplying the padded zero gives 0 * inf = NaN: the
    spec leaves that element open (padding_times_nonfinite; ONNX Runtime's CPU Conv returns the
    NaN), so a NaN is `diverges-on-unspecified`, not a mismatch. At 4 (the centre, replacing the 2, on
    the input): the term is 1 * inf = inf and nothing is open: 2 is a mismatch, inf passes."""
    spec = SPECS.operator("CONVOLUTION")
    x = np.array([1], np.float32).reshape(1, 1, 1, 1)
    w = np.array([0, 0, 0, 0, 2, 0, 0, 0, 0], np.float32)
    w[inf_at] = np.inf
    w = w.reshape(1, 1, 3, 3)
    spec, case = _case(x, w, [1, 1, 1, 1], _attrs(1, start=(1, 1), end=(1, 1)))
    out = np.array([actual], np.float32).reshape(1, 1, 1, 1)
    diff = judge(spec, case, Outputs({"OutputTensor": pack_buffer(out, case.descriptor.tensors["OutputTensor"],
                                                                   SPECS.catalog.dtype("FLOAT32"))}), True)
    assert (diff.mismatch_count, diff.unspecified_count) == (mismatches, open_)


def test_past_reach_marks_the_output_padding():
    """Transposed, in 2, kernel 1, stride 2, start 0: the scatter reaches (2 - 1) * 2 + 1 = 3
    outputs; an output padding of 1 adds a 4th, past the reach. Forward, in 3, kernel 2, stride 1:
    (3 - 2) // 1 + 1 = 2 outputs; a 3rd would be past it."""
    from harness.reference.families.windowing import past_reach
    assert past_reach(Window((2,), (1,), (0,), transposed=True), (0,), (2,), (4,), (1,)).tolist() == [False, False, False, True]
    assert past_reach(Window((1,), (1,), (0,)), (0,), (3,), (3,), (2,)).tolist() == [False, False, True]
