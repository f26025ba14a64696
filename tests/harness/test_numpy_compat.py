"""The formula evaluator does not depend on how a NumPy release treats a Python int it cannot hold.

NumPy gives a Python int the type of the NumPy value it meets (NEP 50). Where that type cannot
hold it, NumPy 2.0-2.4 silently wrap it in np.where (np.where(c, -1, uint16_values) selects 65535)
and NumPy 2.5 raises OverflowError (ELEMENT_WISE_SIGN's formula on UINT16 inputs), while min, max
and arithmetic raise on every 2.x and a float16 operand rounds 65520 to inf. The evaluator types
such a literal itself (the smallest integer type that holds it), so every step is exact on any
NumPy >= 2.0; scripts/check_newest_numpy.sh runs this file on the newest NumPy pip can get.
Warnings are errors here: a cast that overflows would show up as one.
"""
from __future__ import annotations

import ast
from fractions import Fraction

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.reference.evaluate import expected_for
from harness.spec.expr import EvalContext, FormulaError, _select, evaluate_exact, parse_formula
from tests.helpers import SPECS

pytestmark = pytest.mark.filterwarnings("error")

SIGN = "where(x < 0, -1, where(x > 0, 1, 0))"  # specs/ELEMENT_WISE_SIGN.yaml
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
INTEGERS = ["int8", "int16", "int32", "int64"] + UNSIGNED
BIG = 5000  # above the size where where() selects with bit masks (expr._SELECT_MIN_ELEMENTS)


def _evaluate(text: str, x: np.ndarray, literal_dtype=None):
    return parse_formula(text).evaluate(EvalContext(variables={"x": x}, literal_dtype=literal_dtype))


def _contexts(dtype: np.dtype):
    """The evaluator's two ways with literals: as they come, and typed like the output where exact
    (what the reference does for select-only formulas on native operands)."""
    return [None, dtype]


# --- where() with a literal the operand's type cannot hold --------------------------------------

@pytest.mark.parametrize("literal_dtype", ["native", None])
@pytest.mark.parametrize("size", [4, BIG])
@pytest.mark.parametrize("type_name", UNSIGNED)
def test_sign_formulas_on_unsigned_types_give_exact_values_and_a_type_that_holds_minus_one(type_name, size, literal_dtype):
    dtype = np.dtype(type_name)
    base = np.array([0, 1, 2, np.iinfo(dtype).max if dtype.itemsize < 8 else 2**53], dtype)
    x = np.resize(base, size)
    typed = dtype if literal_dtype == "native" else None
    ones = _evaluate("where(x < 0, -1, 1)", x, typed)
    assert np.asarray(ones).tolist() == [1] * size
    assert np.can_cast(np.int8, np.asarray(ones).dtype), f"-1 would not fit a {np.asarray(ones).dtype} result"
    sign = _evaluate(SIGN, x, typed)
    assert np.asarray(sign).tolist() == np.resize([0, 1, 1, 1], size).tolist()
    assert np.can_cast(np.int8, np.asarray(sign).dtype)


@pytest.mark.parametrize("size", [4, BIG])
@pytest.mark.parametrize("type_name", UNSIGNED)
def test_a_selected_minus_one_is_minus_one_not_the_types_maximum(type_name, size):
    dtype = np.dtype(type_name)
    top = int(np.iinfo(dtype).max) if dtype.itemsize < 8 else 2**53
    x = np.resize(np.array([0, 5, top], dtype), size)
    want = np.resize([-1, 5, top], size).tolist()
    for literal_dtype in _contexts(dtype):
        got = _evaluate("where(x < 1, -1, x)", x, literal_dtype)
        assert np.asarray(got).tolist() == want  # NumPy 2.4 selected 2^k - 1 for the -1; 2.5 raised


def test_select_types_the_literal_with_the_smallest_type_that_holds_it():
    condition = np.array([True, False] * BIG)
    x16 = np.full(2 * BIG, 7, np.uint16)
    got = _select(condition, -1, x16)
    assert got.dtype == np.int32 and got[:4].tolist() == [-1, 7, -1, 7]  # uint16 with int8
    got = _select(condition, 300, np.full(2 * BIG, 7, np.uint8))
    assert got.dtype == np.uint16 and got[:2].tolist() == [300, 7]
    got = _select(condition, np.uint8(1), 70000)
    assert got.dtype == np.uint32 and got[:2].tolist() == [1, 70000]
    got = _select(condition, 2**63, condition)  # bool and a Python int: NumPy used int64 (wrapping to -2^63)
    assert got[:2].tolist() == [2**63, 0]
    assert _select(condition, 1, x16).dtype == np.uint16  # a literal the type holds leaves the type alone


def test_uint64_and_a_negative_literal_are_exact_or_refused_never_rounded():
    """No NumPy integer type holds both; float64 holds both up to 2^53, beyond it would round."""
    small = np.array([0, 1, 2**53], np.uint64)
    assert _evaluate("where(x < 1, -1, x)", small).tolist() == [-1, 1, 2**53]
    big = np.array([0, 2**64 - 1], np.uint64)
    for text in ("where(x < 1, -1, x)", "max(x, -1)", "clamp(x, -5, 300)"):
        with pytest.raises(FormulaError, match="no NumPy type holds both"):
            _evaluate(text, big)


# --- min, max, clamp and arithmetic with an out-of-range literal ---------------------------------

@pytest.mark.parametrize("size", [4, BIG])
def test_literal_300_with_a_uint8_tensor(size):
    x = np.resize(np.array([0, 100, 101, 255], np.uint8), size)
    cases = {
        "where(x > 100, 300, x)": [0, 100, 300, 300],   # NumPy 2.4: 44 (300 mod 256)
        "min(x, 300)": [0, 100, 101, 255],              # OverflowError on every NumPy 2.x
        "max(x, 300)": [300, 300, 300, 300],
        "clamp(x, -5, 300)": [0, 100, 101, 255],
        "clamp(x, 101, 300)": [101, 101, 101, 255],
        "x + 300": [300, 400, 401, 555],
        "x == 300": [False] * 4,
        "x < 300": [True] * 4,
    }
    for text, want in cases.items():
        for literal_dtype in _contexts(np.dtype(np.uint8)):
            got = np.broadcast_to(_evaluate(text, x, literal_dtype), x.shape)
            assert got.tolist() == np.resize(np.array(want), size).tolist(), text


def test_int_literals_compared_with_float16_are_not_rounded_to_float16():
    x = np.array([65504, np.inf, -np.inf], np.float16)
    assert _evaluate("x == 65520", x).tolist() == [False, False, False]  # 65520 is inf in float16
    assert _evaluate("x >= 65519", x).tolist() == [False, True, False]   # 65519 is 65504 in float16
    assert _evaluate("where(x < 70000, 1, 0)", x, np.float16).tolist() == [1, 0, 1]


def test_negated_literals_are_exact_down_to_int64_min():
    x = np.array([-3, 0, 3], np.int64)
    got = _evaluate("where(x < 0, -9223372036854775808, x)", x)  # np.negative(2**63) is +2^63 as uint64
    assert got.dtype == np.int64 and got.tolist() == [-2**63, 0, 3]
    assert _evaluate("-9223372036854775808", x) == -2**63
    with pytest.raises(FormulaError, match="at least -2"):
        parse_formula("x * -18446744073709551615")   # np.negative(2**64 - 1) wrapped to 1
    with pytest.raises(FormulaError, match="at least -2"):
        parse_formula("max(x, -9223372036854775809)")
    parse_formula("x * 18446744073709551615")  # positive ones up to 2^64 - 1 stay allowed (UINT64's maximum)


def test_float_literals_keep_numpy_behaviour():
    """A Python float next to a float32 value stays float32 (NumPy's own rule): bit for bit."""
    x = np.array([-2.5, -0.0, 0.1, 3.0, np.nan], np.float32)
    for literal_dtype in (None, np.float32):
        got = _evaluate("min(x, 0.1)", x, literal_dtype)
        assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), np.minimum(x, 0.1).view(np.uint32))
        got = _evaluate("where(x < 0, 0.5, x)", x, literal_dtype)
        assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), np.where(x < 0, 0.5, x).view(np.uint32))
    assert _evaluate("x * 0.1", x).dtype == np.float32
    assert _evaluate("x * -0.5", x).dtype == np.float64  # a negated literal is a float64 scalar, as before


def _bounded(x: np.ndarray, lo: float, hi: float, output=None):
    """min(hi, max(lo, x)) with the bounds as the reference binds a FLOAT attribute (float64
    scalars), for an output of x's type unless `output` names another."""
    ctx = EvalContext(variables={"x": x, "lo": np.float64(lo), "hi": np.float64(hi)},
                      output_numpy_dtype=x.dtype if output is None else output)
    return np.asarray(parse_formula("min(hi, max(lo, x))").evaluate(ctx))


def test_whole_float_bounds_select_64_bit_integers_exactly():
    """A whole float bound within the integer operand's type is selected in that type: INT64 and
    UINT64 values beyond 2^53 are not rounded through float64 (2^53 + 1 would become 2^53)."""
    x = np.array([2**53 + 1, -(2**62) - 1, 2**63 - 1, -(2**63)], np.int64)
    got = _bounded(x, -2.0**62, 2.0**62)
    assert got.dtype == np.int64 and got.tolist() == [2**53 + 1, -(2**62), 2**62, -(2**62)]
    u = np.array([2**53 + 1, 2**63 + 1, 2**64 - 1, 0], np.uint64)
    got = _bounded(u, 0.0, 2.0**63)
    assert got.dtype == np.uint64 and got.tolist() == [2**53 + 1, 2**63, 2**63, 0]
    assert _bounded(np.array([-3, 7], np.int8), -0.0, 5.0).tolist() == [0, 5]  # -0.0 is the whole number 0


def test_whole_float_bounds_beyond_the_output_type_stay_floats():
    """INT8 data bound as int64 (the reference widens integer inputs) with a bound of 200: the
    selection stays float64 and reaches the INT8 output saturated (127), not as the int64 200,
    which would wrap to -56; a float output type keeps NumPy's promotion too."""
    got = _bounded(np.array([-3, 7], np.int64), 200.0, 300.0, output=np.int8)
    assert got.dtype == np.float64 and got.tolist() == [200.0, 200.0]
    assert _bounded(np.array([-3, 7], np.int64), -5.0, 5.0, output=np.int8).dtype == np.int64
    assert _bounded(np.array([-3, 7], np.int64), -5.0, 5.0, output=np.float32).dtype == np.float64


@pytest.mark.parametrize("lo,hi", [(-1.5, 5.0), (np.nan, 5.0), (-np.inf, 5.0), (0.0, 2.0**63), (-(2.0**63) * 2, 0.0)])
def test_float_bounds_no_integer_type_holds_keep_numpy_promotion(lo, hi):
    """A fraction, NaN, an infinity or a bound beyond INT64 (2^63, -2^64) is not an INT64 value:
    the selection stays in float64, as NumPy promotes it."""
    got = _bounded(np.array([-3, 7], np.int64), lo, hi)
    assert got.dtype == np.float64


# --- every step of an evaluation is exact ---------------------------------------------------------

STEP_FORMULAS = [SIGN, "where(x < 0, -1, 1)", "where(x < 1, -1, x)", "where(x > 100, 300, x)", "clamp(x, -5, 300)",
                 "max(min(x, 300), -129)", "min(where(x > 0, 70000, -70000), x)", "where(x == 65536, 1, -1)",
                 "where(x > 4294967296, 4294967296, -129)", "where(x != -1, 256, -1)"]


def _values(dtype: np.dtype) -> list[int]:
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if dtype == np.uint64:
        high = 2**53  # float64 (uint64 with a negative literal) holds these exactly; beyond: FormulaError, above
    candidates = {low, low + 1, -1, 0, 1, 2, 100, 101, 255, 256, 300, 65535, 65536, high - 1, high}
    return sorted(v for v in candidates if low <= v <= high)


def _steps(formula_text: str):
    """Each sub-expression the evaluator computes, as a formula of its own (the evaluator is
    compositional: a step gives the same values on its own as inside the whole formula)."""
    for node in ast.walk(parse_formula(formula_text).tree.body):
        if isinstance(node, (ast.Call, ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp)):
            yield ast.unparse(node)


def _as_exact(value) -> Fraction | bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return Fraction(int(value)) if np.asarray(value).dtype.kind in "iu" else Fraction(float(value))


@pytest.mark.parametrize("type_name", INTEGERS)
@pytest.mark.parametrize("formula", STEP_FORMULAS)
def test_no_evaluation_step_produces_a_wrapped_value(formula, type_name):
    dtype = np.dtype(type_name)
    values = _values(dtype)
    x = np.resize(np.array(values, dtype), BIG)
    for step in _steps(formula):
        exact = [evaluate_exact(parse_formula(step), {"x": Fraction(v)}) for v in values]
        want = np.resize(np.array(exact, dtype=object), BIG)
        for literal_dtype in _contexts(dtype):
            got = np.broadcast_to(np.asarray(_evaluate(step, x, literal_dtype)), x.shape)
            wrong = [(int(x[i]), got[i], want[i]) for i in range(len(values)) if _as_exact(got[i]) != want[i]]
            assert not wrong, f"{step} on {type_name} (literals typed {literal_dtype}): (x, got, exact) {wrong}"


# --- the reference, end to end ------------------------------------------------------------------

@pytest.mark.parametrize("type_name", ["UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT64"])
def test_sign_reference_on_integer_types(type_name):
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    dtype = SPECS.catalog.dtype(type_name).numpy
    info = np.iinfo(dtype)
    values = np.resize(np.array([info.min, 0, 1, info.max], dtype), BIG)
    case = case_from_arrays(spec, "6.4", {"InputTensor": type_name, "OutputTensor": type_name}, {"InputTensor": values})
    got = expected_for(spec, case).outputs["OutputTensor"]
    want = np.resize(np.array([-1 if info.min < 0 else 0, 0, 1, 1]), BIG)
    assert got.dtype == dtype and got.tolist() == want.tolist()
