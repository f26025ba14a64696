"""What shape and constraint expressions read of a descriptor (harness.spec.shape_expr).

One definition for the validator, generation and the family references: each attribute field
by name (scalars as numbers, whole numbers as ints, arrays as lists of ints, a count field as its
array's length), every enum member, and each tensor field's Sizes (None: absent).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from harness.model.descriptor import Descriptor
from harness.spec.catalog import Catalog
from harness.spec.model import FEATURE_LEVEL_NAME, OperatorSpec, enum_members, level_constant, level_names
from harness.spec.shape_expr import TensorFacts


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def attribute_names(spec: OperatorSpec, attributes: dict[str, Any]) -> dict[str, Any]:
    """Attribute fields and enum members by name, as shape expressions see them."""
    names: dict[str, Any] = dict(enum_members(list(spec.fields)))
    defaults = spec.default_attributes()
    for f in spec.attribute_fields:
        if f.struct is not None:
            continue
        if f.is_array or f.is_activation_array:  # an activation array: its items' operator types
            names[f.name] = [_plain(v) if f.element == "FLOAT" else int(v) for v in attributes.get(f.name, [])]
        elif f.is_count:
            if (f.count_of or ("",))[0] in spec.tensor_arrays:
                continue  # the number of items present: tensor facts, not an attribute (shape_names leaves it out)
            names[f.name] = len(attributes.get((f.count_of or ("",))[0], []))
        else:
            names[f.name] = _plain(attributes.get(f.name, defaults.get(f.name, 0.0)))
    return names


def expression_scope(spec: OperatorSpec, descriptor: Descriptor, attributes: dict[str, Any] | None = None
                     ) -> tuple[dict[str, Any], dict[str, TensorFacts]]:
    """What a shape or constraint expression sees of a descriptor: attributes and enum members by
    name (attribute_names; `attributes` overrides the descriptor's), each tensor's facts
    (tensor_facts), and each tensor array by its name as the list of its present items' facts, so
    a rule can loop over the items: `sum(t.Sizes[Axis] for t in InputTensors)`."""
    names = attribute_names(spec, descriptor.attributes if attributes is None else attributes)
    facts = tensor_facts(descriptor, spec.catalog)
    for array, items in spec.tensor_arrays.items():
        names[array] = [facts[item] for item in items if item in facts and facts[item].sizes is not None]
    return names, facts


@lru_cache(maxsize=None)
def level_guarded(spec: OperatorSpec) -> frozenset[str]:
    """The rules (type, expression or shape) whose `when` reads the feature level: their guards
    need level_facts (POW's exponent type tied below FL 3.0)."""
    levels = level_names(spec.catalog)
    return frozenset(c.rule for c in spec.constraints if c.guard is not None and c.guard.names() & levels)


def level_facts(catalog: Catalog, level: str | None) -> dict[str, int]:
    """The case's feature level as data-range expressions read it (`FeatureLevel`, its
    DML_FEATURE_LEVEL value) and every level of the catalog as `FL_X_Y`, so that a range can say
    "from FL 3.0" (`FeatureLevel >= FL_3_0`). No level: the newest (what a device reports)."""
    names = {level_constant(fl.name): fl.enum for fl in catalog.levels}
    names[FEATURE_LEVEL_NAME] = catalog.level(level).enum if level is not None else catalog.newest_level.enum
    return names


def tensor_facts(descriptor: Descriptor, catalog: Catalog | None = None) -> dict[str, TensorFacts]:
    """Each tensor's Sizes, DimensionCount, Strides (packed where the descriptor gives none) and
    (given the catalog) DataType as its enum value."""
    def data_type(name: str) -> int | None:
        return catalog.data_types[name].enum if catalog is not None and name in catalog.data_types else None
    return {name: TensorFacts(tuple(t.sizes), t.dim_count, data_type(t.data_type),
                              tuple(t.strides) if t.strides is not None else None) if t is not None else TensorFacts(None)
            for name, t in descriptor.tensors.items()}


def constant_of_field(spec: Any, field: str, value: Any, numpy_type: Any) -> np.ndarray:
    """A constant attribute (a pad value) as the 0-d array of the tensor type it fills. A FLOAT
    field holds a float32, whatever the case file's number (1e18 is 999999984306749440 there), and
    that float32 is what the operator converts (toward zero to an integer type, to nearest to
    FLOAT16, as NumPy converts); a DML_SCALAR_UNION holds the tensor's own type (scalar_union)."""
    if spec.field(field).c_type == "FLOAT":
        with np.errstate(all="ignore"):
            value = np.float32(value)
    return scalar_union(value, numpy_type)


def scalar_union(value: Any, numpy_type: Any) -> np.ndarray:
    """A DML_SCALAR_UNION attribute (a Python number, as case files hold it) as the 0-d array of
    the tensor type it fills: one conversion for the reference and the backends that take the
    value as a tensor (ONNX Pad's constant_value), so that they agree on it bit for bit. An
    integer stays an exact integer (INT64 and UINT64 values beyond 2^53 are not read as floats);
    NaN and out-of-range floats convert as NumPy converts them (no warning: an invalid case
    may hold such a value)."""
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(numpy_type)
