"""The reduce family: each output element combines the input elements that differ from it only
along the reduced axes.

The reduced axes come from the spec's `axes` array attribute; the output keeps the input's rank
with size 1 along them (the spec's shape rule says so; the validator has checked it). The combine
is fixed by the spec or picked by an enum attribute (harness.spec.families):

- index reductions (argmax, argmin): the index counts within the reduced axes in row-major order
  over them, ascending by axis (the only multi-axis example of the index operators' pages: argmax
  over {0, 1} of a 3x3 tensor = 7); the first of equal candidates unless `last_on_ties` holds;
- max, min: native comparisons (NaN ignored: groups holding one are what the spec's rules name);
- sum, average, l1, l2, sum_square, log_sum, log_sum_exp, multiply: exactly. Integers with Python
  integers (the result is written wrapped to the output type, and `out_of_range` tells the spec's
  rules where it does not fit), floats in float64 (a product through its binary exponents, so no
  float64 overflow stands in for a finite product): the float64 value is within N * 2^-53 of the
  sum of |terms| of the exact value, far inside any bound below.

Precision model. Comparisons are exact in every type, but a D3D device may flush fp32 denormal
inputs to a zero of the same sign (fp32_input_flush): the result over the flushed input is a legal
alternative. An arithmetic reduction may also add in any order and round each step within D3D's
bounds; the spec states, per combine, how far from the exact value that can take a conforming
device (`bounds`, formulas over the family's bound variables evaluated here per output element). A bound of
+inf accepts every result. IEEE propagation stays exact: a group holding a NaN must give NaN
(every arithmetic combine), whatever its bound.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names, expression_scope
from harness.reference.families.result import (FamilyPlugin, FamilyResult, evaluate_bound, flush_f32_denormals, one_input,
                                                type_bound_variables)
from harness.spec.catalog import DataType
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

INDEX = ("argmax", "argmin")
EXTREMES = ("max", "min")


def _groups(x: np.ndarray, axes: list[int]) -> tuple[np.ndarray, list[int]]:
    """`x` as (kept dims..., reduced elements) with the reduced axes last in ascending order, and
    the output's sizes (1 along the reduced axes)."""
    axes = sorted(set(axes))
    keep = [i for i in range(x.ndim) if i not in axes]
    grouped = x.transpose(keep + axes).reshape([x.shape[i] for i in keep] + [-1])
    return grouped, [1 if i in axes else x.shape[i] for i in range(x.ndim)]


def _index(grouped: np.ndarray, combine: str, last: bool) -> np.ndarray:
    """argmax/argmin over the last axis, first or last of equal candidates; NaN ranks below
    everything (the groups holding one are unspecified; this keeps the result defined)."""
    values = grouped
    if values.dtype.kind == "f":
        fill = -np.inf if combine == "argmax" else np.inf
        values = np.where(np.isnan(values), fill, values)
    pick = np.argmax if combine == "argmax" else np.argmin
    if last:
        n = values.shape[-1]
        return (n - 1) - pick(values[..., ::-1], axis=-1)
    return pick(values, axis=-1)


def _extreme(grouped: np.ndarray, combine: str) -> np.ndarray:
    """The largest (argmax, max) or smallest (argmin, min) value of each group, NaN ignored (an
    all-NaN group gives NaN). Of -0 and +0, max gives +0 and min -0 (IEEE 754-2019 maximumNumber
    and minimumNumber; D3D allows either, and the spec's bound of 0 accepts either)."""
    largest = combine in ("argmax", "max")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if grouped.dtype.kind != "f":
            return (np.max if largest else np.min)(grouped, axis=-1)
        found = (np.nanmax if largest else np.nanmin)(grouped, axis=-1)
    zero = found == 0
    if zero.any():  # the sign of a zero result: +0 for max where the group holds one, -0 for min
        is_zero, negative = grouped == 0, np.signbit(grouped)
        has_plus, has_minus = (is_zero & ~negative).any(axis=-1), (is_zero & negative).any(axis=-1)
        want_negative = has_minus & ~has_plus if largest else has_minus
        found = np.where(zero, np.where(want_negative, -0.0, 0.0).astype(found.dtype), found)
    return found


def _ties(grouped: np.ndarray, combine: str) -> np.ndarray:
    """How many elements of each group equal the value an index reduction picks (1 otherwise)."""
    if combine not in INDEX:
        return np.ones(grouped.shape[:-1], dtype=np.int64)
    picked = _extreme(grouped, combine)[..., None]
    return (grouped == picked).sum(axis=-1).astype(np.int64)


def _terms(grouped64: np.ndarray, combine: str) -> np.ndarray:
    """What an arithmetic reduction accumulates of each element (float64)."""
    with np.errstate(all="ignore"):
        if combine == "l1":
            return np.abs(grouped64)
        if combine in ("l2", "sum_square"):
            return grouped64 * grouped64
        if combine == "log_sum_exp":
            return np.exp(grouped64)
        return grouped64


def _product(grouped64: np.ndarray) -> np.ndarray:
    """The exact product of each group (one rounding, float64), through binary exponents: no
    float64 overflow or underflow stands in for a representable product. IEEE for the rest: NaN
    in or 0 * inf gives NaN, otherwise an infinity gives +-inf and a zero +-0."""
    finite = np.isfinite(grouped64)
    mantissa, exponent = np.frexp(np.where(finite, grouped64, 1.0))
    with np.errstate(all="ignore"):
        magnitude = np.ldexp(np.prod(mantissa, axis=-1), np.sum(exponent, axis=-1).clip(-4000, 4000).astype(np.int64))
    negative = (np.signbit(grouped64).sum(axis=-1) % 2) == 1
    zero = (grouped64 == 0).any(axis=-1)
    inf = np.isinf(grouped64).any(axis=-1)
    nan = np.isnan(grouped64).any(axis=-1) | (zero & inf)
    out = np.where(inf, np.inf, np.where(zero, 0.0, np.abs(magnitude)))
    out = np.where(negative, -out, out)
    return np.where(nan, np.nan, out)


def _exact_float(grouped64: np.ndarray, combine: str) -> tuple[np.ndarray, np.ndarray]:
    """(exact result, exact accumulation before the final function) of an arithmetic reduction."""
    n = grouped64.shape[-1]
    with np.errstate(all="ignore"):
        if combine == "multiply":
            product = _product(grouped64)
            return product, product
        if combine == "log_sum_exp":
            total = np.sum(_terms(grouped64, combine), axis=-1)
            return np.logaddexp.reduce(grouped64, axis=-1), total
        total = np.sum(_terms(grouped64, combine), axis=-1)
        if combine == "average":
            return total / n, total
        if combine == "l2":
            return np.sqrt(total), total
        if combine == "log_sum":
            return np.log(total), total
        return total, total  # sum, l1, sum_square


def _exact_integer(grouped: np.ndarray, combine: str) -> np.ndarray:
    """An arithmetic reduction of integers, exactly (Python integers in an object array)."""
    values = grouped.astype(object)
    if combine == "l1":
        values = np.abs(values)
    elif combine == "sum_square":
        values = values * values
    reduced = np.prod(values, axis=-1) if combine == "multiply" else np.sum(values, axis=-1)
    return np.array(reduced, dtype=object).reshape(values.shape[:-1])  # a 0-d sum is a plain int


def _wrapped(exact: np.ndarray, dtype: DataType) -> tuple[np.ndarray, np.ndarray]:
    """Exact integers written to an integer type (wrapped modulo 2^bits), and where they do not fit."""
    assert dtype.min is not None and dtype.max is not None
    flat = exact.reshape(-1)
    modulus = 1 << dtype.bits
    wrapped = [((int(v) - dtype.min) % modulus) + dtype.min for v in flat]
    outside = np.array([not dtype.min <= int(v) <= dtype.max for v in flat], dtype=bool).reshape(exact.shape)
    return np.array(wrapped, dtype=object).reshape(exact.shape).astype(dtype.numpy), outside


@dataclass
class _Combined:
    """One combine's results over the groups: the output, and for the bounds its exact value."""

    output: np.ndarray
    exact: np.ndarray | None = None       # float64 exact value (arithmetic combines of floats)
    total: np.ndarray | None = None
    out_of_range: np.ndarray | None = None


def _combine(grouped: np.ndarray, combine: str, last: bool, out_type: DataType) -> _Combined:
    """The output of each group (group shape), in the output's type."""
    if combine in INDEX:
        return _Combined(_index(grouped, combine, last).astype(out_type.numpy))
    if combine in EXTREMES:  # exact: a float result is its own exact value (for a bound of 0: either zero)
        extreme = _extreme(grouped, combine).astype(out_type.numpy)
        exact = extreme.astype(np.float64) if out_type.is_float else None
        return _Combined(extreme, exact, exact)
    if grouped.dtype.kind in "iu" and not out_type.is_float and combine in ("sum", "multiply", "l1", "sum_square"):
        output, outside = _wrapped(_exact_integer(grouped, combine), out_type)
        return _Combined(output, out_of_range=outside)
    with np.errstate(invalid="ignore"):
        grouped64 = grouped.astype(np.float64)
    exact, total = _exact_float(grouped64, combine)
    if out_type.is_float:
        with np.errstate(all="ignore"):
            output = exact.astype(out_type.numpy)
        if combine in LOGARITHMIC:
            _round_logarithms(grouped64, combine, exact, output)
        return _Combined(output, exact, total)
    # a combine the tables never give an integer output (average, l2, log_sum, log_sum_exp of
    # integers): toward zero, as a float written to an integer type (kept defined)
    from harness.reference.rounding import float_to_integer
    return _Combined(float_to_integer(exact, out_type.numpy), exact, total)


LOGARITHMIC = ("log_sum", "log_sum_exp")


def _round_logarithms(grouped64: np.ndarray, combine: str, exact: np.ndarray, output: np.ndarray) -> None:
    """LOG_SUM and LOG_SUM_EXP rounded correctly (in place), whatever CPU NumPy runs on: NumPy's
    float64 log, exp and logaddexp differ between its SIMD paths by a few ULPs per step, so a group
    whose float64 result lies near a rounding boundary of the output type is computed again with
    mpmath (harness.reference.rounding); the window grows with the group, as logaddexp's error does."""
    from fractions import Fraction

    from harness.reference.rounding import TRANSCENDENTAL_WINDOW, round_near_midpoints
    from harness.spec.functions import exact_value

    n = grouped64.shape[-1]
    exact_of = exact_value("log_sum_exp" if combine == "log_sum_exp" else "log_sum")

    def exact_at(index: tuple[int, ...]) -> Fraction | None:
        group = grouped64[index]
        if not np.isfinite(group).all():
            return None
        try:
            return exact_of([float(v) for v in group])
        except ArithmeticError:
            return None

    round_near_midpoints(np.asarray(exact, dtype=np.float64), output, TRANSCENDENTAL_WINDOW * max(1, n), exact_at)


def _bound_variables(grouped64: np.ndarray, combine: str, combined: _Combined, out_type: DataType) -> dict[str, object]:
    """The bound variables of the family's bound_variables (harness.spec.families), per group (float64)."""
    finite = np.isfinite(grouped64)
    terms = _terms(grouped64, combine)
    with np.errstate(all="ignore"):
        magnitude = np.where(finite, np.abs(grouped64), 0.0)
        finite_terms = np.where(np.isfinite(terms) & finite, np.abs(terms), 0.0)
        return {
            **type_bound_variables(out_type.numpy),
            "N": np.float64(grouped64.shape[-1]),
            "exact": combined.exact,
            "total": combined.total,
            "sum_abs": np.sum(finite_terms, axis=-1),
            "max_abs": np.max(magnitude, axis=-1) if grouped64.shape[-1] else np.zeros(grouped64.shape[:-1]),
            "big": np.prod(np.where(finite, np.maximum(magnitude, 1.0), 1.0), axis=-1),
            "small": np.prod(np.where(finite & (grouped64 != 0), np.minimum(magnitude, 1.0), 1.0), axis=-1),
        }


def _bound(spec: OperatorSpec, combine: str, grouped: np.ndarray, combined: _Combined,
           out_type: DataType) -> np.ndarray | None:
    """The spec's bound for `combine` per group (None: no bound, the comparison is exact). A
    group holding a NaN gets no slack (except max and min, whose NaN groups the spec's rules name)."""
    family = spec.formula.family
    assert family is not None
    bound = family.bound(combine)
    if bound is None or combined.exact is None or not out_type.is_float:
        return None
    with np.errstate(invalid="ignore"):
        grouped64 = grouped.astype(np.float64)
    variables = _bound_variables(grouped64, combine, combined, out_type)
    nan_in = None if combine in EXTREMES else np.isnan(grouped64).any(axis=-1)
    return evaluate_bound(bound.atol, variables, combined.output.shape, nan_in)


def _arithmetic_summaries(grouped: np.ndarray, combine: str, combined: _Combined,
                          out_shape: list[int]) -> dict[str, np.ndarray]:
    """`exact` (the exact result) and `sum_abs` (the sum of |terms|) per output element, in
    float64 (integers rounded): what failure reports show, and what expectation files may read."""
    with np.errstate(all="ignore"):
        if combined.exact is not None:
            exact = combined.exact
            sum_abs = np.sum(np.abs(_terms(grouped.astype(np.float64), combine)), axis=-1)
        else:
            exact = np.array([float(v) for v in _exact_integer(grouped, combine).reshape(-1)]).reshape(grouped.shape[:-1])
            magnitudes = np.abs(grouped.astype(object))
            sums = _exact_integer(magnitudes, "sum_square" if combine == "sum_square" else "sum")
            sum_abs = np.array([float(v) for v in sums.reshape(-1)]).reshape(grouped.shape[:-1])
    return {"exact": np.asarray(exact, dtype=np.float64).reshape(out_shape),
            "sum_abs": np.asarray(sum_abs, dtype=np.float64).reshape(out_shape)}


def _lift(mask: np.ndarray, axes: list[int], out_shape: list[int]) -> np.ndarray:
    grouped, _ = _groups(mask, axes)
    lifted = grouped.any(axis=-1).reshape(out_shape)
    assert isinstance(lifted, np.ndarray)  # out_shape has the input's rank (at least 1)
    return lifted


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, var: str, x: np.ndarray, axes: list[int],
                 out_shape: list[int], out_type: DataType, group_facts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The spec's element-wise rules over the input, with the family's facts about each element's
    group (ties, out_of_range) broadcast to it, lifted to the output elements they reach."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: x}, descriptor.attributes)
    for name, per_group in group_facts.items():  # back from (kept..., 1) per group to the input's shape
        ctx.variables[name] = np.broadcast_to(per_group.reshape(out_shape), x.shape)
    masks = {}
    for rule in spec.unspecified:
        if not rule.concerns(spec.formula.output, out_type.name):
            continue
        hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), x.shape)
        if hit.any():
            masks[rule.id] = _lift(hit, axes, out_shape)
    return masks


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    axes = list(names[family.params["axes"]])
    last_expr = family.expression("last_on_ties")
    last = bool(last_expr.evaluate(names, facts)) if last_expr is not None else False
    combine = family.choice("combine", names)
    call = one_input(spec, descriptor, inputs)
    var, x, out_name, out_type = call.var, call.x, call.out_name, call.out_type

    grouped, out_shape = _groups(x, axes)
    combined = _combine(grouped, combine, last, out_type)
    result = FamilyResult({out_name: combined.output.reshape(out_shape)})
    if combine in INDEX:
        result.summaries[f"group_{combine[3:]}"] = _extreme(grouped, combine).reshape(out_shape)
    elif combine not in EXTREMES:  # the exact value and the sum of |terms| (float64), shown beside a difference
        result.summaries.update(_arithmetic_summaries(grouped, combine, combined, out_shape))
    atol = _bound(spec, combine, grouped, combined, out_type)
    if atol is not None:
        assert combined.exact is not None
        result.bounds[out_name] = (combined.exact.reshape(out_shape), atol.reshape(out_shape))
        result.summaries["bound"] = atol.reshape(out_shape)

    outside = combined.out_of_range if combined.out_of_range is not None else np.zeros(grouped.shape[:-1], dtype=bool)
    group_facts = {"ties": _ties(grouped, combine), "out_of_range": outside.astype(np.int64)}
    result.unspecified[out_name] = _unspecified(spec, descriptor, var, x, axes, out_shape, out_type, group_facts)

    flushed = flush_f32_denormals(x)
    if flushed is not None:
        alt = _combine(_groups(flushed, axes)[0], combine, last, out_type).output.reshape(out_shape)
        result.alternatives[out_name] = [("fp32_input_flush", alt)]
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The outputs of one legal device (for the worst legal backend): arithmetic reductions of
    floats accumulate in a random order, one rounding per step in the output's type (or FLOAT32
    for a FLOAT16 output, at random), and apply sqrt, log and exp in that type; the rest is exact."""
    family = spec.formula.family
    assert family is not None
    names = attribute_names(spec, descriptor.attributes)
    combine = family.choice("combine", names)
    exact = compute(spec, descriptor, inputs).outputs
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    out_type = spec.catalog.dtype(out_desc.data_type)
    x = inputs[next(iter(spec.formula.inputs))]
    if combine in INDEX + EXTREMES or not out_type.is_float or x.dtype.kind != "f":
        return exact
    grouped, out_shape = _groups(x, list(names[family.params["axes"]]))
    compute_type = np.float32 if out_type.numpy == np.float16 and rng.random() < 0.5 else out_type.numpy
    values = _sequential(grouped.astype(compute_type), combine, rng, np.dtype(compute_type))
    with np.errstate(all="ignore"):
        return {out_name: values.astype(out_type.numpy).reshape(out_shape)}


def _sequential(grouped: np.ndarray, combine: str, rng: np.random.Generator, dtype: np.dtype) -> np.ndarray:
    """A left-to-right accumulation over a random permutation of each group, in `dtype`."""
    order = rng.permutation(grouped.shape[-1])
    values = grouped[..., order]
    with np.errstate(all="ignore"):
        if combine == "l1":
            values = np.abs(values)
        elif combine in ("l2", "sum_square"):
            values = values * values
        elif combine == "log_sum_exp":
            shift = np.max(np.where(np.isnan(values), -np.inf, values), axis=-1, keepdims=True)
            shift = np.where(np.isfinite(shift), shift, 0).astype(dtype)
            values = np.exp(values - shift)
        acc = values[..., 0].copy()
        for i in range(1, values.shape[-1]):
            acc = (acc * values[..., i]) if combine == "multiply" else (acc + values[..., i])
        n = dtype.type(grouped.shape[-1])
        if combine == "average":
            acc = acc / n
        elif combine == "l2":
            acc = np.sqrt(acc)
        elif combine == "log_sum":
            acc = np.log(acc)
        elif combine == "log_sum_exp":
            acc = np.log(acc) + shift[..., 0]
    return acc.astype(dtype)


PLUGIN = FamilyPlugin(DECLARATIONS["reduce"], compute, legal_device)
