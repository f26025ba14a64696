"""The gradient family's mean_variance mode: each output is the derivative of the forward spec's
formula, checked against central finite differences of that formula (evaluated in float64 by the
spec's own expression, never by the gradient's code), and judged within its bound."""
from __future__ import annotations

import numpy as np

from harness.spec.context import formula_context
from tests.harness.test_gradient_family import _run
from tests.helpers import SPECS

F32 = "FLOAT32"
FULL, STATS = [2, 3, 1, 2], [1, 3, 1, 1]  # statistics per channel: the sums run over N and W (4 terms)


def _forward(x: np.ndarray, mean: np.ndarray, variance: np.ndarray, scale: np.ndarray, bias: np.ndarray,
             epsilon: float) -> np.ndarray:
    """BATCH_NORMALIZATION's formula, float64, the parameters broadcast as its spec says."""
    spec = SPECS.operator("BATCH_NORMALIZATION")
    types = {f.name: F32 for f in spec.fields if f.role != "attribute"}
    ctx = formula_context(spec, types, {"x": x, "mean": mean, "variance": variance, "scale": scale, "bias": bias},
                          {"Epsilon": epsilon})
    return np.asarray(spec.formula.expression.evaluate(ctx), dtype=np.float64)


def _central(f, value: np.ndarray, h: float = 2.0 ** -10) -> np.ndarray:
    """d f / d value by central differences, element by element."""
    grad = np.zeros_like(value)
    for i in np.ndindex(value.shape):
        up, down = value.copy(), value.copy()
        up[i] += h
        down[i] -= h
        grad[i] = (f(up) - f(down)) / (2 * h)
    return grad


def test_batch_normalization_gradient_is_the_derivative_of_the_forward():
    """d<y, dy>/dx, d<y, dy>/dScale and d<y, dy>/dBias of BATCH_NORMALIZATION (statistics given,
    per channel) against the three outputs, dyadic data (exact in FLOAT32)."""
    rng = np.random.default_rng(7)
    x = rng.integers(-16, 16, size=FULL) / 4.0
    dy = rng.integers(-16, 16, size=FULL) / 8.0
    mean = rng.integers(-4, 4, size=STATS) / 2.0
    variance = rng.integers(0, 8, size=STATS) / 4.0
    scale = rng.integers(-8, 8, size=STATS) / 4.0
    bias = rng.integers(-4, 4, size=STATS) / 4.0
    epsilon = 0.5

    def loss(x_: np.ndarray = x, scale_: np.ndarray = scale, bias_: np.ndarray = bias) -> float:
        return float((_forward(x_, mean, variance, scale_, bias_, epsilon) * dy).sum())

    names = ["InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor",
             "OutputGradientTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor"]
    sizes = {n: FULL if n in ("InputTensor", "InputGradientTensor", "OutputGradientTensor") else STATS for n in names}
    out = _run("BATCH_NORMALIZATION_GRAD", {n: F32 for n in names}, sizes,
               {"InputTensor": x, "InputGradientTensor": dy, "MeanTensor": mean, "VarianceTensor": variance,
                "ScaleTensor": scale}, {"Epsilon": epsilon})
    np.testing.assert_allclose(out["OutputGradientTensor"], _central(lambda v: loss(x_=v), x), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out["OutputScaleGradientTensor"], _central(lambda v: loss(scale_=v), scale), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out["OutputBiasGradientTensor"], _central(lambda v: loss(bias_=v), bias), rtol=1e-6, atol=1e-9)


def test_batch_normalization_training_gradient_is_the_derivative_of_the_forward():
    """d<y, dy>/dx of BATCH_NORMALIZATION_TRAINING (whose mean and variance are computed from x) and
    d<y, dy>/dScale, d<y, dy>/dBias against the three outputs, the statistics given as the
    forward's (the input's mean and population variance per channel)."""
    rng = np.random.default_rng(13)
    x = rng.integers(-16, 16, size=FULL) / 4.0
    dy = rng.integers(-16, 16, size=FULL) / 8.0
    scale = rng.integers(-8, 8, size=STATS) / 4.0
    bias = rng.integers(-4, 4, size=STATS) / 4.0
    epsilon = 0.5
    axes = (0, 2, 3)
    mean = x.mean(axis=axes, keepdims=True)
    variance = x.var(axis=axes, keepdims=True)
    forward = SPECS.operator("BATCH_NORMALIZATION_TRAINING")

    def training(x_: np.ndarray, scale_: np.ndarray, bias_: np.ndarray) -> np.ndarray:
        """The forward spec's formula over its family's `normalized` (computed here in float64 from
        x_: the group's own mean and population variance, as that spec's comment says)."""
        m, v = x_.mean(axis=axes, keepdims=True), x_.var(axis=axes, keepdims=True)
        types = {f.name: F32 for f in forward.fields if f.role != "attribute"}
        ctx = formula_context(forward, types, {"x": x_, "scale": scale_, "bias": bias_, "fused_add": -0.0,
                                               "normalized": (x_ - m) / np.sqrt(v + epsilon)}, {"Epsilon": epsilon})
        return np.asarray(forward.formula.expression.evaluate(ctx), dtype=np.float64)

    def loss(x_: np.ndarray = x, scale_: np.ndarray = scale, bias_: np.ndarray = bias) -> float:
        return float((training(x_, scale_, bias_) * dy).sum())

    names = ["InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor",
             "OutputGradientTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor"]
    sizes = {n: FULL if n in ("InputTensor", "InputGradientTensor", "OutputGradientTensor") else STATS for n in names}
    # the statistics are inputs of FLOAT32: the float64 ones rounded (the finite differences read the exact ones)
    out = _run("BATCH_NORMALIZATION_TRAINING_GRAD", {n: F32 for n in names}, sizes,
               {"InputTensor": x, "InputGradientTensor": dy, "MeanTensor": mean, "VarianceTensor": variance,
                "ScaleTensor": scale}, {"Epsilon": epsilon})
    np.testing.assert_allclose(out["OutputGradientTensor"], _central(lambda v: loss(x_=v), x, 2.0 ** -14), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["OutputScaleGradientTensor"], _central(lambda v: loss(scale_=v), scale), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out["OutputBiasGradientTensor"], _central(lambda v: loss(bias_=v), bias), rtol=1e-6, atol=1e-6)
    assert np.abs(out["OutputGradientTensor"]).max() > 0.1  # not a vacuous zero


def test_local_response_normalization_gradient_is_the_derivative_of_the_forward():
    """d<y, dy>/dx of LOCAL_RESPONSE_NORMALIZATION (its formula over the normalize family's window
    sum of squares, float64) against the gradient's output, across channels and within a channel,
    an odd and an even LocalSize (the even region's extra element after it in both)."""
    from harness.reference.families.normalize import _window_sums

    forward = SPECS.operator("LOCAL_RESPONSE_NORMALIZATION")
    rng = np.random.default_rng(17)
    shape = [1, 4, 3, 3]
    x = rng.integers(-8, 8, size=shape) / 4.0
    dy = rng.integers(-8, 8, size=shape) / 4.0
    for cross, size in ((1, 3), (0, 3), (1, 2), (0, 2)):
        attributes = {"CrossChannel": cross, "LocalSize": size, "Alpha": 0.75, "Beta": 0.75, "Bias": 1.0}
        axes = [1] if cross else [2, 3]

        def loss(values: np.ndarray) -> float:
            types = {"InputTensor": F32, "OutputTensor": F32}
            ctx = formula_context(forward, types, {"x": values, "window_sq": _window_sums(values, axes, size)}, attributes)
            return float((np.asarray(forward.formula.expression.evaluate(ctx), dtype=np.float64) * dy).sum())

        out = _run("LOCAL_RESPONSE_NORMALIZATION_GRAD", {n: F32 for n in ("InputTensor", "InputGradientTensor", "OutputGradientTensor")},
                   {n: shape for n in ("InputTensor", "InputGradientTensor", "OutputGradientTensor")},
                   {"InputTensor": x, "InputGradientTensor": dy}, attributes)["OutputGradientTensor"]
        np.testing.assert_allclose(out, _central(loss, x, 2.0 ** -14), rtol=1e-5, atol=1e-6, err_msg=f"{cross=} {size=}")
