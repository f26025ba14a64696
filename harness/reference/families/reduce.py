"""The reduce family: each output element combines the input elements that differ from it only
along the reduced axes (the index reductions argmax and argmin so far).

The reduced axes come from the spec's `axes` array attribute; the output keeps the input's rank
with size 1 along them (the spec's shape rule says so; the validator has checked it). Index
results count within the reduced axes in row-major order over them, ascending by axis (the
page's only multi-axis example, argmax over {0, 1} of a 3x3 tensor = 7).

Precision model: comparisons are exact in every type, but a D3D device may flush fp32 denormal
inputs to a zero of the same sign (fp32_input_flush); the result over the flushed input is the
legal alternative. A group holding a NaN is what the spec's `unspecified` rules name (lifted:
any element of the group meeting the rule makes the output element unspecified).
"""
from __future__ import annotations

import warnings

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names, tensor_facts
from harness.reference.families import FamilyResult, flush_f32_denormals
from harness.spec.context import formula_context
from harness.spec.operator import OperatorSpec



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
    """The largest (argmax) or smallest (argmin) value of each group, NaN ignored: shown beside a
    differing index in failure reports."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN group gives NaN
        if grouped.dtype.kind == "f":
            return (np.nanmax if combine == "argmax" else np.nanmin)(grouped, axis=-1)
        return (np.max if combine == "argmax" else np.min)(grouped, axis=-1)


def _lift(mask: np.ndarray, axes: list[int], out_shape: list[int]) -> np.ndarray:
    grouped, _ = _groups(mask, axes)
    return grouped.any(axis=-1).reshape(out_shape)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    names, facts = attribute_names(spec, descriptor.attributes), tensor_facts(descriptor, spec.catalog)
    axes = list(names[family.params["axes"]])
    last_expr = family.expression("last_on_ties")
    last = bool(last_expr.evaluate(names, facts)) if last_expr is not None else False
    combine = family.params["combine"]
    var = next(iter(spec.formula.inputs))
    x = inputs[var]
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    out_type = spec.catalog.dtype(out_desc.data_type)

    grouped, out_shape = _groups(x, axes)
    result = _index(grouped, combine, last).reshape(out_shape).astype(out_type.numpy)
    family_result = FamilyResult({out_name: result})
    family_result.summaries[f"group_{combine[3:]}"] = _extreme(grouped, combine).reshape(out_shape)

    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: x}, descriptor.attributes)
    masks = {}
    for rule in spec.unspecified:
        if rule.applies_to is not None and out_type.name not in rule.applies_to:
            continue
        hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), x.shape)
        if hit.any():
            masks[rule.id] = _lift(hit, axes, out_shape)
    family_result.unspecified[out_name] = masks

    flushed = flush_f32_denormals(x)
    if flushed is not None:
        alt = _index(_groups(flushed, axes)[0], combine, last).reshape(out_shape).astype(out_type.numpy)
        family_result.alternatives[out_name] = [("fp32_input_flush", alt)]
    return family_result
