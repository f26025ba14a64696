"""The sort family: selections ordered by value along one axis (top-k so far).

Mode `top_k`: along `axis`, each sequence's K largest elements in decreasing order (or smallest
in increasing order), equal values by ascending index whatever the direction (the page's
guarantee), with their indices within the sequence. Values are ranked, not negated, so unsigned
and 64-bit integers order exactly and -0 equals +0.

Precision model: ordering compares, and D3D may flush fp32 denormal inputs for a comparison
while the selected value itself may or may not be flushed (min/max: "flushed for the comparison;
the result may or may not be flushed"): the legal alternatives are the order over the flushed
input, with the flushed or the original values. A sequence holding a NaN is what the spec's
`unspecified` rules name, lifted to every output element of that sequence.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.result import FamilyPlugin, FamilyResult, flush_f32_denormals
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec



def _top_k(x: np.ndarray, axis: int, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """(values, indices) of the top k along `axis`; ties by ascending index."""
    moved = np.moveaxis(x, axis, -1)
    _, rank = np.unique(moved, return_inverse=True)
    rank = rank.reshape(moved.shape).astype(np.int64)
    order = np.argsort(-rank if largest else rank, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(moved, order, axis=-1)
    return np.moveaxis(values, -1, axis), np.moveaxis(order, -1, axis)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    axis, k = int(names[family.params["axis"]]), int(names[family.params["k"]])
    largest_expr = family.expression("largest")
    largest = bool(largest_expr.evaluate(names, facts)) if largest_expr is not None else True
    var = next(iter(spec.formula.inputs))
    x = inputs[var]
    values_name, indices_name = family.params["values"], family.params["indices"]
    value_type = spec.catalog.dtype(descriptor.tensors[values_name].data_type).numpy  # type: ignore[union-attr]
    index_type = spec.catalog.dtype(descriptor.tensors[indices_name].data_type).numpy  # type: ignore[union-attr]

    values, indices = _top_k(x, axis, k, largest)
    result = FamilyResult({values_name: values.astype(value_type), indices_name: indices.astype(index_type)})

    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: x}, descriptor.attributes)
    masks: dict[str, np.ndarray] = {}
    for rule in spec.unspecified:
        hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), x.shape)
        if hit.any():  # every selected element of a sequence holding a hit
            lifted = np.broadcast_to(hit.any(axis=axis, keepdims=True), values.shape)
            masks[rule.id] = np.ascontiguousarray(lifted)
    result.unspecified = {values_name: dict(masks), indices_name: dict(masks)}

    flushed = flush_f32_denormals(x)
    if flushed is not None:
        flushed_values, flushed_indices = _top_k(flushed, axis, k, largest)
        original_values = np.moveaxis(np.take_along_axis(np.moveaxis(x, axis, -1), np.moveaxis(flushed_indices, axis, -1), axis=-1), -1, axis)
        result.alternatives = {
            values_name: [("fp32_input_flush", flushed_values.astype(value_type)), ("fp32_input_flush", original_values.astype(value_type))],
            indices_name: [("fp32_input_flush", flushed_indices.astype(index_type))]}
    return result


PLUGIN = FamilyPlugin(DECLARATIONS["sort"], compute)
