"""The resample family: each output element read from the input at a position that per-dimension
scales and offsets give.

Per dimension d, output index o samples the input at x = (o + output offset) / scale - input
offset (offsets 0.5 where the spec names none: pixel centres, "the input element nearest to the
corresponding pixel center"). An integer upsampling factor is the same computation with the factor
as the scale, so one plug-in serves every such operator; the spec gives the scales (and offsets)
as shape expressions over its fields.

- nearest_neighbor: the element at round(x) per dimension, clamped to the input. Which neighbour a
  .5 tie takes is the spec's business: the reference takes the upper one (floor(x + 0.5)) and
  gives the lower one as a legal alternative wherever the position lies within its own computation
  error of a tie (`tie`, an element variable, for the spec's rule). The value is a copy. Where the
  spec names a rounding `direction`, floor(x) or ceil(x) instead, the other side legal within the
  position's error of a whole number.
- linear: the weighted sum of the 2^D elements at floor(x) and floor(x) + 1 (clamped: the edges
  repeat) over the D dimensions whose position is not whole, weights 1 - frac and frac, exact in
  float64. A device computes the position in FLOAT32, the weights and their products and the sum
  of 2^D terms in its own arithmetic: the spec states the bound (`bounds.linear`) over the
  variables computed here (D, terms, pos_err, spread, max_abs, exact and the type's eps, tiny,
  tiny_out, max_out, inf). Interpolation is continuous, so a position error (even one that takes
  the other floor at a whole position) moves the result by at most pos_err times the spread of
  the neighbourhood.

Where the spec's `antialiased` holds for a dimension (a per-dimension list), linear's tent is
stretched to half-width 1 / scale there (antialiased downsampling: more input elements per output
element), its weights normalised and its indices clamped (`_taps`); the bound's extra variable
`weight_err` counts the normalisation's steps, and `pos_err` carries the stretched filter's gain.

The legal device (worst-legal) ties the other way where it may (nearest) and moves a linear result
to the edge of the bound, as the pooling family does.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.result import (F32_SMALLEST_NORMAL, FamilyPlugin, FamilyResult, evaluate_bound,
                                                flush_f32_denormals, toward_the_bound, type_bound_variables)
from harness.spec.context import formula_context
from harness.spec.expr import Formula
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

F32_EPS = 2.0 ** -23
POSITION_STEPS = 4.0  # a FLOAT32 position's error in steps of its magnitude: the division (2.5) and the subtraction (1)


@dataclass
class _Axis:
    """One dimension's sampling: the exact position per output index and its error bound."""

    position: np.ndarray  # {O}: float64
    error: np.ndarray     # {O}: how far a FLOAT32 computation of it may land
    size: int             # the input's size along it
    stretch: float = 1.0  # linear only: the filter's half-width (1, or 1 / scale where the spec antialiases)


def _floats(value: Any, rank: int, default: float) -> list[float]:
    """A family list (a shape expression's value) as FLOAT32 values, `default` each where absent."""
    if value is None:
        return [default] * rank
    items = [float(np.float32(v)) for v in value]
    if len(items) != rank:
        raise ValueError(f"the family's per-dimension list has {len(items)} items for {rank} dimensions")
    return items


def _axes(spec: OperatorSpec, descriptor: Descriptor, in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[_Axis]:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    rank = len(in_shape)

    def read(key: str) -> Any:
        expr = family.expression(key)
        return None if expr is None else expr.evaluate(names, facts)
    scales = _floats(read("scales"), rank, 1.0)
    into, out_off = _floats(read("input_offsets"), rank, 0.5), _floats(read("output_offsets"), rank, 0.5)
    wide = read("antialiased")
    wide = [False] * rank if wide is None else [bool(w) for w in wide]
    axes = []
    for d in range(rank):
        o = np.arange(out_shape[d], dtype=np.float64)
        with np.errstate(all="ignore"):
            scaled = (o + out_off[d]) / scales[d]
            position = scaled - into[d]
            error = POSITION_STEPS * F32_EPS * (np.abs(scaled) + abs(into[d]))
        if scales[d] == 1.0 and into[d] == out_off[d]:  # x = o, exact in FLOAT32 too: a copied dimension
            position, error = o, np.zeros_like(o)
        axes.append(_Axis(position, error, in_shape[d], 1.0 / scales[d] if wide[d] else 1.0))
    return axes


def _along(values: np.ndarray, d: int, rank: int) -> np.ndarray:
    """A per-index array of dimension d shaped to broadcast over the output's `rank` dimensions."""
    return values.reshape([values.shape[0] if k == d else 1 for k in range(rank)])


def _choices(axes: list[_Axis], direction: bool | None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per dimension: (the index taken, the other one a device may take, where it may). Rounding to
    nearest (`direction` None) takes floor(x + 0.5), the other neighbour where x lies within its
    error of a .5 tie; a direction (True: toward increasing indices, ceil(x); False: floor(x)) takes
    the other side where x lies within its error of a whole number."""
    out = []
    for axis in axes:
        x = axis.position
        frac = x - np.floor(x)
        if direction is None:
            main = np.floor(x + 0.5)
            other = 2 * np.floor(x) + 1 - main  # the other of floor(x), floor(x) + 1
            near = np.abs(frac - 0.5) <= axis.error
        else:
            main = np.ceil(x) if direction else np.floor(x)
            up = (frac == 0) | (frac > 0.5) if direction else frac > 0.5
            other = np.where(up, main + 1, main - 1)
            near = np.minimum(frac, 1 - frac) <= axis.error
        out.append((main, other, near & (axis.size > 1)))
    return out


def _nearest(x: np.ndarray, axes: list[_Axis], choices: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
             flip: list[np.ndarray | None] | None = None) -> np.ndarray:
    """The element at each dimension's chosen index, clamped; where `flip[d]` holds (a dimension's
    near-ties chosen to go the other way), its other index."""
    index = []
    for d, (axis, (main, other, _)) in enumerate(zip(axes, choices)):
        mask = flip[d] if flip is not None else None
        taken = np.where(mask, other, main) if mask is not None else main
        index.append(np.clip(taken, 0, axis.size - 1).astype(np.int64))
    return x[np.ix_(*index)]


@dataclass
class _Linear:
    exact: np.ndarray
    variables: dict[str, object]
    nonfinite: np.ndarray


def _taps(axis: _Axis) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One dimension's linear filter per output index: (the input indices read {O, K}, clamped;
    their exact weights {O, K}, summing to 1; whether the dimension moves (its weights are not a
    single 1); the position error times the filter's gain, d(result)/dx per unit of spread; the
    weights' own error in eps steps, normalisation included).

    Half-width 1 is the plain linear interpolation's tent: floor(x) and floor(x) + 1, weights
    1 - frac and frac (its weight error is counted by the bound's per-dimension steps, 0 here).
    A stretched tent (antialiasing, half-width f = 1 / scale) weighs every index i with
    max(0, 1 - |i - x| / f), normalised by their sum W over the n indices it reaches (clamped, as the
    edges repeat): a normalised filter moves by at most sum |dw_i / dx| / W + |dW / dx| / W <=
    2 n / (f W) times the spread per unit of position, and its weights carry 1 - |i - x| / f (the
    difference, the division and the subtraction from 1: 3 eps absolute each, 3 n / W once
    normalised), the sum W (n - 1 steps relative) and the division (one): n + 1 + 3 n / W steps."""
    x = axis.position
    floor = np.floor(x)
    if axis.stretch == 1.0:
        frac = x - floor
        index = np.stack([floor, floor + 1], axis=1)
        weight = np.stack([1.0 - frac, frac], axis=1)
        moves = (frac != 0) & (axis.size > 1)
        return (np.clip(index, 0, axis.size - 1).astype(np.int64), weight, moves,
                np.where(moves, axis.error, 0.0), np.zeros_like(x))
    f = axis.stretch
    reach = int(np.ceil(f))
    index = floor[:, None] + np.arange(-reach, reach + 2)[None, :]
    with np.errstate(all="ignore"):
        raw = np.maximum(0.0, 1.0 - np.abs(index - x[:, None]) / f)
        total = raw.sum(axis=1)
        weight = raw / total[:, None]
        n = (raw > 0).sum(axis=1).astype(np.float64)
    clamped = np.clip(index, 0, axis.size - 1).astype(np.int64)
    moves = (axis.size > 1) & (n > 1)
    gain = 2.0 * n / (f * total)
    return (clamped, weight, moves, np.where(moves, axis.error * gain, 0.0),
            np.where(moves, n + 1 + 3 * n / total, 0.0))


def _linear(x: np.ndarray, axes: list[_Axis]) -> _Linear:
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    rank = len(axes)
    taps = [_taps(axis) for axis in axes]
    out_shape = tuple(a.position.shape[0] for a in axes)
    exact = np.zeros(out_shape)
    max_abs = np.zeros(out_shape)
    nonfinite = np.zeros(out_shape, dtype=bool)
    with np.errstate(all="ignore"):
        for corner in itertools.product(*[range(t[0].shape[1]) for t in taps]):
            idx = [t[0][:, k] for t, k in zip(taps, corner)]
            w = np.ones(out_shape)
            for d, (t, k) in enumerate(zip(taps, corner)):
                w = w * _along(t[1][:, k], d, rank)
            value = x64[np.ix_(*idx)]
            finite = np.isfinite(value)
            exact = exact + np.where(w != 0, w * value, 0.0)
            max_abs = np.maximum(max_abs, np.where(finite & (w != 0), np.abs(value), 0.0))
        # the neighbourhood: the filter's reach widened by one index either side (floor - 1 ..
        # floor + 2 for the tent), clamped (a copied dimension, exact position and no error, reads
        # its own index only: the spread); the non-finite facts also look one index either side
        # along a copied dimension, which a device may read with a zero weight (0 * inf)
        hood, near = [], []
        for a in axes:
            reach = int(np.ceil(a.stretch))
            width = np.arange(-reach, reach + 2)
            if a.error.any():
                h = np.clip(np.floor(a.position)[:, None] + width[None, :], 0, a.size - 1).astype(np.int64)
                hood.append(h)
                near.append(h)
            else:
                hood.append(np.clip(np.floor(a.position)[:, None] + np.zeros(1)[None, :], 0, a.size - 1).astype(np.int64))
                near.append(np.clip(a.position[:, None] + np.array([-1, 0, 1])[None, :], 0, a.size - 1).astype(np.int64))
        lo, hi = np.full(out_shape, np.inf), np.full(out_shape, -np.inf)
        for offs in itertools.product(*[range(h.shape[1]) for h in hood]):
            value = x64[np.ix_(*[h[:, k] for h, k in zip(hood, offs)])]
            finite = np.isfinite(value)
            lo = np.where(finite, np.minimum(lo, value), lo)
            hi = np.where(finite, np.maximum(hi, value), hi)
        for offs in itertools.product(*[range(h.shape[1]) for h in near]):
            nonfinite |= ~np.isfinite(x64[np.ix_(*[h[:, k] for h, k in zip(near, offs)])])
        spread = np.where(hi >= lo, hi - lo, 0.0)
    count = np.zeros(out_shape)
    terms = np.ones(out_shape)
    pos_err = np.zeros(out_shape)
    weight_err = np.zeros(out_shape)
    for d, t in enumerate(taps):
        count = count + _along(t[2].astype(np.float64), d, rank)
        terms = terms * _along(np.where(t[2], (t[1] != 0).sum(axis=1), 1).astype(np.float64), d, rank)
        pos_err = pos_err + _along(t[3], d, rank)
        weight_err = weight_err + _along(t[4], d, rank)
    variables: dict[str, object] = {"D": count, "terms": terms,
                                    "pos_err": np.broadcast_to(pos_err, out_shape).astype(np.float64),
                                    "weight_err": np.broadcast_to(weight_err, out_shape).astype(np.float64),
                                    "spread": spread, "max_abs": max_abs, "exact": exact}
    return _Linear(exact, variables, nonfinite)


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, var: str, values: np.ndarray, out_name: str,
                 facts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The spec's rules over each output element's facts (the value read or computed, the element
    variables, the attributes)."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    ctx = formula_context(spec, types, {var: values}, descriptor.attributes)
    ctx.variables.update(facts)
    masks = {}
    for rule in spec.unspecified:
        if not rule.concerns(out_name, out_type.name):
            continue
        with np.errstate(all="ignore"):
            hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), values.shape)
        if hit.any():
            masks[rule.id] = np.ascontiguousarray(hit)
    return masks


def _setup(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> tuple[str, np.ndarray, str, list[_Axis], str]:
    family = spec.formula.family
    assert family is not None
    var = next(v for v, t in spec.formula.inputs.items() if t == family.params["input"])
    x = np.asarray(inputs[var])
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    axes = _axes(spec, descriptor, tuple(x.shape), tuple(out_desc.sizes))
    names, _ = expression_scope(spec, descriptor)
    return var, x, out_name, axes, family.choice("mode", names)


def _scatter(shape: tuple[int, ...], dests: list[np.ndarray], values: np.ndarray) -> np.ndarray:
    """The sum of `values` (an output-shaped array) into `shape` at the per-dimension destination
    indices `dests` (dimension d's index per output index along d), float64."""
    out = np.zeros(shape)
    grid = np.ix_(*dests)
    flat = np.ravel_multi_index(tuple(np.broadcast_to(g, values.shape) for g in grid), shape)
    np.add.at(out.reshape(-1), flat.reshape(-1), values.reshape(-1))
    return out


def _adjoint(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """The transpose of the forward resample's linear map (a resample's gradient): the family's
    `input` holds the forward output's gradient dy, the output has the forward input's shape, and
    each of its elements sums dy times the weight it had in the forward pass (exact, float64).

    A device adds the contributions in any order (atomics) and computes the weights as the forward
    does, so the spec's bound reads: N, the contributions an element may receive (every tap a
    position within its FLOAT32 error can reach); sum_abs, the sum of |w dy| (exact weights);
    pos_dy, the sum over those taps of |dy| times the weight's own error (the forward's pos_err: a
    moved position moves each of its weights by at most that); D; exact; tie_span (nearest: where a
    position lies within its error of a tie, its dy may go to either neighbour, so the element's
    value may lie anywhere in the interval those choices span: `exact` is its midpoint and tie_span
    its half-width). Element variables: `nonfinite_near` (an infinite or NaN dy among the taps a
    device may weigh by 0) and `tie`."""
    family = spec.formula.family
    assert family is not None
    var = next(v for v, t in spec.formula.inputs.items() if t == family.params["input"])
    dy = np.asarray(inputs[var])
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    shape = tuple(out_desc.sizes)
    axes = _axes(spec, descriptor, shape, tuple(dy.shape))
    names, scope_facts = expression_scope(spec, descriptor)
    mode = family.choice("mode", names)
    out_type = spec.catalog.dtype(out_desc.data_type)
    rank = len(shape)
    with np.errstate(invalid="ignore"):
        g = dy.astype(np.float64)
    finite = np.isfinite(g)
    absg = np.where(finite, np.abs(g), 0.0)
    # the taps a position within its error may read, per dimension: floor(x) - 1 .. floor(x) + 2 (a
    # stretched filter's reach one wider), its own index along a copied dimension
    hood = []
    for a in axes:
        if a.error.any():
            reach = int(np.ceil(a.stretch))
            hood.append(np.clip(np.floor(a.position)[:, None] + np.arange(-reach, reach + 2)[None, :], 0, a.size - 1).astype(np.int64))
        else:
            hood.append(np.clip(a.position[:, None], 0, a.size - 1).astype(np.int64))
    err = [np.zeros_like(a.position) for a in axes]
    count_near = np.zeros(shape)
    pos_dy = np.zeros(shape)
    nonfinite = np.zeros(shape)
    exact = np.zeros(shape)
    sum_abs = np.zeros(shape)
    moving = 0
    tie_lo = np.zeros(shape)
    tie_hi = np.zeros(shape)
    tie_any = np.zeros(shape)
    with np.errstate(all="ignore"):
        if mode == "linear":
            taps = [_taps(a) for a in axes]
            err = [t[3] for t in taps]
            moving = sum(1 for t in taps if t[2].any())
            for corner in itertools.product(*[range(t[0].shape[1]) for t in taps]):
                w = np.ones(dy.shape)
                for d, (t, k) in enumerate(zip(taps, corner)):
                    w = w * _along(t[1][:, k], d, rank)
                dests = [t[0][:, k] for t, k in zip(taps, corner)]
                exact = exact + _scatter(shape, dests, np.where(w != 0, w * g, 0.0))
                sum_abs = sum_abs + _scatter(shape, dests, np.where(w != 0, w * absg, 0.0))
        else:
            direction_expr = family.expression("direction")
            direction = bool(direction_expr.evaluate(names, scope_facts)) if direction_expr is not None else None
            choices = _choices(axes, direction)
            main = [np.clip(m, 0, a.size - 1).astype(np.int64) for a, (m, _, _) in zip(axes, choices)]
            other = [np.clip(o, 0, a.size - 1).astype(np.int64) for a, (_, o, _) in zip(axes, choices)]
            tied = [near & (o != m) for (_, _, near), m, o in zip(choices, main, other)]
            free = np.zeros(dy.shape, dtype=bool)
            for d, t in enumerate(tied):
                free |= _along(t, d, rank)
            exact = _scatter(shape, main, np.where(free, 0.0, g))
            sum_abs = _scatter(shape, main, np.where(free, 0.0, absg))
            count_near = _scatter(shape, main, (~free).astype(np.float64))
            nonfinite = _scatter(shape, main, (~free & ~finite).astype(np.float64))
            for pick in itertools.product((False, True), repeat=rank):
                ok = np.ones(dy.shape, dtype=bool)
                for d, p in enumerate(pick):
                    if p:
                        ok &= _along(tied[d], d, rank)
                dests = [o if p else m for p, m, o in zip(pick, main, other)]
                sel = free & ok
                tie_lo = tie_lo + _scatter(shape, dests, np.where(sel, np.minimum(g, 0.0), 0.0))
                tie_hi = tie_hi + _scatter(shape, dests, np.where(sel, np.maximum(g, 0.0), 0.0))
                sum_abs = sum_abs + _scatter(shape, dests, np.where(sel, absg, 0.0))
                tie_any = tie_any + _scatter(shape, dests, sel.astype(np.float64))
                nonfinite = nonfinite + _scatter(shape, dests, (sel & ~finite).astype(np.float64))
            count_near = count_near + tie_any
        if mode == "linear":
            pos_err = np.zeros(dy.shape)
            for d, e in enumerate(err):
                pos_err = pos_err + _along(e, d, rank)
            for corner in itertools.product(*[range(h.shape[1]) for h in hood]):
                dests = [h[:, k] for h, k in zip(hood, corner)]
                count_near = count_near + _scatter(shape, dests, np.ones(dy.shape))
                pos_dy = pos_dy + _scatter(shape, dests, pos_err * absg)
                nonfinite = nonfinite + _scatter(shape, dests, (~finite).astype(np.float64))
        low, high = exact + tie_lo, exact + tie_hi
        middle = np.where(tie_any > 0, (low + high) / 2, exact)
        span = np.where(tie_any > 0, (high - low) / 2, 0.0)
    out = middle.astype(out_type.numpy) if out_type.is_float else middle
    result = FamilyResult({out_name: np.asarray(out)})
    facts = {"tie": (tie_any > 0).astype(np.int64), "nonfinite_near": (nonfinite > 0).astype(np.int64),
             "rounds_up": np.zeros(shape, dtype=np.int64), "past_edge": np.zeros(shape, dtype=np.int64),
             "stretched": np.zeros(shape, dtype=np.int64)}
    result.unspecified[out_name] = _unspecified(spec, descriptor, var, np.asarray(out), out_name, facts)
    bound = family.bound(mode)
    if bound is not None:
        variables: dict[str, object] = {**type_bound_variables(out_type.numpy), "N": np.maximum(count_near, 1.0), "sum_abs": sum_abs,
                     "pos_dy": pos_dy, "D": np.full(shape, float(moving)), "exact": middle, "tie_span": span}
        atol = evaluate_bound(bound.atol, variables, shape, nonfinite > 0)
        result.bounds[out_name] = (middle, atol)
        result.summaries.update({"exact": middle, "bound": atol, "terms": np.maximum(count_near, 1.0), "tie": facts["tie"]})
    return result


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    adjoint = family.expression("adjoint")
    if adjoint is not None:
        names, scope_facts = expression_scope(spec, descriptor)
        if adjoint.evaluate(names, scope_facts):
            return _adjoint(spec, descriptor, inputs)
    var, x, out_name, axes, mode = _setup(spec, descriptor, inputs)
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    shape = tuple(a.position.shape[0] for a in axes)
    if mode == "nearest_neighbor":
        names, scope_facts = expression_scope(spec, descriptor)
        direction_expr = family.expression("direction")
        direction = bool(direction_expr.evaluate(names, scope_facts)) if direction_expr is not None else None
        choices = _choices(axes, direction)
        out = _nearest(x, axes, choices).astype(out_type.numpy)
        result = FamilyResult({out_name: out})
        ties = [near for _, _, near in choices]
        tie_any = np.zeros(shape, dtype=bool)
        for d, t in enumerate(ties):
            tie_any |= _along(t, d, len(shape))
        up = np.zeros(shape, dtype=bool)
        for d, axis in enumerate(axes):
            frac = axis.position - np.floor(axis.position)
            up |= _along((frac >= 0.5) & (np.floor(axis.position) + 1 <= axis.size - 1), d, len(shape))
        facts = {"tie": tie_any.astype(np.int64), "nonfinite_near": np.zeros(shape, dtype=np.int64),
                 "rounds_up": up.astype(np.int64), "past_edge": np.zeros(shape, dtype=np.int64),
                 "stretched": np.zeros(shape, dtype=np.int64)}
        result.unspecified[out_name] = _unspecified(spec, descriptor, var, out, out_name, facts)
        result.summaries.update({name: np.broadcast_to(value, shape) for name, value in facts.items()
                                 if name in ("tie", "rounds_up")})
        alternatives: list[tuple[str, np.ndarray]] = []
        tied = [d for d, t in enumerate(ties) if t.any()]
        flushed = flush_f32_denormals(x)
        for chosen in itertools.product((False, True), repeat=len(tied)):
            flip = [ties[d] if d in tied and chosen[tied.index(d)] else None for d in range(len(axes))]
            if any(chosen):
                alternatives.append(("rounding", _nearest(x, axes, choices, flip).astype(out_type.numpy)))
            if flushed is not None:  # each tie choice over the flushed input too
                alternatives.append(("fp32_input_flush", _nearest(flushed, axes, choices, flip).astype(out_type.numpy)))
        if alternatives:
            result.alternatives = {out_name: alternatives}
        return result
    linear = _linear(x, axes)
    with np.errstate(all="ignore"):
        out = linear.exact.astype(out_type.numpy)
    result = FamilyResult({out_name: out})
    past = np.zeros(shape, dtype=bool)
    for d, axis in enumerate(axes):
        past |= _along(((axis.position < 0) | (axis.position > axis.size - 1)) & (axis.size > 1), d, len(shape))
    stretched = np.zeros(shape, dtype=bool)
    for d, axis in enumerate(axes):
        if axis.stretch != 1.0:
            stretched |= _along(np.full(axis.position.shape, axis.size > 1), d, len(shape))
    facts = {"tie": np.zeros(shape, dtype=np.int64), "nonfinite_near": linear.nonfinite.astype(np.int64),
             "rounds_up": np.zeros(shape, dtype=np.int64), "past_edge": past.astype(np.int64),
             "stretched": stretched.astype(np.int64)}
    result.summaries["past_edge"] = past.astype(np.int64)
    result.summaries["stretched"] = stretched.astype(np.int64)
    result.unspecified[out_name] = _unspecified(spec, descriptor, var, out, out_name, facts)
    bound = family.bound(mode)
    if bound is not None and not out_type.is_float:
        result.alternatives = {out_name: _integer_roundings(linear, bound.atol, out_type.numpy, shape)}
        return result
    if bound is not None and out_type.is_float:
        variables = {**type_bound_variables(out_type.numpy), **linear.variables}
        atol = evaluate_bound(bound.atol, variables, shape, linear.nonfinite)
        result.bounds[out_name] = (linear.exact, atol)
        result.summaries.update({"exact": linear.exact, "bound": atol, "spread": linear.variables["spread"],  # type: ignore[dict-item]
                                 "terms": linear.variables["terms"]})  # type: ignore[dict-item]
    flushed = flush_f32_denormals(x)
    if flushed is not None:
        with np.errstate(all="ignore"):
            result.alternatives = {out_name: [("fp32_input_flush", _linear(flushed, axes).exact.astype(out_type.numpy))]}
    return result


def _integer_roundings(linear: _Linear, atol: Formula, numpy_type: np.dtype, shape: tuple[int, ...]) -> list[tuple[str, np.ndarray]]:
    """An integer output of a weighted average: the pages do not say how the FLOAT32 result becomes
    an integer (rounded or truncated), so every integer from floor(exact - bound) to
    ceil(exact + bound) is legal, the bound over FLOAT32's variables (the arithmetic a device
    interpolates integers in); saturated to the type (an average of its values stays inside)."""
    variables = {**type_bound_variables(np.dtype(np.float32)), **linear.variables}
    bound = evaluate_bound(atol, variables, shape, linear.nonfinite)
    info = np.iinfo(numpy_type)
    with np.errstate(all="ignore"):
        low = np.clip(np.floor(linear.exact - bound), info.min, info.max)
        high = np.clip(np.ceil(linear.exact + bound), info.min, info.max)
    out = []
    for step in range(int(np.max(high - low, initial=0)) + 1):
        out.append(("rounding", np.minimum(low + step, high).astype(numpy_type)))
    return out


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One legal device: nearest ties taken the other way where the reference allows it; a linear
    result moved from the exact value to EDGE of the bound, up or down per case, rounded towards
    the exact value (keeping 2^D tiny in reserve for the fp32 inputs this device sees flushed)."""
    result = compute(spec, descriptor, inputs)
    out_name = spec.formula.output
    out = result.outputs[out_name]
    if out_name not in result.bounds:
        alternatives = [values for liberty, values in result.alternatives.get(out_name, []) if liberty == "rounding"]
        return {out_name: alternatives[-1] if alternatives else out}
    exact, atol = result.bounds[out_name]
    terms = np.asarray(result.summaries["terms"], dtype=np.float64)
    sign = 1.0 if rng.random() < 0.5 else -1.0
    moved, usable = toward_the_bound(exact, atol, out.dtype, sign, reserve=2 * terms * F32_SMALLEST_NORMAL)
    return {out_name: np.where(usable, moved, out).astype(out.dtype)}


PLUGIN = FamilyPlugin(DECLARATIONS["resample"], compute, legal_device)
