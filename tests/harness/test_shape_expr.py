"""The shape and constraint expression language: what it computes, and what it refuses (it is a
whitelist evaluator over descriptor facts, never `eval`)."""
import pytest

from harness.spec.expr import FormulaError
from harness.spec.shape_expr import MAX_LIST, TensorFacts, parse_shape_expr

NAMES = {"Axes", "AxisCount", "Axis", "DECREASING"}
TENSORS = {"InputTensor", "OutputTensor"}


def value(text, names=None, tensors=None):
    expr = parse_shape_expr(text, NAMES, TENSORS)
    return expr.evaluate(names or {"Axes": [0, 2], "AxisCount": 2, "Axis": 1, "DECREASING": 1},
                         tensors or {"InputTensor": TensorFacts((2, 3, 4)), "OutputTensor": TensorFacts(None)})


@pytest.mark.parametrize("text, want", [
    ("[1 if i in Axes else InputTensor.Sizes[i] for i in range(InputTensor.DimensionCount)]", [1, 3, 1]),
    ("all(a < InputTensor.DimensionCount for a in Axes)", True),
    ("any(a > 2 for a in Axes)", False),
    ("prod(InputTensor.Sizes) // InputTensor.Sizes[Axis]", 8),
    ("[s for s in InputTensor.Sizes if s % 2 == 0]", [2, 4]),
    ("distinct(Axes + [2])", False),
    ("len(Axes) == AxisCount and not OutputTensor.present", True),
    ("InputTensor.Sizes[-1] - min(Axes) * 3", 4),
    ("sorted([3, 1, 2])", [1, 2, 3]),
    ("[divisors(s) for s in InputTensor.Sizes]", [[2, 1], [3, 1], [4, 2, 1]]),   # largest first
    ("divisors(36)", [36, 18, 12, 9, 6, 4, 3, 2, 1]),
    ("len(divisors(4294967296))", 33),   # 2^32: 2^0 .. 2^32, without walking 2^32 values
])
def test_values(text, want):
    assert value(text) == want


@pytest.mark.parametrize("text", [
    "OutputTensor.Sizes",            # an absent tensor
    "InputTensor.Sizes[3]",          # past the end
    "[InputTensor.Sizes[a] for a in [5]]",
])
def test_reading_what_is_not_there_has_no_value(text):
    assert value(text) is None


@pytest.mark.parametrize("text, message", [
    ("__import__('os')", "unknown function"),
    ("InputTensor.__class__", "only T.Sizes"),
    ("Axes.count(1)", "unknown function"),
    ("(lambda: 1)()", "unknown function"),
    ("1.5 + Axis", "integer and boolean literals"),
    ("InputTensor.Sizes[0:2]", "slices"),
    ("Unknown + 1", "unknown name"),
    ("[a for a in Axes for b in Axes]", "one 'for NAME in ...' clause"),
    ("{1: 2}", "not allowed"),
    ("2 ** Axis", "not allowed"),
])
def test_refused_when_parsed(text, message):
    with pytest.raises(FormulaError) as raised:
        parse_shape_expr(text, NAMES, TENSORS)
    assert message in str(raised.value)


def test_lists_are_bounded():
    with pytest.raises(FormulaError):
        value(f"range({MAX_LIST + 1})")


def test_type_errors_are_spec_errors():
    with pytest.raises(FormulaError):
        value("Axes + 1")


def test_free_is_a_position_of_any_size_and_not_a_number():
    """`free` marks a shape rule's position that no other tensor fixes: it evaluates to FREE (the
    generator draws it, the validator accepts any size there); arithmetic on it is a spec error."""
    from harness.spec.shape_expr import FREE
    assert value("[InputTensor.Sizes[0], free]") == [2, FREE]
    assert "free" not in parse_shape_expr("[free, Axis]", NAMES, TENSORS).names()
    with pytest.raises(FormulaError):
        value("free + 1")


# --- a loop over a tensor array's present items (its name holds their facts) ----------------------

ITEMS = [TensorFacts((2, 3)), TensorFacts((2, 5)), TensorFacts((2, 1))]


@pytest.mark.parametrize("text, want", [
    ("sum(t.Sizes[1] for t in Items)", 9),  # 3 + 5 + 1, by hand
    ("len(Items)", 3),
    ("all(t.DimensionCount == 2 for t in Items)", True),
    ("[t.Sizes[0] for t in Items if t.Sizes[1] > 2]", [2, 2]),
])
def test_a_loop_over_tensor_array_items(text, want):
    expr = parse_shape_expr(text, NAMES | {"Items"}, TENSORS)
    assert expr.evaluate({"Items": ITEMS}, {}) == want


def test_only_a_loop_variable_or_a_tensor_field_has_facts():
    with pytest.raises(FormulaError, match="tensor array's item"):
        parse_shape_expr("Items.Sizes", NAMES | {"Items"}, TENSORS)  # the array itself is a list, not a tensor
    with pytest.raises(FormulaError, match="not a tensor"):
        parse_shape_expr("sum(a.Sizes[0] for a in Axes)", NAMES, TENSORS).evaluate({"Axes": [0, 1]}, {})
