"""The gradient family: a backward pass as the transpose (adjoint) of a forward family's index map.

A training gradient of a linear (or piecewise linear) forward computation y = A x is dx = A^T dy:
every incoming gradient element dy[o] goes back, weighted, to the input positions that forward
output o read. The forward's index maps are reused, not restated: the strided copy's from
harness.reference.families.data_movement (strided_window_index), the pooling windows from
harness.reference.families.windowing (window_positions, with the same strides, dilations and
paddings), and a max window's largest element as harness.reference.families.reduce compares it.
Modes (the spec's `mode`, naming the forward whose adjoint is taken):

- strided_window: dx is zeros with each dy element moved to the position the copy read it from
  (strides are non-zero, so no two land together): a move, bit for bit, compared bitwise;
- average: each dy[o] over its window's divisor (the count of the window's elements on the input,
  or prod(window_size) where `include_padding` holds) added into every input position the window
  reads;
- max: each dy[o] added into the position of the window's largest input element (NaN ignored), the
  first in window order of equal ones, which for positive strides and dilations is the lowest
  element index;
- mean_variance: the adjoint of an affine normalization y = scale (x - mean) / sqrt(w) + bias,
  w = variance + epsilon, whose statistics and scale are inputs broadcast along the spec's `axes`
  (they do not depend on x): dx = dy scale / sqrt(w) element by element, and where the spec names
  them, the parameters' gradients, each a sum over the axes: sum dy (x - mean) / sqrt(w) (scale's)
  and sum dy (bias's). Why here and not in the normalize family: the outputs are the adjoint's
  (one per forward input), and two of them are sums in an order nothing fixes, judged as the
  pooling modes' are; the normalize family computes forward statistics.

The pooling modes accumulate: an input position read by several windows sums their terms in an
order nothing fixes (a GPU may scatter with atomics), so the spec states a bound per mode over the
bound variables (N, the terms added; sum_abs; exact; the type's eps, tiny, ...), and the legal
device lands at the edge of it. A window holding a NaN (max) leaves open where its gradient goes:
the element variable `nan_window` marks the positions it reads, for the spec's unspecified rule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable
from math import prod

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names, expression_scope
from harness.reference.families.data_movement import strided_window_index
from harness.reference.families.reduce import _extreme
from harness.reference.families.result import (F32_SMALLEST_NORMAL, FamilyPlugin, FamilyResult, evaluate_bound,
                                                every_bound_toward_its_edge, flush_f32_denormals, toward_the_bound,
                                                type_bound_variables)
from harness.reference.families.windowing import Window, window_positions
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec



def _var(spec: OperatorSpec, tensor: str) -> str:
    """The formula input variable that reads `tensor` (a plug-in's inputs are keyed by variable)."""
    return next(v for v, t in spec.formula.inputs.items() if t == tensor)


def _out_shape(spec: OperatorSpec, descriptor: Descriptor) -> tuple[int, ...]:
    out_desc = descriptor.tensors[spec.formula.output]
    assert out_desc is not None  # a valid case describes its output
    return tuple(out_desc.sizes)


@dataclass
class _Scatter:
    """Where each incoming gradient element goes: terms[i] is added into output flat index dest[i]."""

    dest: np.ndarray   # {T} flat output indices
    terms: np.ndarray  # {T} float64 values added there
    nan_window: np.ndarray  # output-shaped: a window holding a NaN reads this position (max only)
    lowest_window: np.ndarray  # output-shaped: a window whose largest element is -inf or the lowest finite reads it (max)


def _window(spec: OperatorSpec, descriptor: Descriptor, dy_shape: tuple[int, ...],
            out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """The forward pooling's windows over the forward input (the gradient's output):
    (flat spatial position, valid) per {forward output position, window slot}, and the window."""
    p = spec.formula.family.params  # type: ignore[union-attr]
    names = attribute_names(spec, descriptor.attributes)
    rank = len(out_shape) - 2

    def ints(key: str, default: int) -> tuple[int, ...]:
        return tuple(int(v) for v in names[p[key]]) if p.get(key) else (default,) * rank

    kernel = ints("window_size", 1)
    geometry = Window(ints("strides", 1), ints("dilations", 1), ints("start", 0))
    positions, valid = window_positions(geometry, out_shape[2:], dy_shape[2:], kernel)
    return positions, valid, kernel


def _pooling_scatter(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                     mode: str, x: np.ndarray | None) -> _Scatter:
    """The terms a pooling's adjoint adds, and where: average, dy / divisor into every slot on the
    input; max, dy into the slot of the window's largest element (over `x`)."""
    family = spec.formula.family
    assert family is not None
    dy = np.asarray(inputs[_var(spec, family.params["gradient"])])
    out_shape = _out_shape(spec, descriptor)
    positions, valid, kernel = _window(spec, descriptor, dy.shape, out_shape)
    n, c = out_shape[:2]
    spatial = int(prod(out_shape[2:]))
    base = ((np.arange(n)[:, None] * c + np.arange(c)[None, :]) * spatial)[:, :, None, None]
    flat = base + positions[None, None]  # {N, C, P, K}: the slot's flat index into the output
    with np.errstate(invalid="ignore"):
        g = dy.astype(np.float64).reshape(n, c, -1)  # {N, C, P}
    nan_window = np.zeros(n * c * spatial, dtype=bool)
    if mode == "average":
        names, facts = expression_scope(spec, descriptor)
        include = family.expression("include_padding")
        count = valid.sum(axis=-1).astype(np.float64)
        divisor = (np.full_like(count, float(prod(kernel))) if include is not None and include.evaluate(names, facts)
                   else count)
        with np.errstate(all="ignore"):
            per_window = g / np.where(divisor > 0, divisor, 1.0)
        terms = np.broadcast_to(per_window[..., None], flat.shape)
        mask = np.broadcast_to(valid, flat.shape)
        return _Scatter(flat[mask], terms[mask], nan_window.reshape(out_shape), nan_window.reshape(out_shape))
    assert x is not None
    values = x.reshape(n, c, spatial)[..., positions]  # {N, C, P, K}
    fill = np.asarray(-np.inf if values.dtype.kind == "f" else np.iinfo(values.dtype).min, dtype=values.dtype)
    grouped = np.where(valid, values, fill)
    largest = _extreme(grouped, "max")  # NaN ignored, as the forward max
    with np.errstate(invalid="ignore"):
        equal = valid & (grouped == largest[..., None])
        has_nan = (valid & np.isnan(values)).any(axis=-1) if values.dtype.kind == "f" else np.zeros(largest.shape, bool)
    routed = equal.any(axis=-1)  # an empty window (all padding) or all-NaN window routes nowhere
    first = np.argmax(equal, axis=-1)
    dest = np.take_along_axis(flat, first[..., None], axis=-1)[..., 0]
    nan_window[flat[np.broadcast_to(valid, flat.shape) & has_nan[..., None]]] = True
    lowest_window = np.zeros_like(nan_window)
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            lowest = routed & (largest <= -np.finfo(values.dtype).max)
        lowest_window[flat[np.broadcast_to(valid, flat.shape) & lowest[..., None]]] = True
    return _Scatter(dest[routed], g[routed], nan_window.reshape(out_shape), lowest_window.reshape(out_shape))


def _accumulate(scatter: _Scatter, size: int) -> dict[str, np.ndarray]:
    """The exact sums (float64) and what the bound reads, per flat output element."""
    exact = np.zeros(size)
    with np.errstate(all="ignore"):
        np.add.at(exact, scatter.dest, scatter.terms)
        finite = np.isfinite(scatter.terms)
        magnitude = np.where(finite, np.abs(scatter.terms), 0.0)
    count, sum_abs, max_abs = np.zeros(size), np.zeros(size), np.zeros(size)
    nan_in = np.zeros(size, dtype=bool)
    np.add.at(count, scatter.dest, 1.0)
    np.add.at(sum_abs, scatter.dest, magnitude)
    np.maximum.at(max_abs, scatter.dest, magnitude)
    np.logical_or.at(nan_in, scatter.dest, np.isnan(scatter.terms))
    return {"exact": exact, "N": count, "sum_abs": sum_abs, "max_abs": max_abs, "nan_in": nan_in}


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, values: np.ndarray,
                 element: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The spec's rules per output element, over the output's value (bound to the gradient's
    formula variable) and the family's element variables."""
    family = spec.formula.family
    assert family is not None
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    var = _var(spec, family.params["gradient"])
    ctx = formula_context(spec, types, {var: values}, descriptor.attributes)
    ctx.variables.update(element)
    out_name = spec.formula.output
    masks = {}
    for rule in spec.unspecified:
        if not rule.concerns(out_name, types[out_name]):
            continue
        with np.errstate(all="ignore"):
            hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), values.shape)
        if hit.any():
            masks[rule.id] = hit
    return masks


def _moved(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """strided_window: zeros, each dy element moved bit for bit to the position the copy read it from."""
    family = spec.formula.family
    assert family is not None
    names = attribute_names(spec, descriptor.attributes)
    dy = np.asarray(inputs[_var(spec, family.params["gradient"])])
    out_name = spec.formula.output
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    offsets, sizes, strides = ([int(v) for v in names[family.params[k]]] for k in ("offsets", "sizes", "strides"))
    out = np.zeros(_out_shape(spec, descriptor), dtype=out_type.numpy)
    out[np.ix_(*strided_window_index(list(dy.shape), offsets, sizes, strides))] = dy.astype(out_type.numpy, copy=False)
    result = FamilyResult({out_name: out})
    count = np.zeros(out.shape, dtype=np.int64)
    count[np.ix_(*strided_window_index(list(dy.shape), offsets, sizes, strides))] = 1
    element = {"contributions": count, "nan_window": np.zeros(out.shape, dtype=np.int64),
               "lowest_window": np.zeros(out.shape, dtype=np.int64)}
    result.unspecified[out_name] = _unspecified(spec, descriptor, out, element)
    return result


def _sums(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], mode: str,
          flush: bool = False) -> tuple[dict[str, np.ndarray], _Scatter]:
    family = spec.formula.family
    assert family is not None
    x = None
    if mode == "max":
        x = np.asarray(inputs[_var(spec, family.params["input"])])
        if flush:
            flushed = flush_f32_denormals(x)
            x = x if flushed is None else flushed
    scatter = _pooling_scatter(spec, descriptor, inputs, mode, x)
    return _accumulate(scatter, int(prod(_out_shape(spec, descriptor)))), scatter


AFFINE = "mean_variance"  # the mode whose adjoint has up to three outputs (the input's, scale's and bias's gradients)
PARAMETER_SUMS = ("scale_gradient", "bias_gradient")  # its optional outputs, each a sum over the axes


def _largest(*values: np.ndarray) -> np.ndarray:
    """The element-wise largest of `values` (broadcast together; NaN read as 0: a NaN input gets no
    slack anyway)."""
    arrays = np.broadcast_arrays(*values)
    return np.maximum.reduce([np.where(np.isnan(a), 0.0, a) for a in arrays])


def _at_least_one(values: np.ndarray) -> np.ndarray:
    """max(1, |v|) over the finite values (1 elsewhere): a factor's amplification of an absolute error."""
    return np.maximum(1.0, np.where(np.isfinite(values), np.abs(values), 0.0))


def _finite_abs(values: np.ndarray) -> np.ndarray:
    """|v| over the finite values, 0 elsewhere (what a magnitude sums)."""
    return np.where(np.isfinite(values), np.abs(values), 0.0)


def _read_wide(spec: OperatorSpec, inputs: dict[str, np.ndarray], param: str, flush: bool) -> np.ndarray:
    """The input a family parameter names, in float64; with `flush`, as a legal device reads it
    (fp32 denormals flushed to zeros of their sign)."""
    value = np.asarray(inputs[_var(spec, param)])
    if flush:
        flushed = flush_f32_denormals(value)
        value = value if flushed is None else flushed
    with np.errstate(invalid="ignore"):
        return value.astype(np.float64)


def _affine_parts(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                  flush: bool) -> dict[str, tuple[np.ndarray, dict[str, object], np.ndarray]]:
    """mean_variance's exact outputs (float64), each with its bound variables and where a NaN input
    reaches it, keyed by `mode` (the input's gradient) and the optional sums' parameter names; with
    `flush`, over the inputs with their fp32 denormals flushed (a legal device reading)."""
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    axes_expr = family.expression("axes")
    assert axes_expr is not None
    shape = _out_shape(spec, descriptor)
    axes = tuple(sorted({int(a) for a in axes_expr.evaluate(names, facts)}))

    def read(key: str) -> np.ndarray:
        wide = _read_wide(spec, inputs, family.params[key], flush)
        return wide.reshape((1,) * (len(shape) - wide.ndim) + wide.shape)

    dy, x, mean, variance, scale = (read(k) for k in ("gradient", "input", "mean", "variance", "scale"))
    raw_eps = descriptor.attributes.get(family.params["epsilon"], spec.field(family.params["epsilon"]).default)
    epsilon = np.float32(0.0 if raw_eps is None else raw_eps)
    if flush and np.abs(epsilon) < np.float32(F32_SMALLEST_NORMAL):
        epsilon = np.float32(np.copysign(0.0, epsilon))
    e = float(epsilon)
    parts: dict[str, tuple[np.ndarray, dict[str, object], np.ndarray]] = {}
    with np.errstate(all="ignore"):
        w = variance + e
        rs = 1.0 / np.sqrt(np.abs(w))
        nan_w = np.isnan(variance) | bool(np.isnan(e))  # each output's NaN inputs: only those it reads
        common: dict[str, object] = {"var_eps": np.abs(w), "variance_abs": np.abs(variance), "epsilon": abs(e)}
        big, one, out = _largest, _at_least_one, np.broadcast_to

        dx = dy * scale / np.sqrt(w)
        parts[AFFINE] = (out(dx, shape), {**common, "N": np.float64(1.0), "sum_abs": out(np.abs(dx), shape),
                                          "partial": out(big(np.abs(dy * scale), np.abs(scale) * rs, np.abs(dy) * rs,
                                                             np.abs(dx)), shape),
                                          "amp": out(one(dy) * one(scale) * one(rs), shape)},
                         out(np.isnan(dy) | np.isnan(scale) | nan_w, shape))
        n = np.float64(prod(shape[a] for a in axes))
        dev = x - mean
        product = dy * dev
        terms = product * rs

        def reduce(a: np.ndarray, f: Callable[..., np.ndarray] = np.sum) -> np.ndarray:
            return f(np.broadcast_to(a, shape), axis=axes, keepdims=True)

        nan_in = reduce(np.isnan(dy) | np.isnan(x) | np.isnan(mean) | nan_w, np.any)
        finite_abs = _finite_abs
        term_abs = finite_abs(terms)
        parts["scale_gradient"] = (reduce(product) / np.sqrt(w),
                                   {**common, "N": n, "sum_abs": reduce(term_abs), "max_abs": reduce(term_abs, np.max),
                                    "partial": big(reduce(big(np.abs(dev), np.abs(product), np.abs(terms), np.abs(dy) * rs,
                                                              np.abs(dev) * rs), np.max),
                                                   reduce(finite_abs(product)), reduce(term_abs)),
                                    "amp": reduce(one(dy) * one(dev) * one(rs), np.max)},
                                   nan_in)
        dy_abs = finite_abs(dy)
        parts["bias_gradient"] = (reduce(dy), {**common, "N": n, "sum_abs": reduce(dy_abs), "max_abs": reduce(dy_abs, np.max),
                                               "partial": reduce(dy_abs), "amp": np.float64(1.0)},
                                  reduce(np.isnan(dy), np.any))
        batch = family.expression("batch")
        if batch is not None and bool(batch.evaluate(names, facts)):
            parts[AFFINE] = _through_statistics(dy, dev, scale, w, rs, n, reduce, common,
                                                out(reduce(np.isnan(dy) | np.isnan(x) | np.isnan(mean), np.any)
                                                    | np.isnan(scale) | nan_w, shape), shape)
    return parts


def _through_statistics(dy: np.ndarray, dev: np.ndarray, scale: np.ndarray, w: np.ndarray, rs: np.ndarray,
                        n: np.float64, reduce: Callable[..., np.ndarray], common: dict[str, object],
                        nan_in: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, dict[str, object], np.ndarray]:
    """mean_variance with `batch`: the input's gradient when the statistics are the group's own
    (the forward computed mean and variance from x, so dx carries the terms through them):
    scale / sqrt(w) (dy - mean(dy) - (x - mean) mean(dy (x - mean)) / w), exact, with the bound
    variables of its steps (each mean over the group's N elements)."""
    with np.errstate(all="ignore"):
        mean_dy = reduce(dy) / n
        product = dy * dev
        mean_product = reduce(product) / n
        through = dev * mean_product / w
        inner_value = dy - mean_dy - through
        dx = scale / np.sqrt(w) * inner_value
        inner = _finite_abs(dy) + _finite_abs(mean_dy) + _finite_abs(through)
        variables: dict[str, object] = {
            **common, "N": n, "sum_abs": np.broadcast_to(_finite_abs(dx), shape),
            "factor": np.broadcast_to(_finite_abs(scale) * rs, shape), "inner": np.broadcast_to(inner, shape),
            "mean_abs_dy": np.broadcast_to(reduce(_finite_abs(dy)) / n, shape),
            "mean_abs_product": np.broadcast_to(reduce(_finite_abs(product)) / n, shape),
            "dev": np.broadcast_to(_finite_abs(dev), shape), "mean_product": np.broadcast_to(_finite_abs(mean_product), shape),
            "partial": np.broadcast_to(_largest(reduce(_finite_abs(dy)), reduce(_finite_abs(product)), _finite_abs(product),
                                                _finite_abs(dev), _finite_abs(dev * mean_product), inner,
                                                _finite_abs(scale) * inner, rs * inner, _finite_abs(scale) * rs * inner,
                                                _finite_abs(scale * rs)), shape),
            "amp": np.broadcast_to(_at_least_one(scale) * _at_least_one(rs) * _at_least_one(dev) * _at_least_one(rs * rs)
                                   * reduce(_at_least_one(dy) * _at_least_one(dev), np.max), shape)}
    return np.broadcast_to(dx, shape), variables, nan_in


def _affine(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """mean_variance: the input's gradient (the spec's output) and the optional parameter sums, each
    rounded to nearest from its exact value and judged within the spec's bound keyed by the mode
    (the input's gradient) or by the output parameter's name; where fp32 denormal inputs may be
    flushed, the larger of the two computations' bounds (as the normalize family's statistics)."""
    family = spec.formula.family
    assert family is not None
    parts = _affine_parts(spec, descriptor, inputs, flush=False)
    epsilon = abs(float(np.float32(descriptor.attributes.get(family.params["epsilon"]) or 0.0)))
    flushable = (any(flush_f32_denormals(np.asarray(v)) is not None for v in inputs.values())
                 or 0.0 < epsilon < F32_SMALLEST_NORMAL)
    flushed = _affine_parts(spec, descriptor, inputs, flush=True) if flushable else None
    targets = {AFFINE: spec.formula.output, **{k: family.params[k] for k in PARAMETER_SUMS if k in family.params}}
    result = FamilyResult({})
    for key, name in targets.items():
        desc = descriptor.tensors.get(name)
        if desc is None:
            continue
        out_type = spec.catalog.dtype(desc.data_type)
        exact, variables, nan_in = parts[key]
        sizes = tuple(desc.sizes)
        with np.errstate(all="ignore"):
            result.outputs[name] = exact.astype(out_type.numpy).reshape(sizes)
        result.unspecified[name] = {}
        if flushed is not None:  # a device reading flushed inputs: its non-finite results are that computation's
            with np.errstate(all="ignore"):
                result.alternatives[name] = [("fp32_input_flush", flushed[key][0].astype(out_type.numpy).reshape(sizes))]
        bound = family.bound(key)
        if bound is None or not out_type.is_float:
            continue
        base = {**type_bound_variables(out_type.numpy), "exact": exact, "max_abs": variables.get("max_abs", variables["sum_abs"])}
        atol = evaluate_bound(bound.atol, {**base, **variables}, exact.shape, nan_in)
        if flushed is not None:
            exact_f, variables_f, _ = flushed[key]
            with np.errstate(invalid="ignore"):
                moved = np.abs(exact_f - exact) + evaluate_bound(bound.atol, {**base, **variables_f, "exact": exact_f},
                                                                 exact.shape, nan_in)
            atol = np.maximum(atol, np.where(np.isnan(moved), 0.0, moved))
        atol = np.where(np.isfinite(exact), atol, np.where(np.isinf(atol), atol, 0.0))  # a non-finite exact: IEEE's, unless every value is legal
        result.bounds[name] = (exact.reshape(sizes), atol.reshape(sizes))
    return result


ROI_SAMPLED = "roi_sampled"  # the adjoint of the roi family's sampled mode


def _roi_sampled(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """roi_sampled: the roi family's sample grid transposed (harness.reference.families.roi,
    sampled_adjoint), its terms summed as the pooling modes' are (an order nothing fixes). Bound
    variables beside N, sum_abs, max_abs and exact: sum_dy (the sum of the touched terms' |dy share|:
    what an error in a weight multiplies), pos_err (the largest FLOAT32 position error of the samples
    adding there) and ties (nearest: the shares that a .5 tie may send here or elsewhere). The
    optional `roi_gradient` output (the regions' gradient) is written as zeros and left to the
    spec's rules that name it."""
    from harness.reference.families import roi  # the forward's sampling, not a plug-in dependency at import
    family = spec.formula.family
    assert family is not None
    p = family.params
    dy = np.asarray(inputs[_var(spec, p["gradient"])])
    x_desc = descriptor.tensors.get(p["input"])
    x = np.asarray(inputs[_var(spec, p["input"])]) if x_desc is not None else None
    rois = np.asarray(inputs[_var(spec, p["rois"])]).astype(np.float64).reshape(-1, 4)
    batch = np.asarray(inputs[_var(spec, p["batch_indices"])]).reshape(-1).astype(np.float64)
    names, facts = expression_scope(spec, descriptor)
    scale_expr = family.expression("spatial_scale")
    assert scale_expr is not None
    sy, sx = (float(np.float32(v)) for v in scale_expr.evaluate(names, facts))
    out_name = spec.formula.output
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    shape = _out_shape(spec, descriptor)
    size = int(prod(shape))
    scatter = roi.sampled_adjoint(spec, descriptor, dy, x, batch, rois, (sy, sx), shape)
    sums = _accumulate(_Scatter(scatter.dest, scatter.terms, np.zeros(0), np.zeros(0)), size)
    extra = {"sum_dy": np.zeros(size), "pos_err": np.zeros(size), "ties": np.zeros(size)}
    with np.errstate(all="ignore"):
        np.add.at(extra["sum_dy"], scatter.dest, np.where(np.isfinite(scatter.factor), scatter.factor, 0.0))
        np.maximum.at(extra["pos_err"], scatter.dest, scatter.pos_err)
        np.add.at(extra["ties"], scatter.dest, np.where(np.isfinite(scatter.tie), scatter.tie, np.inf))
        out = sums["exact"].astype(out_type.numpy).reshape(shape)
    result = FamilyResult({out_name: out})
    element = {k: v.astype(np.int64).reshape(shape) for k, v in scatter.open.items()}
    element["contributions"] = sums["N"].astype(np.int64).reshape(shape)
    result.unspecified[out_name] = _unspecified(spec, descriptor, out, element)
    result.summaries.update(element)
    bound = family.bound(ROI_SAMPLED)
    if bound is not None and out_type.is_float:
        variables: dict[str, object] = {**type_bound_variables(out_type.numpy), **extra,
                                        **{k: sums[k] for k in ("N", "sum_abs", "max_abs", "exact")}}
        atol = evaluate_bound(bound.atol, variables, (size,), sums["nan_in"])
        result.bounds[out_name] = (sums["exact"].reshape(shape), atol.reshape(shape))
        for key in ("exact", "N", "sum_abs"):
            result.summaries[key] = sums[key].reshape(shape)
        result.summaries["bound"] = atol.reshape(shape)
    roi_out = p.get("roi_gradient")
    roi_desc = descriptor.tensors.get(roi_out) if roi_out else None
    if roi_out and roi_desc is not None:
        roi_type = spec.catalog.dtype(roi_desc.data_type)
        zeros = np.zeros(tuple(roi_desc.sizes), dtype=roi_type.numpy)
        result.outputs[roi_out] = zeros
        result.unspecified[roi_out] = {rule.id: np.ones(zeros.shape, dtype=bool) for rule in spec.unspecified
                                       if rule.outputs is not None and roi_out in rule.outputs
                                       and rule.concerns(roi_out, roi_desc.data_type)}
    return result


LOCAL = "window_sum_square"  # the adjoint of a local normalization x (bias + alpha / w S)^-beta


def _box_sum(values: np.ndarray, axes: list[int], w: int, before: int) -> np.ndarray:
    """The sum of `values` (float64, IEEE kept) over the box of w elements along each of `axes`,
    `before` of them before the element; positions off the tensor add nothing."""
    sums = values
    with np.errstate(all="ignore"):
        for axis in axes:
            pad = [(0, 0)] * sums.ndim
            pad[axis] = (before, w - 1 - before)
            sums = np.lib.stride_tricks.sliding_window_view(np.pad(sums, pad), w, axis=axis).sum(axis=-1)
    return sums


def _box_max(values: np.ndarray, axes: list[int], w: int, before: int) -> np.ndarray:
    """The largest of `values` (non-negative, finite) over the same box (0 off the tensor)."""
    out = values
    for axis in axes:
        pad = [(0, 0)] * out.ndim
        pad[axis] = (before, w - 1 - before)
        out = np.lib.stride_tricks.sliding_window_view(np.pad(out, pad), w, axis=axis).max(axis=-1)
    return out


def _local_parts(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 flush: bool) -> tuple[np.ndarray, dict[str, object], np.ndarray, np.ndarray]:
    """window_sum_square's exact input gradient (float64), its bound variables, where a NaN reaches
    it and where an infinity does (`nonfinite_window`). With D_i = bias + c S_i, c = alpha / w, S_i
    the sum of x^2 over element i's window (b = (w - 1) // 2 before it), y_i = x_i D_i^-beta gives
    dx_j = dy_j D_j^-beta - 2 c beta x_j sum over the windows i holding j of dy_i x_i D_i^(-beta - 1):
    the windows holding j are the mirrored box around j (w - 1 - b before it, b after)."""
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    axes_expr = family.expression("axes")
    assert axes_expr is not None
    axes = sorted({int(a) for a in axes_expr.evaluate(names, facts)})
    w = int(names[family.params["window"]])
    before = (w - 1) // 2

    def read(key: str) -> np.ndarray:
        return _read_wide(spec, inputs, family.params[key], flush)

    def attribute(key: str) -> float:
        raw = descriptor.attributes.get(family.params[key], spec.field(family.params[key]).default)
        value = np.float32(0.0 if raw is None else raw)
        if flush and abs(value) < np.float32(F32_SMALLEST_NORMAL):
            value = np.float32(np.copysign(0.0, value))
        return float(value)

    dy, x = read("gradient"), read("input")
    alpha, beta, bias = attribute("alpha"), attribute("beta"), attribute("bias")
    with np.errstate(all="ignore"):
        c = alpha / w
        squares = _box_sum(x * x, axes, w, before)
        base = bias + c * squares
        power = np.power(base, -beta)
        terms = dy * x * power / base  # dy_i x_i D_i^(-beta - 1)
        coefficient = 2.0 * c * beta
        direct = dy * power
        gathered = _box_sum(terms, axes, w, w - 1 - before)
        exact = direct - coefficient * x * gathered
        finite = _finite_abs
        mirror = lambda v: _box_max(v, axes, w, w - 1 - before)  # noqa: E731  the windows holding the element
        base_abs = np.abs(base)
        rel = np.where(base_abs > 0, (abs(bias) + abs(c) * finite(squares)) / base_abs, np.inf)
        rel_sum = np.where(base_abs > 0, abs(c) / base_abs, np.inf)
        log_base = np.maximum(1.0, finite(np.log2(base_abs)))
        clip = lambda v: np.where(np.isfinite(v), v, np.finfo(np.float64).max)  # noqa: E731
        n = np.float64(w ** len(axes))
        adjoint = abs(coefficient) * finite(x) * _box_sum(finite(terms), axes, w, w - 1 - before)
        one = _at_least_one
        amp = np.maximum(one(dy) * one(power),
                         max(1.0, abs(coefficient)) * one(x) * mirror(one(dy) * one(x) * one(power / base)))
        variables: dict[str, object] = {
            "N": n, "exact": exact, "direct": finite(direct), "adjoint": adjoint,
            "base_rel": np.maximum(clip(rel), mirror(clip(rel))), "sum_rel": np.maximum(clip(rel_sum), mirror(clip(rel_sum))),
            "log_base": np.maximum(log_base, mirror(log_base)), "beta": abs(beta),
            "partial": _largest(finite(direct), adjoint, _box_sum(finite(terms), axes, w, w - 1 - before),
                                mirror(finite(terms)), mirror(finite(power / base)), finite(power),
                                mirror(finite(base)), mirror(finite(squares))),
            "amp": amp}
        nan_in = _box_sum(np.isnan(x).astype(np.float64), axes, w, before) > 0  # D_j's window
        nan_in = nan_in | (mirror(nan_in.astype(np.float64)) > 0) | np.isnan(dy) | (mirror(np.isnan(dy).astype(np.float64)) > 0)
        inf_in = np.isinf(x) | np.isinf(dy)
        inf_near = (_box_sum(inf_in.astype(np.float64), axes, w, before) > 0)
        inf_near = inf_near | (mirror(inf_near.astype(np.float64)) > 0) | (mirror(inf_in.astype(np.float64)) > 0)
    return exact, variables, nan_in | bool(np.isnan(alpha) or np.isnan(beta) or np.isnan(bias)), inf_near


def _local(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """window_sum_square: the input's gradient, rounded to nearest from its exact value, judged
    within the spec's bound keyed by the mode; where fp32 denormals may be flushed, the larger of the
    two computations' bounds and the flushed computation's values as a legal alternative; the spec's
    unspecified rules over the element variable `nonfinite_window`."""
    family = spec.formula.family
    assert family is not None
    out_name = spec.formula.output
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    exact, variables, nan_in, inf_near = _local_parts(spec, descriptor, inputs, flush=False)
    with np.errstate(all="ignore"):
        result = FamilyResult({out_name: exact.astype(out_type.numpy)})
    flushable = any(flush_f32_denormals(np.asarray(v)) is not None for v in inputs.values())
    flushed = _local_parts(spec, descriptor, inputs, flush=True) if flushable else None
    if flushed is not None:
        with np.errstate(all="ignore"):
            result.alternatives[out_name] = [("fp32_input_flush", flushed[0].astype(out_type.numpy))]
    element = {"nonfinite_window": inf_near.astype(np.int64)}
    result.unspecified[out_name] = _unspecified(spec, descriptor, result.outputs[out_name], element)
    result.summaries.update(element)
    bound = family.bound(LOCAL)
    if bound is not None and out_type.is_float:
        base = type_bound_variables(out_type.numpy)
        atol = evaluate_bound(bound.atol, {**base, **variables}, exact.shape, nan_in)
        if flushed is not None:
            with np.errstate(invalid="ignore"):
                moved = np.abs(flushed[0] - exact) + evaluate_bound(bound.atol, {**base, **flushed[1]}, exact.shape, nan_in)
            atol = np.maximum(atol, np.where(np.isnan(moved), 0.0, moved))
        atol = np.where(np.isfinite(exact), atol, np.where(np.isinf(atol), atol, 0.0))
        result.bounds[out_name] = (exact, atol)
        result.summaries["bound"] = atol
    return result


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    mode = family.params["mode"]
    if mode == "strided_window":
        return _moved(spec, descriptor, inputs)
    if mode == AFFINE:
        return _affine(spec, descriptor, inputs)
    if mode == LOCAL:
        return _local(spec, descriptor, inputs)
    if mode == ROI_SAMPLED:
        return _roi_sampled(spec, descriptor, inputs)
    out_name = spec.formula.output
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    shape = _out_shape(spec, descriptor)
    sums, scatter = _sums(spec, descriptor, inputs, mode)
    with np.errstate(all="ignore"):
        out = sums["exact"].astype(out_type.numpy).reshape(shape)
    result = FamilyResult({out_name: out})
    element = {"contributions": sums["N"].astype(np.int64).reshape(shape),
               "nan_window": scatter.nan_window.astype(np.int64),
               "lowest_window": scatter.lowest_window.astype(np.int64)}
    result.unspecified[out_name] = _unspecified(spec, descriptor, out, element)
    result.summaries.update(element)  # what expectation files' `when` reads beside exact and N
    bound = family.bound(mode)
    if bound is not None and out_type.is_float:
        variables: dict[str, object] = {**type_bound_variables(out_type.numpy),
                                        **{k: sums[k] for k in ("N", "sum_abs", "max_abs", "exact")}}
        atol = evaluate_bound(bound.atol, variables, sums["exact"].shape, sums["nan_in"])
        result.bounds[out_name] = (sums["exact"].reshape(shape), atol.reshape(shape))
        for key in ("exact", "N", "sum_abs"):
            result.summaries[key] = sums[key].reshape(shape)
        result.summaries["bound"] = atol.reshape(shape)
    if mode == "max" and flush_f32_denormals(np.asarray(inputs[_var(spec, family.params["input"])])) is not None:
        # a device may read the input with its fp32 denormals flushed: a denormal then ties with a zero
        flushed, _ = _sums(spec, descriptor, inputs, mode, flush=True)
        with np.errstate(all="ignore"):
            alternative = flushed["exact"].astype(out_type.numpy).reshape(shape)
        result.alternatives[out_name] = [("fp32_input_flush", alternative)]
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One legal device's outputs (the worst legal backend): a move's exact result; an accumulated
    one moved from the exact value towards the edge of the spec's bound (up or down at random per
    case), rounded towards the exact value so that it stays inside. The inputs arrive with fp32
    denormals flushed while the judge measures from the unflushed ones: each of the N terms moved by
    less than tiny, so 2 N tiny of the bound is kept in reserve."""
    result = compute(spec, descriptor, inputs)
    out_name = spec.formula.output
    if spec.formula.family is not None and spec.formula.family.params["mode"] in (AFFINE, LOCAL):
        return every_bound_toward_its_edge(result, rng)  # mean_variance: each output its own bound
    if out_name not in result.bounds:
        return result.outputs
    exact, atol = result.bounds[out_name]
    out = result.outputs[out_name]
    sign = 1.0 if rng.random() < 0.5 else -1.0
    moved, usable = toward_the_bound(exact, atol, out.dtype, sign, reserve=2 * result.summaries["N"] * F32_SMALLEST_NORMAL)
    return {**result.outputs, out_name: np.where(usable, moved, out).astype(out.dtype)}



PLUGIN = FamilyPlugin(DECLARATIONS["gradient"], compute, legal_device)
