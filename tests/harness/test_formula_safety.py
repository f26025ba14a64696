"""The formula evaluator is a whitelist: hostile strings are refused with a clear message."""
import numpy as np
import pytest

from harness.spec.expr import (FLOAT, INTEGER, MAX_FORMULA_DEPTH, EvalContext, FormulaError, KindFacts, check_kinds,
                          parse_formula)

HOSTILE = [
    ("__import__('os').system('true')", "only calls of whitelisted functions"),
    ("x.__class__.__bases__", "Attribute"),
    ("(1).real", "Attribute"),
    ("open('/etc/passwd')", "function 'open' is not allowed"),
    ("eval('1')", "function 'eval' is not allowed"),  # noqa: eval-ok - a hostile string, refused
    ("getattr(x, 'dtype')", "function 'getattr' is not allowed"),
    ("x[0]", "Subscript"),
    ("lambda: 1", "Lambda"),
    ("[a for a in x]", "ListComp"),
    ("'abc'", "only numbers"),
    ("x ** 1000000000", "Pow"),
    ("_secret", "names starting with '_'"),
    ("min(x, y=1)", "not allowed"),
    ("max", "must be called"),
    ("x if x else 1", "IfExp"),
    ("(x := 1)", "NamedExpr"),
    ("0 < x < 1", "single comparisons"),
    ("np.maximum(x, 0)", "only calls of whitelisted functions"),
    ("min(x)", "takes 2 argument(s)"),
    ("where(x, 1)", "takes 3 argument(s)"),
    ("x; import os", "not a valid expression"),
    ("x" * 3000, "longer than 1000 characters"),
    # bounded before and while parsing: never a RecursionError
    ("+".join(["x"] * 500), "500 levels deep; at most 50"),
    ("-" * 999 + "x", "nests 999 levels deep"),
    ("-(" * 300 + "x" + ")" * 300, "nests 300 levels deep"),
    ("not " * 200 + "x", "nests 200 levels deep"),
    ("abs(" * 60 + "x" + ")" * 60, "nests 60 levels deep"),
    ("x + " + "9" * 500, "integer literal of 500 digits is out of range"),
    ("x * 18446744073709551616", "integer literal 18446744073709551616 is out of range"),
    ("x\x00", "not a valid expression"),
]


@pytest.mark.parametrize("text,message", HOSTILE, ids=[f"{i}-{t[:30]}" for i, (t, _) in enumerate(HOSTILE)])
def test_hostile_formula_is_refused(text, message):
    with pytest.raises(FormulaError) as info:
        parse_formula(text)
    assert message in str(info.value)


def test_allowed_formula_evaluates_elementwise():
    f = parse_formula("clamp(round_half_even(x / s) + z, -128, 127)")
    ctx = EvalContext(variables={"x": np.array([2.5, 3.5, -1000.0]), "s": np.float64(1.0), "z": np.float64(0.0)})
    assert f.evaluate(ctx).tolist() == [2.0, 4.0, -128.0]
    assert f.names == {"x", "s", "z"}


def test_type_functions_take_tensor_names_only():
    with pytest.raises(FormulaError, match="tensor field name"):
        parse_formula("type_min(1)")
    with pytest.raises(FormulaError, match="data type name in quotes"):
        parse_formula("is_type(InputTensor, INT32)")


def test_formulas_at_the_limits_are_accepted():
    parse_formula("+".join(["x"] * (MAX_FORMULA_DEPTH - 1)))
    parse_formula("-" * (MAX_FORMULA_DEPTH - 2) + "x")
    parse_formula("x * 18446744073709551615")


_INT8 = KindFacts(variables={"x": frozenset({INTEGER})}, tensors={"T": {"INT8": INTEGER}, "F": {"FLOAT32": FLOAT}})
_F32 = KindFacts(variables={"x": frozenset({FLOAT})}, tensors={"T": {"INT8": INTEGER}, "F": {"FLOAT32": FLOAT}})

KIND_ERRORS = [
    ("type_min(F)", _INT8, "type_min(F) is meaningful for integer tensors only"),
    ("type_max(F) + 1", _INT8, "type_max(F) is meaningful for integer tensors only"),
    ("bitnot(x)", _F32, "bitnot() needs an integer argument, but 'x' can be a float value"),
    ("bitnot(x / 2)", _INT8, "bitnot() needs an integer argument"),
    ("isnan(x)", _INT8, "isnan() is meaningful for float values only"),
    ("where(is_denormal_f32(x), 1, 0)", _INT8, "is_denormal_f32() is meaningful for float values only"),
    ("is_type(T, 'FLOAT32')", _INT8, "is_type(T, 'FLOAT32') is always false"),
    ("-(x < 0)", _INT8, "cannot negate a truth value"),
    ("(x > 0) - (x < 0)", _INT8, "'-' between two truth values"),
]


@pytest.mark.parametrize("text,facts,message", KIND_ERRORS, ids=[k[0] for k in KIND_ERRORS])
def test_function_applied_to_the_wrong_kind_is_refused(text, facts, message):
    with pytest.raises(FormulaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_kinds(parse_formula(text), facts)


def test_kinds_accepted_where_meaningful():
    assert check_kinds(parse_formula("type_min(T)"), _INT8) == {INTEGER}
    assert check_kinds(parse_formula("isnan(x / 2)"), _INT8) == {"bool"}
    assert check_kinds(parse_formula("bitnot(x)"), _INT8) == {INTEGER}
    assert check_kinds(parse_formula("clamp(x, 0, 1.5)"), _INT8) == {FLOAT}
