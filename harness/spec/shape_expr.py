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
Expressions are bounded like formulas (length, nesting), and their evaluation is bounded too, so
that no expression a spec can write hangs or exhausts memory (`spec lint` evaluates them under
these same bounds, harness.spec.lint): lists by MAX_LIST, the work of one evaluation by MAX_STEPS
(each comprehension item, times the nodes it evaluates; each element a range, a function or a
comparison walks), integers by MAX_INT_BITS, `divisors(n)` by MAX_DIVISORS_OF. Beyond a bound, and
for a division or modulo by zero, evaluation raises a FormulaError that says so.
"""
from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Callable

from harness.spec.expr import FormulaError, _parse_bounded

MAX_LIST = 1 << 17  # no shape expression needs a longer list (a 65536 size and its range); range(2**40) must not allocate
MAX_STEPS = 1 << 21  # steps of one evaluation (half a second at worst); a spec's rule takes hundreds, divisors of a 2^32 size 2^16
MAX_INT_BITS = 4096  # an integer a product makes; sizes multiply to 2^256 at most (8 dimensions below 2^32)
MAX_DIVISORS_OF = 1 << 40  # divisors(n) walks sqrt(n) candidates: 2^20 at most
BEYOND = "beyond the evaluation bound"


_BUDGET = " budget"  # the key of an evaluation's budget in its `local` names: no name of an expression has a space
_BIG = 1 << MAX_INT_BITS  # compared with, not measured: a product's check costs one comparison
_SMALL = 16  # a list walk this short is not charged: the nodes around it are (each comprehension item's, at least one step)


def _charge(loc: dict, steps: int) -> None:
    """Count `steps` against the evaluation's budget (a one-item list of the steps left, shared by
    every `local` dict of one evaluation); a FormulaError once it is spent."""
    budget = loc[_BUDGET]
    budget[0] -= steps
    if budget[0] < 0:
        raise FormulaError(f"more than {MAX_STEPS:,} evaluation steps: {BEYOND} (a loop over too many values)")


def _checked_int(value: Any) -> Any:
    if type(value) is int and not -_BIG < value < _BIG:
        raise FormulaError(f"an integer of {value.bit_length()} bits is {BEYOND} ({MAX_INT_BITS} bits)")
    return value


def _range(*args: int) -> list[int]:
    r = range(*args)
    if len(r) > MAX_LIST:
        raise FormulaError(f"range of {len(r)} elements is {BEYOND} ({MAX_LIST} elements)")
    return list(r)


def _range_length(*args: Any) -> int:
    """How many values range(*args) has, before it is made (a TypeError for what is no range)."""
    return len(range(*args))


def _prod(values: Any) -> int:
    out = 1
    for v in values:
        out = _checked_int(out * v)
    return out


def _distinct(values: list) -> bool:
    return len(set(values)) == len(values)


@lru_cache(maxsize=4096)
def _divisors_of(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted({*small, *(n // d for d in small)}, reverse=True))


def _divisors(n: int) -> list[int]:
    """The positive divisors of n, largest first (n itself, then down to 1): a blocked tensor's
    sizes. O(sqrt n) and cached, where a comprehension over range(n) walks n values on every rule
    check (a size of 2^17 is 131,072 steps); [] for n < 1; a FormulaError beyond MAX_DIVISORS_OF."""
    n = int(n)
    if n > MAX_DIVISORS_OF:
        raise FormulaError(f"divisors of {n}: {BEYOND} (2^40)")
    return list(_divisors_of(n)) if n >= 1 else []


def _divisors_steps(n: Any) -> int:
    """What divisors(n) counts against the budget: the sqrt(n) candidates it walks (cached or not,
    so that the bound does not depend on what was evaluated before)."""
    return math.isqrt(n) + 1 if type(n) is int and 1 <= n <= MAX_DIVISORS_OF else 1


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len, "range": _range, "min": min, "max": max, "sum": sum, "all": all, "any": any,
    "prod": _prod, "abs": abs, "distinct": _distinct,
    "sorted": sorted, "bit_length": lambda n: int(n).bit_length(), "divisors": _divisors,
    "free_in": lambda values: _FreeIn(values),
}
TENSOR_FACTS = ("Sizes", "DimensionCount", "DataType", "present", "Strides")


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


def right_aligned(have: list[Any], want: list[Any]) -> tuple[list[Any], list[Any]] | None:
    """`have` and `want` cut to their common trailing length, for a shape rule with `align: right`
    (a broadcast operand, read right-aligned: a size it leaves out or adds before the others is 1);
    None where an entry cut from the longer one is not 1 (a `free` entry of `want` may be 1)."""
    n = min(len(have), len(want))
    extra = list(have[:len(have) - n]) + list(want[:len(want) - n])
    if not all(is_free(v) or v == 1 for v in extra):
        return None
    return list(have[len(have) - n:]), list(want[len(want) - n:])


def aligned(have: list[Any], want: list[Any], align: str) -> tuple[list[Any], list[Any]] | None:
    """right_aligned for `align` 'right'; for 'left' (an operand read from its first dimension on,
    as a per-channel scale {1, C, 1, ...} of any dimension count: a size it leaves out or adds
    after the others is 1) the same from the other end; for 'leading_ones' (a tensor that 'can
    also have more dimensions, as long as the leading dimensions are 1's': 1s added before the
    rule's sizes, none of them left out) `have` less its added leading 1s, None where it is shorter
    than `want` or an added size is not 1."""
    if align == "leading_ones":
        extra = len(have) - len(want)
        if extra < 0 or not all(v == 1 for v in have[:extra]):
            return None
        return list(have[extra:]), list(want)
    if align == "right":
        return right_aligned(have, want)
    cut = right_aligned(list(have)[::-1], list(want)[::-1])
    return None if cut is None else (cut[0][::-1], cut[1][::-1])


@dataclass(frozen=True)
class TensorFacts:
    """What a shape expression may read of one tensor field (None: absent tensor)."""

    sizes: tuple[int, ...] | None
    dimension_count: int | None = None  # None: len(sizes) (an invalid descriptor may say otherwise)
    data_type: int | None = None  # its DML_TENSOR_DATA_TYPE value (None: not known to the caller)
    strides: tuple[int, ...] | None = None  # None: packed (what a null Strides pointer means)

    def fact(self, name: str) -> Any:
        if name == "present":
            return self.sizes is not None
        if self.sizes is None:
            raise _Undefined(f"reads {name} of an absent tensor")
        if name == "Sizes":
            return list(self.sizes)
        if name == "Strides":  # in elements; an expectation's descriptor_when tells broadcast layouts apart
            if self.strides is not None:
                return list(self.strides)
            packed: list[int] = []
            step = 1
            for size in reversed(self.sizes):
                packed.insert(0, step)
                step *= size
            return packed
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
_FAST_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
             ast.Mod: operator.mod}  # _BIN's operators as C functions, for the compiled closures
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
        ast.NotEq: operator.ne, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


@dataclass(frozen=True)
class ShapeExpr:
    """A parsed, checked shape/constraint expression."""

    text: str
    tree: ast.Expression

    def names(self) -> frozenset[str]:
        """Free names the expression reads (comprehension targets excluded). Cached: the validator
        asks it of every rule for every descriptor the invalid-case search tries."""
        return self._names

    def facts_read(self) -> frozenset[str]:
        """The tensor facts the expression reads by attribute (`present`, `Sizes`, `DataType`, ...).
        A rule whose only one is `present` is decided by which tensors are bound: generation keeps
        it with the type assignment (harness.generate.types), before any shape is drawn."""
        return self._facts_read

    @cached_property
    def _facts_read(self) -> frozenset[str]:
        return frozenset(n.attr for n in ast.walk(self.tree) if isinstance(n, ast.Attribute))

    @cached_property
    def _names(self) -> frozenset[str]:
        bound = {n.id for c in ast.walk(self.tree) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
                 if isinstance(n, ast.Name)}
        return frozenset({n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                          - bound - set(FUNCTIONS) - {FREE_NAME})

    @cached_property
    def _compiled(self) -> _Node:
        return _compile(self.tree.body)

    def evaluate(self, names: dict[str, Any], tensors: dict[str, TensorFacts]) -> Any:
        """The value; raises FormulaError for a type error (a spec bug), a division by zero or an
        evaluation beyond the bounds (MAX_STEPS, MAX_LIST, MAX_INT_BITS), and returns None where
        the expression reads something that is not there (an absent tensor, an index out of range)."""
        try:
            return self._compiled(names, tensors, {_BUDGET: [MAX_STEPS]})
        except _Undefined:
            return None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, MemoryError, RecursionError) as exc:
            raise FormulaError(f"{self.text!r}: {exc}") from None

    def evaluate_steps(self, names: dict[str, Any], tensors: dict[str, TensorFacts],
                       steps: int = MAX_STEPS) -> tuple[Any, int]:
        """evaluate() within `steps` (at most MAX_STEPS), and the steps it took: what `spec lint`
        uses to keep the probes of one spec within one evaluation's bound altogether."""
        budget = [min(steps, MAX_STEPS)]
        try:
            value = self._compiled(names, tensors, {_BUDGET: budget})
        except _Undefined:
            value = None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, MemoryError, RecursionError) as exc:
            if isinstance(exc, FormulaError) and budget[0] < 0:
                raise FormulaError(f"{self.text!r}: more than {min(steps, MAX_STEPS):,} evaluation steps: {BEYOND}") from None
            raise FormulaError(f"{self.text!r}: {exc}") from None
        return value, min(steps, MAX_STEPS) - budget[0]


def without_text(message: str, text: str) -> str:
    """An evaluation error's message without its leading `'expression': ` (where the spec's key
    already names the expression)."""
    prefix = f"{text!r}: "
    return message[len(prefix):] if message.startswith(prefix) else message


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
    if isinstance(node, ast.Attribute):  # a tensor field's facts, or an item's of a tensor array looped over
        if not (isinstance(node.value, ast.Name) and node.value.id in tensors | local and node.attr in TENSOR_FACTS):
            raise FormulaError(f"only T.{', T.'.join(TENSOR_FACTS)} of a tensor field T (or of a tensor array's item "
                               f"in a loop) may be read, found {ast.unparse(node)!r}")
        return
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        if len(node.generators) != 1 or node.generators[0].is_async or not isinstance(node.generators[0].target, ast.Name):
            raise FormulaError(f"a comprehension takes one 'for NAME in ...' clause: {ast.unparse(node)!r}")
        gen = node.generators[0]
        assert isinstance(gen.target, ast.Name)  # checked just above
        _check(gen.iter, names, tensors, local)
        inner = local | {gen.target.id}
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


_Env = tuple  # (names, tensors, local): what a compiled node reads when it runs
_Node = Callable[[dict, dict, dict], Any]


def _compile(node: ast.AST) -> _Node:
    """The checked tree as nested closures, built once per expression: each takes (names, tensors,
    local) and returns the node's value. The invalid-case search evaluates every rule of a spec for
    every descriptor it tries; dispatching on node types once here, not on every evaluation, is what
    makes that search affordable. Only the whitelisted node kinds (_check) reach this point."""
    if isinstance(node, ast.Constant):
        value = node.value
        return lambda n, t, loc: value
    if isinstance(node, ast.Name):
        return _compile_name(node.id)
    if isinstance(node, ast.Attribute):
        tensor, fact = node.value.id, node.attr  # type: ignore[attr-defined]

        def read_fact(n: dict, t: dict, loc: dict) -> Any:
            facts = loc.get(tensor) if tensor in loc else t.get(tensor)  # a loop variable shadows a field
            if not isinstance(facts, TensorFacts):
                if tensor in loc:
                    raise TypeError(f"{tensor} is {facts!r}, not a tensor (loop over a tensor array to read {fact})")
                raise _Undefined(f"{tensor} is not described")
            return facts.fact(fact)
        return read_fact
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_compile(e) for e in node.elts]
        return lambda n, t, loc: [item(n, t, loc) for item in items]
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return _compile_comprehension(node)
    if isinstance(node, ast.Subscript):
        seq_of, index_of = _compile(node.value), _compile(node.slice)

        def subscript(n: dict, t: dict, loc: dict) -> Any:
            seq, index = seq_of(n, t, loc), index_of(n, t, loc)
            if not isinstance(seq, list) or not isinstance(index, int) or not -len(seq) <= index < len(seq):
                raise _Undefined(f"index {index!r} outside {seq!r}")
            return seq[index]
        return subscript
    if isinstance(node, ast.IfExp):
        test, body, orelse = _compile(node.test), _compile(node.body), _compile(node.orelse)
        return lambda n, t, loc: body(n, t, loc) if test(n, t, loc) else orelse(n, t, loc)
    if isinstance(node, ast.BinOp):
        return _compile_binop(node)
    if isinstance(node, ast.UnaryOp):
        operand = _compile(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda n, t, loc: not operand(n, t, loc)
        return lambda n, t, loc: -operand(n, t, loc)
    if isinstance(node, ast.BoolOp):
        values = [_compile(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda n, t, loc: all(v(n, t, loc) for v in values)
        return lambda n, t, loc: any(v(n, t, loc) for v in values)
    if isinstance(node, ast.Compare):
        return _compile_compare(node)
    if isinstance(node, ast.Call):
        return _compile_call(node)
    raise FormulaError(f"unexpected {type(node).__name__}")


def _compile_call(node: ast.Call) -> _Node:
    """A call of a FUNCTIONS entry, charged for the elements it walks: a range's length before it
    is made, divisors' candidates, every list argument's length."""
    name = node.func.id  # type: ignore[attr-defined]
    function = FUNCTIONS[name]
    args = [_compile(a) for a in node.args]
    if name == "range":
        def call_range(n: dict, t: dict, loc: dict) -> Any:
            values = [a(n, t, loc) for a in args]
            length = _range_length(*values)
            if length > MAX_LIST:
                raise FormulaError(f"range of {length} elements is {BEYOND} ({MAX_LIST} elements)")
            if length > _SMALL:
                _charge(loc, length)
            return _range(*values)
        return call_range
    if name == "divisors":
        (arg,) = args if len(args) == 1 else (None,)

        def call_divisors(n: dict, t: dict, loc: dict) -> Any:
            if arg is None:
                raise TypeError(f"divisors() takes one argument, {len(args)} given")
            value = arg(n, t, loc)
            _charge(loc, _divisors_steps(value))
            return function(value)
        return call_divisors
    if len(args) == 1:
        arg = args[0]

        def call_one(n: dict, t: dict, loc: dict) -> Any:
            value = arg(n, t, loc)
            if type(value) is list and len(value) > _SMALL:
                _charge(loc, len(value))
            return function(value)
        return call_one

    def call(n: dict, t: dict, loc: dict) -> Any:
        values = [a(n, t, loc) for a in args]
        walked = 0
        for v in values:
            if type(v) is list:
                walked += len(v)
        if walked > _SMALL:
            _charge(loc, walked)
        return function(*values)
    return call


def _compile_name(name: str) -> _Node:
    """A name reads a comprehension variable first, then the caller's names; `free` and the
    function names are not values."""
    def lookup(n: dict, t: dict, loc: dict) -> Any:
        if name in loc:
            return loc[name]
        if name in n:
            return n[name]
        if name in ("True", "False"):
            return name == "True"
        if name == FREE_NAME:
            return FREE
        if name in FUNCTIONS:
            raise FormulaError(f"{name} is a function")
        raise _Undefined(f"{name} is not set")
    return lookup


def _compile_comprehension(node: ast.ListComp | ast.GeneratorExp) -> _Node:
    gen = node.generators[0]
    assert isinstance(gen.target, ast.Name)  # _check admits one plain name only
    target = gen.target.id
    values_of, element = _compile(gen.iter), _compile(node.elt)
    conditions = [_compile(c) for c in gen.ifs]
    per_item = 1 + sum(1 for part in (node.elt, *gen.ifs) for _ in ast.walk(part))  # the nodes one item evaluates

    def comprehension(n: dict, t: dict, loc: dict) -> Any:
        values = values_of(n, t, loc)
        if not isinstance(values, list):
            raise TypeError(f"cannot iterate over {values!r}")
        budget = loc[_BUDGET]  # _charge, inlined: one subtraction per comprehension
        budget[0] -= len(values) * per_item
        if budget[0] < 0:
            _charge(loc, 0)
        out = []
        for v in values:
            inner = {**loc, target: v}
            if all(c(n, t, inner) for c in conditions):
                out.append(element(n, t, inner))
        return out
    return comprehension


def _compile_binop(node: ast.BinOp) -> _Node:
    """One closure per operator, the integer case first: a product checked against MAX_INT_BITS,
    a division or modulo against a zero divisor, `+` of two lists against MAX_LIST."""
    left_of, right_of, op = _compile(node.left), _compile(node.right), _FAST_BIN[type(node.op)]
    text = ast.unparse(node)

    def other(left: Any, right: Any, loc: dict) -> Any:
        """Whatever is not two integers: lists (only `+` of two), floats, truth values."""
        if isinstance(left, list) or isinstance(right, list):
            if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
                if len(left) + len(right) > MAX_LIST:
                    raise FormulaError(f"a list of {len(left) + len(right)} elements is {BEYOND} ({MAX_LIST} elements)")
                _charge(loc, len(left) + len(right))
                return left + right
            raise TypeError(f"{type(node.op).__name__} of lists")
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and not right and isinstance(right, (int, float)):
            raise FormulaError(f"division by zero: {text!r} with a divisor of 0")
        return _checked_int(op(left, right))

    if isinstance(node.op, ast.Mult):
        def multiply(n: dict, t: dict, loc: dict) -> Any:
            left, right = left_of(n, t, loc), right_of(n, t, loc)
            if type(left) is int and type(right) is int:
                value = left * right
                if -_BIG < value < _BIG:
                    return value
                return _checked_int(value)
            return other(left, right, loc)
        return multiply
    if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
        def divide(n: dict, t: dict, loc: dict) -> Any:
            left, right = left_of(n, t, loc), right_of(n, t, loc)
            if type(left) is int and type(right) is int and right:
                return op(left, right)
            if right == 0 and type(right) is int:
                raise FormulaError(f"division by zero: {text!r} with a divisor of 0")
            return other(left, right, loc)
        return divide

    def binop(n: dict, t: dict, loc: dict) -> Any:
        left, right = left_of(n, t, loc), right_of(n, t, loc)
        if type(left) is int and type(right) is int:  # the common case, first
            return op(left, right)
        return other(left, right, loc)
    return binop


def _compile_compare(node: ast.Compare) -> _Node:
    first = _compile(node.left)
    steps = [(_CMP[type(op)], _compile(c)) for op, c in zip(node.ops, node.comparators)]
    if len(steps) == 1:
        (op, right_of), = steps

        def compare(n: dict, t: dict, loc: dict) -> Any:
            left, right = first(n, t, loc), right_of(n, t, loc)
            if type(right) is int:  # the common case, first
                return op(left, right)
            if type(right) is list and len(right) > _SMALL:  # `in` walks a list, == compares two
                _charge(loc, len(right))
            elif type(left) is list and len(left) > _SMALL:
                _charge(loc, len(left))
            return op(left, right)
        return compare

    def chain(n: dict, t: dict, loc: dict) -> Any:
        left = first(n, t, loc)
        for op, right_of in steps:
            right = right_of(n, t, loc)
            if type(right) is list and len(right) > _SMALL:
                _charge(loc, len(right))
            elif type(left) is list and len(left) > _SMALL:
                _charge(loc, len(left))
            if not op(left, right):
                return False
            left = right
        return True
    return chain
