"""The matmul and window families' zero points (`a_zero_point`, `b_zero_point`; `input_zero_point`,
`filter_zero_point`) and the shape rules that align right (`align: right`), on MATRIX_MULTIPLY_INTEGER
and CONVOLUTION_INTEGER, whose zero points broadcast against their operands.

Hand-computed: UINT8 A {M=2, K=2} [[3, 5], [7, 9]] less per-row zero points [1, 9] is
[[2, 4], [-2, 0]]; UINT8 B {K=2, N=2} [[1, 2], [3, 4]] less per-column zero points [1, 0] is
[[0, 2], [2, 4]]. The products: row 0: 0 + 8 = 8, 4 + 16 = 20; row 1: 0 + 0 = 0, -4 + 0 = -4."""
from __future__ import annotations

import numpy as np
import pytest

from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.validator import validate
from harness.spec.shape_expr import FREE, right_aligned
from tests.helpers import SPECS, run_reference

OP = "MATRIX_MULTIPLY_INTEGER"
A = np.array([[3, 5], [7, 9]], np.uint8)
B = np.array([[1, 2], [3, 4]], np.uint8)
TYPES = {"ATensor": "UINT8", "AZeroPointTensor": "UINT8", "BTensor": "UINT8", "BZeroPointTensor": "UINT8", "OutputTensor": "INT32"}


@pytest.mark.parametrize("a_zp_sizes, b_zp_sizes", [([1, 1, 2, 1], [1, 1, 1, 2]),  # 4-D zero points of 2-D A and B
                                                     ([2, 1], [2]),                  # as many dims, and one
                                                     ([1, 2, 1], [1, 2])])
def test_zero_points_of_any_dimension_count_align_right(a_zp_sizes, b_zp_sizes):
    layouts = {"ATensor": TensorDesc("UINT8", [2, 2]), "AZeroPointTensor": TensorDesc("UINT8", a_zp_sizes),
               "BTensor": TensorDesc("UINT8", [2, 2]), "BZeroPointTensor": TensorDesc("UINT8", b_zp_sizes),
               "OutputTensor": TensorDesc("INT32", [2, 2])}
    values = {"ATensor": A, "AZeroPointTensor": np.array([1, 9], np.uint8).reshape(a_zp_sizes),
              "BTensor": B, "BZeroPointTensor": np.array([1, 0], np.uint8).reshape(b_zp_sizes)}
    got = run_reference(OP, TYPES, values, layouts=layouts)
    assert got.tolist() == [[8, 20], [0, -4]]


def test_an_absent_zero_point_is_zero():
    types = {"ATensor": "UINT8", "BTensor": "UINT8", "OutputTensor": "INT32"}
    layouts = {n: TensorDesc(t, [2, 2]) for n, t in types.items()}
    got = run_reference(OP, types, {"ATensor": A, "BTensor": B}, layouts=layouts)
    assert got.tolist() == [[3 * 1 + 5 * 3, 3 * 2 + 5 * 4], [7 * 1 + 9 * 3, 7 * 2 + 9 * 4]]


def test_right_aligned_cuts_leading_ones_only():
    assert right_aligned([3], [1, 1, 1, 3]) == ([3], [3])
    assert right_aligned([1, 1, 2, 1], [2, 1]) == ([2, 1], [2, 1])
    assert right_aligned([2, 1, 1], [1, 1]) is None   # a leading 2 is no broadcast
    assert right_aligned([1], [FREE, 1]) == ([1], [1])  # a free size may be 1


@pytest.mark.parametrize("b_zp_sizes, broken", [([2], set()), ([1, 2], set()), ([1, 1, 1, 2], set()), ([1, 1, 1], set()),
                                                ([2, 1], {"constraint.b_zero_point_sizes"}),
                                                ([2, 1, 2], {"constraint.b_zero_point_sizes"})])
def test_the_validator_reads_an_aligned_shape_rule_right_aligned(b_zp_sizes, broken):
    """B {2, 2}: a per-column zero point is {2} or {1, 2} (or with more leading 1s); {2, 1} puts
    the 2 where K is (its last size, 1, is a per-tensor count), {2, 1, 2} a leading 2 that is no broadcast."""
    spec = SPECS.operator(OP)
    tensors = {"ATensor": TensorDesc("UINT8", [2, 2]), "AZeroPointTensor": None, "BTensor": TensorDesc("UINT8", [2, 2]),
               "BZeroPointTensor": TensorDesc("UINT8", b_zp_sizes), "OutputTensor": TensorDesc("INT32", [2, 2])}
    verdict = validate(spec, Descriptor(OP, tensors, {}), "6.4")
    assert verdict.rule_ids == broken, verdict.summary()


# The window family's zero points (`input_zero_point`, `filter_zero_point`), on CONVOLUTION_INTEGER.
CONV = "CONVOLUTION_INTEGER"
WINDOW = {"Strides": [1], "Dilations": [1], "StartPadding": [1], "EndPadding": [0], "GroupCount": 1}


@pytest.mark.parametrize("fzp_sizes", [[1, 2, 1], [2, 1], [1, 1, 2, 1]])
def test_a_filter_zero_point_per_output_channel_aligns_with_the_output(fzp_sizes):
    """UINT8 x {1,1,2} [5, 7] less zero point 3: [2, 4], StartPadding 1: windows [pad, 2] and [2, 4];
    w {2,1,2} [[1, 1], [4, 2]] less per-channel zero points [1, 2]: [[0, 0], [2, 0]]. Channel 0: 0, 0;
    channel 1: 2 * pad + 0 * 2 = 0 (the padding reads the zero point: no term), 2 * 2 + 0 * 4 = 4.
    The zero point {1, M, 1} of a 3-D output, or the same with a leading 1 dropped or added."""
    types = {"InputTensor": "UINT8", "InputZeroPointTensor": "UINT8", "FilterTensor": "UINT8", "FilterZeroPointTensor": "UINT8",
             "OutputTensor": "INT32"}
    izp_sizes = [1] * len(fzp_sizes)  # the page: both zero points have one DimensionCount
    layouts = {"InputTensor": TensorDesc("UINT8", [1, 1, 2]), "InputZeroPointTensor": TensorDesc("UINT8", izp_sizes),
               "FilterTensor": TensorDesc("UINT8", [2, 1, 2]), "FilterZeroPointTensor": TensorDesc("UINT8", fzp_sizes),
               "OutputTensor": TensorDesc("INT32", [1, 2, 2])}
    values = {"InputTensor": np.array([5, 7], np.uint8).reshape(1, 1, 2), "InputZeroPointTensor": np.array([3], np.uint8).reshape(izp_sizes),
              "FilterTensor": np.array([1, 1, 4, 2], np.uint8).reshape(2, 1, 2),
              "FilterZeroPointTensor": np.array([1, 2], np.uint8).reshape(fzp_sizes)}
    got = run_reference(CONV, types, values, level="6.4", layouts=layouts, attributes=WINDOW)
    assert got.ravel().tolist() == [0, 0, 0, 4]
