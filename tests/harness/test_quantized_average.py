"""The window family's average with an epilogue (harness.reference.families.pooling._epilogue) and the
coverage plan's dimension counts for right-aligned broadcast operands (harness.generate.strategies
._realign_plan), on QUANTIZED_LINEAR_AVERAGE_POOLING.

Hand-computed: x UINT8 {1,1,2,2} [3, 5, 7, 9], zero point 3: [0, 2, 4, 6]; WindowSize 2x2, stride 1,
EndPadding 1. Window sums xw: {0,0} 12, {0,1} 2 + 6 = 8, {1,0} 4 + 6 = 10, {1,1} 6. Divisors: the
elements on the input (4, 2, 2, 1), or with IncludePadding 4 each (a padded position adds nothing:
it reads as the zero point).
"""
from __future__ import annotations

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.generate.strategies import _realign_plan, _realigned
from harness.generate.types import coverage_plan, dim_range
from harness.model.descriptor import TensorDesc
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute
from tests.helpers import SPECS

OP = "QUANTIZED_LINEAR_AVERAGE_POOLING"


def _result(include_padding: int):
    spec = SPECS.operator(OP)
    arrays = {"InputTensor": np.array([3, 5, 7, 9], np.uint8).reshape(1, 1, 2, 2),
              "InputScaleTensor": np.array([1.0], np.float32), "InputZeroPointTensor": np.array([3], np.uint8),
              "OutputScaleTensor": np.array([1.0], np.float32)}
    types = {"InputTensor": "UINT8", "InputScaleTensor": "FLOAT32", "InputZeroPointTensor": "UINT8",
             "OutputScaleTensor": "FLOAT32", "OutputTensor": "UINT8"}
    layouts = {n: TensorDesc(types[n], list(a.shape)) for n, a in arrays.items()} | {"OutputTensor": TensorDesc("UINT8", [1, 1, 2, 2])}
    attributes = {"Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [1, 1],
                  "Dilations": [1, 1], "IncludePadding": float(include_padding)}
    case = case_from_arrays(spec, "6.4", types, arrays, layouts=layouts, attributes=attributes)
    return family_compute("window")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))


def test_average_epilogue_gives_the_sum_less_the_zero_point_and_its_divisor():
    result = _result(0)
    ctx = result.contexts["OutputTensor"]
    assert result.epilogue["OutputTensor"]["xw"][0].ravel().tolist() == [12, 8, 10, 6]
    assert np.asarray(ctx.variables["divisor"]).ravel().tolist() == [4, 2, 2, 1]
    # 12/4 = 3, 8/2 = 4, 10/2 = 5, 6/1 = 6
    assert result.outputs["OutputTensor"].ravel().tolist() == [3, 4, 5, 6]


def test_average_epilogue_counts_the_padding_where_include_padding_holds():
    result = _result(1)
    assert np.asarray(result.contexts["OutputTensor"].variables["divisor"]).ravel().tolist() == [4, 4, 4, 4]
    # 12/4 = 3, 8/4 = 2, 10/4 = 2.5 (to even: 2), 6/4 = 1.5 (to even: 2)
    assert result.outputs["OutputTensor"].ravel().tolist() == [3, 2, 2, 2]


def test_realign_plan_reaches_every_dimension_count_of_each_zero_point_type():
    """The zero points (1 to 5 dims, right-aligned against a 4-D or 5-D input) are first drawn at
    every count for each of their types: a cycle keyed by the input's count and the absent tensors
    never started all-ones Sizes at 3 dims."""
    spec = SPECS.operator(OP)
    for name in ("InputZeroPointTensor", "OutputZeroPointTensor", "InputScaleTensor"):
        lo, hi = dim_range(spec, "6.2", [name], None)
        plan = _realign_plan(spec, "6.2", None, name)
        reached = {(cell.types[name], plan[(tuple(sorted(cell.types.items())), cell.dim_count, cell.slot)])
                   for cell in coverage_plan(spec, "6.2") if cell.types.get(name) is not None}
        types = {cell.types[name] for cell in coverage_plan(spec, "6.2") if cell.types.get(name) is not None}
        assert reached == {(t, c) for t in types for c in range(lo, hi + 1)}, name


def test_realigned_takes_the_planned_count_where_the_sizes_allow_it():
    class First:  # a draw that takes the first choice, as a bounded run's first example does
        def __call__(self, strategy):
            return strategy.wrapped_strategy.elements[0] if hasattr(strategy, "wrapped_strategy") else strategy.elements[0]
    draw = First()
    assert _realigned(draw, [1, 1, 1, 1], 1, 5, 3) == [1, 1, 1]
    assert _realigned(draw, [1, 1, 1, 1], 1, 5, 5) == [1, 1, 1, 1, 1]
    assert _realigned(draw, [1, 4, 1, 1], 1, 5, 2) == [4, 1, 1]  # a channel size of 4 needs 3 dims at least
    assert _realigned(draw, [1, 1, 1, 1], 1, 5, None) == [1]


def test_left_aligned_shape_rules_leave_out_or_add_trailing_ones():
    from harness.spec.shape_expr import aligned, parse_shape_expr
    want = [1, parse_shape_expr("free_in([1, 2])", set(), set()).evaluate({}, {}), 1, 1]
    assert aligned([1, 2, 1], want, "left") == ([1, 2, 1], want[:3])
    assert aligned([1, 2, 1, 1, 1], want, "left") == ([1, 2, 1, 1], want)
    assert aligned([1, 1, 2], want, "left") is not None  # cut to 3: its third size then differs from 1
    assert aligned([2, 1, 1, 1, 1, 3], want, "left") is None  # a trailing size other than 1 is no broadcast
    assert aligned([1, 1, 1, 2], want, "right") == ([1, 1, 1, 2], want)


def test_a_left_aligned_scale_reaches_the_family_at_the_rules_dimension_count():
    """A per-channel scale {1, 2, 1} against a 4-D input {1, 2, 2, 2}: channel 0 scaled by 0.5,
    channel 1 by 2 (x - 0 summed over 2x2 windows: 12 and 24, over 4: 3 and 6; times the scales
    1.5 -> 2 (even) and 12)."""
    spec = SPECS.operator(OP)
    arrays = {"InputTensor": np.array([1, 2, 4, 5, 3, 5, 7, 9], np.uint8).reshape(1, 2, 2, 2),
              "InputScaleTensor": np.array([0.5, 2.0], np.float32).reshape(1, 2, 1),
              "OutputScaleTensor": np.array([1.0], np.float32).reshape(1, 1, 1, 1, 1)}
    types = {"InputTensor": "UINT8", "InputScaleTensor": "FLOAT32", "OutputScaleTensor": "FLOAT32", "OutputTensor": "UINT8"}
    layouts = {n: TensorDesc(types[n], list(a.shape)) for n, a in arrays.items()} | {"OutputTensor": TensorDesc("UINT8", [1, 2, 1, 1])}
    attributes = {"Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0],
                  "Dilations": [1, 1], "IncludePadding": 0.0}
    case = case_from_arrays(spec, "6.4", types, arrays, layouts=layouts, attributes=attributes)
    inputs = family_inputs(spec, case.descriptor, case.inputs)
    assert inputs["x_scale"].shape == (1, 2, 1, 1) and inputs["out_scale"].shape == (1, 1, 1, 1)
    result = family_compute("window")(spec, case.descriptor, inputs)
    assert result.outputs["OutputTensor"].ravel().tolist() == [2, 12]
