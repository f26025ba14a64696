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


def _stretched(x: list[float], in_sizes: list[int], out_sizes: list[int], scales: list[float], offsets: float,
               antialiased: int = 1):
    """RESAMPLE3, linear, both offsets `offsets` and -`offsets` (0.5: pixel centres)."""
    spec = SPECS.operator("RESAMPLE3")
    rank = len(in_sizes)
    d = Descriptor("RESAMPLE3", {"InputTensor": TensorDesc("FLOAT32", in_sizes), "OutputTensor": TensorDesc("FLOAT32", out_sizes)},
                   {"InterpolationMode": 1.0, "RoundingDirection": 0.0, "DimensionCount": float(rank), "Scales": scales,
                    "InputPixelOffsets": [offsets] * rank, "OutputPixelOffsets": [-offsets] * rank,
                    "Antialiased": float(antialiased)})
    inputs = {"x": np.asarray(x, dtype=np.float32).reshape(in_sizes)}
    return spec, d, inputs, family_compute("resample")(spec, d, inputs)


def test_stretched_tent_is_normalised_and_clamped_only_below_half():
    """Scale 1/3 over [0, 3, ..., 21] ({8}), centres: x = (o + 0.5) * 3 - 0.5 = 1, 4; half-width 3,
    weights 1 - |i - x| / 3. x = 1: i = -1 .. 3 weigh 1/3, 2/3, 1, 2/3, 1/3 (sum 3) on 0 (clamped), 0,
    3, 6, 9: (3 + 4 + 3) / 3 = 10/3. x = 4: i = 2 .. 6 on 6 .. 18: the filter is symmetric, 12. Scale 0.5
    (1 / scale = 2, not > 2) keeps the tent: x = 0.5, 2.5, 4.5, 6.5 -> 1.5, 7.5, 13.5, 19.5."""
    ramp = [3.0 * i for i in range(8)]
    _, _, _, result = _stretched(ramp, [8], [2], [float(np.float32(1 / 3))], 0.5)
    assert np.allclose(result.outputs["OutputTensor"], [10 / 3, 12.0], rtol=1e-6)
    assert result.summaries["stretched"].tolist() == [1, 1]
    _, _, _, half = _stretched(ramp, [8], [4], [0.5], 0.5)
    assert half.outputs["OutputTensor"].tolist() == [1.5, 7.5, 13.5, 19.5]
    assert half.summaries["stretched"].tolist() == [0, 0, 0, 0]
    _, _, _, off = _stretched(ramp, [8], [2], [float(np.float32(1 / 3))], 0.5, antialiased=0)
    assert np.allclose(off.outputs["OutputTensor"], [3.0, 12.0], rtol=1e-6)  # whole positions: the element itself
    assert off.summaries["stretched"].tolist() == [0, 0]


def test_stretched_bound_counts_the_normalisation():
    """Scale 0.25 at x = 1.5 (centres): the filter reaches n = 8 indices, raw weights summing to
    W = 4: weight_err = 8 + 1 + 3 * 8 / 4 = 15 eps steps; terms 8; the position error's gain
    2 n / (f W) = 2 * 8 / (4 * 4) = 1 times the error 4 * 2^-23 * (2 + 0.5)."""
    _, _, _, result = _stretched([0.0, 4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0], [8], [2], [0.25], 0.5)
    exact, bound = result.bounds["OutputTensor"]
    assert exact.tolist() == [6.625, 21.375]
    eps = 2.0 ** -23
    spread = 24.0  # elements -3 .. 6 clamped to 0 .. 6: 0 .. 24 (floor(1.5) - 4 .. floor(1.5) + 5)
    expected = 4 * eps * 2.5 * 1.0 * spread + (8 + 5 + 15) * eps * 20.0 + eps * 6.625 + 16 * (2.0 ** -126 + 2.0 ** -126 * eps)
    assert np.isclose(bound[0], expected, rtol=1e-12)


def _forward_and_adjoint(in_sizes: list[int], out_sizes: list[int], scales: list[float], mode: int,
                         into: list[float], out_off: list[float], seed: int = 3):
    """RESAMPLE1 of x ({in_sizes} -> {out_sizes}) and RESAMPLE_GRAD of dy ({out_sizes} -> {in_sizes})
    with the same attributes: the exact forward output, the exact adjoint and the adjoint's result."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(in_sizes)
    dy = rng.standard_normal(out_sizes)
    attrs = {"InterpolationMode": float(mode), "DimensionCount": float(len(in_sizes)), "Scales": scales,
             "InputPixelOffsets": into, "OutputPixelOffsets": out_off}
    fwd_spec = SPECS.operator("RESAMPLE1")
    fwd = Descriptor("RESAMPLE1", {"InputTensor": TensorDesc("FLOAT32", in_sizes), "OutputTensor": TensorDesc("FLOAT32", out_sizes)}, attrs)
    y = family_compute("resample")(fwd_spec, fwd, {"x": x.astype(np.float32)})
    grad_spec = SPECS.operator("RESAMPLE_GRAD")
    bwd = Descriptor("RESAMPLE_GRAD", {"InputGradientTensor": TensorDesc("FLOAT32", out_sizes),
                                       "OutputGradientTensor": TensorDesc("FLOAT32", in_sizes)}, attrs)
    g = family_compute("resample")(grad_spec, bwd, {"dy": dy.astype(np.float32)})
    return x.astype(np.float32).astype(np.float64), dy.astype(np.float32).astype(np.float64), y, g


def test_adjoint_identity_linear():
    """<resample(x), dy> == <x, resample_grad(dy)> for the exact float64 maps: the gradient is the
    forward's transpose (upscale, downscale and a copied dimension, corner and centre offsets)."""
    for scales, into, out_off, in_sizes, out_sizes in (
            ([1.0, 0.75, 2.0], [0.5, 0.5, 0.5], [-0.5, -0.5, -0.5], [2, 5, 3], [2, 3, 6]),
            ([1.5, 0.5], [0.0, 0.25], [0.0, -1.0], [4, 6], [6, 3])):
        x, dy, y, g = _forward_and_adjoint(in_sizes, out_sizes, scales, 1, into, out_off)
        forward = y.bounds["OutputTensor"][0] if "OutputTensor" in y.bounds else y.outputs["OutputTensor"].astype(np.float64)
        adjoint = g.bounds["OutputGradientTensor"][0]
        assert np.isclose((forward * dy).sum(), (x * adjoint).sum(), rtol=1e-12, atol=1e-12)


def test_adjoint_identity_nearest_and_its_bound():
    """Nearest without ties (scales 2 and 3, centres: positions never .5): the adjoint routes each dy
    to round(x), so the identity holds with the forward's copies; each element's bound counts its
    contributions (N) and no tie span."""
    x, dy, y, g = _forward_and_adjoint([3, 2], [6, 6], [2.0, 3.0], 0, [0.5, 0.5], [-0.5, -0.5])
    forward = y.outputs["OutputTensor"].astype(np.float64)
    exact, bound = g.bounds["OutputGradientTensor"]
    assert np.isclose((forward * dy).sum(), (x * exact).sum(), rtol=1e-12)
    assert g.summaries["tie"].sum() == 0
    assert (g.summaries["terms"] == 6).all()  # 2 x 3 outputs read each input element


def test_adjoint_nearest_tie_spans_both_neighbours():
    """The page's example: forward {2, 2} -> {1, 3}, Scales {0.5, 1.5}, centres; height position 0.5
    and width position 0.5 tie. dy [4, 5, 6]: the page routes ties down, [[9, 6], [0, 0]]; routing them
    up gives [[0, 0], [4, 11]]; both lie within the family's interval."""
    spec = SPECS.operator("RESAMPLE_GRAD")
    d = Descriptor("RESAMPLE_GRAD", {"InputGradientTensor": TensorDesc("FLOAT32", [1, 3]),
                                     "OutputGradientTensor": TensorDesc("FLOAT32", [2, 2])},
                   {"InterpolationMode": 0.0, "DimensionCount": 2.0, "Scales": [0.5, 1.5],
                    "InputPixelOffsets": [0.5, 0.5], "OutputPixelOffsets": [-0.5, -0.5]})
    g = family_compute("resample")(spec, d, {"dy": np.asarray([[4.0, 5.0, 6.0]], dtype=np.float32)})
    exact, bound = g.bounds["OutputGradientTensor"]
    for legal in ([[9.0, 6.0], [0.0, 0.0]], [[0.0, 0.0], [4.0, 11.0]]):
        assert (np.abs(np.asarray(legal) - exact) <= bound).all()
