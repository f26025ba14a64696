"""Building cases from logical arrays, and the spec's worked examples as cases."""
from __future__ import annotations

from typing import Any

import numpy as np

from harness.model.descriptor import Case, Descriptor, TensorDesc
from harness.model.layout import pack_buffer, read_tensor
from harness.spec.model import Example, OperatorSpec


def case_from_arrays(spec: OperatorSpec, level: str, types: dict[str, str], values: dict[str, np.ndarray],
                     sizes: list[int] | None = None, attributes: dict[str, Any] | None = None,
                     layouts: dict[str, TensorDesc] | None = None, origin: str = "manual",
                     aliases: dict[str, str] | None = None) -> Case:
    """A case whose tensors are packed (or given by `layouts`) and whose inputs hold `values`.

    Tensors missing from `types` are absent (optional inputs). Values are cast to the tensor type.
    """
    catalog = spec.catalog
    if sizes is None:  # from the first input (a case without inputs, such as an empty tensor array, gives every layout)
        first = next(iter(values.values()), np.zeros(1))
        sizes = list(np.shape(first)) or [1]
    tensors: dict[str, TensorDesc | None] = {}
    for f in spec.tensor_fields:
        if layouts and f.name in layouts:
            tensors[f.name] = layouts[f.name]
        elif f.name in types:
            tensors[f.name] = TensorDesc(types[f.name], list(sizes))
        else:
            tensors[f.name] = None
    inputs = {}
    for name, vals in values.items():
        desc = tensors[name]
        assert desc is not None
        dtype = catalog.dtype(desc.data_type)
        arr = np.asarray(vals)
        if arr.dtype.kind in "f" and dtype.kind != "float":
            arr = arr.astype(np.int64)
        arr = arr.astype(dtype.numpy)
        logical = arr.reshape(desc.sizes) if arr.size == int(np.prod(desc.sizes)) else np.broadcast_to(arr, desc.sizes)
        inputs[name] = pack_buffer(logical, desc, dtype)
    attrs = dict(spec.default_attributes())
    attrs.update(attributes or {})
    return Case(Descriptor(spec.name, tensors, attrs, dict(aliases or {})), level, inputs, origin=origin)


def example_case(spec: OperatorSpec, example: Example) -> Case:
    """The example as a case at the newest level where all its types are in the table."""
    catalog = spec.catalog
    level = catalog.newest_level.name
    if example.tensor_sizes is not None:  # shapes differ per tensor (index-space operators)
        layouts = {name: TensorDesc(t, list(example.tensor_sizes[name])) for name, t in example.types.items()}
        values = {name: np.asarray(vals, dtype=np.float64).reshape(example.tensor_sizes[name]) for name, vals in example.inputs.items()}
        return case_from_arrays(spec, level, example.types, values, attributes=example.attributes, layouts=layouts,
                                origin=f"example:{example.name}")
    n = len(next(iter(example.inputs.values())))
    sizes = list(example.sizes) if example.sizes else [n]
    values = {name: np.asarray(vals, dtype=np.float64) for name, vals in example.inputs.items()}
    return case_from_arrays(spec, level, example.types, {k: v.reshape(sizes) for k, v in values.items()},
                            sizes=sizes, attributes=example.attributes, origin=f"example:{example.name}")


def output_values(spec: OperatorSpec, case: Case, buffers: dict[str, bytes]) -> dict[str, np.ndarray]:
    """Logical output arrays read through the output descriptors (of the present outputs: an
    output tensor array holds as many as its count)."""
    catalog = spec.catalog
    out = {}
    for f in spec.output_fields:
        desc = case.descriptor.tensors[f.name]
        if desc is None:
            continue
        out[f.name] = read_tensor(buffers[f.name], desc, catalog.dtype(desc.data_type))
    return out
