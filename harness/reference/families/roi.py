"""The roi family: regions of interest of an image tensor {N, C, height, width}, each pooled onto
a fixed grid, giving {NumROIs, C, H, W}.

A region is a row of the spec's `rois` input: [batch, x1, y1, x2, y2], or [x1, y1, x2, y2] with
the batch index from `batch_indices`. Its corners are multiplied by `spatial_scale` ([y, x]).

- integer_bins: the scaled corners rounded to whole indices (x1 = round(x1 * scale), ...), the
  inclusive region cut into H x W bins by integer division (bin h spans floor(h * RH / H) to
  ceil((h + 1) * RH / H), exclusive, offset by y1, RH = y2 - y1 + 1), each clamped to the input;
  the output element is the bin's largest element (NaN ignored, +0 above -0: the reduce family's
  max), a copy, so exact. The corners' FLOAT32 products may round either way where they lie within
  their error of a .5 tie, and a page that writes round() names no tie rule: `rounding_tie` tells
  the spec's rules. An empty bin gives 0 here (`empty_bin`).

- sampled: the scaled region (start x1 * scale_x, size x2 * scale_x - start; negative for a
  mirrored region) cut into H x W cells of s_y x s_x samples, s = clamp(|size| / cells, minimum,
  maximum) per dimension (`samples`; a mirrored region samples as its unmirrored self). A
  fractional count is not one the page names: the reference takes its ceiling and `samples_open`
  tells the spec's rules, as it does for 0 samples, a minimum above the maximum, or a single sample
  along a dimension with `align_corners`. Sample t (= cell * s + k) lies at (t - output_offset) *
  step + start - input_offset, step = size / (cells * s), or size / (cells * s - 1) with
  `align_corners` (the samples spanning the region). It reads the nearest element (round(x); within
  its FLOAT32 error of a .5 tie either neighbour, which the bound's `ties` spans) or the bilinear
  weighting of its 4 neighbours (weights 1 - frac and frac, edges clamped, as the resample family
  weighs); past [-1, size] (ONNX RoiAlign's reach) it reads `out_of_bounds`, and anywhere outside
  [0, size - 1] it is `past_edge` for the spec's rules (the pages do not say where outside
  begins). A cell averages its samples or takes their largest. The bound (`bounds.sampled`) is over
  terms, pos_err, spread, max_abs, ties, exact; the legal device moves each result to 0.999 of it.

Element variables (for the spec's `unspecified` rules, per output element): batch_invalid,
inverted, rounding_tie, empty_bin, nan_in_bin, nonfinite_roi, samples_open, past_edge
(harness.spec.families).
fp32 denormal inputs a device may flush: the fp32_input_flush alternative (as pooling's max).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.reduce import _extreme
from harness.reference.families.result import (F32_SMALLEST_NORMAL, FamilyPlugin, FamilyResult, evaluate_bound,
                                                flush_f32_denormals, output_rule_masks, toward_the_bound,
                                                type_bound_variables)
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

F32_EPS = 2.0 ** -23
MAX_SAMPLES = 64  # the most samples per cell and dimension the reference computes (more: samples_open)
WHOLE_LIMIT = 2.0 ** 24  # beyond it FLOAT32 holds no longer every integer: a corner there is `nonfinite_roi`


@dataclass
class _Regions:
    """The regions of one case, read from the spec's inputs."""

    x: np.ndarray          # {N, C, H, W}: the input as given
    batch: np.ndarray      # {R}: float64 batch index per region
    corners: np.ndarray    # {R, 4}: x1, y1, x2, y2 (float64 of the stored values)
    scale_x: float
    scale_y: float
    out_name: str
    out_shape: tuple[int, ...]
    var: str


def _read(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> _Regions:
    family = spec.formula.family
    assert family is not None
    p = family.params
    by_tensor = {t: v for v, t in spec.formula.inputs.items()}
    var = by_tensor[p["input"]]
    x = np.asarray(inputs[var])
    rois = np.asarray(inputs[by_tensor[p["rois"]]])
    rows = rois.reshape(-1, rois.shape[-1]).astype(np.float64)
    batch_field = p.get("batch_indices")
    if batch_field is not None and batch_field in by_tensor and descriptor.tensors.get(batch_field) is not None:
        batch = np.asarray(inputs[by_tensor[batch_field]]).reshape(-1).astype(np.float64)
        corners = rows[:, 0:4]
    else:
        batch, corners = rows[:, 0], rows[:, 1:5]
    names, facts = expression_scope(spec, descriptor)
    expr = family.expression("spatial_scale")
    assert expr is not None
    scale_y, scale_x = (float(np.float32(v)) for v in expr.evaluate(names, facts))
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    return _Regions(x, batch, corners, scale_x, scale_y, out_name, tuple(out_desc.sizes), var)


def _batch_invalid(batch: np.ndarray, count: int) -> np.ndarray:
    """Per region: its batch index is not a whole number in [0, count)."""
    with np.errstate(invalid="ignore"):
        return ~(np.isfinite(batch) & (batch == np.floor(batch)) & (batch >= 0) & (batch < count))


def _scaled(corners: np.ndarray, scale_x: float, scale_y: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The corners times their scale: the FLOAT32 products a device computes (IEEE rounding), the
    products' error bound (one FLOAT32 step of their magnitude), and where a product is not finite
    or beyond WHOLE_LIMIT."""
    scales = np.array([scale_x, scale_y, scale_x, scale_y])
    with np.errstate(all="ignore"):
        exact = corners * scales  # two FLOAT32 values: their product is exact in float64
        device = (corners.astype(np.float32) * scales.astype(np.float32)).astype(np.float64)
        error = F32_EPS * np.abs(exact)
        wild = ~np.isfinite(exact) | (np.abs(exact) >= WHOLE_LIMIT)
    return np.where(wild, 0.0, device), np.where(wild, 0.0, error), wild


def _bins(r: _Regions) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """integer_bins: per output element its bin's largest element, the element variables, and the
    bins' input slices ({R, H, W, 4}: y start, y end, x start, x end, clamped) with each region's
    batch index (0 where invalid)."""
    n, _, height, width = r.x.shape
    regions, _, ph, pw = r.out_shape
    device, error, wild = _scaled(r.corners, r.scale_x, r.scale_y)
    with np.errstate(invalid="ignore"):
        frac = device - np.floor(device)
        tie = (np.abs(frac - 0.5) <= error) & ~wild
    whole = np.floor(device + 0.5).astype(np.int64)  # round(), a .5 tie away from -inf (rounding_tie says it is open)
    x1, y1, x2, y2 = whole[:, 0], whole[:, 1], whole[:, 2], whole[:, 3]
    rh, rw = y2 - y1 + 1, x2 - x1 + 1
    invalid_batch = _batch_invalid(r.batch, n)
    batch = np.where(invalid_batch, 0, np.nan_to_num(r.batch)).astype(np.int64)
    slices = np.zeros((regions, ph, pw, 4), dtype=np.int64)
    for i in range(regions):
        for h in range(ph):
            ys = min(max(h * rh[i] // ph + y1[i], 0), height)
            ye = min(max(((h + 1) * rh[i] + ph - 1) // ph + y1[i], 0), height)
            for w in range(pw):
                xs = min(max(w * rw[i] // pw + x1[i], 0), width)
                xe = min(max(((w + 1) * rw[i] + pw - 1) // pw + x1[i], 0), width)
                slices[i, h, w] = (ys, ye, xs, xe)
    per_region = {"batch_invalid": invalid_batch, "inverted": (rh <= 0) | (rw <= 0),
                  "rounding_tie": tie.any(axis=1), "nonfinite_roi": wild.any(axis=1)}
    variables = {k: np.broadcast_to(v[:, None, None, None], r.out_shape).astype(np.int64) for k, v in per_region.items()}
    empty = (slices[..., 1] <= slices[..., 0]) | (slices[..., 3] <= slices[..., 2])
    variables["empty_bin"] = np.broadcast_to(empty[:, None], r.out_shape).astype(np.int64)
    return batch, variables, slices, empty


def _max_bins(x: np.ndarray, batch: np.ndarray, slices: np.ndarray, empty: np.ndarray,
              out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each bin's largest element per channel (0 for an empty bin), and where a bin holds a NaN."""
    out = np.zeros(out_shape, dtype=x.dtype)
    nan_in = np.zeros(out_shape, dtype=bool)
    regions, _, ph, pw = out_shape
    for i in range(regions):
        for h in range(ph):
            for w in range(pw):
                if empty[i, h, w]:
                    continue
                ys, ye, xs, xe = slices[i, h, w]
                block = x[batch[i], :, ys:ye, xs:xe].reshape(x.shape[1], -1)
                out[i, :, h, w] = _extreme(block, "max")
                if x.dtype.kind == "f":
                    nan_in[i, :, h, w] = np.isnan(block).any(axis=-1)
    return out, nan_in


@dataclass
class _Sampling:
    """The sampled mode's parameters, read from the spec's expressions for one descriptor."""

    average: bool
    nearest: bool
    minimum: int
    maximum: int
    input_offset: float
    output_offset: float
    align_corners: bool
    out_of_bounds: float


def _sampling(spec: OperatorSpec, descriptor: Descriptor) -> _Sampling:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)

    def read(key: str, default: Any) -> Any:
        expr = family.expression(key)
        return default if expr is None else expr.evaluate(names, facts)
    minimum, maximum = (int(v) for v in read("samples", [1, 1]))
    oob = family.params.get("out_of_bounds")
    return _Sampling(bool(read("average", True)), bool(read("nearest", False)), minimum, maximum,
                     float(np.float32(read("input_offset", 0.5))), float(np.float32(read("output_offset", -0.5))),
                     bool(read("align_corners", False)),
                     float(np.float32(names[oob])) if oob is not None else 0.0)


def _count(size: float, cells: int, p: _Sampling) -> tuple[int, bool]:
    """Samples per cell along one dimension, and whether the page leaves the count open. A mirrored
    region (negative size) samples as its unmirrored self ('a mirrored/flipped version of the
    input'): the quotient's magnitude (the pages' signed clamp would always give the minimum)."""
    with np.errstate(all="ignore"):
        q = abs(size) / cells
    if not np.isfinite(q) or p.minimum > p.maximum:
        return max(p.minimum, 1), True
    clamped = min(max(q, p.minimum), p.maximum)
    count = int(np.ceil(clamped))
    if count > MAX_SAMPLES:  # the reference's own limit: such a count is left open
        return MAX_SAMPLES, True
    return max(count, 1), count < 1 or clamped != np.floor(clamped)


def _positions(start: float, size: float, cells: int, count: int, p: _Sampling) -> tuple[np.ndarray, np.ndarray]:
    """{cells, count}: each sample's exact position and its FLOAT32 error bound (the scaled
    corner 1 step, the size 1, its division by cells * count 2.5, the product 1, the additions 2:
    8 steps of the largest magnitude met)."""
    t = np.arange(cells * count, dtype=np.float64).reshape(cells, count)
    with np.errstate(all="ignore"):
        # corners: the samples' spacing spans the region, (n - 1) steps (one sample: no spacing, left
        # open by _count's caller)
        step = size / max(cells * count - 1, 1) if p.align_corners else size / (cells * count)
        offset = t - p.output_offset
        position = offset * step + start - p.input_offset
        error = 8 * F32_EPS * (np.abs(start) + np.abs(size) + np.abs(offset * step) + abs(p.input_offset))
    return position, error


def _read_samples(plane: np.ndarray, py: np.ndarray, px: np.ndarray, ey: np.ndarray, ex: np.ndarray,
                  p: _Sampling) -> dict[str, np.ndarray]:
    """Per channel and sample ({C, Sy, Sx} over the outer product of py and px): the value read,
    its other legal value (nearest at a tie, else the value), the bound variables' per-sample parts,
    and where the sample is past the edge or near a NaN."""
    channels, height, width = plane.shape
    with np.errstate(invalid="ignore"):
        x64 = plane.astype(np.float64)
    gy, gx = np.meshgrid(py, px, indexing="ij")
    sy, sx = np.meshgrid(ey, ex, indexing="ij")
    past = (gy < -sy) | (gy > height - 1 + sy) | (gx < -sx) | (gx > width - 1 + sx)
    outside = (gy < -1) | (gy > height) | (gx < -1) | (gx > width)
    if p.nearest:
        def pick(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
            return x64[:, np.clip(yy, 0, height - 1).astype(np.int64), np.clip(xx, 0, width - 1).astype(np.int64)]
        ry, rx = np.floor(gy + 0.5), np.floor(gx + 0.5)
        tie_y = np.abs(gy - np.floor(gy) - 0.5) <= sy
        tie_x = np.abs(gx - np.floor(gx) - 0.5) <= sx
        value = pick(ry, rx)
        lo, hi = value.copy(), value.copy()
        for oy, ox in ((1, 0), (0, 1), (1, 1)):
            ay = np.where(tie_y & (oy == 1), 2 * np.floor(gy) + 1 - ry, ry)
            ax = np.where(tie_x & (ox == 1), 2 * np.floor(gx) + 1 - rx, rx)
            other = pick(ay, ax)
            with np.errstate(invalid="ignore"):
                lo, hi = np.fmin(lo, other), np.fmax(hi, other)
        zeros = np.zeros(gy.shape)
        nan_near = np.isnan(value) | np.isnan(lo)
        return {"value": np.where(outside, p.out_of_bounds, value), "lo": np.where(outside, p.out_of_bounds, lo),
                "hi": np.where(outside, p.out_of_bounds, hi), "pos_err": zeros, "spread": zeros,
                "max_abs": np.where(outside, abs(p.out_of_bounds), np.abs(value)), "past": past, "nan": nan_near}
    cy, cx = np.clip(gy, 0, height - 1), np.clip(gx, 0, width - 1)
    y0, x0 = np.floor(cy).astype(np.int64), np.floor(cx).astype(np.int64)
    y1, x1 = np.minimum(y0 + 1, height - 1), np.minimum(x0 + 1, width - 1)
    fy, fx = cy - y0, cx - x0
    with np.errstate(all="ignore"):
        corners = [(x64[:, y0, x0], (1 - fy) * (1 - fx)), (x64[:, y0, x1], (1 - fy) * fx),
                   (x64[:, y1, x0], fy * (1 - fx)), (x64[:, y1, x1], fy * fx)]
        value = np.sum([np.where(w != 0, w * v, 0.0) for v, w in corners], axis=0)
        max_abs = np.max([np.where(np.isfinite(v) & (w != 0), np.abs(v), 0.0) for v, w in corners], axis=0)
        hood = [x64[:, np.clip(y0 + dy, 0, height - 1), np.clip(x0 + dx, 0, width - 1)]
                for dy in range(-1, 3) for dx in range(-1, 3)]  # what a position error may reach
        stack = np.array(hood)
        finite = np.isfinite(stack)
        spread = np.where(finite.any(axis=0), np.max(np.where(finite, stack, -np.inf), axis=0)
                          - np.min(np.where(finite, stack, np.inf), axis=0), 0.0)
        nan_near = (~finite).any(axis=0)
    value = np.where(outside, p.out_of_bounds, value)
    return {"value": value, "lo": value, "hi": value, "pos_err": np.broadcast_to(sy + sx, value.shape),
            "spread": np.where(outside, 0.0, spread), "max_abs": np.where(outside, abs(p.out_of_bounds), max_abs),
            "past": past, "nan": nan_near & ~outside}


def _sampled(r: _Regions, p: _Sampling) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """sampled: per output element the exact result, the element variables and the bound variables
    (terms, pos_err, spread, max_abs; `ties`: how far a nearest tie may move the result)."""
    n = r.x.shape[0]
    regions, channels, oh, ow = r.out_shape
    _, _, wild = _scaled(r.corners, r.scale_x, r.scale_y)
    invalid_batch = _batch_invalid(r.batch, n)
    exact = np.zeros(r.out_shape)
    names = ("terms", "pos_err", "spread", "max_abs", "ties", "samples_open", "past_edge", "nan_in_bin")
    v = {k: np.zeros(r.out_shape) for k in names}
    for i in range(regions):
        b = 0 if invalid_batch[i] else int(r.batch[i])
        x1, y1, x2, y2 = r.corners[i] * np.array([r.scale_x, r.scale_y, r.scale_x, r.scale_y])
        if wild[i].any():
            continue
        sy, open_y = _count(y2 - y1, oh, p)
        sx, open_x = _count(x2 - x1, ow, p)
        if p.align_corners:  # one sample along a dimension has no spacing to stretch (size / 0)
            open_y, open_x = open_y or oh * sy == 1, open_x or ow * sx == 1
        py, ey = _positions(y1, y2 - y1, oh, sy, p)
        px, ex = _positions(x1, x2 - x1, ow, sx, p)
        read = _read_samples(r.x[b], py.reshape(-1), px.reshape(-1), ey.reshape(-1), ex.reshape(-1), p)
        for key, values in read.items():  # {C, oh * sy, ow * sx} -> {C, oh, ow, sy * sx}
            read[key] = values.reshape(-1, oh, sy, ow, sx).transpose(0, 1, 3, 2, 4).reshape(-1, oh, ow, sy * sx)
        with np.errstate(all="ignore"):
            if p.average:
                exact[i] = read["value"].mean(axis=-1)
                lo, hi = read["lo"].mean(axis=-1), read["hi"].mean(axis=-1)
            else:
                exact[i] = _extreme(read["value"], "max")
                lo, hi = _extreme(read["lo"], "max"), _extreme(read["hi"], "max")
            v["ties"][i] = np.nan_to_num(np.maximum(hi - exact[i], exact[i] - lo), nan=np.inf)
        v["terms"][i] = sy * sx
        v["samples_open"][i] = open_y or open_x
        for key in ("pos_err", "spread", "max_abs"):
            v[key][i] = read[key].max(axis=-1)
        v["past_edge"][i] = read["past"].any(axis=-1)
        v["nan_in_bin"][i] = read["nan"].any(axis=-1)
    per_region: dict[str, np.ndarray] = {"batch_invalid": np.asarray(invalid_batch), "nonfinite_roi": np.asarray(wild.any(axis=1)),
                  "inverted": np.zeros(regions, dtype=bool), "rounding_tie": np.zeros(regions, dtype=bool)}
    variables = {k: np.broadcast_to(a[:, None, None, None], r.out_shape).astype(np.int64) for k, a in per_region.items()}
    for key in ("samples_open", "past_edge", "nan_in_bin"):
        variables[key] = v[key].astype(np.int64)
    variables["empty_bin"] = np.zeros(r.out_shape, dtype=np.int64)
    bound_vars = {k: v[k] for k in ("terms", "pos_err", "spread", "max_abs", "ties")}
    return exact, variables, bound_vars


def _rule_masks(spec: OperatorSpec, descriptor: Descriptor, r: _Regions, out: np.ndarray,
                variables: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The spec's unspecified rules over each output element's value and element variables."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    out_type = spec.catalog.dtype(descriptor.tensors[r.out_name].data_type)  # type: ignore[union-attr]
    ctx = formula_context(spec, types, {r.var: out}, descriptor.attributes)
    ctx.variables.update(variables)
    return output_rule_masks(spec, r.out_name, out_type, ctx, out.shape)


def _compute_sampled(spec: OperatorSpec, descriptor: Descriptor, r: _Regions) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    out_type = spec.catalog.dtype(descriptor.tensors[r.out_name].data_type)  # type: ignore[union-attr]
    p = _sampling(spec, descriptor)
    exact, variables, bound_vars = _sampled(r, p)
    with np.errstate(all="ignore"):
        out = exact.astype(out_type.numpy)
    result = FamilyResult({r.out_name: out})
    result.unspecified[r.out_name] = _rule_masks(spec, descriptor, r, out, variables)
    result.summaries.update({"exact": exact, "samples_open": variables["samples_open"],
                             "past_edge": variables["past_edge"], "terms": bound_vars["terms"]})
    bound = family.bound("sampled")
    if bound is not None:
        atol = evaluate_bound(bound.atol, {**type_bound_variables(out_type.numpy), **bound_vars, "exact": exact},
                              r.out_shape, variables["nan_in_bin"].astype(bool))
        result.bounds[r.out_name] = (exact, atol)
        result.summaries["bound"] = atol
    flushed = flush_f32_denormals(r.x)
    if flushed is not None:
        alternative, _, _ = _sampled(_Regions(flushed, r.batch, r.corners, r.scale_x, r.scale_y, r.out_name,
                                              r.out_shape, r.var), p)
        with np.errstate(all="ignore"):
            result.alternatives = {r.out_name: [("fp32_input_flush", alternative.astype(out_type.numpy))]}
    return result


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    r = _read(spec, descriptor, inputs)
    if family.params["mode"] == "sampled":
        return _compute_sampled(spec, descriptor, r)
    out_type = spec.catalog.dtype(descriptor.tensors[r.out_name].data_type)  # type: ignore[union-attr]
    batch, variables, slices, empty = _bins(r)
    out, nan_in = _max_bins(r.x, batch, slices, empty, r.out_shape)
    variables["nan_in_bin"] = nan_in.astype(np.int64)
    out = out.astype(out_type.numpy)
    result = FamilyResult({r.out_name: out})
    result.unspecified[r.out_name] = _rule_masks(spec, descriptor, r, out, variables)
    with np.errstate(invalid="ignore"):
        exact = out.astype(np.float64)
    result.summaries.update({k: variables[k] for k in ("rounding_tie", "empty_bin", "batch_invalid")})
    result.summaries["exact"] = exact
    bound = family.bound("integer_bins")
    if bound is not None:
        shape = r.out_shape
        result.bounds[r.out_name] = (exact, evaluate_bound(bound.atol, {**type_bound_variables(out_type.numpy),
                                                                         "exact": exact}, shape, nan_in))
    flushed = flush_f32_denormals(r.x)
    if flushed is not None:
        alternative, _ = _max_bins(flushed, batch, slices, empty, r.out_shape)
        result.alternatives = {r.out_name: [("fp32_input_flush", alternative.astype(out_type.numpy))]}
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One legal device: a bounded result (sampled) moved from the exact value to EDGE of its bound,
    up or down per case, rounded towards the exact value (keeping tiny per sample in reserve for
    the fp32 inputs this device sees flushed); integer_bins' copies as they are."""
    result = compute(spec, descriptor, inputs)
    out_name = spec.formula.output
    out = result.outputs[out_name]
    if out_name not in result.bounds:
        return {out_name: out}
    exact, atol = result.bounds[out_name]
    terms = np.asarray(result.summaries.get("terms", np.ones_like(exact)), dtype=np.float64)
    sign = 1.0 if rng.random() < 0.5 else -1.0
    moved, usable = toward_the_bound(exact, atol, out.dtype, sign, reserve=8 * terms * F32_SMALLEST_NORMAL)
    return {out_name: np.where(usable, moved, out).astype(out.dtype)}


PLUGIN = FamilyPlugin(DECLARATIONS["roi"], compute, legal_device)


@dataclass
class AdjointScatter:
    """The sampled mode's adjoint (transpose) for one case, over the forward input's flat index:
    touched taps (each a sample's interpolation neighbour whose weight is non-zero, or may become so
    within the sample's FLOAT32 position error) with the term added there (dy's share times the
    weight, 0 for a weight of 0), the term's factor |dy share| (what a weight's error multiplies),
    its sample's position error, and the share of a nearest sample within its error of a .5 tie
    (either neighbour may receive it); plus masks of the positions whose value the page leaves open."""

    dest: np.ndarray
    terms: np.ndarray
    factor: np.ndarray
    pos_err: np.ndarray
    tie: np.ndarray
    open: dict[str, np.ndarray]


def _taps(g: np.ndarray, e: np.ndarray, size: int, nearest: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per sample along one dimension ({S}): its neighbours' indices and weights ({S, K}), which of
    them a device may weigh (touched: a weight of 0 that a position error of `e` makes non-zero
    included), and whether the sample is within its error of a nearest .5 tie. Clamped to the input;
    the caller zeroes samples outside [-1, size]."""
    if nearest:
        r = np.clip(np.floor(g + 0.5), 0, size - 1)
        tie = np.abs(g - np.floor(g) - 0.5) <= e
        alt = np.clip(2 * np.floor(g) + 1 - np.floor(g + 0.5), 0, size - 1)
        idx = np.stack([r, alt], axis=-1).astype(np.int64)
        weight = np.stack([np.ones_like(g), np.zeros_like(g)], axis=-1)
        touch = np.stack([np.ones_like(tie), tie], axis=-1)
        return idx, weight, touch, tie
    c = np.clip(g, 0, size - 1)
    y0 = np.floor(c)
    f = c - y0
    raw = np.stack([y0 - 1, y0, y0 + 1, y0 + 2], axis=-1)
    weight = np.stack([np.zeros_like(f), 1 - f, f, np.zeros_like(f)], axis=-1)
    touch = np.stack([f <= e, np.ones_like(f, dtype=bool), np.ones_like(f, dtype=bool), 1 - f <= e], axis=-1)
    touch &= (raw >= 0) & (raw <= size - 1)
    return np.clip(raw, 0, size - 1).astype(np.int64), weight, touch, np.zeros(g.shape, dtype=bool)


def sampled_adjoint(spec: OperatorSpec, descriptor: Descriptor, dy: np.ndarray, x: np.ndarray | None,
                    batch: np.ndarray, corners: np.ndarray, scale: tuple[float, float],
                    out_shape: tuple[int, ...]) -> AdjointScatter:
    """The transpose of the sampled mode's map from the input {N, C, height, width} (`out_shape`) to
    the regions' cells (dy's shape): each dy element's share (average: 1 / samples; max: all of it
    to the cell's largest sample, read from `x`) times each sample's interpolation weights, added at
    the sample's neighbours. Why here: the sample grid, positions, counts and weights are this
    family's; the gradient family accumulates the terms. Open positions (masks over the flat input):
    batch_invalid and nonfinite_roi (everywhere), samples_open (the region's batch), past_edge (the
    neighbours of a sample past the edge, clamped), route_open (max: every neighbour of a cell whose
    largest sample is not determined: near ties, non-finite values, a sample past the edge),
    nonfinite_gradient (the neighbours a non-finite dy share touches: a weight of 0 times it is NaN
    on a device that multiplies, 0 on one that skips)."""
    p = _sampling(spec, descriptor)
    n, channels, height, width = out_shape
    size = n * channels * height * width
    scale_y, scale_x = scale
    _, _, wild = _scaled(corners, scale_x, scale_y)
    invalid = _batch_invalid(batch, n)
    masks = {k: np.zeros(size, dtype=bool) for k in ("batch_invalid", "nonfinite_roi", "samples_open", "past_edge", "route_open",
                                                 "nonfinite_gradient")}
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("dest", "terms", "factor", "pos_err", "tie")}
    oh, ow = dy.shape[2], dy.shape[3]
    for i in range(dy.shape[0]):
        if invalid[i] or wild[i].any():
            masks["batch_invalid" if invalid[i] else "nonfinite_roi"][:] = True
            continue
        b = int(batch[i])
        x1, y1, x2, y2 = corners[i] * np.array([scale_x, scale_y, scale_x, scale_y])
        sy, open_y = _count(y2 - y1, oh, p)
        sx, open_x = _count(x2 - x1, ow, p)
        if p.align_corners:
            open_y, open_x = open_y or oh * sy == 1, open_x or ow * sx == 1
        plane = np.zeros(size, dtype=bool).reshape(out_shape)
        if open_y or open_x:
            plane[b] = True
            masks["samples_open"] |= plane.reshape(-1)
        py, ey = (a.reshape(-1) for a in _positions(y1, y2 - y1, oh, sy, p))
        px, ex = (a.reshape(-1) for a in _positions(x1, x2 - x1, ow, sx, p))
        iy, wy, ty, tie_y = _taps(py, ey, height, p.nearest)
        ix, wx, tx, tie_x = _taps(px, ex, width, p.nearest)
        past_y = (py < -ey) | (py > height - 1 + ey)
        past_x = (px < -ex) | (px > width - 1 + ex)
        out_y = (py < -1) | (py > height)
        out_x = (px < -1) | (px > width)
        # {Sy, Sx, Ky, Kx}: weights, touched taps, flat spatial index
        weight = wy[:, None, :, None] * wx[None, :, None, :]
        touch = ty[:, None, :, None] & tx[None, :, None, :]
        spatial = iy[:, None, :, None] * width + ix[None, :, None, :]
        outside = out_y[:, None] | out_x[None, :]
        past = past_y[:, None] | past_x[None, :]
        live = touch & ~outside[:, :, None, None]
        with np.errstate(all="ignore"):
            g = dy[i].astype(np.float64)  # {C, oh, ow}
        share = np.repeat(np.repeat(g, sy, axis=1), sx, axis=2)  # {C, Sy, Sx}
        if p.average:
            share = share / (sy * sx)
        else:
            share = share * _chosen(x, b, py, px, wy, wx, ey, ex, sy, sx, past, p, masks, spatial, touch, out_shape)
        base = (b * channels + np.arange(channels)) * height * width  # {C}
        dest = base[:, None, None, None, None] + spatial[None]
        sel = np.broadcast_to(live[None], dest.shape)
        with np.errstate(all="ignore"):
            term = np.where(weight[None] != 0, share[..., None, None] * weight[None], 0.0)
        factor = np.broadcast_to(np.abs(share)[..., None, None], dest.shape)
        err = np.broadcast_to((ey[:, None] + ex[None, :])[None, :, :, None, None], dest.shape)
        tied = np.broadcast_to((tie_y[:, None] | tie_x[None, :])[None, :, :, None, None], dest.shape)
        parts["dest"].append(dest[sel])
        parts["terms"].append(term[sel])
        parts["factor"].append(factor[sel])
        parts["pos_err"].append(err[sel])
        parts["tie"].append(np.where(tied, factor, 0.0)[sel])
        edge = np.broadcast_to((touch & past[:, :, None, None])[None], dest.shape)
        masks["past_edge"][dest[edge]] = True
        masks["nonfinite_gradient"][dest[sel & ~np.isfinite(factor)]] = True  # inf times a weight of 0: NaN or 0
    joined = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64 if k == "dest" else np.float64)
              for k, v in parts.items()}
    return AdjointScatter(joined["dest"], joined["terms"], joined["factor"], joined["pos_err"], joined["tie"], masks)


def _chosen(x: np.ndarray | None, b: int, py: np.ndarray, px: np.ndarray,
            wy: np.ndarray, wx: np.ndarray, ey: np.ndarray, ex: np.ndarray, sy: int, sx: int, past: np.ndarray,
            p: _Sampling, masks: dict[str, np.ndarray], spatial: np.ndarray, touch: np.ndarray,
            out_shape: tuple[int, ...]) -> np.ndarray:
    """max: {C, Sy, Sx} 1 at each cell's largest sample (the first in row-major sample order), 0
    elsewhere. Where another sample at another position lies within the forward's error of the
    largest (16 eps of the neighbourhood's magnitude plus the position error times its spread), a
    sample reads a non-finite value, or a sample lies past the edge, which sample the device picks
    is open: every neighbour of the cell's samples is marked route_open."""
    assert x is not None  # the page: InputTensor must be supplied with DML_REDUCE_FUNCTION_MAX
    _, channels, height, width = out_shape
    with np.errstate(all="ignore"):
        plane = x[b].astype(np.float64).reshape(channels, -1)  # {C, H * W}
        values = np.einsum("cyxab,yxab->cyx", plane[:, spatial], np.where(touch, wy[:, None, :, None] * wx[None, :, None, :], 0.0))
        finite = np.isfinite(plane)
        spread = np.where(finite, plane, 0.0).max(axis=1) - np.where(finite, plane, 0.0).min(axis=1)
        magnitude = np.where(finite, np.abs(plane), 0.0).max(axis=1)
        bad = (~finite[:, spatial] & touch[None]).any(axis=(-1, -2))  # {C, Sy, Sx}
    eps_in = float(np.finfo(x.dtype).eps)
    oh, ow = len(py) // sy, len(px) // sx
    chosen = np.zeros(values.shape)
    flat_spatial = spatial.reshape(len(py), len(px), -1)
    for h in range(oh):
        for w in range(ow):
            ys, xs = slice(h * sy, (h + 1) * sy), slice(w * sx, (w + 1) * sx)
            block = values[:, ys, xs].reshape(channels, -1)
            err = float((ey[ys].max() + ex[xs].max()))
            tol = 2 * (err * spread + 16 * eps_in * magnitude)  # {C}
            first = np.argmax(np.where(np.isnan(block), -np.inf, block), axis=1)
            top = block[np.arange(channels), first]
            pos = np.stack(np.meshgrid(py[ys], px[xs], indexing="ij"), axis=-1).reshape(-1, 2)
            if p.nearest:
                pos = np.floor(pos + 0.5)
            near = block >= (top - tol)[:, None]
            differs = (np.abs(pos[None] - pos[first][:, None]).sum(axis=-1) > 0) & near
            open_cell = differs.any(axis=1) | bad[:, ys, xs].reshape(channels, -1).any(axis=1) | past[ys, xs].any()
            sub = np.zeros((channels, sy * sx))
            sub[np.arange(channels), first] = 1.0
            chosen[:, ys, xs] = sub.reshape(channels, sy, sx)
            if open_cell.any():
                cells = flat_spatial[ys, xs][touch.reshape(len(py), len(px), -1)[ys, xs]]
                for c in np.nonzero(open_cell)[0]:
                    masks["route_open"][(b * channels + c) * height * width + cells] = True
    return chosen
