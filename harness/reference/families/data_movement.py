"""The data movement family: outputs whose elements are input elements, bit for bit.

D3D requires that moving data alters nothing ("any I/O or data movement operation that does not
manipulate the data ... must not alter data at all (so a denorm remains denorm)"), so there is no
precision liberty: NaN payloads, signed zeros and fp32 denormals are copied as they are, and the
spec compares bitwise. Mode `strided_window`: per dimension the copy starts at the
window's offset, or at its last element where the stride is negative, and steps by the stride;
the output's Sizes say how many elements are taken (the validator has checked that they stay
within the window).
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names
from harness.reference.families import FamilyResult
from harness.spec.operator import OperatorSpec


def _strided_window(x: np.ndarray, out_shape: list[int], offsets: list[int], sizes: list[int],
                    strides: list[int]) -> np.ndarray:
    index = []
    for dim, count in enumerate(out_shape):
        start = offsets[dim] + (sizes[dim] - 1 if strides[dim] < 0 else 0)
        index.append(start + strides[dim] * np.arange(count))
    return x[np.ix_(*index)]


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    names = attribute_names(spec, descriptor.attributes)
    var = next(iter(spec.formula.inputs))
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    x = inputs[var]
    offsets, sizes, strides = (list(names[family.params[k]]) for k in ("offsets", "sizes", "strides"))
    result = _strided_window(x, list(out_desc.sizes), offsets, sizes, strides)
    out_type = spec.catalog.dtype(out_desc.data_type)
    return FamilyResult({out_name: np.ascontiguousarray(result).astype(out_type.numpy, copy=False)})
