"""The one evaluation context of a spec's formula, shared by generation and the reference.

Both evaluate the same expressions (the formula, its constants, `unspecified` and favour rules),
so both must see the same values: attributes as the device holds them (a FLOAT field is a
float32, whatever double the descriptor was written with; other fields as they are), the
catalog's type ranges, and the constants evaluated after the attributes they may name.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from harness.spec.expr import EvalContext
from harness.spec.operator import OperatorSpec


def attribute_values(spec: OperatorSpec, attributes: dict[str, float]) -> dict[str, Any]:
    """Each attribute the formula names, as the device holds it, as a float64 scalar (a struct
    pointer as has_<Field> and its members <Field>_<Member>), except a DML_SCALAR_UNION whose
    typing field names an integer type: that one is an exact int64 (uint64 for UINT64) scalar, as
    the device reads the union's integer member (float64 would merge 64-bit neighbours beyond 2^53)."""
    out: dict[str, Any] = {}
    by_enum = {t.enum: t for t in spec.catalog.data_types.values()}
    for name in spec.formula.attributes:
        field = spec.field(name)
        if field.struct is not None:  # a struct pointer: has_F, and F_M (0 where the pointer is null)
            present = any(f"{name}.{member}" in attributes for member, _ in field.struct)
            out[f"has_{name}"] = np.float64(1.0 if present else 0.0)
            for member, c_type in field.struct:
                value = attributes.get(f"{name}.{member}", 0.0) if present else 0.0
                out[f"{name}_{member}"] = np.float64(np.float32(value)) if c_type == "FLOAT" else np.float64(value)
            continue
        value = attributes.get(name, spec.field(name).default)
        value = 0.0 if value is None else value
        union_type = by_enum.get(int(attributes.get(field.typed_by, -1))) if field.is_scalar_union else None
        whole = isinstance(value, (int, np.integer)) or (np.isfinite(float(value)) and float(value) == int(value))
        if union_type is not None and not union_type.is_float and whole:
            out[name] = np.uint64(int(value)) if union_type.name == "UINT64" else np.int64(int(value))
            continue
        out[name] = np.float64(np.float32(value)) if spec.field(name).c_type == "FLOAT" else np.float64(value)
    return out


def formula_context(spec: OperatorSpec, tensor_types: dict[str, str], variables: dict[str, Any],
                    attributes: dict[str, float], output_numpy_dtype: Any = None) -> EvalContext:
    """The context in which `spec`'s expressions are evaluated: `variables` (the inputs, bound by
    the caller), the attributes, then the constants."""
    ctx = EvalContext(variables=dict(variables), tensor_types=dict(tensor_types), type_ranges=spec.catalog.type_ranges())
    if output_numpy_dtype is not None:
        ctx.output_numpy_dtype = output_numpy_dtype
    ctx.variables.update(attribute_values(spec, attributes))
    for f in spec.attribute_fields:  # an enum attribute's members, by name
        ctx.variables.update({member: np.int64(value) for member, value in (f.enum or {}).items()})
    for name, const in spec.formula.constants.items():
        ctx.variables[name] = np.asarray(const.evaluate(ctx))
    return ctx
