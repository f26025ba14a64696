"""A whitelist evaluator for the spec formulas (never `eval`).

Formulas are parsed with `ast.parse(mode="eval")` into a syntax tree, and only a small set of
node types is allowed: numbers, names bound by the spec, + - * /, comparisons, & | ~, `and`,
`or`, `not`, and calls of the functions in FUNCTIONS. Attribute access, subscripts, lambdas,
comprehensions, strings outside `is_type`, and any unknown name are refused when the spec is
loaded, with a message saying what was found. Evaluation walks the tree with NumPy, elementwise.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


class FormulaError(ValueError):
    """A formula that is not in the whitelisted expression language."""


@dataclass
class EvalContext:
    """What a formula sees: its variables, and facts about the tensors for the type functions."""

    variables: dict[str, Any]
    tensor_types: dict[str, str] = field(default_factory=dict)
    type_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    output_numpy_dtype: Any = np.float32
    # When set, number literals that a where/min/max/clamp may select are given this type if
    # that loses nothing. Only for select-only formulas on native operands: `where(x < 0, -1, 1)`
    # on an INT32 tensor then stays INT32 instead of widening to int64 (half the memory traffic).
    literal_dtype: Any = None


def _literal(value: int | float, dtype: Any) -> Any:
    """`value` as a scalar of `dtype` when that loses nothing, else unchanged."""
    if dtype is None:
        return value
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if isinstance(value, int) and info.min <= value <= info.max:
            return dtype.type(value)
        return value
    if dtype.kind == "f":
        with np.errstate(all="ignore"):
            narrowed = dtype.type(value)
        if float(narrowed) == value:
            return narrowed
    return value


def _as_float(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


def _ulp_out(ctx: EvalContext, v: Any) -> np.ndarray:
    dtype = np.dtype(ctx.output_numpy_dtype)
    if dtype.kind != "f":
        return np.zeros_like(_as_float(v))
    mag = np.abs(_as_float(v)).astype(dtype)
    return np.spacing(mag).astype(np.float64)


def _is_denormal(v: Any, smallest_normal: float) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype.kind not in "f":
        return np.zeros(arr.shape, dtype=bool)
    mag = np.abs(arr.astype(np.float64))
    return (mag > 0) & (mag < smallest_normal)


def _is_half(v: Any) -> np.ndarray:
    arr = _as_float(v)
    with np.errstate(invalid="ignore"):
        return np.isfinite(arr) & ((arr - np.floor(arr)) == 0.5)


def _bitnot(v: Any) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype.kind not in "ui":
        raise FormulaError("bitnot() needs raw-bit integer operands (formula.operands: raw_bits)")
    return np.invert(arr)


_SELECT_MIN_ELEMENTS = 4096


def _select(condition: Any, a: Any, b: Any) -> Any:
    """`np.where(condition, a, b)`, bit for bit, without branches when that is possible.

    np.where mispredicts a branch per element on mixed data (about 3 ms per 2^20 elements here,
    50 times a comparison). When both choices have one integer or float type and the condition
    already has the result's shape, the choice is made with bit masks instead:
    b ^ ((a ^ b) & -condition), on the bits viewed as unsigned integers.
    """
    c = np.asarray(condition)
    dtype_a, dtype_b = getattr(a, "dtype", None), getattr(b, "dtype", None)
    if (c.dtype != np.bool_ or c.size < _SELECT_MIN_ELEMENTS or dtype_a is None or dtype_a != dtype_b
            or dtype_a.kind not in "iuf" or np.broadcast_shapes(c.shape, np.shape(a), np.shape(b)) != c.shape):
        return np.where(condition, a, b)
    bits = np.dtype(f"u{dtype_a.itemsize}")
    a_bits, b_bits = np.asarray(a).view(bits), np.asarray(b).view(bits)
    mask = c.astype(bits)
    np.negative(mask, out=mask)          # 0 -> 0, 1 -> all ones
    np.bitwise_and(mask, np.bitwise_xor(a_bits, b_bits), out=mask)
    np.bitwise_xor(mask, b_bits, out=mask)
    return mask.view(dtype_a)


def _is_negzero(v: Any) -> np.ndarray:
    arr = _as_float(v)
    return (arr == 0) & np.signbit(arr)


# name -> (number of arguments, implementation taking (ctx, *args))
FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "where": (3, lambda ctx, c, a, b: _select(c, a, b)),
    "min": (2, lambda ctx, a, b: np.minimum(a, b)),
    "max": (2, lambda ctx, a, b: np.maximum(a, b)),
    "clamp": (3, lambda ctx, v, lo, hi: np.minimum(np.maximum(v, lo), hi)),
    "abs": (1, lambda ctx, v: np.abs(v)),
    "round_half_even": (1, lambda ctx, v: np.rint(_as_float(v))),
    "isnan": (1, lambda ctx, v: np.isnan(_as_float(v))),
    "isinf": (1, lambda ctx, v: np.isinf(_as_float(v))),
    "is_negzero": (1, lambda ctx, v: _is_negzero(v)),
    "is_denormal_f32": (1, lambda ctx, v: _is_denormal(v, float(np.finfo(np.float32).tiny))),
    "is_half": (1, lambda ctx, v: _is_half(v)),
    "f32": (1, lambda ctx, v: _as_float(v).astype(np.float32).astype(np.float64)),
    "f16": (1, lambda ctx, v: _as_float(v).astype(np.float16).astype(np.float64)),
    "ulp_out": (1, _ulp_out),
    "bitnot": (1, lambda ctx, v: _bitnot(v)),
    # The next three take a tensor field name (not a value) as first argument.
    "type_min": (1, lambda ctx, t: ctx.type_ranges[ctx.tensor_types[t]][0]),
    "type_max": (1, lambda ctx, t: ctx.type_ranges[ctx.tensor_types[t]][1]),
    "is_type": (2, lambda ctx, t, name: np.bool_(ctx.tensor_types.get(t) == name)),
}
TENSOR_NAME_FUNCTIONS = {"type_min", "type_max", "is_type"}

_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
           ast.BitAnd: np.logical_and, ast.BitOr: np.logical_or}
_CMPOPS = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
           ast.Eq: np.equal, ast.NotEq: np.not_equal}


@dataclass(frozen=True)
class Formula:
    """A parsed, whitelisted expression and the names it reads."""

    text: str
    tree: ast.Expression
    names: frozenset[str]
    tensor_names: frozenset[str]
    exact_in_any_precision: bool = False  # only selects and comparisons: no rounding can happen

    def evaluate(self, ctx: EvalContext) -> Any:
        with np.errstate(all="ignore"):
            return _eval(self.tree.body, ctx)


def parse_formula(text: str) -> Formula:
    """Parse and whitelist-check `text`; raise FormulaError naming the first forbidden construct."""
    if not isinstance(text, str) or not text.strip():
        raise FormulaError("a formula must be a non-empty string")
    if len(text) > 2000:
        raise FormulaError("formula longer than 2000 characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"not a valid expression: {exc.msg} at column {exc.offset}") from None
    names: set[str] = set()
    tensor_names: set[str] = set()
    _check(tree.body, names, tensor_names)
    return Formula(text=text, tree=tree, names=frozenset(names), tensor_names=frozenset(tensor_names),
                   exact_in_any_precision=_is_select_only(tree.body))


_SELECT_FUNCTIONS = {"where", "min", "max", "clamp", "abs", "isnan", "isinf", "is_negzero", "bitnot"}


def _is_select_only(node: ast.AST) -> bool:
    """True when the formula only compares, selects and negates its operands, so evaluating it in
    the operands' own type gives the same values as evaluating it exactly."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and not isinstance(sub.op, (ast.BitAnd, ast.BitOr)):
            return False
        if isinstance(sub, ast.Call) and sub.func.id not in _SELECT_FUNCTIONS:  # type: ignore[attr-defined]
            return False
    return True


def _describe(node: ast.AST) -> str:
    return type(node).__name__ + (f" '{ast.unparse(node)}'" if hasattr(ast, "unparse") else "")


def _check(node: ast.AST, names: set[str], tensor_names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise FormulaError(f"only numbers are allowed as constants, found {_describe(node)}")
    elif isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise FormulaError(f"names starting with '_' are not allowed: '{node.id}'")
        if node.id in FUNCTIONS:
            raise FormulaError(f"'{node.id}' is a function and must be called")
        names.add(node.id)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise FormulaError(f"operator {type(node.op).__name__} is not allowed (use + - * / & |)")
        _check(node.left, names, tensor_names)
        _check(node.right, names, tensor_names)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd, ast.Not, ast.Invert)):
            raise FormulaError(f"unary operator {type(node.op).__name__} is not allowed")
        _check(node.operand, names, tensor_names)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, names, tensor_names)
    elif isinstance(node, ast.Compare):
        if len(node.ops) != 1 or type(node.ops[0]) not in _CMPOPS:
            raise FormulaError("only single comparisons < <= > >= == != are allowed")
        _check(node.left, names, tensor_names)
        _check(node.comparators[0], names, tensor_names)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise FormulaError(f"only calls of whitelisted functions are allowed, found {_describe(node.func)}")
        fname = node.func.id
        if fname not in FUNCTIONS:
            raise FormulaError(f"function '{fname}' is not allowed; known: {', '.join(sorted(FUNCTIONS))}")
        if node.keywords:
            raise FormulaError(f"keyword arguments are not allowed in '{fname}()'")
        arity = FUNCTIONS[fname][0]
        if len(node.args) != arity:
            raise FormulaError(f"'{fname}()' takes {arity} argument(s), found {len(node.args)}")
        args = list(node.args)
        if fname in TENSOR_NAME_FUNCTIONS:
            if not isinstance(args[0], ast.Name):
                raise FormulaError(f"'{fname}()' takes a tensor field name as first argument")
            tensor_names.add(args[0].id)
            if fname == "is_type":
                if not (isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)):
                    raise FormulaError("is_type() takes a data type name in quotes as second argument")
            return
        for arg in args:
            _check(arg, names, tensor_names)
    else:
        raise FormulaError(f"{_describe(node)} is not allowed in a formula")


# Functions whose result is one of their value arguments (the condition of `where` is not one).
_VALUE_SELECTING = {"where", "min", "max", "clamp"}


def _value_argument(position: int, node: ast.AST, fname: str, ctx: EvalContext) -> tuple[Any, bool]:
    if fname == "where" and position == 0:
        return _node(node, ctx)
    number = _number(node)
    if number is not None:
        return _literal(number, ctx.literal_dtype), False
    return _node(node, ctx)


def _number(node: ast.AST) -> int | float | None:
    """The value of a number literal, signed ones included (`-1` parses as a negation of 1)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _dtype_of(value: Any) -> Any:
    return value.dtype if isinstance(value, (np.ndarray, np.generic)) else type(value)


def _apply(ufunc: np.ufunc, operands: list[tuple[Any, bool]]) -> tuple[Any, bool]:
    """`ufunc` over the operands' values, written into one of them when this evaluation made it
    (owned) and it already has the result's type and shape.

    Why: a formula like clamp(round_half_even(x / scale) + zero_point, Min, Max) otherwise makes
    a new 2^20-element float64 temporary per step; reusing them measured about a third off the
    reference's time. Variables and anything else the caller holds are never written.
    """
    values = [value for value, _ in operands]
    for value, owned in operands:
        if not (owned and isinstance(value, np.ndarray) and value.ndim and value.flags.writeable):
            continue
        try:
            result_type = ufunc.resolve_dtypes(tuple(_dtype_of(v) for v in values) + (None,))[-1]
            shape = np.broadcast_shapes(*(np.shape(v) for v in values))
        except Exception:  # noqa: BLE001 - no in-place form: the plain call decides
            break
        if result_type == value.dtype and shape == value.shape:
            return ufunc(*values, out=value), True
    return ufunc(*values), True


_UFUNC_CALLS: dict[str, list[np.ufunc]] = {
    "min": [np.minimum], "max": [np.maximum], "clamp": [np.maximum, np.minimum], "abs": [np.absolute],
}
# functions whose result is always a new array (so later steps may write into it)
_FRESH_RESULTS = {"where", "isnan", "isinf", "is_negzero", "is_denormal_f32", "is_half", "f32", "f16", "ulp_out", "bitnot"}


def _eval(node: ast.AST, ctx: EvalContext) -> Any:
    return _node(node, ctx)[0]


def _node(node: ast.AST, ctx: EvalContext) -> tuple[Any, bool]:
    """(value, owned): owned values are arrays made by this evaluation, free to be overwritten."""
    if isinstance(node, ast.Constant):
        return node.value, False
    if isinstance(node, ast.Name):
        try:
            return ctx.variables[node.id], False
        except KeyError:
            raise FormulaError(f"name '{node.id}' is not bound") from None
    if isinstance(node, ast.BinOp):
        return _apply(_BINOPS[type(node.op)], [_node(node.left, ctx), _node(node.right, ctx)])
    if isinstance(node, ast.UnaryOp):
        operand = _node(node.operand, ctx)
        if isinstance(node.op, ast.USub):
            return _apply(np.negative, [operand])
        if isinstance(node.op, ast.UAdd):
            return operand
        return _apply(np.logical_not, [operand])
    if isinstance(node, ast.BoolOp):
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        result = _node(node.values[0], ctx)
        for value in node.values[1:]:
            result = _apply(combine, [result, _node(value, ctx)])
        return result
    if isinstance(node, ast.Compare):
        return _apply(_CMPOPS[type(node.ops[0])], [_node(node.left, ctx), _node(node.comparators[0], ctx)])
    if isinstance(node, ast.Call):
        fname = node.func.id  # type: ignore[attr-defined]
        impl = FUNCTIONS[fname][1]
        if fname in TENSOR_NAME_FUNCTIONS:
            extra = [a.value for a in node.args[1:]]  # type: ignore[attr-defined]
            return impl(ctx, node.args[0].id, *extra), False  # type: ignore[attr-defined]
        if fname in _VALUE_SELECTING and ctx.literal_dtype is not None:
            args = [_value_argument(i, arg, fname, ctx) for i, arg in enumerate(node.args)]
        else:
            args = [_node(arg, ctx) for arg in node.args]
        if fname in _UFUNC_CALLS:  # min, max, clamp, abs: one ufunc after another, in place when possible
            result, rest = args[0], args[1:]
            for ufunc in _UFUNC_CALLS[fname]:
                operands = [result] + rest[:ufunc.nin - 1]
                rest = rest[ufunc.nin - 1:]
                result = _apply(ufunc, operands)
            return result
        if fname == "round_half_even":
            value, owned = args[0]
            as_float = _as_float(value)
            return _apply(np.rint, [(as_float, owned or as_float is not value)])
        return impl(ctx, *[value for value, _ in args]), fname in _FRESH_RESULTS
    raise FormulaError(f"{type(node).__name__} is not allowed")  # unreachable after _check


# --- exact evaluation (rare path) -------------------------------------------------------------
# Used for the few elements whose float64 result sits exactly on a rounding midpoint of the
# output type, where rounding twice (exact -> float64 -> output) could differ from rounding once.

def _exact_min(a: Any, b: Any) -> Any:
    return a if a <= b else b


def _exact_max(a: Any, b: Any) -> Any:
    return a if a >= b else b


def _exact_round_half_even(v: Any) -> Any:
    from fractions import Fraction
    return Fraction(round(v))  # Python rounds Fractions half to even


_EXACT_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "where": lambda c, a, b: a if c else b,
    "min": _exact_min,
    "max": _exact_max,
    "clamp": lambda v, lo, hi: _exact_min(_exact_max(v, lo), hi),
    "abs": abs,
    "round_half_even": _exact_round_half_even,
}


class NotExact(Exception):
    """The formula uses something the exact path does not model."""


def evaluate_exact(formula: Formula, variables: dict[str, Any]) -> Any:
    """Evaluate with Python Fractions (finite values only); raise NotExact when not possible."""
    from fractions import Fraction

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return Fraction(node.value)
        if isinstance(node, ast.Name):
            return variables[node.id]
        if isinstance(node, ast.BinOp):
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Div):
                if right == 0:
                    raise NotExact("division by zero")
                return left / right
            raise NotExact(type(node.op).__name__)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Compare):
            op = type(node.ops[0])
            a, b = walk(node.left), walk(node.comparators[0])
            return {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b, ast.Eq: a == b, ast.NotEq: a != b}[op]
        if isinstance(node, ast.Call) and node.func.id in _EXACT_FUNCTIONS:  # type: ignore[attr-defined]
            return _EXACT_FUNCTIONS[node.func.id](*[walk(a) for a in node.args])  # type: ignore[attr-defined]
        raise NotExact(type(node).__name__)

    return walk(formula.tree.body)
