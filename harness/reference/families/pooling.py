"""Pooling: the window family's combines that take no filter (max, average, lp).

The windows are the convolution's (harness.reference.families.windowing: strided, dilated,
with start and end padding); only what a window gives differs, so a pooling spec names the same
parameters as a convolution's, without the filter, with the window's extent from an array field
(`window_size`). Per output element {n, c, spatial...} the window reads the input elements of
channel c at the positions windowing gives; a position on the padding is no element:

- max: the largest element (NaN ignored, +0 above -0, as the reduce family's max); with
  `indices`, the flat row-major index into the whole input of the first window element (in window
  order) equal to it;
- average: the sum of the elements over a divisor: their count, or the window's element count
  (prod(window_size)) where the spec's `include_padding` expression holds;
- lp: (sum |x|^p)^(1/p) over the elements.

An average whose spec expression reads the family's formula variable `xw` is an epilogue instead
(a quantized average: integers less an `input_zero_point`, summed, then requantized by the
expression): the plug-in gives the exact window sum `xw` and its `divisor`, and the expression is
judged under the element-wise precision model as the window family's dot product is
(harness.reference.families.matmul.dot_epilogue), so its scales, rounding and clamp stay data.

A window that reads no input element (all padding) gives the combine's identity here (max: -inf or
the type's minimum; average and lp: 0) and `empty_window` tells the spec's rules; `ties` counts the
elements equal to a max window's largest. Both are element variables; a spec's `unspecified`
rules are evaluated over each window's elements with them and lifted to the window's output.

Exactness and the precision model. max is exact (comparisons), its fp32 denormal inputs may be
flushed (fp32_input_flush). average and lp are float64 over float32/float16 inputs (one rounding
to the output type); a device may add in any order and round each step, so the spec states a bound
per combine (`bounds`, over N, D, eps, sum_abs, exact, ...), evaluated per output element.
The legal device (for the worst legal backend) returns the exact value moved to the edge of
that bound, so the run proves the bound as written is what the judge accepts.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.matmul import _to_rank, dot_epilogue
from harness.reference.families.reduce import _extreme
from harness.reference.families.result import (F32_SMALLEST_NORMAL, FamilyResult, evaluate_bound, flush_f32_denormals,
                                                toward_the_bound, type_bound_variables)
from harness.reference.families.windowing import Window, window_positions
from harness.spec.catalog import DataType
from harness.spec.context import formula_context
from harness.spec.model import OperatorSpec



@dataclass
class _Windows:
    """One descriptor's windows over one input: what each output element reads."""

    values: np.ndarray   # {N, C, P, K}: the input element each window slot reads (slot 0's element on padding)
    valid: np.ndarray    # {P, K}: whether the slot lands on the input
    flat: np.ndarray     # {N, C, P, K}: the slot's flat row-major index into the whole input
    out_shape: tuple[int, ...]
    kernel: tuple[int, ...]


def _ints(names: dict, field: str | None, rank: int, default: int) -> tuple[int, ...]:
    """An array field's items (`default` per dimension where the spec names no field)."""
    return tuple(int(v) for v in names[field]) if field else (default,) * rank


def _windows(spec: OperatorSpec, descriptor: Descriptor, x: np.ndarray) -> _Windows:
    family = spec.formula.family
    assert family is not None
    names, _ = expression_scope(spec, descriptor)
    p = family.params
    rank = x.ndim - 2
    kernel = _ints(names, p["window_size"], rank, 1)
    window = Window(_ints(names, p["strides"], rank, 1), _ints(names, p.get("dilations"), rank, 1),
                    _ints(names, p["start"], rank, 0))
    out_desc = descriptor.tensors[spec.formula.output]
    assert out_desc is not None
    out_shape = tuple(out_desc.sizes)
    positions, valid = window_positions(window, tuple(x.shape[2:]), out_shape[2:], kernel)
    n, c = x.shape[:2]
    spatial = int(prod(x.shape[2:]))
    values = x.reshape(n, c, spatial)[..., positions]
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * spatial
    flat = base[:, :, None, None] + positions[None, None]
    return _Windows(values, valid, flat, out_shape, kernel)


def _fill(dtype: np.dtype) -> np.ndarray:
    """What a padding slot holds for max: below every element of the type."""
    return np.asarray(-np.inf if dtype.kind == "f" else np.iinfo(dtype).min, dtype=dtype)


def _max(w: _Windows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(largest, index of the first slot equal to it, ties) per window, {N, C, P}."""
    grouped = np.where(w.valid, w.values, _fill(w.values.dtype))
    largest = _extreme(grouped, "max")
    with np.errstate(invalid="ignore"):
        equal = w.valid & (grouped == largest[..., None])
    first = np.argmax(equal, axis=-1)
    index = np.take_along_axis(w.flat, first[..., None], axis=-1)[..., 0]
    return largest, index, np.maximum(equal.sum(axis=-1), 1)


@dataclass
class _Sum:
    """An arithmetic pooling's exact value and the facts its bound reads, per window {N, C, P}."""

    exact: np.ndarray
    variables: dict[str, object]
    nan_in: np.ndarray


def _arithmetic(spec: OperatorSpec, descriptor: Descriptor, w: _Windows, combine: str, out_type: DataType) -> _Sum:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    with np.errstate(invalid="ignore"):
        x64 = w.values.astype(np.float64)
    count = w.valid.sum(axis=-1).astype(np.float64)  # {P}
    divisor = count
    include = family.expression("include_padding")
    if combine == "average" and include is not None and include.evaluate(names, facts):
        divisor = np.full_like(count, float(prod(w.kernel)))
    power = float(names[family.params["p"]]) if combine == "lp" else 1.0
    with np.errstate(all="ignore"):
        terms = np.abs(x64) ** power if combine == "lp" else x64
        total = np.where(w.valid, terms, 0.0).sum(axis=-1)
        exact = total / np.where(divisor > 0, divisor, 1.0) if combine == "average" else total ** (1.0 / power)
        finite = w.valid & np.isfinite(x64)
        magnitude = np.where(finite, np.abs(x64), 0.0)
        finite_terms = np.where(finite & np.isfinite(terms), np.abs(terms), 0.0)
        # HLSL pow(x, p) is exp2(p * log2(x)): its error grows with |log2 x|, per term (zeros are exact)
        weight = np.where(finite & (magnitude > 0), np.fmax(1.0, np.abs(np.log2(np.where(magnitude > 0, magnitude, 1.0)))), 1.0)
    variables: dict[str, object] = {**type_bound_variables(out_type.numpy), "N": count, "K": count, "D": divisor,
                                    "exact": exact, "sum_abs": finite_terms.sum(axis=-1),
                                    "max_abs": magnitude.max(axis=-1), "sum_inputs": magnitude.sum(axis=-1),
                                    "p": np.float64(power), "sum_abs_log2": (finite_terms * weight).sum(axis=-1),
                                    "max_log2": weight.max(axis=-1)}
    return _Sum(exact, variables, np.asarray((w.valid & np.isnan(x64)).any(axis=-1)))


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, var: str, w: _Windows, out_name: str, out_type: DataType,
                 facts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The spec's rules over each window's elements (with the window's facts), lifted to the window's
    output element: any element that lands on the input, or for an empty window any slot."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: w.values}, descriptor.attributes)
    for name, value in facts.items():
        ctx.variables[name] = np.broadcast_to(value[..., None], w.values.shape)
    empty = ~w.valid.any(axis=-1)
    masks = {}
    for rule in spec.unspecified:
        if not rule.concerns(out_name, out_type.name):
            continue
        with np.errstate(all="ignore"):
            hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), w.values.shape)
        lifted = np.where(empty, hit.any(axis=-1), (hit & w.valid).any(axis=-1))
        if lifted.any():
            masks[rule.id] = lifted.reshape(w.out_shape)
    return masks


def _outputs(spec: OperatorSpec, descriptor: Descriptor, w: _Windows, combine: str) -> tuple[dict[str, np.ndarray], dict]:
    """The outputs in their types, and what else the combine knows (max: ties; arithmetic: _Sum)."""
    family = spec.formula.family
    assert family is not None
    out_name = spec.formula.output
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    if combine == "max":
        largest, index, ties = _max(w)
        outputs = {out_name: largest.astype(out_type.numpy).reshape(w.out_shape)}
        indices = family.params.get("indices")
        if indices and descriptor.tensors.get(indices) is not None:
            index_type = spec.catalog.dtype(descriptor.tensors[indices].data_type).numpy  # type: ignore[union-attr]
            outputs[indices] = index.astype(index_type).reshape(w.out_shape)
        return outputs, {"ties": ties}
    summed = _arithmetic(spec, descriptor, w, combine, out_type)
    with np.errstate(all="ignore"):
        return {out_name: summed.exact.astype(out_type.numpy).reshape(w.out_shape)}, {"sum": summed}


# builds one descriptor's window slots over an input (a pooling's own: _windows; col2im's:
# harness.reference.families.patches, whose slots are the transposed window's)
WindowsOf = Callable[[OperatorSpec, Descriptor, np.ndarray], _Windows]


SUM_VARIABLE, DIVISOR_VARIABLE = "xw", "divisor"  # the family's formula variables an average's epilogue reads


def _epilogue(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """An average whose expression reads `xw`: the exact sum of each window's input elements less the
    family's `input_zero_point` (broadcast right-aligned, leading 1s beyond the input's rank dropped;
    absent: the formula's absent value), and its divisor, handed to the expression as the window
    family's dot product is. Integers less integers are exact in float64, and so is their sum; a
    padded position is no element (it reads as the zero point: zero once dequantized)."""
    family = spec.formula.family
    assert family is not None
    p = family.params
    var = next(v for v, t in spec.formula.inputs.items() if t == p["input"])
    with np.errstate(invalid="ignore"):
        x = np.asarray(inputs[var]).astype(np.float64)
        operands: tuple[str, ...] = (p["input"],)
        if "input_zero_point" in p:
            zp_var = next(v for v, t in spec.formula.inputs.items() if t == p["input_zero_point"])
            x = x - _to_rank(np.asarray(inputs[zp_var]).astype(np.float64), x.ndim)
            operands += (p["input_zero_point"],)
    w = _windows(spec, descriptor, x)
    names, facts = expression_scope(spec, descriptor)
    include = family.expression("include_padding")
    count = w.valid.sum(axis=-1).astype(np.float64)  # {P}
    divisor = (np.full_like(count, float(prod(w.kernel))) if include is not None and include.evaluate(names, facts)
               else count)
    with np.errstate(all="ignore"):
        total = np.where(w.valid, w.values, 0.0).sum(axis=-1).reshape(w.out_shape)
        sum_abs = np.where(w.valid, np.abs(w.values), 0.0).sum(axis=-1).reshape(w.out_shape)
    shape = w.out_shape
    element_facts = {DIVISOR_VARIABLE: np.broadcast_to(divisor, w.values.shape[:-1]).reshape(shape),
                     "empty_window": np.broadcast_to(~w.valid.any(axis=-1), w.values.shape[:-1]).astype(np.int64).reshape(shape),
                     "ties": np.ones(shape, dtype=np.int64)}
    return dot_epilogue(spec, descriptor, inputs, SUM_VARIABLE, operands, total, sum_abs, sum_abs,
                        int(prod(w.kernel)), None, element_facts)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
            windows: WindowsOf | None = None) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    combine = family.params["combine"]
    if combine == "average" and SUM_VARIABLE in spec.formula.expression.names:
        return _epilogue(spec, descriptor, inputs)
    build = windows or _windows
    var = next(v for v, t in spec.formula.inputs.items() if t == family.params["input"])
    x = np.asarray(inputs[var])
    w = build(spec, descriptor, x)
    outputs, known = _outputs(spec, descriptor, w, combine)
    result = FamilyResult(outputs)
    out_name = spec.formula.output
    out_type = spec.catalog.dtype(descriptor.tensors[out_name].data_type)  # type: ignore[union-attr]
    empty = np.broadcast_to(~w.valid.any(axis=-1), w.values.shape[:-1]).astype(np.int64)
    ties = known.get("ties", np.ones(w.values.shape[:-1], dtype=np.int64)).astype(np.int64)
    facts = {"ties": ties, "empty_window": empty}
    for name in outputs:
        name_type = spec.catalog.dtype(descriptor.tensors[name].data_type)  # type: ignore[union-attr]
        result.unspecified[name] = _unspecified(spec, descriptor, var, w, name, name_type, facts)
    bound = family.bound(combine)
    if bound is not None and out_type.is_float:
        if "sum" in known:
            summed: _Sum = known["sum"]
            exact, atol = summed.exact, evaluate_bound(bound.atol, summed.variables, summed.exact.shape, summed.nan_in)
            for name in ("sum_abs", "N", "D"):  # shown beside a difference; N and D for the legal device's margin
                value = np.asarray(summed.variables[name], dtype=np.float64)
                result.summaries[name] = np.broadcast_to(value, summed.exact.shape).reshape(w.out_shape)
        else:  # max: its own exact value (a bound of 0 accepts either zero)
            with np.errstate(invalid="ignore"):
                exact = outputs[out_name].astype(np.float64).reshape(w.values.shape[:-1])
            atol = np.zeros_like(exact)
        result.bounds[out_name] = (exact.reshape(w.out_shape), atol.reshape(w.out_shape))
        result.summaries["exact"] = exact.reshape(w.out_shape)
        result.summaries["bound"] = atol.reshape(w.out_shape)
    flushed = flush_f32_denormals(x)
    if flushed is not None:
        alternative, _ = _outputs(spec, descriptor, build(spec, descriptor, flushed), combine)
        result.alternatives = {name: [("fp32_input_flush", value)] for name, value in alternative.items()}
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator, windows: WindowsOf | None = None) -> dict[str, np.ndarray]:
    """One legal device's outputs: max exact; an arithmetic pooling's float result moved from the
    exact value towards the edge of the spec's bound (up or down at random per case), rounded
    towards the exact value so that it stays inside. An infinite or zero bound leaves the exact result.

    The inputs arrive with fp32 denormals flushed (the worst legal backend's own liberty), while the
    judge measures from the exact value over the unflushed inputs: each flushed element moved the sum
    by less than tiny, so the move keeps 2 N tiny / D of the bound in reserve."""
    result = compute(spec, descriptor, inputs, windows)
    out_name = spec.formula.output
    if out_name not in result.bounds or "N" not in result.summaries:
        return result.outputs
    exact, atol = result.bounds[out_name]
    out = result.outputs[out_name]
    count, divisor = result.summaries["N"], result.summaries["D"]
    with np.errstate(all="ignore"):
        reserve = np.where(divisor > 0, 2 * count * F32_SMALLEST_NORMAL / divisor, 0.0)
    sign = 1.0 if rng.random() < 0.5 else -1.0
    moved, usable = toward_the_bound(exact, atol, out.dtype, sign, reserve)
    return {**result.outputs, out_name: np.where(usable, moved, out).astype(out.dtype)}
