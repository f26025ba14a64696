"""The normalize family's mean_variance options beyond the normalised value: `centred` false (the
mean taken as 0: a root-mean-square normalization) and the statistics outputs (`mean_output`,
`variance_output`) with their own bounds, which the worst legal device reaches and the judge
accepts.

The expected values and bounds are worked out by hand in each docstring; none is taken from the
reference's own output."""
from __future__ import annotations

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import pack_buffer
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute, family_device
from tests.helpers import SPECS

EPS = 2.0 ** -23
STATISTICS = ("OutputMeanTensor", "OutputVarianceTensor")


def _centred_case(use_mean: float):
    """A spec whose family has `centred: "UseMean != 0"`: {1, 2} [3, 4] along axis 1, Epsilon 0."""
    spec = SPECS.operator("MEAN_VARIANCE_NORMALIZATION2")
    x = np.array([3, 4], np.float32).reshape(1, 2)
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    layouts = {"InputTensor": TensorDesc("FLOAT32", [1, 2]), "OutputTensor": TensorDesc("FLOAT32", [1, 2])}
    attributes = {"Axes": [1], "UseMean": use_mean, "UseVariance": 1.0, "Epsilon": 0.0}
    return spec, case_from_arrays(spec, "6.4", types, {"InputTensor": x}, layouts=layouts, attributes=attributes)


def test_not_centred_divides_by_the_root_mean_square():
    """[3, 4] with the mean taken as 0: mean(x^2) = (9 + 16) / 2 = 12.5, so x / sqrt(12.5) =
    [0.848528..., 1.131370...]; centred it is (x - 3.5) / sqrt(0.25) = [-1, 1]. The bound (the
    same formula; N 2, S1 7, S2 25): Ev = 29 eps 12.5 = 362 eps either way; not centred, var_eps
    12.5 and Ew / var_eps about 30 eps, Ed = 9 eps 7 / 2 + eps |x| <= 36 eps: about
    (36 + 4 (19 + 15)) eps / 3.54, some 50 eps at most; centred, var_eps 0.25 and the one-pass
    cancellation Ew / var_eps about 1450 eps: about 2 (32 + 0.5 1450 / 2) eps, some 790 eps."""
    for use_mean, expected, most in ((0.0, [3 / np.sqrt(12.5), 4 / np.sqrt(12.5)], 50 * EPS), (1.0, [-1.0, 1.0], 800 * EPS)):
        spec, case = _centred_case(use_mean)
        result = family_compute("normalize")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
        normalized, spread = result.epilogue["OutputTensor"]["normalized"]
        assert np.allclose(normalized.reshape(-1), expected, rtol=1e-15, atol=0)
        assert spread is not None and np.all(spread < most), spread / EPS


def _statistics_case():
    """{2, 2, 1, 1} with Scale and Bias {1, 2, 1, 1}: statistics per channel over the batch."""
    spec = SPECS.operator("BATCH_NORMALIZATION_TRAINING")
    x = np.array([1, 0, 5, -6], np.float32).reshape(2, 2, 1, 1)
    params = {"ScaleTensor": np.ones((1, 2, 1, 1), np.float32), "BiasTensor": np.zeros((1, 2, 1, 1), np.float32)}
    names = ["InputTensor", "ScaleTensor", "BiasTensor", "OutputTensor", *STATISTICS]
    types = {n: "FLOAT32" for n in names}
    sizes = {n: ([2, 2, 1, 1] if n in ("InputTensor", "OutputTensor") else [1, 2, 1, 1]) for n in names}
    layouts = {n: TensorDesc("FLOAT32", s) for n, s in sizes.items()}
    return spec, case_from_arrays(spec, "6.4", types, {"InputTensor": x, **params}, layouts=layouts,
                                  attributes={"Epsilon": 0.0})


def test_statistics_outputs_and_their_bounds():
    """Channel 0 [1, 5]: mean 3, variance 4; channel 1 [0, -6]: mean -3, variance 9 (divisor N = 2).
    The mean's bound (2 N + 5) eps S1 / N + 2 N t: 9 eps 6 / 2 = 27 eps (channel 0) and 27 eps
    (channel 1, S1 = 6); the variance's ((6 N + 17) eps + ...) S2 / N: 29 eps 26 / 2 = 377 eps
    (channel 0, S2 = 26) and 29 eps 18 = 522 eps (channel 1, S2 = 36), the tiny terms aside."""
    spec, case = _statistics_case()
    result = family_compute("normalize")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    mean, mean_bound = result.bounds["OutputMeanTensor"]
    variance, variance_bound = result.bounds["OutputVarianceTensor"]
    assert mean.shape == (1, 2, 1, 1) and np.array_equal(mean.reshape(-1), [3.0, -3.0])
    assert np.array_equal(variance.reshape(-1), [4.0, 9.0])
    assert np.allclose(mean_bound.reshape(-1), [27 * EPS, 27 * EPS], rtol=1e-6)
    assert np.allclose(variance_bound.reshape(-1), [377 * EPS, 522 * EPS], rtol=1e-4)


def test_statistics_legal_device_lands_at_the_edge_and_passes():
    """The worst legal device moves each statistic 0.999 of its bound (one FLOAT32 ULP of 3 is 2 eps,
    of 4 and 9 4 and 8 eps: at most a tenth of the bounds above), and the judge accepts every output."""
    spec, case = _statistics_case()
    inputs = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("normalize")(spec, case.descriptor, inputs)
    device = family_device("normalize")
    assert device is not None
    for seed in range(4):
        outs = device(spec, case.descriptor, inputs, np.random.default_rng(seed))
        for name in STATISTICS:
            exact, bound = result.bounds[name]
            share = np.abs(np.asarray(outs[name]).astype(np.float64) - exact) / bound
            assert np.all((share >= 0.85) & (share <= 1.0)), (name, share)
        packed = {n: pack_buffer(np.asarray(v), case.descriptor.tensors[n], SPECS.catalog.dtype("FLOAT32"))
                  for n, v in outs.items()}
        assert judge(spec, case, Outputs(packed), True).mismatch_count == 0


def _window_case(x: list[float], sizes: list[int], cross_channel: float, local_size: float):
    spec = SPECS.operator("LOCAL_RESPONSE_NORMALIZATION")
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    layouts = {"InputTensor": TensorDesc("FLOAT32", sizes), "OutputTensor": TensorDesc("FLOAT32", sizes)}
    attributes = {"CrossChannel": cross_channel, "LocalSize": local_size, "Alpha": 1.0, "Beta": 1.0, "Bias": 1.0}
    arr = np.array(x, np.float32).reshape(sizes)
    return spec, case_from_arrays(spec, "6.4", types, {"InputTensor": arr}, layouts=layouts, attributes=attributes)


def test_window_sum_square_boxes_and_bound():
    """window_sum_square over a spec's axes: {1, 1, 3, 3} [1..9] within the channel (axes H and W),
    LocalSize 3: the 3x3 box around each element, cut at the edges: corner [0, 0] sums 1 + 4 + 16 +
    25 = 46, the centre all of 1..9 squared, 285. Across channels (axis C) a {1, 3, 1, 1} [1, 2, 3]
    with LocalSize 2 puts (2 - 1) // 2 = 0 elements before and 1 after: [1 + 4, 4 + 9, 9] = [5, 13, 9].
    The bound: 2 N eps times the sum, N = 9 (3x3) and 2 (one axis): 18 eps 46 and 4 eps 13."""
    spec, case = _window_case(list(range(1, 10)), [1, 1, 3, 3], 0.0, 3.0)
    result = family_compute("normalize")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    sums, spread = result.epilogue["OutputTensor"]["window_sq"]
    assert sums.reshape(-1)[0] == 46 and sums.reshape(-1)[4] == 285
    assert spread is not None and np.isclose(spread.reshape(-1)[0], 18 * EPS * 46, rtol=1e-6)
    spec, case = _window_case([1, 2, 3], [1, 3, 1, 1], 1.0, 2.0)
    result = family_compute("normalize")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    sums, spread = result.epilogue["OutputTensor"]["window_sq"]
    assert np.array_equal(sums.reshape(-1), [5.0, 13.0, 9.0])
    assert spread is not None and np.isclose(spread.reshape(-1)[1], 4 * EPS * 13, rtol=1e-6)


def test_window_sum_square_legal_device_passes():
    """The worst legal device moves `window_sq` 0.999 of its bound, then evaluates the expression
    exactly and rounds it: the judge accepts it."""
    spec, case = _window_case([1.5, -2.0, 0.25, 3.0, 7.0, -1.0, 0.5, 2.5, 4.0], [1, 1, 3, 3], 0.0, 3.0)
    inputs = family_inputs(spec, case.descriptor, case.inputs)
    device = family_device("normalize")
    assert device is not None
    for seed in range(4):
        out = np.asarray(device(spec, case.descriptor, inputs, np.random.default_rng(seed))["OutputTensor"])
        packed = pack_buffer(out, case.descriptor.tensors["OutputTensor"], SPECS.catalog.dtype("FLOAT32"))
        assert judge(spec, case, Outputs({"OutputTensor": packed}), True).mismatch_count == 0
