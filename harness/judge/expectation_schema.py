"""The shape of an expectation file (backends/expectations/BACKEND.yaml, BACKEND/*.yaml), and the
bound on the loops of a `descriptor_when`.

The JSON Schema states what harness.judge.expectations reads, written from that reader and from
every shipped file: structure only. The meaning checks (known operators, tensors, attributes,
types and rules; `when` over the names the operator's formula binds; probes a case can be built
from) are harness.judge.expectations' (`check_expectation_files`), with the spec set.

`loop_problem` bounds a `descriptor_when` before it is ever evaluated. Shape expressions may loop
(`any(... for i in range(...))`), and a loop inside a loop over large ranges would run for hours:
the loops of one expression may visit at most MAX_LOOP_ITEMS items in all, nested loops
multiplied, where a loop whose length the expression does not bound (a range over an attribute's
value, an attribute array) counts as the longest list a shape expression may build
(harness.spec.shape_expr.MAX_LIST: the limit generation works under). So one such loop is
allowed, a loop over a tensor's Sizes or `range(T.DimensionCount)` costs at most 16 items, and a
nested pair of unbounded loops is refused when the file is read.
"""
from __future__ import annotations

import ast
from harness.spec.shape_expr import MAX_LIST

MAX_LOOP_ITEMS = MAX_LIST     # items all loops of one descriptor_when visit, nested loops multiplied
MAX_TENSOR_DIMENSIONS = 16    # Sizes of any descriptor a runner takes (harness.model.wellformed.MAX_C_DIMENSIONS)
MAX_PRODUCT_TERMS = 64        # prod() of at most this many values: sizes multiply to 2^4096 at most
MAX_PROBE_ELEMENTS = 1 << 20  # elements of one probe tensor (a probe shows a divergence on a few)

_ID = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"}
_NAME = {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"}
_TEXT = {"type": "string", "minLength": 1, "pattern": r"\S"}
_TYPE_LIST = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}}
_NAME_LIST = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "minLength": 1}}
_NUMBERS = {"type": "array", "items": {"type": "number"}}

STATUSES = ("mismatch", "rejected-valid", "accepted-invalid", "crashed", "flaky")  # what an expectation may explain

_PROBE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["types"],
    "properties": {
        "types": {"type": "object", "minProperties": 1, "propertyNames": _NAME, "additionalProperties": {"type": "string"}},
        "inputs": {"type": "object", "propertyNames": _NAME, "additionalProperties": _NUMBERS},
        "input_bits": {"type": "object", "propertyNames": _NAME,
                       "additionalProperties": {"type": "array", "items": {"type": "integer", "minimum": 0}}},
        "tensor_sizes": {"type": "object", "propertyNames": _NAME, "additionalProperties": {
            "type": "array", "maxItems": MAX_TENSOR_DIMENSIONS, "items": {"type": "integer", "minimum": 0, "maximum": 2 ** 32 - 1}}},
        # a tensor's Strides (in elements), for a divergence only a strided layout shows; needs tensor_sizes
        "tensor_strides": {"type": "object", "propertyNames": _NAME, "additionalProperties": {
            "type": "array", "maxItems": MAX_TENSOR_DIMENSIONS, "items": {"type": "integer", "minimum": 0, "maximum": 2 ** 32 - 1}}},
        "attributes": {"type": "object", "propertyNames": {"type": "string", "minLength": 1},
                       "additionalProperties": {"type": ["number", "array"], "items": {"type": "number"}}},
        "rule": {"type": "string", "minLength": 1},
    },
    "dependentRequired": {"tensor_strides": ["tensor_sizes"]},
}

_ENTRY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "operator", "why"],
    "properties": {
        "id": _ID,
        "operator": {"type": "string", "pattern": r"^[A-Z][A-Z0-9_]*$"},
        "status": {"enum": list(STATUSES)},
        "data_types": _TYPE_LIST,
        "input_types": _TYPE_LIST,
        "when": _TEXT,
        "descriptor_when": _TEXT,
        "why": _TEXT,
        "rule": {"type": "string", "minLength": 1},
        "reason_contains": {"type": "string", "minLength": 1},
        "attributes_present": _NAME_LIST,
        "tensor_types": _TYPE_LIST,
        "devices": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S"}},
        "probe": _PROBE,
        "hangs": {"type": "boolean"},
    },
    # a mismatch (the default status) is explained element by element: its output types and condition
    "if": {"properties": {"status": {"const": "mismatch"}}},
    "then": {"required": ["data_types", "when"]},
    # a known hang (its cases are not sent to the device) is checked on its probe in every run
    "dependentSchemas": {"hangs": {"required": ["probe", "devices"], "properties": {"status": {"const": "crashed"}}}},
}

EXPECTATION_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "backend": {"type": "string", "minLength": 1},
        "expectations": {"type": "array", "items": _ENTRY},
    },
}

# keys that only one kind of expectation reads (the other kind would silently ignore them)
MISMATCH_ONLY = ("when", "input_types")
STATUS_ONLY = ("rule", "reason_contains", "attributes_present", "tensor_types", "hangs")


# --- the loops of a descriptor_when -------------------------------------------------------------

def _value_bound(node: ast.AST, lengths: dict[str, int]) -> int | None:
    """An upper bound on |value| of an integer expression, or None where the expression does not
    bound it (an attribute's value)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return abs(int(node.value))
    if isinstance(node, ast.Attribute) and node.attr == "DimensionCount":
        return MAX_TENSOR_DIMENSIONS
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _value_bound(node.operand, lengths)
    if isinstance(node, ast.IfExp):
        both = [_value_bound(node.body, lengths), _value_bound(node.orelse, lengths)]
        return None if None in both else max(b for b in both if b is not None)
    if isinstance(node, ast.BinOp):
        left, right = _value_bound(node.left, lengths), _value_bound(node.right, lengths)
        if isinstance(node.op, ast.Mod):
            return right
        if isinstance(node.op, ast.FloorDiv):
            return left
        if left is None or right is None:
            return None
        return left + right if isinstance(node.op, (ast.Add, ast.Sub)) else left * right if isinstance(node.op, ast.Mult) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "len" and len(node.args) == 1:
            return _length_bound(node.args[0], lengths)
        if node.func.id in ("abs", "min", "max") and node.args and not (node.func.id != "abs" and len(node.args) == 1):
            bounds = [_value_bound(a, lengths) for a in node.args]
            return None if None in bounds else max(b for b in bounds if b is not None)
    return None


def _length_bound(node: ast.AST, lengths: dict[str, int]) -> int | None:
    """An upper bound on the length of a list the expression builds, or None where it does not
    bound it (an attribute array, a range over an attribute's value)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts)
    if isinstance(node, ast.Attribute) and node.attr == "Sizes":
        return MAX_TENSOR_DIMENSIONS
    if isinstance(node, ast.Name):
        return lengths.get(node.id)  # a tensor array: its items; anything else: not bounded
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return _length_bound(node.generators[0].iter, lengths)
    if isinstance(node, ast.IfExp):
        both = [_length_bound(node.body, lengths), _length_bound(node.orelse, lengths)]
        return None if None in both else max(b for b in both if b is not None)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _length_bound(node.left, lengths), _length_bound(node.right, lengths)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "sorted" and len(node.args) == 1:
            return _length_bound(node.args[0], lengths)
        if node.func.id == "range" and 1 <= len(node.args) <= 3:
            bounds = [_value_bound(a, lengths) for a in node.args[:2]]
            return None if None in bounds else sum(b for b in bounds if b is not None)
    return None


def loop_problem(tree: ast.AST, lengths: dict[str, int] | None = None) -> str | None:
    """Why the loops of a shape expression's syntax tree may run too long, or None. `lengths`:
    names whose list length the caller knows (a tensor array's item count)."""
    known = lengths or {}
    total = 0

    def visit(node: ast.AST, multiplier: int) -> str | None:
        nonlocal total
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "prod" and len(node.args) == 1:
            terms = _length_bound(node.args[0], known)
            if terms is None or terms > MAX_PRODUCT_TERMS:
                return (f"prod() of {'a list whose length the expression does not bound' if terms is None else f'{terms} values'}: "
                        f"at most {MAX_PRODUCT_TERMS} values (a tensor's Sizes, a literal list), or the product "
                        f"may be an integer of millions of digits")
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            generator = node.generators[0]
            problem = visit(generator.iter, multiplier)
            if problem:
                return problem
            items = _length_bound(generator.iter, known)
            items = MAX_LOOP_ITEMS if items is None else min(items, MAX_LOOP_ITEMS)
            inner = multiplier * max(items, 1)
            total += multiplier * items
            if total > MAX_LOOP_ITEMS:
                nested = " (nested loops multiply)" if multiplier > 1 else ""
                return (f"its loops may visit more than {MAX_LOOP_ITEMS:,} items{nested}, the longest list a shape "
                        f"expression may build; a loop over a range of an attribute's value or over an attribute "
                        f"array counts {MAX_LOOP_ITEMS:,} (loop over a tensor's Sizes or range(T.DimensionCount) instead)")
            for part in (node.elt, *generator.ifs):
                problem = visit(part, inner)
                if problem:
                    return problem
            return None
        for child in ast.iter_child_nodes(node):
            problem = visit(child, multiplier)
            if problem:
                return problem
        return None

    return visit(tree, 1)
