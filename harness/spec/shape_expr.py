"""Shape and constraint expressions: a whitelist evaluator over integers and lists (never `eval`).

Index-space operators relate tensors through their Sizes and attribute arrays: a reduction's
output keeps the input's sizes except along `Axes`, where it is 1; a matrix product's inner
dimensions agree. The
spec writes such facts as Python-like expressions, e.g.

    [1 if i in Axes else InputTensor.Sizes[i] for i in range(InputTensor.DimensionCount)]
    all(a < InputTensor.DimensionCount for a in Axes)

The element-wise formula language (expr.py) works on NumPy arrays of tensor data; this one works
on descriptor facts: Python ints, bools and lists. Allowed: integer and boolean literals, names
bound by the caller (attributes, array attributes, enum members), `T.Sizes`, `T.DimensionCount`
and `T.present` for a tensor field T, subscripts with an integer, list displays, one-generator
list comprehensions and generator expressions (with optional `if`), `a if c else b`, + - * // %,
comparisons including `in` / `not in`, `and`/`or`/`not`, and the functions in FUNCTIONS.
Expressions are bounded like formulas (length, nesting), and lists by MAX_LIST.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Callable

from harness.spec.expr import FormulaError, _parse_bounded

MAX_LIST = 1 << 17  # no shape expression needs a longer list (a 65536 size and its range); range(2**40) must not allocate


def _range(*args: int) -> list[int]:
    r = range(*args)
    if len(r) > MAX_LIST:
        raise FormulaError(f"range of {len(r)} elements exceeds {MAX_LIST}")
    return list(r)


def _distinct(values: list) -> bool:
    return len(set(values)) == len(values)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len, "range": _range, "min": min, "max": max, "sum": sum, "all": all, "any": any,
    "prod": lambda values: math.prod(values), "abs": abs, "distinct": _distinct,
    "sorted": sorted, "bit_length": lambda n: int(n).bit_length(),
    "free_in": lambda values: _FreeIn(values),
}
TENSOR_FACTS = ("Sizes", "DimensionCount", "DataType", "present")


class _Free:
    """`free` in a shape rule's Sizes: this position takes any size, a dimension of its own that no
    other tensor fixes (a matrix product's N in B {K, N}, while K must equal A's). Generation draws
    it; the validator accepts any size there; the invalid generator never mutates it. It is not a
    number: arithmetic on it is a spec error."""

    def __repr__(self) -> str:
        return "free"


FREE = _Free()
FREE_NAME = "free"


class _FreeIn(_Free):
    """`free_in(values)`: a `free` position (the validator accepts any size there; what the sizes
    must satisfy is stated by the spec's own constraints) whose size generation draws from
    `values` instead of from every size the budget allows: a generation domain that keeps the
    drawn descriptors inside those constraints (a channel count that is a multiple of a group
    count, a window no larger than what it slides over)."""

    def __init__(self, values: Any) -> None:
        self.values = tuple(int(v) for v in values)

    def __repr__(self) -> str:
        return f"free_in({list(self.values)})"


def is_free(value: Any) -> bool:
    """Whether a shape rule's entry is `free` or `free_in(...)` (any size is valid there)."""
    return isinstance(value, _Free)


@dataclass(frozen=True)
class TensorFacts:
    """What a shape expression may read of one tensor field (None: absent tensor)."""

    sizes: tuple[int, ...] | None
    dimension_count: int | None = None  # None: len(sizes) (an invalid descriptor may say otherwise)
    data_type: int | None = None  # its DML_TENSOR_DATA_TYPE value (None: not known to the caller)

    def fact(self, name: str) -> Any:
        if name == "present":
            return self.sizes is not None
        if self.sizes is None:
            raise _Undefined(f"reads {name} of an absent tensor")
        if name == "Sizes":
            return list(self.sizes)
        if name == "DataType":
            if self.data_type is None:
                raise _Undefined("reads DataType without a catalog")
            return self.data_type
        return len(self.sizes) if self.dimension_count is None else self.dimension_count


class _Undefined(Exception):
    """An expression that reads a value that is not there (an absent tensor, an index out of range):
    the rule it states cannot hold."""


_BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}
_CMP = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
        ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


@dataclass(frozen=True)
class ShapeExpr:
    """A parsed, checked shape/constraint expression."""

    text: str
    tree: ast.Expression

    def names(self) -> set[str]:
        """Free names the expression reads (comprehension targets excluded)."""
        bound = {n.id for c in ast.walk(self.tree) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
                 if isinstance(n, ast.Name)}
        return ({n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                - bound - set(FUNCTIONS) - {FREE_NAME})

    def evaluate(self, names: dict[str, Any], tensors: dict[str, TensorFacts]) -> Any:
        """The value; raises FormulaError for a type error (a spec bug) and returns None where the
        expression reads something that is not there (an absent tensor, an index out of range)."""
        try:
            return _Eval(names, tensors).visit(self.tree.body)
        except _Undefined:
            return None
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise FormulaError(f"{self.text!r}: {exc}") from exc


def parse_shape_expr(text: str, names: set[str], tensors: set[str]) -> ShapeExpr:
    """Parse and check `text`: only the whitelisted nodes, names in `names`, tensor facts of `tensors`."""
    tree = _parse_bounded(text)
    _check(tree.body, names, tensors, set())
    return ShapeExpr(text, tree)


def _check(node: ast.AST, names: set[str], tensors: set[str], local: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, (int, bool)) or isinstance(node.value, float):
            raise FormulaError(f"only integer and boolean literals are allowed, found {node.value!r}")
        return
    if isinstance(node, ast.Name):
        if node.id not in names | local | set(FUNCTIONS) | {"True", "False", FREE_NAME}:
            raise FormulaError(f"unknown name {node.id!r}; known: {', '.join(sorted(names | local))}")
        return
    if isinstance(node, ast.Attribute):
        if not (isinstance(node.value, ast.Name) and node.value.id in tensors and node.attr in TENSOR_FACTS):
            raise FormulaError(f"only T.{', T.'.join(TENSOR_FACTS)} of a tensor field T may be read, found {ast.unparse(node)!r}")
        return
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        if len(node.generators) != 1 or node.generators[0].is_async or not isinstance(node.generators[0].target, ast.Name):
            raise FormulaError(f"a comprehension takes one 'for NAME in ...' clause: {ast.unparse(node)!r}")
        gen = node.generators[0]
        _check(gen.iter, names, tensors, local)
        inner = local | {gen.target.id}  # type: ignore[union-attr]
        for cond in gen.ifs:
            _check(cond, names, tensors, inner)
        _check(node.elt, names, tensors, inner)
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
            raise FormulaError(f"unknown function in {ast.unparse(node)!r}; allowed: {', '.join(sorted(FUNCTIONS))}")
        for arg in node.args:
            _check(arg, names, tensors, local)
        return
    allowed = (ast.List, ast.Tuple, ast.Subscript, ast.IfExp, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare)
    if not isinstance(node, allowed):
        raise FormulaError(f"{type(node).__name__} is not allowed in a shape expression: {ast.unparse(node)!r}")
    if isinstance(node, ast.BinOp) and type(node.op) not in _BIN:
        raise FormulaError(f"operator {type(node.op).__name__} is not allowed (use + - * // %)")
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, (ast.USub, ast.Not)):
        raise FormulaError(f"unary {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.Compare) and any(type(op) not in _CMP for op in node.ops):
        raise FormulaError(f"comparison not allowed in {ast.unparse(node)!r}")
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        raise FormulaError(f"slices are not allowed: {ast.unparse(node)!r}")
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            _check(child, names, tensors, local)


class _Eval:
    def __init__(self, names: dict[str, Any], tensors: dict[str, TensorFacts]) -> None:
        self.scopes: list[dict[str, Any]] = [dict(names)]
        self.tensors = tensors

    def lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in ("True", "False"):
            return name == "True"
        if name == FREE_NAME:
            return FREE
        if name in FUNCTIONS:
            raise FormulaError(f"{name} is a function")
        raise _Undefined(f"{name} is not set")

    def iterate(self, gen: ast.comprehension) -> list:
        values = self.visit(gen.iter)
        if not isinstance(values, list):
            raise TypeError(f"cannot iterate over {values!r}")
        out = []
        for v in values:
            self.scopes.append({gen.target.id: v})  # type: ignore[union-attr]
            try:
                if all(self.visit(c) for c in gen.ifs):
                    out.append(v)
            finally:
                self.scopes.pop()
        return out

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            facts = self.tensors.get(node.value.id)  # type: ignore[attr-defined]
            if facts is None:
                raise _Undefined(f"{node.value.id} is not described")  # type: ignore[attr-defined]
            return facts.fact(node.attr)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.visit(e) for e in node.elts]
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            gen = node.generators[0]
            out = []
            for v in self.iterate(gen):
                self.scopes.append({gen.target.id: v})  # type: ignore[union-attr]
                try:
                    out.append(self.visit(node.elt))
                finally:
                    self.scopes.pop()
            return out
        if isinstance(node, ast.Subscript):
            seq, index = self.visit(node.value), self.visit(node.slice)
            if not isinstance(seq, list) or not isinstance(index, int) or not -len(seq) <= index < len(seq):
                raise _Undefined(f"index {index!r} outside {seq!r}")
            return seq[index]
        if isinstance(node, ast.IfExp):
            return self.visit(node.body) if self.visit(node.test) else self.visit(node.orelse)
        if isinstance(node, ast.BinOp):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(left, list) or isinstance(right, list):
                if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
                    if len(left) + len(right) > MAX_LIST:
                        raise FormulaError(f"list longer than {MAX_LIST}")
                    return left + right
                raise TypeError(f"{type(node.op).__name__} of lists")
            return _BIN[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            value = self.visit(node.operand)
            return (not value) if isinstance(node.op, ast.Not) else -value
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(self.visit(v) for v in node.values)
            return any(self.visit(v) for v in node.values)
        if isinstance(node, ast.Compare):
            left = self.visit(node.left)
            for op, comparator in zip(node.ops, node.comparators):
                right = self.visit(comparator)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            fname = node.func.id  # type: ignore[attr-defined]
            if fname in ("all", "any") and len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp):
                return FUNCTIONS[fname](self.visit(node.args[0]))
            return FUNCTIONS[fname](*[self.visit(a) for a in node.args])
        raise FormulaError(f"unexpected {type(node).__name__}")
