"""Index-space families: what a spec's `formula.family` may say, checked when the spec is loaded.

An element-wise operator is its formula. An operator with index-space semantics (a reduction, a
matrix product, a window, a gather) names the family plug-in that computes it
(`harness/reference/families/`) and the family's parameters; the formula's expression stays the
element-wise part (the value each input element contributes: `x` for an index reduction). This module holds
the declarations only (the spec stage may not import the reference stage): each family's
parameters, their kinds, and which are required.

Parameter kinds: `choice` (one of the listed words), `array` (the name of an array attribute
field), `scalar` (the name of a UINT or INT attribute field), `output` (the name of an output
tensor field: families with several outputs name each), `expression` (a shape expression over
attributes and enum members, evaluated per descriptor: harness.spec.shape_expr).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.spec.expr import FormulaError
from harness.spec.shape_expr import ShapeExpr, parse_shape_expr


@dataclass(frozen=True)
class Param:
    kind: str  # choice | array | scalar | output | union | expression
    required: bool = True
    choices: tuple[str, ...] = ()
    meaning: str = ""
    modes: tuple[str, ...] = ()  # only for these values of the family's `mode` (required there, refused elsewhere)


FAMILIES: dict[str, dict[str, Param]] = {
    "reduce": {
        "combine": Param("choice", choices=("argmax", "argmin"),
                         meaning="how the elements of one reduced group become one output element"),
        "axes": Param("array", meaning="the array attribute listing the reduced axes"),
        "last_on_ties": Param("expression", required=False,
                              meaning="true: an index reduction returns the last of equal candidates (default: the first)"),
    },
    "sort": {
        "mode": Param("choice", choices=("top_k",),
                      meaning="top_k: the K largest (or smallest) elements of each sequence along an axis, sorted, "
                              "equal values by ascending index, with their indices"),
        "axis": Param("scalar", meaning="the UINT field naming the axis"),
        "k": Param("scalar", meaning="the UINT field holding K"),
        "largest": Param("expression", meaning="true: the largest K in decreasing order; false: the smallest in increasing order"),
        "values": Param("output", meaning="the output tensor of the selected values"),
        "indices": Param("output", meaning="the output tensor of their indices within the sequence"),
    },
    "data_movement": {
        "mode": Param("choice", choices=("strided_window", "pad"),
                      meaning="strided_window: OutputTensor[o] = InputTensor[start + strides * o], start at the window's "
                              "beginning, or its end where the stride is negative; pad: the input placed after `start` "
                              "elements per dimension, the elements around it from the padding rule in force"),
        "offsets": Param("array", meaning="the window's first element per dimension", modes=("strided_window",)),
        "sizes": Param("array", meaning="the window's extent per dimension", modes=("strided_window",)),
        "strides": Param("array", meaning="the step per dimension (INT: its sign picks the end the copy starts from)",
                         modes=("strided_window",)),
        "start": Param("array", meaning="padding elements before the input, per dimension", modes=("pad",)),
        "constant": Param("expression", meaning="true: padding elements are `value`", modes=("pad",)),
        "value": Param("union", meaning="the DML_SCALAR_UNION field of the constant", modes=("pad",)),
        "edge": Param("expression", meaning="true: padding repeats the nearest edge element", modes=("pad",)),
        "reflection": Param("expression", meaning="true: mirrored about the edge elements, which are not repeated "
                                                  "(period 2(n - 1), folding over earlier padding)", modes=("pad",)),
        "symmetric": Param("expression", meaning="true: mirrored including the edge elements (period 2n)", modes=("pad",)),
    },
}


@dataclass(frozen=True)
class FamilySpec:
    """A spec's `formula.family`: the plug-in's name and its checked parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)  # str for choice/array, ShapeExpr for expression

    def expression(self, key: str) -> ShapeExpr | None:
        value = self.params.get(key)
        return value if isinstance(value, ShapeExpr) else None


def read_family(raw: dict, fields: list, names: set[str], tensors: set[str]) -> FamilySpec:
    """Check `raw` against the family's declaration; raise FormulaError saying what is wrong."""
    name = raw["name"]
    declared = FAMILIES.get(name)
    if declared is None:
        raise FormulaError(f"unknown family {name!r}; known: {', '.join(sorted(FAMILIES))}")
    params: dict[str, Any] = {}
    unknown = sorted(set(raw) - set(declared) - {"name"})
    if unknown:
        raise FormulaError(f"family {name} has no parameter {', '.join(unknown)}; it takes {', '.join(sorted(declared))}")
    arrays = {f.name for f in fields if getattr(f, "is_array", False)}
    scalars = {f.name for f in fields if f.role == "attribute" and f.c_type in ("UINT", "INT") and not f.is_count}
    outputs = {f.name for f in fields if f.role == "output"}
    unions = {f.name for f in fields if getattr(f, "is_scalar_union", False)}
    mode = raw.get("mode")
    for key, param in declared.items():
        if param.modes and mode not in param.modes:
            if key in raw:
                raise FormulaError(f"family {name}: {key!r} is only for mode {', '.join(param.modes)}")
            continue
        if key not in raw:
            if param.required:
                raise FormulaError(f"family {name} needs {key!r} ({param.meaning})")
            continue
        value = raw[key]
        if param.kind == "choice":
            if value not in param.choices:
                raise FormulaError(f"{key}: {value!r} is not one of {', '.join(param.choices)}")
            params[key] = value
        elif param.kind in ("array", "scalar", "output", "union"):
            allowed = {"array": arrays, "scalar": scalars, "output": outputs, "union": unions}[param.kind]
            if value not in allowed:
                raise FormulaError(f"{key}: {value!r} is not {'an' if param.kind != 'scalar' else 'a'} {param.kind} field "
                                   f"({', '.join(sorted(allowed)) or 'none'})")
            params[key] = value
        else:
            params[key] = parse_shape_expr(str(value), names, tensors)
    return FamilySpec(name, params)
