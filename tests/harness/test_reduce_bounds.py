"""Arithmetic reductions of the reduce family, on a throw-away spec (tests/fixtures/variants/
VARIANT_REDUCE.yaml): the combine an enum attribute picks, error bounds over shape variables
(formulas over the family's per-output variables), the group facts that `unspecified` rules read
(ties, out_of_range), and generation limits. Values are hand-checked; device outputs are built
by hand and judged."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from backends.worst_legal import WorstLegalBackend
from harness.generate.cases import case_from_arrays
from harness.generate.data import limited_values
from harness.generate.strategies import valid_cases
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import output_buffers
from harness.reference.evaluate import expected_for
from harness.spec.expr import FormulaError, parse_formula
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import SpecError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "variants"
FUNCTION = {"ARGMAX": 0, "ARGMIN": 1, "AVERAGE": 2, "L1": 3, "L2": 4, "LOG_SUM": 5, "LOG_SUM_EXP": 6, "MAX": 7, "MIN": 8,
            "MULTIPLY": 9, "SUM": 10, "SUM_SQUARE": 11}
EPS32 = 2.0 ** -23


def _specs_dir(tmp_path: Path, edit: tuple[str, str] | None = None) -> Path:
    specs = tmp_path / "specs"
    specs.mkdir(parents=True)
    for path in DEFAULT_SPECS_DIR.glob("_*.yaml"):
        shutil.copy(path, specs / path.name)
    shutil.copy(FIXTURES / "VARIANT_REDUCE.yaml", specs / "VARIANT_REDUCE.yaml")
    if edit is not None:
        target = specs / "VARIANT_REDUCE.yaml"
        assert edit[0] in target.read_text(), edit[0]
        target.write_text(target.read_text().replace(edit[0], edit[1], 1))
    return specs


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    return load_specs(_specs_dir(tmp_path_factory.mktemp("reduce")))


@pytest.fixture(scope="module")
def spec(specs):
    return specs.operator("VARIANT_REDUCE")


def _case(spec, function: str, in_type: str, out_type: str, values, sizes, axes):
    out_sizes = [1 if i in axes else n for i, n in enumerate(sizes)]
    layouts = {"InputTensor": TensorDesc(in_type, list(sizes)), "OutputTensor": TensorDesc(out_type, out_sizes)}
    array = np.asarray(values, dtype=np.float64 if spec.catalog.dtype(in_type).is_float else object)
    return case_from_arrays(spec, "6.4", {"InputTensor": in_type, "OutputTensor": out_type},
                            {"InputTensor": array.astype(spec.catalog.dtype(in_type).numpy).reshape(sizes)},
                            layouts=layouts, attributes={"Function": float(FUNCTION[function]), "Axes": list(axes)})


def _reference(spec, case) -> np.ndarray:
    return expected_for(spec, case).outputs["OutputTensor"].reshape(-1)


def _judge(spec, case, values):
    desc = case.descriptor.tensors["OutputTensor"]
    array = np.asarray(values, dtype=np.float64).astype(spec.catalog.dtype(desc.data_type).numpy).reshape(desc.sizes)
    return judge(spec, case, Outputs(output_buffers(spec, case, {"OutputTensor": array})), backend_validates=True)


# --- the combine the enum picks ---------------------------------------------------------------------

ROWS = [1.0, 2.0, 3.0, -4.0]  # [[1, 2], [3, -4]] reduced along axis 1


@pytest.mark.parametrize("function,out_type,expected", [
    ("SUM", "FLOAT32", [3.0, -1.0]),
    ("AVERAGE", "FLOAT32", [1.5, -0.5]),
    ("L1", "FLOAT32", [3.0, 7.0]),
    ("L2", "FLOAT32", [math.sqrt(5.0), 5.0]),
    ("SUM_SQUARE", "FLOAT32", [5.0, 25.0]),
    ("MULTIPLY", "FLOAT32", [2.0, -12.0]),
    ("MAX", "FLOAT32", [2.0, 3.0]),
    ("MIN", "FLOAT32", [1.0, -4.0]),
    ("LOG_SUM", "FLOAT32", [math.log(3.0), math.nan]),                       # log(3 + -4): NaN
    ("LOG_SUM_EXP", "FLOAT32", [math.log(math.e + math.e ** 2), math.log(math.e ** 3 + math.e ** -4)]),
    ("ARGMAX", "UINT32", [1, 0]),
    ("ARGMIN", "UINT32", [0, 1]),
])
def test_the_enum_picks_the_combine(spec, function, out_type, expected):
    case = _case(spec, function, "FLOAT32", out_type, ROWS, [2, 2], [1])
    got = _reference(spec, case)
    want = np.asarray(expected, dtype=np.float64).astype(got.dtype)
    assert np.array_equal(got, want, equal_nan=True), (got, want)


def test_integer_arithmetic_is_exact_and_wraps_where_unspecified(spec):
    case = _case(spec, "SUM", "INT32", "INT32", [2147483647, 1, -5, 3], [2, 2], [1])
    assert _reference(spec, case).tolist() == [-2147483648, -2]       # 2^31 wraps to -2^31 (unspecified there)
    expected = expected_for(spec, case)
    assert expected.unspecified("OutputTensor").reshape(-1).tolist() == [True, False]
    assert expected.unspecified_reasons["OutputTensor"] == ["integer_overflow"]
    assert _judge(spec, case, [2147483647, -2]).status == "diverges-on-unspecified"  # a saturating device
    assert _judge(spec, case, [-2147483648, -3]).status == "mismatch"
    product = _case(spec, "MULTIPLY", "INT32", "INT32", [46341, 46341], [2], [0])   # 46341^2 = 2147488281 > 2^31 - 1
    assert _reference(spec, product).tolist() == [2147488281 - 2 ** 32]


# --- bounds over shape variables --------------------------------------------------------------------

def test_a_sum_is_judged_within_its_bound(spec):
    case = _case(spec, "SUM", "FLOAT32", "FLOAT32", [1.0, 2.0, 3.0, 4.0], [4], [0])
    exact, bound = expected_for(spec, case).family.bounds["OutputTensor"]
    # N = 4, sum|x| = 10: 2 (N-1) eps 10 + eps 10 = 70 eps, plus 8 (tiny + tiny_out eps)
    assert exact.tolist() == [10.0] and bound[0] == pytest.approx(70 * EPS32, rel=1e-12)
    ulp = 2.0 ** -20  # of 10 in FLOAT32
    inside = _judge(spec, case, [10.0 + 8 * ulp])
    assert inside.status == "pass" and inside.legal_count == 1 and inside.liberties, inside.summary
    assert _judge(spec, case, [10.0 + 9 * ulp]).status == "mismatch"       # 9 ULP > 70 eps = 8.75 ULP
    assert _judge(spec, case, [6.0]).status == "mismatch"                   # an element dropped
    assert _judge(spec, case, [2.5]).status == "mismatch"                   # AVERAGE instead of SUM


def test_the_bound_uses_the_output_types_epsilon(spec):
    case = _case(spec, "SUM", "FLOAT16", "FLOAT16", [1.0, 2.0, 3.0, 4.0], [4], [0])
    # 70 eps of FLOAT16, and 2 N tiny_out eps = 8 * 2^-24 for steps below FLOAT16's normal range
    assert expected_for(spec, case).family.bounds["OutputTensor"][1][0] == pytest.approx(70 * 2.0 ** -10 + 8 * 2.0 ** -24, rel=1e-9)
    assert _judge(spec, case, [10.0 + 2 * 2.0 ** -7]).status == "pass"     # 2 ULP of FLOAT16 at 10 (0.0156 < 0.068)


def test_an_infinite_bound_accepts_every_result(spec):
    # sum|x| = 9e38 >= FLOAT32's largest: some order overflows, whatever the exact 3e38
    case = _case(spec, "SUM", "FLOAT32", "FLOAT32", [3e38, 3e38, -3e38], [3], [0])
    assert np.isinf(expected_for(spec, case).family.bounds["OutputTensor"][1][0])
    for device in (np.inf, np.nan, 3e38, -1.0):
        assert _judge(spec, case, [device]).status == "pass"


def test_a_nan_in_the_group_must_give_nan(spec):
    case = _case(spec, "SUM", "FLOAT32", "FLOAT32", [3e38, 3e38, np.nan], [3], [0])  # overflow possible, but NaN in
    assert _judge(spec, case, [np.nan]).status == "pass"
    assert _judge(spec, case, [np.inf]).status == "mismatch"


def test_a_product_leaving_the_normal_range_is_not_judged_and_zeros_are(spec):
    big = _case(spec, "MULTIPLY", "FLOAT32", "FLOAT32", [1e30, 1e30, 1e-30], [3], [0])
    assert _judge(spec, big, [np.inf]).status == "pass"                    # (1e30 * 1e30) overflows first
    zero = _case(spec, "MULTIPLY", "FLOAT32", "FLOAT32", [0.0, 5.0, -2.0], [3], [0])
    assert _reference(spec, zero).tolist() == [-0.0] and np.signbit(_reference(spec, zero)[0])
    assert _judge(spec, zero, [0.0]).status == "pass"                      # a bound of 0 takes either zero
    assert _judge(spec, zero, [1.0e-45]).status == "mismatch"


def test_max_is_exact_but_either_zero(spec):
    case = _case(spec, "MAX", "FLOAT32", "FLOAT32", [-0.0, 0.0, -1.0], [3], [0])
    assert _reference(spec, case).tolist() == [0.0] and not np.signbit(_reference(spec, case)[0])
    assert _judge(spec, case, [-0.0]).status == "pass"
    assert _judge(spec, case, [-1.0]).status == "mismatch"


def test_ties_of_an_index_reduction_are_unspecified(spec):
    case = _case(spec, "ARGMAX", "FLOAT32", "UINT32", [5.0, 5.0, 1.0, 2.0, 7.0, 3.0], [2, 3], [1])
    assert _reference(spec, case).tolist() == [0, 1]
    assert _judge(spec, case, [1, 1]).status == "diverges-on-unspecified"  # the other 5 of row 0
    assert _judge(spec, case, [0, 0]).status == "mismatch"                  # row 1 has no tie


def test_the_legal_device_passes(specs, spec):
    """The worst legal backend's reduce device (another order, one rounding per step in the
    output type or FLOAT32) stays within every bound."""
    device = WorstLegalBackend(specs)
    seen = set()

    @settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(valid_cases(spec, "6.4"))
    def check(case):
        result = device.run(case)
        assert result.kind == "outputs", result
        diff = judge(spec, case, result, backend_validates=True)
        assert diff.status in ("pass", "diverges-on-unspecified"), diff.render()
        seen.add(spec.variant_member(case.descriptor.attributes))
    check()
    assert len(seen) >= 8


def test_bounds_are_checked_when_the_spec_is_read(tmp_path):
    with pytest.raises(SpecError, match="unknown name.*the bound variables are N, eps"):
        load_specs(_specs_dir(tmp_path / "a", ('max: {atol: "0"', 'max: {atol: "terms * 0"')))
    with pytest.raises(SpecError, match="'median' is not a choice combine can take"):
        load_specs(_specs_dir(tmp_path / "b", ("      min: {atol", "      median: {atol: \"0\", why: x}\n      min: {atol")))
    with pytest.raises(SpecError, match="unknown name"):  # the group facts are for unspecified rules only
        load_specs(_specs_dir(tmp_path / "c", ('applies_to: [INT32], when: "Function in [SUM, L1, AVERAGE]"',
                                               'applies_to: [INT32], when: "ties > 1"')))


def test_a_combine_by_enum_needs_every_member_to_be_a_choice(tmp_path):
    text = (FIXTURES / "VARIANT_REDUCE.yaml").read_text()
    assert "combine: Function" in text
    edit = ("  - {name: Function, role: attribute, c_type: DML_REDUCE_FUNCTION}",
            "  - {name: Function, role: attribute, c_type: DML_REDUCE_FUNCTION}\n  - {name: Mode, role: attribute, c_type: DML_ROUNDING_MODE}")
    specs = _specs_dir(tmp_path, edit)
    target = specs / "VARIANT_REDUCE.yaml"
    target.write_text(target.read_text().replace("combine: Function", "combine: Mode"))
    with pytest.raises(SpecError, match="member.s. HALVES_TO_NEAREST_EVEN, TOWARD_ZERO, TOWARD_INFINITY are no choice of combine"):
        load_specs(specs)


def test_sqrt_in_the_formula_language():
    formula = parse_formula("sqrt(a) + 1")
    from harness.spec.expr import EvalContext, KindFacts, check_kinds
    assert formula.evaluate(EvalContext(variables={"a": np.float64(16.0)})) == 5.0
    with pytest.raises(FormulaError, match="sqrt"):
        check_kinds(formula, KindFacts(variables={"a": frozenset({"integer"})}, tensors={}))


# --- generation limits -------------------------------------------------------------------------------

def test_limited_values(specs):
    int32, float32 = specs.catalog.dtype("INT32"), specs.catalog.dtype("FLOAT32")
    values = np.array([0, 1, -1, 7, 8, 9, -9, 2147483647, -2147483648], dtype=np.int32)
    limited = limited_values(values, int32, 3)                             # |x| <= 8
    assert limited[:6].tolist() == [0, 1, -1, 7, 8, 9 - 17] and np.abs(limited).max() <= 8
    floats = np.array([0.0, -0.0, np.inf, np.nan, 1.0e-45, 3e38, -3.0, 0.75], dtype=np.float32)
    clipped = limited_values(floats, float32, 2)                           # |x| in [2^-2, 2^2)
    assert clipped[0] == 0 and np.signbit(clipped[1]) and np.isinf(clipped[2]) and np.isnan(clipped[3])
    assert all(0.25 <= abs(v) < 4 for v in clipped[4:]) and clipped[6] == -3.0 and clipped[7] == 0.75


def test_generated_integer_reductions_do_not_overflow(spec):
    """Without the limits most INT32 sums of random values would overflow (unspecified)."""
    checked = []

    @settings(max_examples=80, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(valid_cases(spec, "6.4", data_type="INT32"))
    def check(case):
        expected = expected_for(spec, case)
        if spec.variant_member(case.descriptor.attributes) in ("SUM", "L1", "SUM_SQUARE", "MULTIPLY"):
            assert not expected.unspecified("OutputTensor").any(), (case.descriptor, expected.unspecified_reasons)
            checked.append(case)
    check()
    assert len(checked) >= 10


def test_limits_read_the_descriptor(spec):
    case = _case(spec, "SUM", "INT32", "INT32", [0] * 8, [2, 4], [1])
    from harness.generate.data import make_inputs
    from harness.model.layout import read_logical
    values = read_logical(make_inputs(spec, case.descriptor, 7)["InputTensor"], case.descriptor.tensors["InputTensor"], np.int32)
    assert np.abs(values.astype(np.int64)).max() <= 2 ** (31 - (4).bit_length())   # N = 4: bits 28
