"""The normalize family: each output element is its input element normalised against the group of
input elements that differ from it only along the spec's axes (an axis-wise activation).

The axes come from the spec's `axes` shape expression (an array field, or a fixed list such as the
last axis); the output has the input's shape. The mode is the spec's:

- softmax: exp(x - m) / sum(exp(x - m)) over the group, m the group's largest element;
- log_softmax: (x - m) - log(sum(exp(x - m)));
- hardmax: 1 at the group's first largest element (row-major order over the axes, ascending by
  axis, as the reduce family's index reductions count), 0 elsewhere;
- lp: x / sqrt(||group||_p^2 + epsilon), p from the spec's `p` field, epsilon its `epsilon` FLOAT field
  (epsilon inside the square: what keeps a group of zeros finite, as DirectML evaluates it);
- mean_variance: the formula variable `normalized`, (x - mean) / sqrt(variance + epsilon) over the
  group (the population variance, divisor N), or x - mean where the spec's `variance` expression
  does not hold; where the optional `centred` expression does not hold the mean is taken as 0
  (x / sqrt(mean(x^2) + epsilon): the same formula with nothing subtracted, so the same bound
  holds, its mean terms then an over-estimate); the spec's expression is the element-wise epilogue over it (a scale and a bias,
  a fused activation), judged as the matmul family's dot product is: `normalized` anywhere within
  its bound, the rest under the element-wise precision model; optional outputs receive each
  group's mean and population variance, each within its own bound;
- window_sum_square: the formula variable `window_sq`, the sum of x^2 over a box of `window`
  elements along each of the axes around the element, under the spec's expression as
  `normalized` is (a local normalization).

Why the shift by m: it is the mathematical function (exp(x) / sum exp(x) is the same value), and
the form every implementation evaluates, since the literal exp(x) overflows FLOAT16 beyond 11.1.
The exact values are float64: exp(x - m) is at most 1 and the sum at most N, so the float64 value
is within a few float64 ULPs of the exact one, far inside the spec's bounds. IEEE propagation is
kept: a group holding a NaN gives NaN everywhere (the sum is NaN), a group of -inf only gives NaN
(0 / 0), a -inf element gives 0 (softmax) or -inf (log_softmax). A +inf element makes m infinite
(inf - inf is NaN: NaN everywhere here); the spec marks such groups with an `unspecified` rule.

Precision model. Softmax and log-softmax add N terms in an order the page leaves open and take exp
and log under D3D's bounds; the spec states the largest |device - exact| per mode (`bounds`) over
the bound variables this plug-in computes per output element (`N`, `arg` = |x - m|, `exact` and the
type's facts). lp and mean_variance accumulate too (the norm; the mean and the variance): their
bounds read what was accumulated per group (`sum_abs`, `sum_sq`, `norm`, `mean`, `dev`, `var_eps`,
`divisor`), so that one formula per mode judges every group size and magnitude; their legal device
lands at 0.999 of that bound (as the pooling family's average does). Hardmax is comparisons only: exact, with fp32 denormal inputs flushed as a legal
alternative (a flushed denormal ties with a zero). The spec's element-wise `unspecified` rules are
lifted to every output element of a group one of whose elements meets them.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.result import (FamilyPlugin, FamilyResult, evaluate_bound, flush_f32_denormals, one_input,
                                                output_rule_masks, rule_hits, toward_the_bound, type_bound_variables)
from harness.reference.rounding import TRANSCENDENTAL_WINDOW, round_formula_near_midpoints
from harness.spec.catalog import DataType
from harness.spec.context import formula_context
from harness.spec.expr import Formula
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

EXP2_RELATIVE = 2.0 ** -21  # D3D 11.3 §22.10.6: exp2's largest relative error
VARIABLE = "normalized"  # mean_variance's formula variable (its formula_variables in harness.spec.families)


class _Groups:
    """One descriptor's grouping: the input with the normalised axes moved last and flattened into
    one (kept..., N), and the way back to the input's layout."""

    def __init__(self, spec: OperatorSpec, descriptor: Descriptor, shape: tuple[int, ...]) -> None:
        family = spec.formula.family
        assert family is not None
        names, facts = expression_scope(spec, descriptor)
        axes_expr = family.expression("axes")
        assert axes_expr is not None
        self.axes = sorted({int(a) for a in axes_expr.evaluate(names, facts)})
        self.mode = family.choice("mode", names)
        self.shape = shape
        self.keep = [i for i in range(len(shape)) if i not in self.axes]
        self.order = self.keep + self.axes

    def group(self, x: np.ndarray) -> np.ndarray:
        """`x` as (kept sizes..., N): each row one group, its elements row-major over the axes."""
        return x.transpose(self.order).reshape([self.shape[i] for i in self.keep] + [-1])

    def reduced(self, values: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
        """One value per group (kept..., 1) in the input's layout with the axes of size 1, shaped
        as `sizes` (a statistics output's Sizes: the same element count)."""
        kept = values.reshape([self.shape[i] for i in self.keep] + [1] * len(self.axes))
        return np.ascontiguousarray(kept.transpose(np.argsort(self.order))).reshape(sizes)

    def back(self, grouped: np.ndarray) -> np.ndarray:
        """Group-shaped values (kept..., N) back in the input's layout."""
        moved = grouped.reshape([self.shape[i] for i in self.order])
        return np.ascontiguousarray(moved.transpose(np.argsort(self.order)))


def _group_max(grouped64: np.ndarray) -> np.ndarray:
    """Each group's largest element (NaN ignored; a group of NaN only: -inf), kept as (..., 1)."""
    with np.errstate(invalid="ignore"):
        return np.max(np.where(np.isnan(grouped64), -np.inf, grouped64), axis=-1, keepdims=True)


def _exact(grouped64: np.ndarray, mode: str) -> np.ndarray:
    """Softmax or log-softmax of each group, float64, IEEE propagation kept (module docstring)."""
    m = _group_max(grouped64)
    with np.errstate(all="ignore"):
        shifted = grouped64 - m
        total = np.sum(np.exp(shifted), axis=-1, keepdims=True)  # NaN where the group holds a NaN
        if mode == "softmax":
            return np.exp(shifted) / total
        return shifted - np.log(total)


def _hardmax(grouped: np.ndarray) -> np.ndarray:
    """1.0 at each group's first largest element, 0.0 elsewhere (NaN ranks below everything: the
    spec's rules mark groups holding one; this keeps the result defined)."""
    values = np.where(np.isnan(grouped), -np.inf, grouped) if grouped.dtype.kind == "f" else grouped
    first = np.argmax(values, axis=-1)[..., None]
    return (np.arange(grouped.shape[-1]) == first).astype(np.float64)


def _outputs(grouped: np.ndarray, mode: str, out_type: DataType) -> tuple[np.ndarray, np.ndarray]:
    """(the output in its type, the exact float64 value), group-shaped."""
    if mode == "hardmax":
        exact = _hardmax(grouped)
    else:
        with np.errstate(invalid="ignore"):
            exact = _exact(grouped.astype(np.float64), mode)
    with np.errstate(all="ignore"):
        return exact.astype(out_type.numpy), exact


def _bound_variables(grouped64: np.ndarray, exact: np.ndarray, out_type: DataType) -> dict[str, object]:
    """The family's bound variables (harness.spec.families NORMALIZE_FAMILY), per element (float64)."""
    with np.errstate(invalid="ignore"):
        arg = np.abs(grouped64 - _group_max(grouped64))
    return {**type_bound_variables(out_type.numpy), "N": np.float64(grouped64.shape[-1]), "exact": exact,
            "arg": np.where(np.isfinite(arg), arg, 0.0)}  # a non-finite element's result is IEEE's, exactly


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, var: str, grouped: np.ndarray, groups: _Groups,
                 out_type: DataType, only: list[str] | None = None) -> dict[str, np.ndarray]:
    """The spec's element-wise rules (those in `only`, where given) over each group's elements,
    lifted to the whole group."""
    if only is None:
        hits = list(rule_hits(spec, descriptor, {var: grouped}, out_type, grouped.shape))
    else:  # only the rules that read nothing but the element and the attributes (no epilogue variable)
        types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
        ctx = formula_context(spec, types, {var: grouped}, descriptor.attributes)
        hits = [(r.id, np.broadcast_to(np.asarray(r.when.evaluate(ctx), dtype=bool), grouped.shape))
                for r in spec.unspecified if r.id in only and r.concerns(spec.formula.output, out_type.name)]
    return {rule: groups.back(np.broadcast_to(hit.any(axis=-1, keepdims=True), grouped.shape))
            for rule, hit in hits if hit.any()}


ACCUMULATING = ("lp", "mean_variance")  # the modes whose bounds read the group's accumulated magnitudes


def _epsilon(spec: OperatorSpec, descriptor: Descriptor) -> float:
    """The family's `epsilon` FLOAT field as the struct holds it (float32)."""
    family = spec.formula.family
    assert family is not None
    name = family.params["epsilon"]
    value = descriptor.attributes.get(name, spec.field(name).default)
    return float(np.float32(0.0 if value is None else value))


def _finite(values: np.ndarray) -> np.ndarray:
    """`values` with the non-finite ones as 0 (what a magnitude sums over finite elements)."""
    return np.where(np.isfinite(values), values, 0.0)


def _accumulated(spec: OperatorSpec, descriptor: Descriptor, grouped: np.ndarray, mode: str,
                 names: dict) -> tuple[np.ndarray, dict[str, object]]:
    """An accumulating mode's exact float64 value, group-shaped, and its bound variables (what
    each group accumulated, broadcast to its elements). IEEE propagation is kept: a NaN or an
    infinity in a group reaches every element of it through the sum."""
    family = spec.formula.family
    assert family is not None
    epsilon = _epsilon(spec, descriptor)
    with np.errstate(all="ignore"):
        x = grouped.astype(np.float64)
        n = np.float64(x.shape[-1])
        facts: dict[str, object] = {"N": n, "epsilon": np.float64(abs(epsilon)),
                                    "sum_abs": np.sum(_finite(np.abs(x)), axis=-1, keepdims=True),
                                    "sum_sq": np.sum(_finite(x * x), axis=-1, keepdims=True)}
        if mode == "lp":
            p = int(names[family.params["p"]])
            facts["p"] = np.float64(p)
            norm = np.sum(np.abs(x) ** p, axis=-1, keepdims=True) ** (1.0 / p)
            divisor = np.sqrt(norm * norm + np.float64(epsilon))  # the norm with epsilon inside its square
            facts.update(norm=_finite(norm), divisor=_finite(divisor))
            return x / divisor, facts
        centred = family.expression("centred")  # absent: the mean is subtracted
        if centred is None or bool(centred.evaluate(*expression_scope(spec, descriptor))):
            mean = np.sum(x, axis=-1, keepdims=True) / n
        else:  # the mean taken as 0 (exactly, no accumulation): a root-mean-square normalization
            mean = np.zeros(x.shape[:-1] + (1,))
        deviation = x - mean
        var_eps = np.sum(deviation * deviation, axis=-1, keepdims=True) / n + np.float64(epsilon)
        divisor = np.sqrt(var_eps)
        variance = bool(family.expression("variance").evaluate(*expression_scope(spec, descriptor)))  # type: ignore[union-attr]
        facts.update(mean=_finite(np.abs(mean)), dev=_finite(np.abs(deviation)), var_eps=_finite(var_eps),
                     divisor=_finite(divisor), variance=np.float64(1.0 if variance else 0.0))
        return (deviation / divisor if variance else deviation), facts


def _bound(atol: Formula, grouped: np.ndarray, exact: np.ndarray, facts: dict[str, object], out_type: DataType) -> np.ndarray:
    """The spec's bound per grouped element over the group's accumulated facts (no slack where the
    group holds a NaN)."""
    variables = {**type_bound_variables(out_type.numpy), **_broadcast_facts(facts, grouped.shape), "exact": exact}
    with np.errstate(invalid="ignore"):
        nan_in = np.isnan(grouped.astype(np.float64)).any(axis=-1, keepdims=True)
    return evaluate_bound(atol, variables, grouped.shape, nan_in)


def _broadcast_facts(facts: dict[str, object], shape: tuple[int, ...]) -> dict[str, object]:
    """Each group-shaped fact broadcast to the grouped elements (scalars kept)."""
    return {k: (np.broadcast_to(v, shape) if isinstance(v, np.ndarray) else v) for k, v in facts.items()}


def _accumulating(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """lp (the output itself within the spec's bound) and mean_variance (the formula variable
    `normalized` within the bound, under the spec's element-wise expression)."""
    family = spec.formula.family
    assert family is not None
    call = one_input(spec, descriptor, inputs)
    var, x, out_name, out_type = call.var, call.x, call.out_name, call.out_type
    groups = _Groups(spec, descriptor, x.shape)
    grouped = groups.group(x)
    names, _ = expression_scope(spec, descriptor)
    exact, facts = _accumulated(spec, descriptor, grouped, groups.mode, names)
    exact = np.broadcast_to(exact, grouped.shape)
    bound = family.bound(groups.mode)
    flushed = flush_f32_denormals(x)
    atol = None
    if bound is not None and out_type.is_float:
        atol = groups.back(_bound(bound.atol, grouped, exact, facts, out_type))
        if flushed is not None:  # the flush is legal: the bound covers a device at the edge of the flushed computation too
            grouped_flushed = groups.group(flushed)
            exact_flushed, facts_flushed = _accumulated(spec, descriptor, grouped_flushed, groups.mode, names)
            exact_flushed = np.broadcast_to(exact_flushed, grouped.shape)
            with np.errstate(invalid="ignore"):
                moved = np.abs(exact_flushed - exact) + _bound(bound.atol, grouped_flushed, exact_flushed, facts_flushed, out_type)
            atol = np.maximum(atol, groups.back(np.where(np.isnan(moved), 0.0, moved)))
    if groups.mode == "lp":
        with np.errstate(all="ignore"):
            result = FamilyResult({out_name: groups.back(exact.astype(out_type.numpy))})
        result.summaries["exact"] = groups.back(exact)
        if atol is not None:
            atol = np.where(np.isfinite(groups.back(exact)), atol, 0.0)
            result.bounds[out_name] = (groups.back(exact), atol)
            result.summaries["bound"] = atol
        result.unspecified[out_name] = _unspecified(spec, descriptor, var, grouped, groups, out_type)
        if flushed is not None:
            alternative, _ = _accumulated(spec, descriptor, groups.group(flushed), "lp", names)
            with np.errstate(all="ignore"):
                result.alternatives[out_name] = [("fp32_input_flush", groups.back(np.broadcast_to(alternative, grouped.shape)).astype(out_type.numpy))]
        return result
    normalized = groups.back(exact)
    alternatives = []
    if flushed is not None:
        alternative, _ = _accumulated(spec, descriptor, groups.group(flushed), "mean_variance", names)
        alternatives = [("fp32_input_flush", groups.back(np.broadcast_to(alternative, grouped.shape)))]
    result = _epilogue(spec, descriptor, inputs, normalized, atol, alternatives)
    # a rule over the input element (and attributes) alone is lifted to its whole group, as for the
    # other modes: every element of the group is computed from that element
    own = {var} | {f.name for f in spec.attribute_fields}
    lifted = _unspecified(spec, descriptor, var, grouped, groups, out_type,
                          [r.id for r in spec.unspecified if r.when.names <= own])
    masks = result.unspecified[out_name]
    for rule, hit in lifted.items():
        masks[rule] = masks[rule] | hit if rule in masks else hit
    _statistics(spec, descriptor, grouped, groups, facts, lifted, result,
                None if flushed is None else groups.group(flushed), names)
    return result


STATISTICS = ("mean_output", "variance_output")  # mean_variance's optional outputs of each group's statistics


def _statistic(spec: OperatorSpec, descriptor: Descriptor, grouped: np.ndarray, key: str) -> np.ndarray:
    """Each group's mean (`key` mean_output) or population variance (divisor N, no epsilon; about 0
    where the spec's `centred` does not hold), exact (float64), kept as (kept..., 1)."""
    family = spec.formula.family
    assert family is not None
    with np.errstate(all="ignore"):
        x = grouped.astype(np.float64)
        centred = family.expression("centred")
        mean = (np.sum(x, axis=-1, keepdims=True) / x.shape[-1]
                if centred is None or bool(centred.evaluate(*expression_scope(spec, descriptor)))
                else np.zeros(x.shape[:-1] + (1,)))
        return mean if key == "mean_output" else np.sum((x - mean) ** 2, axis=-1, keepdims=True) / x.shape[-1]


def _statistics(spec: OperatorSpec, descriptor: Descriptor, grouped: np.ndarray, groups: _Groups,
                facts: dict[str, object], lifted: dict[str, np.ndarray], result: FamilyResult,
                flushed: np.ndarray | None, names: dict) -> None:
    """mean_variance's optional statistics outputs into `result`: each group's mean and population
    variance (_statistic), rounded to nearest, judged within the bound the spec keys by the output
    parameter's name (read over the group's accumulated facts: one value per group); where fp32
    denormal inputs may be flushed (`flushed`, grouped), the larger of the two computations' bounds,
    as for `normalized`. Why here: an operator that normalises over a batch also returns the
    statistics it normalised with, from the same accumulation."""
    family = spec.formula.family
    assert family is not None
    for key in STATISTICS:
        name = family.params.get(key)
        desc = descriptor.tensors.get(name) if name is not None else None
        if name is None or desc is None:
            continue
        out_type = spec.catalog.dtype(desc.data_type)
        exact = _statistic(spec, descriptor, grouped, key)
        value = groups.reduced(exact, tuple(desc.sizes))
        with np.errstate(all="ignore"):
            result.outputs[name] = value.astype(out_type.numpy)
        bound = family.bound(key)
        if bound is not None and out_type.is_float:
            atol = _bound(bound.atol, grouped, np.broadcast_to(exact, grouped.shape), facts, out_type)[..., :1]
            if flushed is not None:  # a device at the edge of the flushed computation is legal too
                exact_f = _statistic(spec, descriptor, flushed, key)
                _, facts_f = _accumulated(spec, descriptor, flushed, "mean_variance", names)
                with np.errstate(invalid="ignore"):
                    moved = np.abs(exact_f - exact) + _bound(bound.atol, flushed, np.broadcast_to(exact_f, flushed.shape),
                                                             facts_f, out_type)[..., :1]
                atol = np.maximum(atol, np.where(np.isnan(moved), 0.0, moved))
            atol = groups.reduced(np.where(np.isfinite(exact), atol, 0.0), tuple(desc.sizes))
            result.bounds[name] = (value, atol)
        rules = {r.id: r for r in spec.unspecified}
        result.unspecified[name] = {rule: groups.reduced(groups.group(hit)[..., :1], tuple(desc.sizes))
                                    for rule, hit in lifted.items() if rules[rule].concerns(name, out_type.name)}


WINDOWED = "window_sum_square"  # the mode whose formula variable is a sum over a window around each element
WINDOW_VARIABLE = "window_sq"


def _window_sums(x: np.ndarray, axes: list[int], w: int) -> np.ndarray:
    """The sum of x^2 (float64, IEEE kept: a NaN or an infinity reaches every window holding it)
    over the box of w elements along each of `axes` around each element, (w - 1) // 2 before it
    and the rest after it; positions off the tensor read nothing. The box sum is separable: one
    sliding sum per axis, over zeros padded at both ends."""
    with np.errstate(all="ignore"):
        sums = x.astype(np.float64) ** 2
        before = (w - 1) // 2
        for axis in axes:
            pad = [(0, 0)] * sums.ndim
            pad[axis] = (before, w - 1 - before)
            sums = np.lib.stride_tricks.sliding_window_view(np.pad(sums, pad), w, axis=axis).sum(axis=-1)
    return sums


def _windowed(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], axes: list[int]) -> FamilyResult:
    """window_sum_square: the formula variable `window_sq` (each element's window sum of squares,
    within the spec's bound over `N`, the window's element count, and `exact`), under the spec's
    element-wise expression as mean_variance's `normalized` is. Why a normalize mode and not the
    window family: the window here is centred on every element along any axes, the output has the
    input's shape, and no stride or padding field shapes it (a local normalization)."""
    family = spec.formula.family
    assert family is not None
    call = one_input(spec, descriptor, inputs)
    names, _ = expression_scope(spec, descriptor)
    w = int(names[family.params["window"]])
    sums = _window_sums(np.asarray(call.x), axes, w)
    bound = family.bound(WINDOWED)
    atol = None
    if bound is not None and call.out_type.is_float:
        variables: dict[str, object] = {**type_bound_variables(call.out_type.numpy), "N": np.float64(w ** len(axes)), "exact": sums}
        atol = evaluate_bound(bound.atol, variables, sums.shape, np.isnan(sums))
        atol = np.where(np.isfinite(sums), atol, 0.0)  # an infinite or NaN sum is IEEE's, exactly
    return _epilogue(spec, descriptor, inputs, sums, atol, [], WINDOW_VARIABLE)


def _epilogue(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], normalized: np.ndarray,
              spread: np.ndarray | None, alternatives: list[tuple[str, np.ndarray]],
              variable: str = VARIABLE) -> FamilyResult:
    """The FamilyResult of the spec's expression over the formula variable `normalized` (each
    element anywhere within `spread` of it), the other inputs broadcast to the output's Sizes,
    as the matmul family's dot_epilogue judges its dot product."""
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    out_type = spec.catalog.dtype(out_desc.data_type)
    shape = tuple(out_desc.sizes)
    ctx = _epilogue_context(spec, descriptor, inputs, normalized, variable)
    with np.errstate(all="ignore"):
        value = np.broadcast_to(np.asarray(spec.formula.expression.evaluate(ctx), dtype=np.float64), shape)
    if spec.formula.expression.transcendental:  # a fused activation's exp: the same bits on every CPU
        with np.errstate(all="ignore"):
            output = value.astype(out_type.numpy)
        round_formula_near_midpoints(spec.formula.expression, ctx.variables, value, output, TRANSCENDENTAL_WINDOW)
    else:
        with np.errstate(all="ignore"):
            output = value.astype(out_type.numpy)
    result = FamilyResult({out_name: output})
    if alternatives:
        result.epilogue_alternatives[out_name] = [(name, {variable: values}) for name, values in alternatives]
    result.summaries[variable] = normalized
    if spread is not None:
        result.summaries["bound"] = spread
    result.epilogue[out_name] = {variable: (normalized, spread)}
    result.contexts[out_name] = ctx
    # element-wise over the output's elements, with the family's variables and the inputs
    result.unspecified[out_name] = output_rule_masks(spec, out_name, out_type, ctx, shape)
    return result


def _epilogue_context(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], normalized: np.ndarray,
                      variable: str = VARIABLE):
    """The spec expression's context per output element: the inputs broadcast (right-aligned) to
    the output's Sizes, an absent one as its absent value, and `normalized`."""
    shape = normalized.shape
    variables: dict[str, object] = {}
    for var in spec.formula.inputs:
        value = np.asarray(inputs[var])
        if value.ndim:
            value = value.reshape((1,) * (len(shape) - value.ndim) + value.shape) if value.ndim < len(shape) else value
            variables[var] = np.broadcast_to(value, shape)
        else:
            variables[var] = value
    variables[variable] = normalized
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    return formula_context(spec, types, variables, descriptor.attributes)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    call = one_input(spec, descriptor, inputs)
    var, x, out_name, out_type = call.var, call.x, call.out_name, call.out_type
    groups = _Groups(spec, descriptor, x.shape)
    if groups.mode in ACCUMULATING:
        return _accumulating(spec, descriptor, inputs)
    if groups.mode == WINDOWED:
        return _windowed(spec, descriptor, inputs, groups.axes)
    grouped = groups.group(x)
    output, exact = _outputs(grouped, groups.mode, out_type)
    result = FamilyResult({out_name: groups.back(output)})
    bound = family.bound(groups.mode)
    if bound is not None and out_type.is_float:
        with np.errstate(invalid="ignore"):
            grouped64 = grouped.astype(np.float64)
        variables = _bound_variables(grouped64, exact, out_type)
        atol = evaluate_bound(bound.atol, variables, grouped.shape, np.isnan(grouped64).any(axis=-1, keepdims=True))
        atol = np.where(np.isfinite(exact), atol, 0.0)  # an infinite exact value (a -inf element) is IEEE's, exactly
        result.bounds[out_name] = (groups.back(exact), groups.back(atol))
        result.summaries["exact"] = groups.back(exact)
        result.summaries["bound"] = groups.back(atol)
    result.unspecified[out_name] = _unspecified(spec, descriptor, var, grouped, groups, out_type)
    flushed = flush_f32_denormals(x)
    if flushed is not None:
        alternative, _ = _outputs(groups.group(flushed), groups.mode, out_type)
        result.alternatives[out_name] = [("fp32_input_flush", groups.back(alternative))]
    return result


# --- one legal device, at the edge of the bounds -------------------------------------------------

def _directed(values: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    """float64 `values` rounded to `dtype` toward +inf (`up`) or -inf: one of the two faithful
    neighbours D3D allows, the one that pushes the result the chosen way."""
    with np.errstate(all="ignore"):
        rounded = values.astype(dtype)
        wide = rounded.astype(np.float64)
        if up:
            step = np.isfinite(values) & (wide < values)
            return np.where(step, np.nextafter(rounded, dtype.type(np.inf)), rounded).astype(dtype)
        step = np.isfinite(values) & (wide > values)
        return np.where(step, np.nextafter(rounded, dtype.type(-np.inf)), rounded).astype(dtype)


def _toward_zero(values: np.ndarray) -> np.ndarray:
    """FLOAT32 values converted to FLOAT16 toward zero."""
    wide = values.astype(np.float64)
    return np.where(wide < 0, _directed(wide, np.dtype(np.float16), True), _directed(wide, np.dtype(np.float16), False))


def _edge_exp(shifted: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    """exp of the (rounded, non-positive) shifted arguments at the edge of the precision model's exp
    rule: the argument's error (x * log2(e) and the constant, 2 eps relative) and exp2's 2^-21,
    both the chosen way, then rounded the chosen way."""
    eps = float(np.finfo(dtype).eps)
    sign = 1.0 if up else -1.0
    t = shifted.astype(np.float64)
    with np.errstate(all="ignore"):
        value = np.exp(t + sign * 2 * eps * np.abs(np.where(np.isfinite(t), t, 0.0))) * (1 + sign * EXP2_RELATIVE)
    return np.where(t == 0, dtype.type(1), _directed(value, dtype, up)).astype(dtype)  # exp(+-0) = 1 exactly (§22.10.6)


def _edge_sum(terms: np.ndarray, dtype: np.dtype, up: bool, rng: np.random.Generator) -> np.ndarray:
    """The terms of each group added one by one in a random order, each step rounded the chosen way."""
    order = rng.permutation(terms.shape[-1])
    acc = terms[..., order[0]].astype(dtype)
    for i in order[1:]:
        acc = _directed(acc.astype(np.float64) + terms[..., i].astype(np.float64), dtype, up)
    return acc[..., None]


def _edge_log(total: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    """log of the computed sum at the edge of the precision model's log rule (FLOAT32: 3.3e-7
    absolute and 2^-21 relative; FLOAT16: 2^-10 absolute), rounded the chosen way."""
    sign = 1.0 if up else -1.0
    t = total.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = np.log(t)
        if dtype == np.float16:
            value = exact + sign * 2.0 ** -10
        else:
            value = exact + sign * (3.3052e-07 + EXP2_RELATIVE * np.abs(exact))
    return _directed(np.where(np.isfinite(exact), value, exact), dtype, up)


def _edge_normalise(grouped: np.ndarray, mode: str, dtype: np.dtype, up: bool, rng: np.random.Generator) -> np.ndarray:
    """Softmax or log-softmax in `dtype`, every step at the edge of its rule, pushed up (`up`) or
    down: the element's own terms one way, the sum the other (a device computing the numerator and
    the sum in separate passes may round them differently)."""
    with np.errstate(all="ignore"):
        return _edge_steps(grouped, mode, dtype, up, rng)


def _edge_steps(grouped: np.ndarray, mode: str, dtype: np.dtype, up: bool, rng: np.random.Generator) -> np.ndarray:
    """_edge_normalise's steps (overflow and NaN warnings silenced there: IEEE values are intended)."""
    x = grouped.astype(dtype)
    m = _group_max(x.astype(np.float64)).astype(dtype)
    shifted_up = _directed(x.astype(np.float64) - m.astype(np.float64), dtype, up)
    shifted_down = _directed(x.astype(np.float64) - m.astype(np.float64), dtype, not up)
    total = _edge_sum(_edge_exp(shifted_down, dtype, not up), dtype, not up, rng)
    if mode == "softmax":
        numerator = _edge_exp(shifted_up, dtype, up)
        reciprocal = _directed(1.0 / total.astype(np.float64), dtype, up)  # division through the reciprocal
        return _directed(numerator.astype(np.float64) * reciprocal.astype(np.float64), dtype, up)
    log_total = _edge_log(total, dtype, not up)
    return _directed(shifted_up.astype(np.float64) - log_total.astype(np.float64), dtype, up)


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The outputs of one legal device (the worst legal backend): softmax and log-softmax with every
    step at the edge of its D3D rule, all pushed up or all down for the case (at random), in the
    output's type (or FLOAT32 for a FLOAT16 output, at random, then converted toward zero or to
    nearest); hardmax is exact."""
    call = one_input(spec, descriptor, inputs)
    x, out_name, out_type = call.x, call.out_name, call.out_type
    groups = _Groups(spec, descriptor, x.shape)
    if groups.mode in ACCUMULATING or groups.mode == WINDOWED:
        return _edge_of_bound(spec, descriptor, inputs, rng)
    if groups.mode == "hardmax" or not out_type.is_float or x.dtype.kind != "f":
        return compute(spec, descriptor, inputs).outputs
    widen = out_type.numpy == np.float16 and rng.random() < 0.5
    compute_type = np.dtype(np.float32 if widen else out_type.numpy)
    up = bool(rng.random() < 0.5)
    values = _edge_normalise(groups.group(x), groups.mode, compute_type, up, rng)
    if widen:  # FLOAT32 to FLOAT16: toward zero or to nearest (§3.2.2)
        values = _toward_zero(values) if rng.random() < 0.5 else values.astype(np.float16)
    return {out_name: groups.back(values.astype(out_type.numpy))}


def _moved(exact: np.ndarray, atol: np.ndarray, dtype: np.dtype, sign: float) -> np.ndarray:
    """`exact` moved by EDGE of `atol` the `sign` way, in `dtype`, rounded towards `exact` so that it
    stays inside; an infinite or zero bound, or a non-finite exact value, leaves the exact value."""
    moved, usable = toward_the_bound(exact, atol, dtype, sign)
    return np.where(usable, moved, exact.astype(dtype)).astype(dtype)


def _edge_of_bound(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                   rng: np.random.Generator) -> dict[str, np.ndarray]:
    """An accumulating mode's legal device: lp's output, or mean_variance's `normalized` (then the
    spec's expression over it, exactly, rounded to nearest), moved from the exact value to EDGE of
    the spec's bound, up or down at random per case."""
    result = compute(spec, descriptor, inputs)
    out_name = spec.formula.output
    sign = 1.0 if rng.random() < 0.5 else -1.0
    if out_name in result.bounds:
        exact, atol = result.bounds[out_name]
        return {**result.outputs, out_name: _moved(exact, atol, result.outputs[out_name].dtype, sign)}
    if out_name not in result.epilogue:
        return result.outputs
    ((variable, (normalized, spread)),) = result.epilogue[out_name].items()
    if spread is None:
        return result.outputs
    statistics = {name: _moved(exact, atol, result.outputs[name].dtype, sign)  # mean_variance's statistics outputs
                  for name, (exact, atol) in result.bounds.items() if name != out_name}
    moved = _moved(normalized, spread, np.dtype(np.float64), sign)
    ctx = _epilogue_context(spec, descriptor, inputs, moved, variable)
    out = result.outputs[out_name]
    with np.errstate(all="ignore"):
        value = np.broadcast_to(np.asarray(spec.formula.expression.evaluate(ctx), dtype=np.float64), out.shape)
        return {**result.outputs, **statistics, out_name: value.astype(out.dtype)}


PLUGIN = FamilyPlugin(DECLARATIONS["normalize"], compute, legal_device)
