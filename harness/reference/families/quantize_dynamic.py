"""The quantize_dynamic family: a statistic of the whole input (its range) fixes a scale and a zero
point, which then quantize every element; three outputs (the values, the scale, the zero point).

No other family fits: a reduction gives one output per group and stops there, and an element-wise
formula never sees the other elements. Mode `range_with_zero` (ONNX's dynamic quantization):

    lo = min(0, min x), hi = max(0, max x)             (NaN ignored: the spec's rules name such inputs)
    scale = (hi - lo) / (qmax - qmin)                  (qmin, qmax: the integer output type's range)
    zero_point = saturate(round(qmin - lo / scale))    (round half to even)
    values = saturate(round(x / scale) + zero_point)

The reference is the correctly rounded FLOAT32 scale (the exact range over qmax - qmin, rounded
once), then the zero point and the values with exact divisions by that scale (float64: exact
enough, a quotient's error is far below the distance to a rounding tie it could cross).

Precision model. The scale is FLOAT32 arithmetic: a subtraction and a division, which D3D lets a
device round to either neighbour and compute through a reciprocal within 1 ULP
(specs/_arithmetic.yaml); the spec's `bounds` says how far from the exact scale that takes it,
and the plug-in judges the scale against that bound. The zero point and the values are integers
computed from the device's scale, which the judge does not pass to the other outputs' comparison
(each output is judged alone): so the plug-in enumerates every FLOAT32 scale within the bound and,
for each, the integers that a division through the reciprocal (two faithful steps: 2 eps(1 + eps)
relative) and, for the zero point, the subtraction from qmin (one more faithful step) can round
to; an output element is legal anywhere between the smallest and the largest of them (liberty
`rounding`; given to the judge as a bound about the interval's midpoint). Every element keeps its own interval, so two elements judged against two different
scales both pass: the check is per element, not of one consistent device. fp32 denormal inputs
may be flushed (the range and the quotients over the flushed input are included). Where the bound
reaches below FLOAT32's smallest normal (a flushed scale of 0 divides by zero) or past its largest
value, the zero point and the values accept every result.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from harness.model.descriptor import Descriptor
from harness.reference.families.result import (F32_SMALLEST_NORMAL, FamilyPlugin, FamilyResult, evaluate_bound,
                                               flush_f32_denormals)
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

EPS32 = float(np.finfo(np.float32).eps)  # 2^-23
MAX32 = float(np.finfo(np.float32).max)
MAX_SCALES = 64  # FLOAT32 scales enumerated within the bound (a few steps either side of the exact one)


def _range(x: np.ndarray) -> tuple[float, float]:
    """min(0, min x) and max(0, max x) in float64, NaN ignored."""
    with np.errstate(invalid="ignore"):
        flat = x.astype(np.float64).reshape(-1)
    return float(np.fmin.reduce(flat, initial=0.0)), float(np.fmax.reduce(flat, initial=0.0))


def _quantize(x: np.ndarray, lo: float, scale: float, qmin: int, qmax: int) -> tuple[int, np.ndarray]:
    """The zero point and the values for one scale, with exact divisions (a zero scale, whose
    divisions are 0 / 0, reads its quotients as 0: what the spec leaves open)."""
    with np.errstate(all="ignore"):
        t = -lo / scale if scale > 0 else 0.0
        zp = int(np.clip(np.rint(qmin + t), qmin, qmax)) if np.isfinite(t) else qmin
        q = x.astype(np.float64) / scale if scale > 0 else np.zeros(x.shape)
        values = np.clip(np.rint(np.where(np.isnan(q), 0.0, q)) + zp, qmin, qmax)
    return zp, values.astype(np.int64)


def _scales(exact: float, atol: float) -> list[float] | None:
    """Every FLOAT32 value within `atol` of `exact`, or None where that reaches a flushed (or
    denormal) scale, or beyond FLOAT32's range, or past MAX_SCALES values: every result is legal."""
    low, high = exact - atol, exact + atol
    if not (np.isfinite(low) and np.isfinite(high)) or low < F32_SMALLEST_NORMAL or high > MAX32:
        return None
    value = np.float32(low)
    if float(value) < low:
        value = np.nextafter(value, np.float32(np.inf))
    found: list[float] = []
    while float(value) <= high:
        found.append(float(value))
        if len(found) > MAX_SCALES:
            return None
        value = np.nextafter(value, np.float32(np.inf))
    return found


def _interval(value: np.ndarray | float, half_width: np.ndarray | float, qmin: int, qmax: int,
              offset: np.ndarray | float = 0) -> tuple[np.ndarray, np.ndarray]:
    """The saturated integers round-half-even gives anywhere in value +- half_width, plus `offset`
    (lowest, highest): rounding is monotonic, so the ends give them."""
    low = np.clip(np.rint(np.asarray(value) - half_width) + offset, qmin, qmax)
    high = np.clip(np.rint(np.asarray(value) + half_width) + offset, qmin, qmax)
    return low.astype(np.int64), high.astype(np.int64)


def _legal_integers(readings: list[tuple[np.ndarray, float]], scales: list[float], qmin: int,
                    qmax: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """The lowest and highest zero point, and values, over every scale and input reading:
    lo / scale and x / scale within two faithful steps (a division through the reciprocal), the
    zero point's subtraction from qmin within one more."""
    z_low, z_high = qmax, qmin
    shape = readings[0][0].shape
    y_low, y_high = np.full(shape, qmax, dtype=np.int64), np.full(shape, qmin, dtype=np.int64)
    division = (2 + 2 * EPS32) * EPS32
    for x, lo in readings:
        x = np.where(np.isfinite(x), x, 0)  # NaN and infinities: the spec's rules leave every output open
        for scale in scales:
            t = -lo / scale
            zl, zh = _interval(qmin + t, division * abs(t) + EPS32 * (abs(qmin) + abs(t) * (1 + division)), qmin, qmax)
            z_low, z_high = min(z_low, int(zl)), max(z_high, int(zh))
            q = x.astype(np.float64) / scale
            low, _ = _interval(q, division * np.abs(q), qmin, qmax, zl)
            _, high = _interval(q, division * np.abs(q), qmin, qmax, zh)
            y_low, y_high = np.minimum(y_low, low), np.maximum(y_high, high)
    return z_low, z_high, y_low, y_high


def _as_bound(low: np.ndarray | int, high: np.ndarray | int, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """[low, high] as the judge's bound: the midpoint and the half-width (an integer result within
    half the width of the midpoint is one of the integers from low to high)."""
    low64, high64 = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    return np.broadcast_to((low64 + high64) / 2, shape).copy(), np.broadcast_to((high64 - low64) / 2, shape).copy()


def _overflows(lo: float, hi: float) -> bool:
    """Whether the exact range hi - lo exceeds FLOAT32's largest value (NaN: not finite either).
    Exactly, not in float64: FLOAT32's largest value minus -1.19 is above it by far less than a
    float64 ULP there (2^76), and a FLOAT32 subtraction may round that up to infinity (D3D lets a
    result land on either neighbour), which the spec leaves open as it does any larger range."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return True
    return Fraction(hi) - Fraction(lo) > Fraction(MAX32)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    p = family.params
    var = next(v for v, t in spec.formula.inputs.items() if t == p["input"])
    x = np.asarray(inputs[var])
    descs = {key: descriptor.tensors[p[key]] for key in ("values", "scale", "zero_point")}
    values_desc, scale_desc, zp_desc = descs["values"], descs["scale"], descs["zero_point"]
    assert values_desc is not None and scale_desc is not None and zp_desc is not None  # a valid case binds them
    values_type, zp_type = spec.catalog.dtype(values_desc.data_type), spec.catalog.dtype(zp_desc.data_type)
    assert values_type.min is not None and values_type.max is not None
    qmin, qmax = int(values_type.min), int(values_type.max)
    scale_shape, zp_shape = tuple(scale_desc.sizes), tuple(zp_desc.sizes)

    lo, hi = _range(x)
    with np.errstate(all="ignore"):
        span = hi - lo
        exact = span / (qmax - qmin)
        scale = np.float32(exact)
    zp, values = _quantize(x, lo, float(scale), qmin, qmax)
    outputs = {p["values"]: values.astype(values_type.numpy),
               p["scale"]: np.full(scale_shape, scale, dtype=spec.catalog.dtype(scale_desc.data_type).numpy),
               p["zero_point"]: np.full(zp_shape, zp, dtype=zp_type.numpy)}
    result = FamilyResult(outputs)

    facts = {"zero_range": np.int64(span == 0), "range_overflow": np.int64(_overflows(lo, hi))}
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: x, **facts}, descriptor.attributes)
    for rule in spec.unspecified:  # every output element depends on every input element
        hit = bool(np.asarray(rule.when.evaluate(ctx), dtype=bool).any())
        for name in outputs:
            if hit and rule.concerns(name, types[name]):
                result.unspecified.setdefault(name, {})[rule.id] = np.ones(outputs[name].shape, dtype=bool)

    bound = family.bound(family.choice("mode", {}))
    atol = 0.0
    if bound is not None:
        variables: dict[str, object] = {"exact": np.float64(exact), "eps": np.float64(EPS32), "tiny": np.float64(F32_SMALLEST_NORMAL),
                     "inf": np.float64(np.inf)}
        atol = float(evaluate_bound(bound.atol, variables, (), None))
        result.bounds[p["scale"]] = (np.full(scale_shape, exact), np.full(scale_shape, atol))
    readings = [(x, lo)]
    flushed = flush_f32_denormals(x)
    if flushed is not None:
        readings.append((flushed, _range(flushed)[0]))
    scales = _scales(float(exact), atol) if np.isfinite(exact) else None
    if scales is None:  # a flushed scale or an overflowed range: every integer is legal
        result.bounds[p["values"]] = (values.astype(np.float64), np.full(values.shape, np.inf))
        result.bounds[p["zero_point"]] = (np.full(zp_shape, float(zp)), np.full(zp_shape, np.inf))
    else:
        z_low, z_high, y_low, y_high = _legal_integers(readings, scales, qmin, qmax)
        result.bounds[p["values"]] = _as_bound(y_low, y_high, values.shape)
        result.bounds[p["zero_point"]] = _as_bound(z_low, z_high, zp_shape)
        result.summaries["legal_low"], result.summaries["legal_high"] = y_low, y_high
    with np.errstate(all="ignore"):
        result.summaries["quotient"] = x.astype(np.float64) / np.float64(scale)
    result.summaries.update({k: np.asarray(v) for k, v in facts.items()})  # one value each, for expectations' `when`
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One legal device (for the worst legal backend): the FLOAT32 scale farthest from the exact
    one that the spec's bound allows, below or above at random, and the zero point and the values
    computed from that scale (exact divisions); the exact outputs where every result is legal."""
    family = spec.formula.family
    assert family is not None
    p = family.params
    exact_result = compute(spec, descriptor, inputs)
    bounds = exact_result.bounds.get(p["scale"])
    if bounds is None or p["values"] in exact_result.bounds:
        return exact_result.outputs
    exact, atol = float(bounds[0].reshape(-1)[0]), float(bounds[1].reshape(-1)[0])
    scales = _scales(exact, atol)
    if not scales:
        return exact_result.outputs
    scale = scales[0] if rng.random() < 0.5 else scales[-1]
    var = next(v for v, t in spec.formula.inputs.items() if t == p["input"])
    x = np.asarray(inputs[var])
    outputs = dict(exact_result.outputs)
    values_type = outputs[p["values"]].dtype
    qmin, qmax = int(np.iinfo(values_type).min), int(np.iinfo(values_type).max)
    zp, values = _quantize(x, _range(x)[0], scale, qmin, qmax)
    outputs[p["values"]] = values.astype(values_type)
    outputs[p["scale"]] = np.full(outputs[p["scale"]].shape, scale, dtype=outputs[p["scale"]].dtype)
    outputs[p["zero_point"]] = np.full(outputs[p["zero_point"]].shape, zp, dtype=outputs[p["zero_point"]].dtype)
    return outputs


PLUGIN = FamilyPlugin(DECLARATIONS["quantize_dynamic"], compute, legal_device)
