"""exp() in the formula language, the reference and the precision model.

The model's bound (specs/_arithmetic.yaml, types.*.exp): exp(x) * e^(+-argument * |x|) * (1 +- relative),
rounded outward to the compute type; exp(+-0) = 1, exp(-inf) = +0, exp(+inf) = +inf exactly. The
oracle below recomputes that bound from first principles with Python's decimal module (80 digits)
and picks the outermost representable values by exact comparison, independently of the model's
float64 interval code; the model must accept them and reject the next value out on either side.
"""
from __future__ import annotations

from decimal import Decimal, getcontext, localcontext
from fractions import Fraction

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.layout import pack_buffer
from harness.reference.legal import LegalEvaluator, Operand, contains, evaluate_legal
from harness.spec.expr import FLOAT, INTEGER, EvalContext, FormulaError, KindFacts, check_kinds, evaluate_exact, parse_formula
from tests.helpers import SPECS

getcontext().prec = 80
MODEL = SPECS.catalog.arithmetic
EXP = parse_formula("exp(x)")
FLT_MAX = float(np.finfo(np.float32).max)


def _bound(compute: str) -> tuple[Decimal, Decimal]:
    relative, argument = MODEL.types[compute].exp
    return Decimal(relative), Decimal(argument)


def _representable(value: Decimal, dtype, direction: int) -> float:
    """The outermost `dtype` value on the `direction` side of `value` (-1: largest <= value, +1:
    smallest >= value), found by exact comparison from a first guess."""
    guess = np.asarray(float(value)).astype(dtype)
    step = dtype(np.inf) if direction > 0 else dtype(-np.inf)
    back = dtype(-np.inf) if direction > 0 else dtype(np.inf)
    while np.isfinite(guess) and (Decimal(float(guess)) < value if direction > 0 else Decimal(float(guess)) > value):
        guess = np.nextafter(guess, step)
    while True:
        previous = np.nextafter(guess, back)
        if not np.isfinite(previous) or (Decimal(float(previous)) < value if direction > 0 else Decimal(float(previous)) > value):
            return float(guess)
        guess = previous


def _oracle(x: float, compute: str, dtype) -> tuple[float, float]:
    """The smallest and largest legal exp(x) of the model, from decimal arithmetic."""
    relative, argument = _bound(compute)
    d = Decimal(x)
    low = (d - argument * abs(d)).exp() * (1 - relative)
    high = (d + argument * abs(d)).exp() * (1 + relative)
    return _representable(low, dtype, -1), _representable(high, dtype, +1)


def _accepts(values, x, compute: str = "FLOAT32", data_type: str = "FLOAT32") -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    ev = LegalEvaluator(MODEL, compute, {"x": Operand(np.full(values.size, x), "input", data_type)}, values.size, None)
    accepted, _ = contains(evaluate_legal(EXP, ev), values)
    return accepted


def _f32_values(rng: np.random.Generator) -> list[float]:
    xs = [-87.0, -50.5, -10.0, -1.0, -0.25, -1.0e-3, 1.0e-3, 0.75, 3.0, 20.0, 60.0, 88.0]
    xs += [float(np.float32(v)) for v in rng.uniform(-80, 80, 24)]
    return xs


@pytest.mark.parametrize("x", _f32_values(np.random.default_rng(11)))
def test_fp32_exp_bound_is_accepted_and_one_step_beyond_is_rejected(x):
    low, high = _oracle(x, "FLOAT32", np.float32)
    below = float(np.nextafter(np.float32(low), np.float32(-np.inf)))
    above = float(np.nextafter(np.float32(high), np.float32(np.inf)))
    exact = float(np.float32(float(Decimal(x).exp()))) if abs(x) < 88.7 else np.inf
    assert _accepts([low, high, exact], x).all(), (x, low, high)
    assert not _accepts([below], x).any(), (x, below)
    if np.isfinite(high):
        assert not _accepts([above], x).any(), (x, above)


def test_the_bound_grows_with_the_argument_as_the_model_says():
    # at x = -87 the argument term e^(87 * 2^-22) is about 2.1e-5 relative each side: 2 to 4 fp32
    # steps per unit of |x| each side, 350 to 700 in all
    low, high = _oracle(-87.0, "FLOAT32", np.float32)
    steps = int(np.float32(high).view(np.int32)) - int(np.float32(low).view(np.int32))
    assert 350 <= steps <= 700, steps
    low, high = _oracle(-0.25, "FLOAT32", np.float32)
    steps = int(np.float32(high).view(np.int32)) - int(np.float32(low).view(np.int32))
    assert steps <= 20, steps  # near zero only exp2's 2^-21 (4 to 8 steps each side)


@pytest.mark.parametrize("x", [-11.0, -3.0, -0.5, 0.125, 2.0, 10.0])
def test_fp16_exp_bound_is_accepted_and_one_step_beyond_is_rejected(x):
    low, high = _oracle(x, "FLOAT16", np.float16)
    below = float(np.nextafter(np.float16(low), np.float16(-np.inf)))
    above = float(np.nextafter(np.float16(high), np.float16(np.inf)))
    assert _accepts([low, high], x, "FLOAT16", "FLOAT16").all(), (x, low, high)
    assert not _accepts([below, above], x, "FLOAT16", "FLOAT16").any(), (x, below, above)


def test_special_values_follow_the_exp2_table():
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    one_below, one_above = float(np.nextafter(np.float32(1), np.float32(0))), float(np.nextafter(np.float32(1), np.float32(2)))
    assert _accepts([0.0], -np.inf).tolist() == [True]
    assert _accepts([-0.0, tiny], -np.inf).tolist() == [False, False]
    assert _accepts([np.inf, FLT_MAX], np.inf).tolist() == [True, False]
    for zero in (0.0, -0.0):
        assert _accepts([1.0, one_below, one_above], zero).tolist() == [True, False, False]
    assert _accepts([np.nan, 1.0], np.nan).tolist() == [True, False]


def test_a_flushed_denormal_input_gives_exactly_one_or_the_bound():
    # -1e-40 may be flushed to -0 (exp = 1) or not (exp within 2^-21 of 1)
    assert _accepts([1.0, 1.0 - 2.0 ** -21], -1.0e-40).all()
    assert not _accepts([1.0 - 2.0 ** -20], -1.0e-40).any()


def test_a_part_from_zero_to_a_denormal_keeps_the_bound_inside():
    """2^-149 * 0.5 rounds to 0 or to 2^-149: a part [0, 2^-149]. Only its point 0 has exp = 1
    exactly; at 2^-149 exp2 may be 2^-21 off, so 1 - 2^-21 is legal (the worst legal device found
    the model's old rule, exactly 1 wherever the part started at 0, too strict)."""
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    formula = parse_formula("exp(x * s)")
    operands = {"x": Operand(np.full(3, tiny), "input", "FLOAT32"), "s": Operand(np.full(3, 0.5), "constant", None)}
    ev = LegalEvaluator(MODEL, "FLOAT32", operands, 3, None)
    accepted, _ = contains(evaluate_legal(formula, ev), np.array([1.0, 1.0 - 2.0 ** -21, 1.0 - 2.0 ** -20]))
    assert accepted.tolist() == [True, True, False]


def test_elu_through_the_judge_one_step_beyond_the_exp_bound_is_a_mismatch():
    """ELU(-0.5) with Alpha 1: exp(-0.5) lies in [0.5, 1), so exp(x) - 1 is exact there (Sterbenz)
    and times 1 too: the legal outputs are exactly the oracle's exp range minus 1."""
    spec = SPECS.operator("ACTIVATION_ELU")
    low, high = _oracle(-0.5, "FLOAT32", np.float32)
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": np.array([-0.5], np.float32)}, attributes={"Alpha": 1.0})
    desc = case.descriptor.tensors["OutputTensor"]
    outermost = [np.float32(low - 1), np.float32(high - 1)]
    beyond = [np.nextafter(outermost[0], np.float32(-1)), np.nextafter(outermost[1], np.float32(0))]
    for value, want in zip(outermost + beyond, ["pass", "pass", "mismatch", "mismatch"]):
        buffer = pack_buffer(np.array([value], np.float32), desc, SPECS.catalog.dtype("FLOAT32"))
        diff = judge(spec, case, Outputs({"OutputTensor": buffer}), True)
        assert diff.status == want, (value, diff.summary)
        if want == "pass":
            assert "exp within the D3D bound (exp2's 2^-21 relative error, x * log2(e) rounded)" in diff.liberties, diff.summary


# --- the formula language and the reference ----------------------------------------------------

def test_exp_takes_float_values_only():
    facts = KindFacts(variables={"x": frozenset({INTEGER})}, tensors={})
    with pytest.raises(FormulaError, match=r"exp\(\) takes float values only"):
        check_kinds(parse_formula("exp(x)"), facts)
    floats = KindFacts(variables={"x": frozenset({FLOAT})}, tensors={})
    assert check_kinds(parse_formula("exp(x) - 1"), floats) == {FLOAT}


def test_exp_minus_one_keeps_its_digits_near_zero():
    # float64 exp(x) - 1 cancels: for x = -1e-10 it keeps about 7 digits; the evaluator uses expm1
    x = np.array([-1.0e-10, -1.0e-300, -0.5, 3.0])
    got = parse_formula("exp(x) - 1").evaluate(EvalContext(variables={"x": x}))
    with localcontext() as ctx:
        ctx.prec = 400  # exp(-1e-300) - 1 cancels 300 digits
        want = [float(Decimal(v).exp() - 1) for v in x.tolist()]
    assert got.tolist() == want
    assert parse_formula("exp(x) - 1").transcendental and not parse_formula("x - 1").transcendental


def test_exact_evaluation_of_exp_decides_the_rounding():
    value = evaluate_exact(parse_formula("exp(x) - 1"), {"x": Fraction(-1, 2)})
    assert abs(value - Fraction(Decimal(-0.5).exp() - 1)) < Fraction(1, 10 ** 70)
    assert evaluate_exact(parse_formula("exp(x)"), {"x": Fraction(0)}) == 1


def test_reference_elu_on_fp32_denormals_is_correctly_rounded():
    # Alpha * (exp(x) - 1) for a denormal x is x (times Alpha) to far below a float32 step
    spec = SPECS.operator("ACTIVATION_ELU")
    x = np.array([-1.0e-40, -1.4e-45, -1.1754942e-38], np.float32)
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": x}, attributes={"Alpha": 2.0})
    from harness.reference.evaluate import expected_for
    got = expected_for(spec, case).outputs["OutputTensor"].ravel()
    assert got.view(np.uint32).tolist() == (x * np.float32(2)).view(np.uint32).tolist()


def test_parts_merged_beyond_the_limit_keep_both_zeros():
    """A value set of more than MAX_PARTS parts merges the extra ones into a hull; the hull of -0 and
    +0 holds both (nanmin/nanmax see them as equal: SCALED_ELU with a flushed Alpha lost its +0)."""
    from harness.reference.legal import MAX_PARTS, Part, _limit
    def point(v):
        return Part(np.array([v]), np.array([v]), np.array([False]), np.zeros(1, np.uint16), True)
    parts = [point(-1.0)] * (MAX_PARTS - 1) + [point(-0.0), point(0.0), point(-0.0)]
    merged = _limit(parts)
    assert len(merged) == MAX_PARTS
    assert contains(merged, np.array([0.0]))[0].all() and contains(merged, np.array([-0.0]))[0].all()
