"""The resample family: sampling positions from scales and offsets, nearest and linear, the linear
bound's variables and the non-finite neighbourhood. Expected values are worked out by hand in each
docstring, not taken from the reference's own output."""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor, TensorDesc
from harness.reference.families import family_compute, family_device
from tests.helpers import SPECS

OP = "UPSAMPLE_2D"


def _run(x: list[float], in_sizes: list[int], height: int, width: int, mode: int):
    spec = SPECS.operator(OP)
    out_sizes = in_sizes[:-2] + [in_sizes[-2] * height, in_sizes[-1] * width]
    d = Descriptor(OP, {"InputTensor": TensorDesc("FLOAT32", list(in_sizes)), "OutputTensor": TensorDesc("FLOAT32", out_sizes)},
                   {"ScaleSize_Width": float(width), "ScaleSize_Height": float(height), "InterpolationMode": float(mode)})
    inputs = {"x": np.asarray(x, dtype=np.float32).reshape(in_sizes)}
    return spec, d, inputs, family_compute("resample")(spec, d, inputs)


def test_nearest_integer_factor_is_a_block_copy_without_ties():
    """Width factor 3: positions (o + 0.5) / 3 - 0.5 = -1/3, 0, 1/3, 2/3, 1, 4/3: input 0, 0, 0, 1, 1, 1;
    no position comes near a .5 tie, so no alternative is offered."""
    _, _, _, result = _run([5.0, 7.0], [1, 1, 1, 2], 1, 3, 0)
    assert result.outputs["OutputTensor"].reshape(-1).tolist() == [5, 5, 5, 7, 7, 7]
    assert not result.alternatives


def test_linear_values_and_bound_variables():
    """Width factor 2 over [0, 8]: positions -0.25, 0.25, 0.75, 1.25 -> 0, 2, 6, 8 (edges clamped).
    One dimension interpolates (D 1, terms 2); the copied height has no position error; pos_err at
    o = 1 is 4 * 2^-23 * (0.75 + 0.5); the spread is 8 (both elements)."""
    _, _, _, result = _run([0.0, 8.0], [1, 1, 1, 2], 1, 2, 1)
    assert result.outputs["OutputTensor"].reshape(-1).tolist() == [0, 2, 6, 8]
    exact, bound = result.bounds["OutputTensor"]
    eps = 2.0 ** -23
    # at o = 1: pos_err * spread + (2 + 5) eps max_abs + eps |exact| + 4 (tiny + tiny_out eps)
    expected = 4 * eps * 1.25 * 8 + 7 * eps * 8 + eps * 2 + 4 * (2.0 ** -126 + 2.0 ** -126 * eps)
    assert np.isclose(bound.reshape(-1)[1], expected, rtol=1e-12)


def test_infinity_next_along_a_copied_dimension_leaves_the_element_open():
    """Height copied (factor 1), width factor 2; an infinity in row 1 is one index away along the copied
    height from row 0's outputs: a device may read it with weight 0 (0 * inf), so row 0 is open too."""
    _, _, _, result = _run([1.0, 2.0, float("inf"), 4.0], [1, 1, 2, 2], 1, 2, 1)
    mask = result.unspecified["OutputTensor"]["nonfinite_near"].reshape(2, 4)
    assert mask.all()


def test_legal_device_lands_inside_the_bound():
    """The worst legal device's linear results stay within the bound of the exact value (moved to
    its edge where the bound is positive)."""
    spec, d, inputs, result = _run([1.0, -3.0, 2.5, 7.0], [1, 1, 2, 2], 2, 2, 1)
    device = family_device("resample")
    assert device is not None
    out = device(spec, d, inputs, np.random.default_rng(1))["OutputTensor"].astype(np.float64)
    exact, bound = result.bounds["OutputTensor"]
    assert (np.abs(out - exact) <= bound).all() and (out != exact).any()


def _resample(x: list, scales: list[float], out_sizes: list[int], mode: int, dtype: str = "FLOAT32"):
    spec = SPECS.operator("RESAMPLE")
    d = Descriptor("RESAMPLE", {"InputTensor": TensorDesc(dtype, [len(x)]), "OutputTensor": TensorDesc(dtype, out_sizes)},
                   {"InterpolationMode": float(mode), "Scales": scales})
    inputs = {"x": np.asarray(x, dtype=SPECS.catalog.dtype(dtype).numpy)}
    return family_compute("resample")(spec, d, inputs)


def test_nearest_tie_accepts_either_neighbour_and_nothing_else():
    """Scale 0.5 over [1, 2, 3, 4]: positions (o + 0.5) * 2 - 0.5 = 0.5, 2.5, both ties: the reference
    takes the upper neighbours [2, 4]; the lower ones [1, 3] are the one legal alternative."""
    result = _resample([1.0, 2.0, 3.0, 4.0], [0.5], [2], 0)
    assert result.outputs["OutputTensor"].tolist() == [2.0, 4.0]
    alternatives = [values.tolist() for liberty, values in result.alternatives["OutputTensor"] if liberty == "rounding"]
    assert alternatives == [[1.0, 3.0]]
    assert result.summaries["tie"].tolist() == [1, 1]


def test_integer_linear_accepts_either_rounding_of_the_average():
    """UINT8 [0, 5] downscaled by 0.5 (linear): position 0.5 weighs both by 0.5: 2.5 exactly, so 2 and 3
    (floor and ceil of the exact average within its bound) are legal, 1 and 4 are not."""
    result = _resample([0, 5], [0.5], [1], 1, "UINT8")
    legal = {int(values[0]) for _, values in result.alternatives["OutputTensor"]}
    assert legal == {2, 3}


def test_rounding_direction_takes_ceil_or_floor_and_the_other_side_only_at_whole_positions():
    """RESAMPLE2 (a `direction`): [10, 20, 30] upscaled by 1.5 with pixel-centre offsets: positions -1/6, 1/2,
    7/6, 11/6; INCREASING takes ceil: 0, 1, 2, 2 -> [10, 20, 30, 30], no alternative (no position is within
    its error of a whole number); DECREASING takes floor: -1 (clamped 0), 0, 1, 1 -> [10, 10, 20, 20]."""
    spec = SPECS.operator("RESAMPLE2")
    for direction, expected in ((0, [10.0, 20.0, 30.0, 30.0]), (1, [10.0, 10.0, 20.0, 20.0])):
        d = Descriptor("RESAMPLE2", {"InputTensor": TensorDesc("FLOAT32", [3]), "OutputTensor": TensorDesc("FLOAT32", [4])},
                       {"InterpolationMode": 0.0, "RoundingDirection": float(direction), "Scales": [1.5],
                        "InputPixelOffsets": [0.5], "OutputPixelOffsets": [-0.5]})
        result = family_compute("resample")(spec, d, {"x": np.asarray([10.0, 20.0, 30.0], dtype=np.float32)})
        assert result.outputs["OutputTensor"].tolist() == expected
        assert not result.alternatives
