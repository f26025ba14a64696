"""The formula evaluator is a whitelist: hostile strings are refused with a clear message."""
import numpy as np
import pytest

from harness.expr import EvalContext, FormulaError, parse_formula

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
    ("x" * 3000, "longer than 2000"),
]


@pytest.mark.parametrize("text,message", HOSTILE)
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
