"""A whitelist evaluator for the spec formulas (never `eval`).

Formulas are parsed with `ast.parse(mode="eval")` into a syntax tree, and only a small set of
node types is allowed: numbers, names bound by the spec, + - * /, comparisons, & | ~, `and`,
`or`, `not`, and calls of the functions in FUNCTIONS. Attribute access, subscripts, lambdas,
comprehensions, strings outside `is_type`, and any unknown name are refused when the spec is
loaded, with a message saying what was found. Evaluation walks the tree with NumPy, elementwise.

Formulas are bounded so that no text can end in a RecursionError: at most MAX_FORMULA_CHARS
characters and MAX_FORMULA_DEPTH levels (checked on the text before parsing, then on the tree),
integer literals below 2^64 (and not below -2^63 when negated: no NumPy integer type holds that).
A Python integer meets a NumPy value only through `_typed_literals`, which gives it a NumPy type
that holds it exactly where the NumPy operand's type cannot (see there). `check_kinds` checks each
function against the kinds of value its argument can hold (integer-only, float-only or any), given
the spec's support tables.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from harness.spec.functions import BIT_FUNCTIONS, EXACT_VALUE_FUNCTIONS, MATH_FUNCTIONS, erfc, exact_floor_mod, exact_fmod


# Element coordinates (element-wise formulas): `coord0` is the element's index along the output's
# LAST dimension, `coord1` along the one before it, ... up to `coord7` (0 beyond the output's rank,
# as for a leading dimension of size 1); `linear_index` is its row-major index over the output's
# Sizes. Counted from the last dimension so that a formula reads the same for every rank
# (a diagonal matrix's row and column are coord1 and coord0 whatever the batch dimensions) and so that
# the arrays broadcast against a leading batch axis (the generator's (count, *Sizes) views).
COORDINATE_NAMES: tuple[str, ...] = tuple(f"coord{i}" for i in range(8))
LINEAR_INDEX = "linear_index"
ELEMENT_NAMES = frozenset(COORDINATE_NAMES + (LINEAR_INDEX,))


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
    """`value` as a scalar of `dtype` when that loses nothing, else unchanged (an integer that
    `dtype` cannot hold is typed by `_typed_literals` where it meets its operands)."""
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


# --- Python integers next to NumPy values ------------------------------------------------------
# Under NumPy's promotion rules (NEP 50) a Python int takes the type of the NumPy value it meets.
# When that type cannot hold it, the outcome depends on the function and on the NumPy release:
# np.where(c, -1, uint16_values) silently wraps -1 to 65535 on NumPy 2.0-2.4 (a uint16 result) and
# raises OverflowError on 2.5; np.minimum(uint16_values, -1), uint8_values + 300 and np.uint16(-1) raise;
# float16_values == 65520 compares against inf, and a lone 2**63 is turned into uint64 (so
# np.negative(2**63) wraps to +2**63). So the evaluator never hands NumPy such a mix: an integer
# that an operand's type cannot hold exactly is given the smallest NumPy integer type that holds it
# (np.min_scalar_type), and NumPy's promotion then widens (uint16 and int8 -> int32) instead of
# wrapping or raising. Python floats are left as they are (a float next to float32 stays float32),
# and so is every integer its operands hold (the results, and their types, do not change).
# Comparisons need nothing for integer operands: NumPy compares Python ints with integer arrays
# exactly, whatever their range (since NumPy 2.0), and the mixed uint64/int64 loops are exact too.

_DEFAULT_INT = np.dtype(np.int64)  # NumPy's type for a Python int that meets no NumPy value (and for bool + int)
_FLOAT_EXACT_INT = 2 ** 53         # integers of at most this magnitude are exact in float64
_COMPARISONS = frozenset({np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal})


def _is_int(value: Any) -> bool:
    """A Python integer (a literal, or what type_min/type_max give), not a NumPy one and not a bool."""
    return isinstance(value, int) and not isinstance(value, (bool, np.generic))


def _holds(dtype: np.dtype, value: int) -> bool:
    """Whether NumPy, giving the Python int `value` the type `dtype` (as NEP 50 does), keeps it exactly."""
    if dtype.kind == "b":
        dtype = _DEFAULT_INT  # bool + int promotes to the default integer
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min <= value <= info.max
    if dtype.kind == "f":
        with np.errstate(all="ignore"):
            return float(dtype.type(value)) == value  # int == float compares exactly in Python
    return True  # object and others: NumPy keeps the Python int


def _typed_literals(values: list[Any], comparison: bool = False) -> list[Any]:
    """`values` with each Python int that some NumPy operand's type cannot hold exactly replaced by
    a scalar of the smallest NumPy integer type that holds it (np.min_scalar_type); everything else
    unchanged. With no NumPy operand, NumPy's default integer decides. In a comparison, integer and
    bool operands are left to NumPy, which compares Python ints with them exactly; only float
    operands (which would round the int: float16 == 65520 is inf == 65520) count."""
    if not any(_is_int(v) for v in values):
        return values
    dtypes = [v.dtype for v in values if isinstance(v, (np.ndarray, np.generic))]
    if not dtypes:
        dtypes = [_DEFAULT_INT]
    elif comparison:
        dtypes = [d for d in dtypes if d.kind not in "biu"]
    return [np.min_scalar_type(v).type(v) if _is_int(v) and not all(_holds(d, v) for d in dtypes) else v
            for v in values]


def _check_exact_selection(values: list[Any], result: Any) -> None:
    """A selection (where, min, max, clamp) gives one of its operands: it must give it exactly.

    No NumPy integer type holds both uint64 and a negative integer, so NumPy promotes that mix to
    float64, which rounds integers above 2^53. Refuse that instead of returning a value that none
    of the operands had; below 2^53 (SIGN's where(x < 0, -1, ...) on UINT64 selects among -1, 0, 1)
    float64 holds every operand exactly."""
    if np.asarray(result).dtype.kind != "f":
        return
    arrays = [np.asarray(v) for v in values]
    if any(a.dtype.kind not in "biu" for a in arrays):
        return  # a float operand: a float result by design
    for a in arrays:
        if a.size and a.dtype.itemsize == 8 and (a.max() > _FLOAT_EXACT_INT or (a.dtype.kind == "i" and a.min() < -_FLOAT_EXACT_INT)):
            kinds = " and ".join(sorted({str(b.dtype) for b in arrays}))
            raise FormulaError(f"no NumPy type holds both operands of this selection exactly ({kinds}, "
                               f"values beyond 2^53): NumPy would round them in float64")


def _negated(value: int) -> np.integer:
    """`-value` for a Python int, exactly, as np.int64: the type np.negative gives every int below
    2^63, where np.negative(2**63) would make 2**63 a uint64 and wrap it back to +2^63."""
    if not np.iinfo(_DEFAULT_INT).min <= -value <= np.iinfo(_DEFAULT_INT).max:
        raise FormulaError(f"-{value} is below -2^63: no NumPy integer type holds it")
    return _DEFAULT_INT.type(-value)


def _as_float(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


def _ulp_out(ctx: EvalContext, v: Any) -> np.ndarray:
    dtype = np.dtype(ctx.output_numpy_dtype)
    if dtype.kind != "f":
        return np.zeros_like(_as_float(v))
    mag = np.abs(_as_float(v)).astype(dtype)
    return np.spacing(mag).astype(np.float64)


F32_SMALLEST_NORMAL = float(np.finfo(np.float32).tiny)


def is_f32_denormal(v: Any) -> np.ndarray:
    """Where a value is an fp32 denormal (non-zero, below float32's smallest normal): the one
    definition of the values D3D hardware may flush, used by the formula function
    `is_denormal_f32`, the reference's flush and the judge. False everywhere for integers."""
    arr = np.asarray(v)
    if arr.dtype.kind != "f":
        return np.zeros(arr.shape, dtype=bool)
    with np.errstate(invalid="ignore"):  # signalling NaN payloads raise FE_INVALID when widened
        mag = np.abs(arr.astype(np.float64))
    return (mag > 0) & (mag < F32_SMALLEST_NORMAL)


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
    if c.ndim == 0:
        # one choice for every element (an attribute's condition, e.g. has_ScaleBias): the chosen
        # operand, never promoted against the other (INT64 beyond 2^53 next to a float), and a copy:
        # callers may reuse a where() result in place, and the operand may be a bound input
        return np.array(a if bool(c) else b, copy=True)
    a, b = _typed_literals([a, b])  # np.where(c, -1, uint16_values) would wrap -1 (NumPy 2.5: raise)
    dtype_a, dtype_b = getattr(a, "dtype", None), getattr(b, "dtype", None)
    if (c.dtype != np.bool_ or c.size < _SELECT_MIN_ELEMENTS or dtype_a is None or dtype_a != dtype_b
            or dtype_a.kind not in "iuf" or np.broadcast_shapes(c.shape, np.shape(a), np.shape(b)) != c.shape):
        result = np.where(condition, a, b)
        _check_exact_selection([a, b], result)
        return result
    bits = np.dtype(f"u{dtype_a.itemsize}")
    a_bits, b_bits = np.asarray(a).view(bits), np.asarray(b).view(bits)
    mask = c.astype(bits)
    np.negative(mask, out=mask)          # 0 -> 0, 1 -> all ones
    np.bitwise_and(mask, np.bitwise_xor(a_bits, b_bits), out=mask)
    np.bitwise_xor(mask, b_bits, out=mask)
    return mask.view(dtype_a)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, halves away from zero (the sign of zero kept: -0.4 -> -0)."""
    with np.errstate(invalid="ignore"):
        return np.copysign(np.floor(np.abs(v) + 0.5), v) if np.asarray(v).size else v


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
    "round_half_away": (1, lambda ctx, v: _round_half_away(_as_float(v))),
    "trunc": (1, lambda ctx, v: np.trunc(_as_float(v))),
    "isnan": (1, lambda ctx, v: np.isnan(_as_float(v))),
    "isinf": (1, lambda ctx, v: np.isinf(_as_float(v))),
    "is_negzero": (1, lambda ctx, v: _is_negzero(v)),
    "is_denormal_f32": (1, lambda ctx, v: is_f32_denormal(v)),
    "is_half": (1, lambda ctx, v: _is_half(v)),
    "exp": (1, lambda ctx, v: np.exp(_as_float(v))),
    "f32": (1, lambda ctx, v: _as_float(v).astype(np.float32).astype(np.float64)),
    "f16": (1, lambda ctx, v: _as_float(v).astype(np.float16).astype(np.float64)),
    "ulp_out": (1, _ulp_out),
    "bitnot": (1, lambda ctx, v: _bitnot(v)),
    # The next three take a tensor field name (not a value) as first argument.
    "type_min": (1, lambda ctx, t: ctx.type_ranges[ctx.tensor_types[t]][0]),
    "type_max": (1, lambda ctx, t: ctx.type_ranges[ctx.tensor_types[t]][1]),
    "is_type": (2, lambda ctx, t, name: np.bool_(ctx.tensor_types.get(t) == name)),
}
FUNCTIONS.update({name: (f.arity, (lambda numpy: lambda ctx, *args: numpy(*args))(f.numpy)) for name, f in MATH_FUNCTIONS.items()})
FUNCTIONS.update({name: (arity, impl) for name, (arity, impl, _) in BIT_FUNCTIONS.items()})
FUNCTIONS.update(EXACT_VALUE_FUNCTIONS)
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
    transcendental: bool = False          # calls exp(): float64 gives its value only approximately

    def evaluate(self, ctx: EvalContext) -> Any:
        with np.errstate(all="ignore"):
            return _eval(self.tree.body, ctx)


# Bounds on a formula, checked before and while parsing: Python's parser, `_check` and the
# evaluator all recurse once per level of the syntax tree, so an unbounded formula (`x+x+...+x`,
# `------x`, `-(-(-(x)))`) would otherwise end in a RecursionError instead of a clear message.
MAX_FORMULA_CHARS = 1000   # the longest spec formula is under 100 characters
MAX_FORMULA_DEPTH = 50     # levels of the syntax tree; the deepest spec formula has 6
MAX_INT_DIGITS = 20        # an integer literal: |value| < 2^64, which has 20 decimal digits
_INT_LIMIT = 2 ** 64
_NEGATIVE_INT_LIMIT = -2 ** 63
_PREFIX_OPERATORS = {"-", "+", "~", "not"}
_OPENING, _CLOSING = "([{", ")]}"


def _nesting_estimate(text: str) -> int:
    """A cheap, non-recursive estimate of how deep `text` nests: the deepest bracket level, or the
    longest run of prefix operators (`------x`, `-(-(-(x`), whichever is larger.

    Why before parsing: it refuses pathological text without handing it to Python's parser,
    whose own recursion (and memory) grows with the nesting.
    """
    depth = deepest = run = longest = 0
    for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*|\S", text):
        if token in _OPENING:
            depth += 1
            deepest = max(deepest, depth)
        elif token in _CLOSING:
            depth -= 1
            run = 0
        elif token in _PREFIX_OPERATORS:
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    return max(deepest, longest)


_SKIPPED_NODES = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _tree_depth(tree: ast.AST) -> int:
    """The syntax tree's depth in expression levels, measured without recursion."""
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _SKIPPED_NODES):
                stack.append((child, depth + 1))
    return deepest


def _parse_bounded(text: str) -> ast.Expression:
    """`ast.parse` of a formula whose length and nesting are within the limits; never a RecursionError."""
    if len(text) > MAX_FORMULA_CHARS:
        raise FormulaError(f"formula longer than {MAX_FORMULA_CHARS} characters ({len(text)})")
    nesting = _nesting_estimate(text)
    if nesting > MAX_FORMULA_DEPTH:
        raise FormulaError(f"formula nests {nesting} levels deep (brackets or prefix operators); "
                           f"at most {MAX_FORMULA_DEPTH} are allowed")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        raise FormulaError(f"not a valid expression: {exc.msg}{where}") from None
    except ValueError as exc:  # e.g. a NUL character
        raise FormulaError(f"not a valid expression: {exc}") from None
    except (RecursionError, MemoryError) as exc:
        raise FormulaError(f"formula too deeply nested to parse ({type(exc).__name__})") from None
    depth = _tree_depth(tree.body) + 1
    if depth > MAX_FORMULA_DEPTH:
        raise FormulaError(f"formula is {depth} levels deep; at most {MAX_FORMULA_DEPTH} are allowed "
                           "(name parts of it in formula.constants)")
    return tree


def parse_formula(text: str) -> Formula:
    """Parse and whitelist-check `text`; raise FormulaError naming the first forbidden construct."""
    if not isinstance(text, str) or not text.strip():
        raise FormulaError("a formula must be a non-empty string")
    tree = _parse_bounded(text)
    names: set[str] = set()
    tensor_names: set[str] = set()
    try:
        _check(tree.body, names, tensor_names)
    except (RecursionError, MemoryError) as exc:  # unreachable within MAX_FORMULA_DEPTH; never a traceback
        raise FormulaError(f"formula too deeply nested to check ({type(exc).__name__})") from None
    return Formula(text=text, tree=tree, names=frozenset(names), tensor_names=frozenset(tensor_names),
                   exact_in_any_precision=_is_select_only(tree.body),
                   transcendental=any(isinstance(sub, ast.Call) and getattr(sub.func, "id", None) in TRANSCENDENTAL_FUNCTIONS
                                      for sub in ast.walk(tree.body)))


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


def _check_int_literal(value: int | float) -> None:
    """Integer literals stay within 64 bits: no data type holds more, and NumPy would turn a larger
    one into a Python-object array (or fail) at evaluation time. (A negated one is checked against
    -2^63 by `_check`.)"""
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:
        digits = len(str(abs(value)))
        shown = str(value) if digits <= 2 * MAX_INT_DIGITS else f"of {digits} digits"
        raise FormulaError(f"integer literal {shown} is out of range: |value| must be below 2^64 "
                           f"(at most {MAX_INT_DIGITS} digits)")


def _check(node: ast.AST, names: set[str], tensor_names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise FormulaError(f"only numbers are allowed as constants, found {_describe(node)}")
        _check_int_literal(node.value)
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
        literal = _number(node)
        if isinstance(node.op, ast.USub) and isinstance(literal, int) and literal < _NEGATIVE_INT_LIMIT:
            raise FormulaError(f"integer literal {literal} is out of range: a negative one must be at least -2^63 "
                               f"({_NEGATIVE_INT_LIMIT}), the smallest 64-bit integer")
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


# --- kinds: which function is meaningful for which values ---------------------------------------
# A formula is checked once more when its spec is built: each function against the kinds of value
# (integer, float, truth value) its argument can hold, from the support tables of the tensors the
# formula reads. The evaluator would otherwise find out at run time, in the middle of a diff.

INTEGER, FLOAT, BOOL = "integer", "float", "bool"
Kinds = frozenset
ANY_NUMBER: Kinds = frozenset({INTEGER, FLOAT})

# Integer-only functions fail on a float at run time (bitnot refuses it; float types have no
# type_min/type_max), so a single float type allowed is an error. Float-only functions are
# predicates that are always false on integers, so they are an error only when their argument
# can never be a float (a dead condition). The others are meaningful for any number.
INTEGER_ONLY_FUNCTIONS = frozenset({"bitnot", "type_min", "type_max", *BIT_FUNCTIONS})
FLOAT_ONLY_FUNCTIONS = frozenset({"isnan", "isinf", "is_negzero", "is_denormal_f32", "is_half"})
# Float-only functions with a float value: the precision model has rules for them on floats only
# (D3D's exp is a float instruction), so an argument that can be an integer or a truth value is an error.
FLOAT_VALUE_FUNCTIONS = frozenset({"exp", *MATH_FUNCTIONS})
TRANSCENDENTAL_FUNCTIONS = frozenset({"exp", *MATH_FUNCTIONS})  # results float64 cannot give exactly (see evaluate.py)
_FLOAT_RESULTS = {"round_half_even", "round_half_away", "trunc", "f32", "f16", "ulp_out", "exp", "floor", "ceil", *MATH_FUNCTIONS}


@dataclass(frozen=True)
class KindFacts:
    """What a spec says about the names a formula reads (see check_kinds)."""

    variables: dict[str, Kinds]             # variable -> kinds of value it can hold
    tensors: dict[str, dict[str, str]]      # tensor field -> {data type it may have: its kind}
    why: dict[str, str] = field(default_factory=dict)  # name -> where its kinds come from, for messages


def check_kinds(formula: Formula, facts: KindFacts) -> Kinds:
    """Check every function of `formula` against the kinds its argument can hold; return the kinds
    of the formula's value. Raises FormulaError naming the function and why the kind is wrong."""
    return _kinds(formula.tree.body, facts)


def _combine(left: Kinds, right: Kinds) -> Kinds:
    """Kinds of an arithmetic result: NumPy promotes to float when either operand is a float."""
    return frozenset(FLOAT if FLOAT in (a, b) else INTEGER for a in left for b in right)


def _reasons(node: ast.AST, facts: KindFacts) -> str:
    """` (x reads InputTensor: INT8, UINT8)`: where the kinds of the names in `node` come from."""
    names = sorted({sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)})
    known = [facts.why[name] for name in names if name in facts.why]
    return f" ({'; '.join(known)})" if known else ""


def _kinds(node: ast.AST, facts: KindFacts) -> Kinds:
    """Kinds of `node`'s value; recursion is bounded by MAX_FORMULA_DEPTH."""
    if isinstance(node, ast.Constant):
        return frozenset({INTEGER if isinstance(node.value, int) else FLOAT})
    if isinstance(node, ast.Name):
        return facts.variables.get(node.id, ANY_NUMBER)
    if isinstance(node, ast.BinOp):
        left, right = _kinds(node.left, facts), _kinds(node.right, facts)
        if isinstance(node.op, ast.Div):
            return frozenset({FLOAT})
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            return frozenset({BOOL})
        if isinstance(node.op, ast.Sub) and BOOL in left and BOOL in right:
            raise FormulaError(f"'-' between two truth values ('{ast.unparse(node)}'); NumPy refuses it (use where())")
        return _combine(left, right)
    if isinstance(node, ast.UnaryOp):
        operand = _kinds(node.operand, facts)
        if isinstance(node.op, (ast.Not, ast.Invert)):
            return frozenset({BOOL})
        if isinstance(node.op, ast.USub) and BOOL in operand:
            raise FormulaError(f"'-' cannot negate a truth value ('{ast.unparse(node.operand)}'); NumPy refuses it")
        return operand
    if isinstance(node, (ast.BoolOp, ast.Compare)):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                _kinds(child, facts)
        return frozenset({BOOL})
    if isinstance(node, ast.Call):
        return _call_kinds(node, facts)
    return ANY_NUMBER  # unreachable after _check


def _call_kinds(node: ast.Call, facts: KindFacts) -> Kinds:
    """Kinds of a call's value, after checking its argument against the function's domain."""
    fname = node.func.id  # type: ignore[attr-defined]
    if fname in TENSOR_NAME_FUNCTIONS:
        return _tensor_function_kinds(node, fname, facts)
    args = [_kinds(arg, facts) for arg in node.args]
    first = node.args[0]
    if fname == "bitnot" or fname in BIT_FUNCTIONS:
        for arg, kinds in zip(node.args, args):
            wrong = sorted(kinds - {INTEGER})
            if wrong:
                raise FormulaError(f"{fname}() needs an integer argument, but '{ast.unparse(arg)}' can be a "
                                   f"{' or '.join(wrong)} value{_reasons(arg, facts)}")
        return frozenset({INTEGER})
    if fname in FLOAT_ONLY_FUNCTIONS:
        if FLOAT not in args[0]:
            raise FormulaError(f"{fname}() is meaningful for float values only, but '{ast.unparse(first)}' "
                               f"is never a float{_reasons(first, facts)}, so it is always false")
        return frozenset({BOOL})
    if fname in FLOAT_VALUE_FUNCTIONS:
        for arg, kinds in zip(node.args, args):
            wrong = sorted(kinds - {FLOAT})
            if wrong:
                raise FormulaError(f"{fname}() takes float values only, but '{ast.unparse(arg)}' can be a "
                                   f"{' or '.join(wrong)} value{_reasons(arg, facts)}")
        return frozenset({FLOAT})
    if fname in ("fmod", "floor_mod"):
        return _combine(args[0], args[1])
    if fname == "where":
        return args[1] | args[2]
    if fname in ("min", "max", "clamp"):
        result = args[0]
        for other in args[1:]:
            result = _combine(result, other)
        return result
    if fname in _FLOAT_RESULTS:
        return frozenset({FLOAT})
    return args[0]  # abs


def _tensor_function_kinds(node: ast.Call, fname: str, facts: KindFacts) -> Kinds:
    """type_min/type_max need an integer tensor; is_type must name a type the tensor can have."""
    tensor = node.args[0].id  # type: ignore[attr-defined]
    types = facts.tensors.get(tensor)
    if fname == "is_type":
        name = node.args[1].value  # type: ignore[attr-defined]
        if types is not None and name not in types:
            raise FormulaError(f"is_type({tensor}, '{name}') is always false: the support tables allow "
                               f"{tensor} only {', '.join(types)}")
        return frozenset({BOOL})
    floats = [t for t, kind in (types or {}).items() if kind == FLOAT]
    if floats:
        raise FormulaError(f"{fname}({tensor}) is meaningful for integer tensors only (float types have no range), "
                           f"but the support tables allow {tensor} {', '.join(floats)}")
    return frozenset({INTEGER})


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


def _apply(ufunc: np.ufunc, operands: list[tuple[Any, bool]], output: Any = None) -> tuple[Any, bool]:
    """`ufunc` over the operands' values, written into one of them when this evaluation made it
    (owned) and it already has the result's type and shape.

    Why: a formula like clamp(round_half_even(x / scale) + zero_point, Min, Max) otherwise makes
    a new 2^20-element float64 temporary per step; reusing them measured about a third off the
    reference's time. Variables and anything else the caller holds are never written.
    Python ints are typed first (`_typed_literals`), so no operand is wrapped or refused; for
    min/max, `output` (the output's NumPy type) lets a whole float be selected as an integer
    (`_whole_floats_as_integers`).
    """
    values = _typed_literals([value for value, _ in operands], comparison=ufunc in _COMPARISONS)
    if (ufunc is np.minimum or ufunc is np.maximum) and output is not None:
        values = _whole_floats_as_integers(values, np.dtype(output))
    result = _apply_typed(ufunc, values, operands)
    if ufunc is np.minimum or ufunc is np.maximum:
        _check_exact_selection(values, result[0])
    return result


def _whole_floats_as_integers(values: list[Any], output: np.dtype) -> list[Any]:
    """The operands of a min/max with each float scalar (an attribute, a literal) given the
    integer operands' type, when the output is an integer type and the scalar is a whole number
    that both the operands' type and the output's type hold; otherwise `values` unchanged.

    Why: NumPy promotes an int64 or uint64 operand next to a float one to float64, which rounds
    integers beyond 2^53 (a FLOAT attribute bounding INT64 data: max(-1.0, 2^60 + 1) would give
    2^60). A whole float within the types' ranges is the same number as an integer, so the
    selection gives what it gave before, exactly. A fraction, NaN, an infinity or a value beyond
    the output's type keeps NumPy's promotion, so such a result still reaches the output as a
    float (toward zero, saturated) rather than as an integer that would wrap.
    """
    integer_types = {np.dtype(v.dtype) for v in values if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "iu"}
    floats = [i for i, v in enumerate(values) if isinstance(v, float) or
              (isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind == "f")]
    scalars = all(np.ndim(values[i]) == 0 for i in floats)  # a float array: the result is a float anyway
    if output.kind not in "iu" or len(integer_types) != 1 or not floats or not scalars:
        return values
    (integer,) = integer_types
    out = list(values)
    for i in floats:
        value = np.asarray(values[i], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            held = np.isfinite(value) & (np.trunc(value) == value)
            for info in (np.iinfo(integer), np.iinfo(output)):
                # the ends are -2^(n-1) or 0 and 2^n - 1: info.max + 1 is a power of two, exact in float64
                held &= (value >= float(info.min)) & (value < float(info.max + 1))
        if not held.all():
            return values
        converted = value.astype(integer)
        out[i] = converted if isinstance(values[i], np.ndarray) else integer.type(converted)
    return out


def _apply_typed(ufunc: np.ufunc, values: list[Any], operands: list[tuple[Any, bool]]) -> tuple[Any, bool]:
    """`ufunc(*values)`, into an owned operand of `operands` where it has the result's type and shape."""
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
_FRESH_RESULTS = {"where", "isnan", "isinf", "is_negzero", "is_denormal_f32", "is_half", "f32", "f16", "ulp_out", "bitnot", "exp",
                  *MATH_FUNCTIONS, *BIT_FUNCTIONS, *EXACT_VALUE_FUNCTIONS}


def _is_exp_minus_one(node: ast.BinOp) -> bool:
    """`exp(a) - 1`: evaluated as expm1(a), the same real value without float64's cancellation
    (exp(-1e-10) - 1 in float64 keeps only about 6 correct digits; expm1 keeps all 16)."""
    return (isinstance(node.op, ast.Sub) and isinstance(node.left, ast.Call) and isinstance(node.left.func, ast.Name)
            and node.left.func.id == "exp" and len(node.left.args) == 1
            and isinstance(node.right, ast.Constant) and type(node.right.value) in (int, float) and node.right.value == 1)


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1


def _call_of(node: ast.AST, name: str) -> ast.AST | None:
    """The argument of a one-argument call of `name`, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name and len(node.args) == 1:
        return node.args[0]
    return None


def _one_plus_erf_argument(node: ast.BinOp) -> ast.AST | None:
    """`1 + erf(a)` (either order): evaluated as erfc(-a), the same real value without float64's
    cancellation where erf(a) is near -1 (GELU's tail: 1 + erf(-5.77) in float64 is 5% off)."""
    if not isinstance(node.op, ast.Add):
        return None
    if _is_one(node.left):
        return _call_of(node.right, "erf")
    if _is_one(node.right):
        return _call_of(node.left, "erf")
    return None


def _log_one_plus_argument(node: ast.Call) -> ast.AST | None:
    """`log(1 + t)` (either order): evaluated as log1p(t), without float64's cancellation where t is
    tiny (a softplus of -50 is 1.9e-22, which log(1 + t) in float64 gives as 0)."""
    inner = _call_of(node, "log")
    if not isinstance(inner, ast.BinOp) or not isinstance(inner.op, ast.Add):
        return None
    if _is_one(inner.left):
        return inner.right
    if _is_one(inner.right):
        return inner.left
    return None


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
        if _is_exp_minus_one(node):
            return np.expm1(_as_float(_node(node.left.args[0], ctx)[0])), True  # type: ignore[attr-defined]
        erf_argument = _one_plus_erf_argument(node)
        if erf_argument is not None:
            return erfc(np.negative(_as_float(_node(erf_argument, ctx)[0]))), True
        return _apply(_BINOPS[type(node.op)], [_node(node.left, ctx), _node(node.right, ctx)])
    if isinstance(node, ast.UnaryOp):
        operand = _node(node.operand, ctx)
        if isinstance(node.op, ast.USub):
            if _is_int(operand[0]):  # a literal or type_min/type_max: negated exactly
                return _negated(operand[0]), False
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
        log_argument = _log_one_plus_argument(node)
        if log_argument is not None:
            with np.errstate(all="ignore"):
                return np.log1p(_as_float(_node(log_argument, ctx)[0])), True
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
                result = _apply(ufunc, operands, ctx.output_numpy_dtype)
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


# exp of a non-zero rational is irrational, so no exact Fraction exists: it is computed with Python's
# decimal module to EXP_DIGITS significant digits (correctly rounded there) and handed on as a
# Fraction. That decides the rounding to float32/float16 of every result whose distance from a
# rounding midpoint is above about 10^-(EXP_DIGITS - 50) relative (the 50: exp(x) - 1 cancels up to
# 45 leading digits for an fp32 denormal x); binary32's hardest-to-round cases of exp need about
# 2 x 24 + 10 bits, far below that. exp(0) = 1 is exact.
EXP_DIGITS = 120


def _exact_exp(v: Any) -> Any:
    from decimal import Context, Decimal
    from fractions import Fraction
    if v == 0:
        return Fraction(1)
    if abs(v) > 10 ** 4:  # exp overflows or underflows every float type: float64's inf or 0 is exact
        raise NotExact("exp of a huge argument")
    ctx = Context(prec=EXP_DIGITS, Emax=10 ** 6, Emin=-10 ** 6)
    value = ctx.divide(Decimal(v.numerator), Decimal(v.denominator)).exp(ctx)
    return Fraction(value)


def _or_not_exact(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """`f`, with its domain errors (a remainder by zero, a complex result) as NotExact."""
    def call(*args: Any) -> Any:
        try:
            return f(*args)
        except (ArithmeticError, ValueError) as exc:
            raise NotExact(f"{name}: {exc}") from None
    return call


_EXACT_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{name: _or_not_exact(name, f.exact) for name, f in MATH_FUNCTIONS.items()},  # sqrt among them (mpmath)
    "exp": _exact_exp,
    "floor": lambda v: v.numerator // v.denominator,
    "ceil": lambda v: -((-v.numerator) // v.denominator),
    "fmod": _or_not_exact("fmod", exact_fmod),
    "floor_mod": _or_not_exact("floor_mod", exact_floor_mod),
    "where": lambda c, a, b: a if c else b,
    "min": _exact_min,
    "max": _exact_max,
    "clamp": lambda v, lo, hi: _exact_min(_exact_max(v, lo), hi),
    "abs": abs,
    "round_half_even": _exact_round_half_even,
    "round_half_away": lambda v: (1 if v >= 0 else -1) * ((abs(v) * 2 + 1) // 2),
    "trunc": lambda v: (1 if v >= 0 else -1) * (abs(v) // 1),
}


class NotExact(Exception):
    """The formula uses something the exact path does not model."""


def evaluate_exact(formula: Formula, variables: dict[str, Any]) -> Any:
    """Evaluate with Python Fractions (finite values only); raise NotExact when not possible."""
    from fractions import Fraction

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            assert isinstance(node.value, (int, float, str))  # a checked formula's constants are numbers
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
