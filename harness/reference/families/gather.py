"""The gather family: each output element is the input element that an index selects along one
axis, bit for bit (a data movement: D3D forbids altering moved data, so NaN payloads, signed
zeros and fp32 denormals are copied as they are and the spec compares bitwise).

The spec names the parameters (harness.spec.families): the `input` and `indices` tensors, the
`axis` field and the `index_dimensions` field, the number of trailing dims of `indices` that
index (its leading dims are 1, which the spec's shape rules require). The result before the
output's Sizes is input.take(indices, axis): the input's sizes before the axis, the index sizes,
the input's sizes after it; the output's Sizes (the validator has checked them) hold the same
elements in the same order, right-aligned (only leading 1s cropped or added), so it is reshaped.

A negative index counts from the axis' end. Which indices are valid is the spec's to say, not the
plug-in's: it gives the spec's `unspecified` rules, per output element, the index that selected
it (`index`) and the axis' size (`axis_size`) (its element variables), and reads an index outside
[-axis_size, axis_size) as 0, so that the reference still has a value there for the rule to mark.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names
from harness.reference.families.result import FamilyPlugin, FamilyResult
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

_INT64_MAX = np.iinfo(np.int64).max


def _variable(spec: OperatorSpec, tensor: str) -> str:
    """The formula input variable that reads `tensor` (the plug-in's inputs are keyed by variable)."""
    return next(v for v, t in spec.formula.inputs.items() if t == tensor)


def _indices_as_int64(indices: np.ndarray) -> np.ndarray:
    """The index values as int64: an unsigned value beyond INT64's range is saturated (it is out of
    range of any axis either way)."""
    if indices.dtype == np.uint64:
        return np.minimum(indices, np.uint64(_INT64_MAX)).astype(np.int64)
    return indices.astype(np.int64)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    names = attribute_names(spec, descriptor.attributes)
    x = np.asarray(inputs[_variable(spec, family.params["input"])])
    indices = _indices_as_int64(np.asarray(inputs[_variable(spec, family.params["indices"])]))
    axis, index_dims = int(names[family.params["axis"]]), int(names[family.params["index_dimensions"]])
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    out_shape = tuple(out_desc.sizes)
    axis_size = x.shape[axis]
    index_shape = indices.shape[indices.ndim - index_dims:] if index_dims else ()
    index = indices.reshape(index_shape)  # the leading dims are 1 (the spec's shape rule)
    valid = (index >= -axis_size) & (index < axis_size)
    picked = np.take(x, np.where(valid, np.where(index < 0, index + axis_size, index), 0), axis=axis)
    result = np.ascontiguousarray(picked).reshape(out_shape).astype(spec.catalog.dtype(out_desc.data_type).numpy, copy=False)
    # the index per output element: the index dims sit between the input's dims before and after the axis
    spread = index.reshape((1,) * axis + index_shape + (1,) * (x.ndim - axis - 1))
    index_per_element = np.broadcast_to(spread, picked.shape).reshape(out_shape)
    family_result = FamilyResult({out_name: result})
    var = _variable(spec, family.params["input"])
    family_result.summaries[var] = result  # the value copied there: what expectation files' `when` reads
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: result, "index": index_per_element,
                                        "axis_size": np.int64(axis_size)}, descriptor.attributes)
    masks = {}
    for rule in spec.unspecified:
        if not rule.concerns(out_name, out_desc.data_type):
            continue
        hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), out_shape)
        if hit.any():
            masks[rule.id] = hit
    family_result.unspecified[out_name] = masks
    return family_result


PLUGIN = FamilyPlugin(DECLARATIONS["gather"], compute)
