"""The one evaluation context of a spec's formula, shared by generation and the reference.

Both evaluate the same expressions (the formula, its constants, `unspecified` and favour rules),
so both must see the same values: attributes as the device holds them (a FLOAT field is a
float32, whatever double the descriptor was written with; other fields as they are), the
catalog's type ranges, and the constants evaluated after the attributes they may name.
"""
from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import Any

import numpy as np

from harness.spec.expr import ELEMENT_NAMES, LINEAR_INDEX, EvalContext
from harness.spec.model import OperatorSpec


def attribute_values(spec: OperatorSpec, attributes: dict[str, float]) -> dict[str, Any]:
    """Each attribute the formula names, as the device holds it, as a float64 scalar (a struct
    pointer as has_<Field> and its members <Field>_<Member>), except a DML_SCALAR_UNION whose
    typing field names an integer type: that one is an exact int64 (uint64 for UINT64) scalar, as
    the device reads the union's integer member (float64 would merge 64-bit neighbours beyond 2^53)."""
    out: dict[str, Any] = {}
    for name in spec.formula.attributes:
        field = spec.field(name)
        if field.is_array:  # read through formula.items, one item per element (bind_items)
            continue
        if field.struct is not None:  # a struct pointer: has_F, and F_M (0 where the pointer is null)
            present = any(f"{name}.{member}" in attributes for member, _ in field.struct)
            out[f"has_{name}"] = np.float64(1.0 if present else 0.0)
            for member, c_type in field.struct:
                value = attributes.get(f"{name}.{member}", 0.0) if present else 0.0
                out[f"{name}_{member}"] = np.float64(np.float32(value)) if c_type == "FLOAT" else np.float64(value)
            continue
        given = attributes.get(name, spec.field(name).default)
        value = 0.0 if given is None else given
        union_type = None
        if field.is_scalar_union:  # the DML_TENSOR_DATA_TYPE its typing field holds
            assert field.typed_by is not None  # what is_scalar_union means
            enum = int(attributes.get(field.typed_by, -1))
            union_type = next((t for t in spec.catalog.data_types.values() if t.enum == enum), None)
        whole = isinstance(value, (int, np.integer)) or (np.isfinite(float(value)) and float(value) == int(value))
        if union_type is not None and not union_type.is_float and whole:
            out[name] = np.uint64(int(value)) if union_type.name == "UINT64" else np.int64(int(value))
            continue
        out[name] = np.float64(np.float32(value)) if spec.field(name).c_type == "FLOAT" else np.float64(value)
    return out


@lru_cache(maxsize=None)  # per spec object (identity-hashed): evaluated for every case
def element_names_read(spec: OperatorSpec) -> frozenset[str]:
    """The element-coordinate names any formula of `spec` reads (only those are bound: linear_index
    costs an int64 array of the output's size)."""
    if spec.formula.family is not None:
        return frozenset()
    formulas = [*spec.formula.outputs.values(), *(r.when for r in spec.unspecified), *(f.expression for f in spec.favour)]
    formulas += [f for c in spec.comparison.values() for f in (c.atol, c.ties) if f is not None]
    return frozenset(n for f in formulas for n in f.names if n in ELEMENT_NAMES) | {index for _, index in spec.formula.items.values()}


def item_data_type(spec: OperatorSpec, var: str) -> str | None:
    """What the precision model reads a `formula.items` variable as: a FLOAT item is a FLOAT32 state
    (it may be flushed, as a FLOAT attribute); an integer item is exact."""
    return "FLOAT32" if spec.field(spec.formula.items[var][0]).element == "FLOAT" else None


def bind_items(spec: OperatorSpec, attributes: dict[str, Any], coordinates: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each `formula.items` variable: its array attribute's item at the element's coordinate, as the
    device holds it (a FLOAT item a float32). The spec's constraints keep the coordinate within the
    array on a valid descriptor (ChannelCount matches the channel size); beyond it, the last item
    (an invalid descriptor has no reference)."""
    out: dict[str, np.ndarray] = {}
    for var, (array, index) in spec.formula.items.items():
        values = np.asarray(attributes.get(array, []), dtype=np.float64)
        if spec.field(array).element == "FLOAT":
            values = values.astype(np.float32).astype(np.float64)
        if values.size == 0:
            values = np.zeros(1)
        out[var] = np.take(values, coordinates[index], mode="clip")
    return out


def element_coordinates(sizes: Any, names: Any = ELEMENT_NAMES, index_dtype: Any = np.int64) -> dict[str, np.ndarray]:
    """`names` (of ELEMENT_NAMES) as exact int64 arrays of shape `sizes`: each coordinate a read-only
    broadcast view (no copy), linear_index np.arange over the elements in `index_dtype` (uint64 for a
    UINT64 output, so that `ValueStart + linear_index * ValueDelta` stays an exact uint64, modulo 2^64,
    where int64 next to uint64 would promote to float64)."""
    shape = tuple(int(s) for s in sizes)
    rank = len(shape)
    out: dict[str, np.ndarray] = {}
    for name in names:
        if name == LINEAR_INDEX:
            out[name] = np.arange(prod(shape), dtype=index_dtype).reshape(shape)
            continue
        axis = rank - 1 - int(name[len("coord"):])
        if axis < 0:
            out[name] = np.broadcast_to(np.int64(0), shape)
            continue
        along = np.arange(shape[axis], dtype=np.int64).reshape([shape[axis] if d == axis else 1 for d in range(rank)])
        out[name] = np.broadcast_to(along, shape)
    return out


def formula_context(spec: OperatorSpec, tensor_types: dict[str, str], variables: dict[str, Any],
                    attributes: dict[str, float], output_numpy_dtype: Any = None,
                    output_sizes: Any = None) -> EvalContext:
    """The context in which `spec`'s expressions are evaluated: `variables` (the inputs, bound by
    the caller), the element coordinates the spec reads (when `output_sizes` is given), the
    attributes, then the constants."""
    ctx = EvalContext(variables=dict(variables), tensor_types=dict(tensor_types), type_ranges=spec.catalog.type_ranges())
    if output_sizes is not None:
        uint64_out = tensor_types.get(spec.formula.output) == "UINT64"
        coordinates = element_coordinates(output_sizes, element_names_read(spec), np.uint64 if uint64_out else np.int64)
        ctx.variables.update(coordinates)
        ctx.variables.update(bind_items(spec, attributes, coordinates))
    if output_numpy_dtype is not None:
        ctx.output_numpy_dtype = output_numpy_dtype
    ctx.variables.update(attribute_values(spec, attributes))
    for f in spec.attribute_fields:  # an enum attribute's members, by name
        ctx.variables.update({member: np.int64(value) for member, value in (f.enum or {}).items()})
    for name, const in spec.formula.constants.items():
        ctx.variables[name] = np.asarray(const.evaluate(ctx))
    return ctx
