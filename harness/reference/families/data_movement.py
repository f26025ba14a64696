"""The data movement family: outputs whose elements are input elements, bit for bit.

D3D requires that moving data alters nothing ("any I/O or data movement operation that does not
manipulate the data ... must not alter data at all (so a denorm remains denorm)"), so there is no
precision liberty: NaN payloads, signed zeros and fp32 denormals are copied as they are, and the
spec compares bitwise. Mode `strided_window`: per dimension the copy starts at the
window's offset, or at its last element where the stride is negative, and steps by the stride;
the output's Sizes say how many elements are taken (the validator has checked that they stay
within the window). Mode `pad`: the input placed after `start` elements per dimension; around
it, the padding rule whose spec expression holds (constant, edge, reflection, symmetric), applied
per dimension (the mirrors fold periodically over earlier padding, as the page's examples show).
Mode `join`: the present items of a tensor array, in order, concatenated along `axis` (the
validator has checked that their other sizes agree and the output's Sizes are their sum there).
Mode `split`: the inverse: the input cut along `axis` into the present items of an output tensor
array, each taking as many positions as its Sizes say there.
The formula's input variable (`x`) is bound per output element to the value copied there (an
input element, or the padding value), which is what expectation files' `when` reads.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names, expression_scope, scalar_union
from harness.reference.families.result import FamilyPlugin, FamilyResult
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec


def _strided_window(x: np.ndarray, out_shape: list[int], offsets: list[int], sizes: list[int],
                    strides: list[int]) -> np.ndarray:
    index = []
    for dim, count in enumerate(out_shape):
        start = offsets[dim] + (sizes[dim] - 1 if strides[dim] < 0 else 0)
        index.append(start + strides[dim] * np.arange(count))
    return x[np.ix_(*index)]


def _pad_index(count: int, start: int, n: int, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Per output position along one dimension: the input index it copies, and whether it is a
    padding position (for the constant rule, which writes the value there instead)."""
    p = np.arange(count) - start
    inside = (p >= 0) & (p < n)
    if rule == "edge" or n == 1:  # one element: every mirror and the edge coincide
        source = np.clip(p, 0, n - 1)
    elif rule == "reflection":  # ... 2 1 | 0 1 2 | 1 0 ...: period 2(n - 1)
        r = np.mod(p, 2 * (n - 1))
        source = np.where(r >= n, 2 * (n - 1) - r, r)
    elif rule == "symmetric":  # ... 1 0 | 0 1 2 | 2 1 ...: period 2n
        r = np.mod(p, 2 * n)
        source = np.where(r >= n, 2 * n - 1 - r, r)
    else:  # constant: any in-range index; the padding positions are overwritten
        source = np.clip(p, 0, n - 1)
    return source, ~inside


def _pad(spec: OperatorSpec, descriptor: Descriptor, x: np.ndarray, out_shape: list[int], out_numpy) -> np.ndarray:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    rules = [r for r in ("constant", "edge", "reflection", "symmetric") if family.expression(r).evaluate(names, facts)]  # type: ignore[union-attr]
    rule = rules[0] if rules else "constant"  # no rule in force: the spec's unspecified rules say so
    start = list(names[family.params["start"]])
    index, padding = [], np.zeros(out_shape, dtype=bool)
    for dim, count in enumerate(out_shape):
        source, pad = _pad_index(count, start[dim], x.shape[dim], rule)
        index.append(source)
        shape = [1] * len(out_shape)
        shape[dim] = count
        padding |= pad.reshape(shape)
    result = x[np.ix_(*index)].astype(out_numpy, copy=True)
    if rule == "constant":
        result[padding] = scalar_union(descriptor.attributes.get(family.params["value"], 0), out_numpy)
    return result


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, var: str, result: np.ndarray) -> dict[str, np.ndarray]:
    """The spec's unspecified rules over the output's values (each output element is an input
    element or a constant): a rule that reads only attributes covers the whole output."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: result}, descriptor.attributes)
    masks = {}
    for rule in spec.unspecified:
        hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), result.shape)
        if hit.any():
            masks[rule.id] = hit
    return masks


def _join(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], axis: int) -> np.ndarray:
    """The present items of the family's tensor array, concatenated along `axis` (the plug-in's
    inputs are keyed by formula variable: each item's variable reads it)."""
    family = spec.formula.family
    assert family is not None
    by_tensor = {tensor: var for var, tensor in spec.formula.inputs.items()}
    items = [inputs[by_tensor[name]] for name in spec.tensor_arrays[family.params["items"]]
             if descriptor.tensors.get(name) is not None]
    return np.concatenate(items, axis=axis)


def _split(spec: OperatorSpec, descriptor: Descriptor, x: np.ndarray, axis: int) -> dict[str, np.ndarray]:
    """The input cut along `axis` into the present items of the family's output tensor array."""
    family = spec.formula.family
    assert family is not None
    out, start = {}, 0
    for name in spec.tensor_arrays[family.params["items"]]:
        desc = descriptor.tensors.get(name)
        if desc is None:
            break
        count = desc.sizes[axis]
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + count)
        out[name] = np.ascontiguousarray(x[tuple(index)]).astype(spec.catalog.dtype(desc.data_type).numpy, copy=False)
        start += count
    return out


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    names = attribute_names(spec, descriptor.attributes)
    var = next(iter(spec.formula.inputs))
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    x = inputs[var]
    out_type = spec.catalog.dtype(out_desc.data_type)
    if family.params["mode"] == "split":  # several outputs: each item's values (the formula's variable per item)
        parts = _split(spec, descriptor, x, int(names[family.params["axis"]]))
        split_result = FamilyResult(parts)
        for name, part in parts.items():
            split_result.unspecified[name] = _unspecified(spec, descriptor, var, part)
        return split_result  # no per-element variable: each item has its own shape (the values are the expected ones)
    if family.params["mode"] == "pad":
        result = _pad(spec, descriptor, x, list(out_desc.sizes), out_type.numpy)
    elif family.params["mode"] == "join":
        result = _join(spec, descriptor, inputs, int(names[family.params["axis"]]))
    else:
        offsets, sizes, strides = (list(names[family.params[k]]) for k in ("offsets", "sizes", "strides"))
        result = _strided_window(x, list(out_desc.sizes), offsets, sizes, strides)
    result = np.ascontiguousarray(result).astype(out_type.numpy, copy=False)
    family_result = FamilyResult({out_name: result})
    # the formula's variable per output element (the input element copied there, or the padding
    # value): what failure reports show beside a difference and expectation files' `when` reads
    family_result.summaries[var] = result
    family_result.unspecified[out_name] = _unspecified(spec, descriptor, var, result)
    return family_result


PLUGIN = FamilyPlugin(DECLARATIONS["data_movement"], compute)
