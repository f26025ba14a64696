"""Fused activations: an operator whose `const DML_OPERATOR_DESC*` field names an activation.

DirectML applies the named activation to the operator's result before it is written (the
activation's desc has null tensors; its other fields are FLOAT scalars). The spec of the host
operator lists which activation specs the field may name (`activations:`); nothing about a
particular activation is written twice: its formula, constants and unspecified regions come from
its own spec file, composed here into the host's formula for one descriptor.

In a descriptor the field holds the activation's DML_OPERATOR_TYPE value, and the activation's
fields are attributes `<Field>.<Member>` (like a struct pointer's members); no value is a null
pointer. In formulas the members are `<Field>_<Member>` and `has_<Field>` says whether one is set.

Composition is syntactic: the activation's formula with its input variable replaced by the host's
formula and its names prefixed, so the precision model sees one formula and may round (or not)
between the two parts exactly as it may within any formula ("fused operations may be fused or
not").
"""
from __future__ import annotations

import ast
from dataclasses import replace
from functools import lru_cache

from harness.model.descriptor import Descriptor
from harness.spec.expr import Formula, parse_formula
from harness.spec.model import FieldSpec, OperatorSpec


def members(activation: OperatorSpec) -> tuple[tuple[str, str], ...]:
    """The activation's scalar fields in struct order, as members of the fused field."""
    return tuple((f.name, f.c_type) for f in activation.attribute_fields)


def fused_choice(spec: OperatorSpec, field: FieldSpec, attributes: dict) -> OperatorSpec | None:
    """The activation a descriptor names in `field`, or None (a null pointer)."""
    value = attributes.get(field.name)
    if value is None or field.is_activation_array:
        return None
    return spec.activations.get(field.name, {}).get(int(value))


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, ast.expr]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.expr:
        target = self.names.get(node.id)
        return ast.copy_location(target, node) if target is not None else node


def _compose(text: str, names: dict[str, ast.expr]) -> Formula:
    tree = _Rename(names).visit(ast.parse(text, mode="eval"))
    return parse_formula(ast.unparse(tree))


def _names(field: str, activation: OperatorSpec, inner: ast.expr | None) -> dict[str, ast.expr]:
    """The activation's names in the host's formula: its input becomes `inner`, its attributes and
    constants `<Field>_<name>`."""
    out: dict[str, ast.expr] = {}
    for name in list(activation.formula.attributes) + list(activation.formula.constants):
        out[name] = ast.Name(f"{field}_{name}", ast.Load())
    if inner is not None:
        (var,) = activation.formula.inputs
        out[var] = inner
    return out


@lru_cache(maxsize=256)
def _fused_spec(spec: OperatorSpec, field_name: str, activation: OperatorSpec) -> OperatorSpec:
    field = spec.field(field_name)
    base = spec.formula
    inner = ast.parse(base.expression.text, mode="eval").body
    expression = _compose(activation.formula.expression.text, _names(field_name, activation, inner))
    constants = dict(base.constants)
    for name, const in activation.formula.constants.items():
        constants[f"{field_name}_{name}"] = _compose(const.text, _names(field_name, activation, None))
    # the activation's unspecified regions, over the host's result (its input variable)
    unspecified = list(spec.unspecified)
    for rule in activation.unspecified:
        unspecified.append(replace(rule, id=f"{field_name}.{rule.id}", why=f"{activation.name}: {rule.why}",
                                   when=_compose(rule.when.text, _names(field_name, activation, inner))))
    # composed once: the field becomes the struct of the activation's fields (has_F, F_M)
    fields = tuple(replace(f, struct=members(activation), activations=None) if f.name == field_name else f for f in spec.fields)
    formula = replace(base, expression=expression, constants=constants,
                      attributes=tuple(base.attributes) + (field_name,))
    return replace(spec, fields=fields, formula=formula, unspecified=tuple(unspecified), activations=spec.activations)


def with_fused_activations(spec: OperatorSpec, descriptor: Descriptor) -> OperatorSpec:
    """`spec` with the formula this descriptor computes: each fused activation it names applied to
    the result (the spec itself when it names none)."""
    for field in spec.attribute_fields:
        if not field.is_fused_activation or field.is_activation_array:  # an array's items are the family's to apply
            continue
        activation = fused_choice(spec, field, descriptor.attributes)
        if activation is not None:
            spec = _fused_spec(spec, field.name, activation)
    return spec

# the most items an activation array holds (three gates in each of two directions: 6); the DirectML runner's
# nested storage holds at least this many
MAX_ACTIVATION_ITEMS = 8


def item_field(field: str, slot: int) -> str:
    """The name item `slot` of an activation array goes by in a descriptor: `<Field>_<slot>`, its
    members `<Field>_<slot>.<Member>` (as a tensor array's items are `<Array>_<slot>`)."""
    return f"{field}_{slot}"


def activation_items(spec: OperatorSpec, field: FieldSpec, attributes: dict) -> list[tuple[OperatorSpec, dict[str, float]]]:
    """The activations a descriptor lists in the activation array `field`, in order, each with its
    fields' values by their own names (`Alpha`); an item naming no allowed activation is left out
    (the case-file check refuses such a descriptor first)."""
    allowed = spec.activations.get(field.name, {})
    out: list[tuple[OperatorSpec, dict[str, float]]] = []
    for slot, value in enumerate(attributes.get(field.name) or []):
        activation = allowed.get(int(value))
        if activation is None:
            continue
        prefix = item_field(field.name, slot)
        out.append((activation, {a.name: float(attributes.get(f"{prefix}.{a.name}", 0.0)) for a in activation.attribute_fields}))
    return out
