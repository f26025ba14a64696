"""The `ulp` / `atol` / `ties` comparison at its edges, through the real judge.

No shipped spec uses `kind: ulp`, so this file builds one: ELEMENT_WISE_IDENTITY (f(x) = x, no
ScaleBias) copied with the shared `_*.yaml` catalogs into a temporary directory, its `comparison`
replaced, loaded with the public loader and judged with `harness.judge.diff.judge` (what a run
calls on a backend's result). The identity's reference is the input itself, so every expected
verdict below is derived by hand from the bit patterns, using the rules of docs/spec-format.md
(`comparison`) and the ULP count of `harness.judge.diff.ordered_key`:

- a float's ULP key is its bit pattern read as a signed integer for x >= 0 and
  `INT_MIN - bits` for x < 0, so +0 and -0 are both key 0, +-denorm_min are +-1, and the distance
  from +k denormals to -j denormals is k + j ("through zero", +0/-0 counted once);
- `ulp` accepts a finite value within `max_ulp` keys *or* within `atol` (|expected - actual| <=
  atol, in float64), either suffices; infinities must match exactly; NaN against NaN passes
  (payload ignored by default), NaN against a number fails; zeros must have the same sign;
- `ties` (integer outputs only): an output 1 away from the reference where the expression holds
  is diverges-on-unspecified; floats ignore it, and integer outputs get no ULP slack.

Each helper call judges a vector of elements at once and returns the per-element verdict (from
`bad_mask`), after checking that no element was accepted by anything but the comparison (no
precision-model liberty, no unspecified region, no tie unless asked).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.judge.status import Status
from harness.model.backend import Outputs
from harness.model.layout import pack_buffer

from harness.spec.load import load_specs

SHIPPED = Path(__file__).resolve().parents[2] / "specs"
OP = "ELEMENT_WISE_IDENTITY"
LEVEL = "6.4"

F32_MAX = 0x7F7FFFFF   # 3.4028235e38, the largest finite float32
F16_MAX = 0x7BFF       # 65504, the largest finite float16
INT64_MAX = (1 << 63) - 1

_DTYPES = {"FLOAT16": (np.float16, np.uint16), "FLOAT32": (np.float32, np.uint32), "FLOAT64": (np.float64, np.uint64)}


def bits(values, data_type: str) -> np.ndarray:
    """Floats of `data_type` from their bit patterns."""
    float_t, uint_t = _DTYPES[data_type]
    return np.asarray(values, dtype=uint_t).view(float_t)


@pytest.fixture(scope="module")
def make_spec(tmp_path_factory):
    """comparison (a dict, as written in YAML) -> the identity spec with that comparison as its
    `default`, loaded from a fresh directory with the shipped catalogs (memoised)."""
    base = yaml.safe_load((SHIPPED / f"{OP}.yaml").read_text())
    catalogs = sorted(SHIPPED.glob("_*.yaml"))
    assert catalogs, "no shared catalogs next to the shipped specs"
    built: dict[str, object] = {}

    def make(comparison: dict):
        key = yaml.safe_dump(comparison, sort_keys=True)
        if key not in built:
            directory = tmp_path_factory.mktemp("spec")
            for path in catalogs:
                shutil.copy(path, directory / path.name)
            data = dict(base, comparison={"default": comparison})
            (directory / f"{OP}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
            built[key] = load_specs(directory).operator(OP)
        return built[key]

    return make


def judged(spec, data_type: str, inputs, actual):
    """The DiffResult of a backend that returned `actual` for the identity of `inputs`."""
    case = case_from_arrays(spec, LEVEL, {"InputTensor": data_type, "OutputTensor": data_type},
                            {"InputTensor": np.asarray(inputs)})
    desc = case.descriptor.tensors["OutputTensor"]
    buffer = pack_buffer(np.asarray(actual), desc, spec.catalog.dtype(data_type))
    return judge(spec, case, Outputs({"OutputTensor": buffer}), True)


def verdicts(spec, data_type: str, expected, actual) -> list[bool]:
    """Per element: does the comparison accept `actual` where the reference is `expected`?"""
    expected, actual = np.asarray(expected), np.asarray(actual)
    assert expected.shape == actual.shape
    diff = judged(spec, data_type, expected, actual)
    # nothing but the spec's comparison may have decided: no liberty, no unspecified region, no tie
    assert diff.legal_count == 0 and diff.unspecified_count == 0 and diff.tie_count == 0, diff.render()
    ok = [True] * expected.size if diff.bad_mask is None else (~diff.bad_mask.reshape(-1)).tolist()
    assert (diff.status == Status.PASS) == all(ok), diff.render()
    assert (diff.status == Status.MISMATCH) == (not all(ok)), diff.render()
    assert diff.mismatch_count == ok.count(False)
    return ok


def ulp(n: int) -> dict:
    return {"kind": "ulp", "max_ulp": n}


# --- max_ulp = N: N keys away passes, N + 1 fails ----------------------------------------------------

# (expected bits, actual bits, accepted) under max_ulp = 3. 1.0 is 0x3F800000 (float32) / 0x3C00
# (float16): above it a ULP is 2^-23 / 2^-10, below it 2^-24 / 2^-11, and the key counts either.
F32_ULP3 = [
    (0x3F800000, 0x3F800003, True),    # 1.0 -> 1 + 3*2^-23: 3 ULP up
    (0x3F800000, 0x3F800004, False),   # 4 ULP up
    (0x3F800000, 0x3F7FFFFD, True),    # 1.0 -> 1 - 3*2^-24: 3 ULP down, below the power of two
    (0x3F800000, 0x3F7FFFFC, False),   # 4 ULP down
    (0x3F7FFFFE, 0x3F800001, True),    # 1 - 2^-23 -> 1 + 2^-23: 3 ULP across the boundary (up)
    (0x3F7FFFFE, 0x3F800002, False),   # 4 ULP across it
    (0x3F800001, 0x3F7FFFFE, True),    # 1 + 2^-23 -> 1 - 2^-23: 3 ULP across it (down)
    (0x3F800001, 0x3F7FFFFD, False),   # 4 ULP across it
    (0xBF800000, 0xBF800003, True),    # -1.0 -> -(1 + 3*2^-23): 3 ULP, negative side
    (0xBF800000, 0xBF800004, False),
    (0xBF800000, 0xBF7FFFFD, True),    # -1.0 -> -(1 - 3*2^-24)
    (0xBF800000, 0xBF7FFFFC, False),
    (0x00000002, 0x80000001, True),    # +2 denorm_min -> -denorm_min: keys 2 and -1, 3 apart
    (0x00000002, 0x80000002, False),   # keys 2 and -2: 4 apart
    (0x80000002, 0x00000001, True),    # the same through zero, upwards
    (0x80000002, 0x00000002, False),
    (0x00000000, 0x80000003, True),    # +0 -> -3 denorm_min: keys 0 and -3
    (0x00000000, 0x80000004, False),
    (0x80000000, 0x00000003, True),    # -0 -> +3 denorm_min: keys 0 and 3
    (0x80000000, 0x00000004, False),
    (0x00800000, 0x007FFFFD, True),    # smallest normal -> 3 below, into the denormals
    (0x00800000, 0x007FFFFC, False),
    (0x7F7FFFFF, 0x7F7FFFFC, True),    # largest finite, 3 below
    (0x7F7FFFFF, 0x7F7FFFFB, False),
]
F16_ULP3 = [
    (0x3C00, 0x3C03, True),            # 1.0 -> 1 + 3*2^-10
    (0x3C00, 0x3C04, False),
    (0x3C00, 0x3BFD, True),            # 1.0 -> 1 - 3*2^-11
    (0x3C00, 0x3BFC, False),
    (0x3BFE, 0x3C01, True),            # across the power of two, up
    (0x3BFE, 0x3C02, False),
    (0x3C01, 0x3BFE, True),            # and down
    (0x3C01, 0x3BFD, False),
    (0xBC00, 0xBC03, True),            # -1.0, negative side
    (0xBC00, 0xBC04, False),
    (0xBC00, 0xBBFD, True),
    (0xBC00, 0xBBFC, False),
    (0x0002, 0x8001, True),            # through zero: keys 2 and -1
    (0x0002, 0x8002, False),
    (0x8002, 0x0001, True),
    (0x8002, 0x0002, False),
    (0x0000, 0x8003, True),            # +0 -> -3 denorm_min
    (0x0000, 0x8004, False),
    (0x8000, 0x0003, True),            # -0 -> +3 denorm_min
    (0x8000, 0x0004, False),
    (0x0400, 0x03FD, True),            # smallest normal, into the denormals
    (0x0400, 0x03FC, False),
    (0x7BFF, 0x7BFC, True),            # 65504 -> 3 below
    (0x7BFF, 0x7BFB, False),
]


@pytest.mark.parametrize("data_type, table", [("FLOAT32", F32_ULP3), ("FLOAT16", F16_ULP3)])
def test_max_ulp_bound_is_inclusive_both_ways_across_powers_of_two_and_zero(make_spec, data_type, table):
    expected, actual, accepted = zip(*table)
    assert verdicts(make_spec(ulp(3)), data_type, bits(expected, data_type), bits(actual, data_type)) == list(accepted)


@pytest.mark.parametrize("data_type, table", [("FLOAT32", F32_ULP3), ("FLOAT16", F16_ULP3)])
def test_each_element_alone(make_spec, data_type, table):
    """The same pairs one per case: the verdict of a case is that of its only element."""
    spec = make_spec(ulp(3))
    for e, a, accepted in table:
        diff = judged(spec, data_type, bits([e], data_type), bits([a], data_type))
        assert diff.status == (Status.PASS if accepted else Status.MISMATCH), (hex(e), hex(a), diff.render())


@pytest.mark.parametrize("data_type, one, above, below, tiny, neg_tiny", [
    ("FLOAT32", 0x3F800000, 0x3F800001, 0x3F7FFFFF, 0x00000001, 0x80000001),
    ("FLOAT16", 0x3C00, 0x3C01, 0x3BFF, 0x0001, 0x8001),
])
def test_max_ulp_zero_is_exact(make_spec, data_type, one, above, below, tiny, neg_tiny):
    spec = make_spec(ulp(0))
    expected = bits([one, one, one, tiny, neg_tiny], data_type)
    actual = bits([one, above, below, neg_tiny, tiny], data_type)
    assert verdicts(spec, data_type, expected, actual) == [True, False, False, False, False]
    # and 1 ULP is exactly what max_ulp = 1 adds (+-denorm_min are 2 apart through zero)
    assert verdicts(make_spec(ulp(1)), data_type, expected, actual) == [True, True, True, False, False]
    assert verdicts(make_spec(ulp(2)), data_type, expected, actual) == [True, True, True, True, True]


# --- atol ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data_type, table", [
    # atol 0.25 around 1.0: 1.25 and 0.75 are exactly 0.25 away; the next representable values
    # beyond are 1.25 + 2^-23 / 0.75 - 2^-24 (float32), 1.25 + 2^-10 / 0.75 - 2^-11 (float16)
    ("FLOAT32", [(0x3F800000, 0x3FA00000, True), (0x3F800000, 0x3FA00001, False),
                 (0x3F800000, 0x3F400000, True), (0x3F800000, 0x3F3FFFFF, False),
                 (0xBF800000, 0xBFA00000, True), (0xBF800000, 0xBFA00001, False),    # -1.0 vs -1.25
                 (0x3E800000, 0x00000000, True), (0x3E800000, 0x80000000, True),      # 0.25 vs +-0
                 (0x3E800001, 0x00000000, False),                                     # 0.25 + 2^-25 vs +0
                 (0x3E800001, 0x80000000, False)]),                                   # and vs -0
    ("FLOAT16", [(0x3C00, 0x3D00, True), (0x3C00, 0x3D01, False),
                 (0x3C00, 0x3A00, True), (0x3C00, 0x39FF, False),
                 (0xBC00, 0xBD00, True), (0xBC00, 0xBD01, False),
                 (0x3400, 0x0000, True), (0x3400, 0x8000, True),
                 (0x3400, 0x8001, False),                                             # 0.25 vs -2^-24
                 (0x3401, 0x0000, False)]),                                           # 0.25 + 2^-12 vs 0
])
def test_atol_bound_is_inclusive(make_spec, data_type, table):
    spec = make_spec({"kind": "ulp", "max_ulp": 0, "atol": "0.25"})
    expected, actual, accepted = zip(*table)
    assert verdicts(spec, data_type, bits(expected, data_type), bits(actual, data_type)) == list(accepted)


def test_atol_or_max_ulp_either_suffices_float32(make_spec):
    spec = make_spec({"kind": "ulp", "max_ulp": 2, "atol": "0.25"})
    expected = bits([0x3F800000, 0x3F800000, 0x4E800000, 0x4E800000, 0x3E800000, 0x3E800001], "FLOAT32")
    actual = bits([0x3FA00000,   # 1.25: 2^21 ULP away, but |diff| = 0.25 = atol
                   0x3FA00001,   # 1.25 + 2^-23: neither
                   0x4E800002,   # 2^30 + 256: |diff| 256 > atol, but 2 ULP (a ULP is 128 there)
                   0x4E800003,   # 2^30 + 384: 3 ULP, |diff| 384: neither
                   0x80000000,   # 0.25 vs -0: |diff| = 0.25
                   0x80000000],  # 0.25 + 2^-25 vs -0: |diff| > 0.25, ~2^30 ULP: neither
                  "FLOAT32")
    assert verdicts(spec, "FLOAT32", expected, actual) == [True, False, True, False, True, False]


def test_atol_or_max_ulp_either_suffices_float16(make_spec):
    spec = make_spec({"kind": "ulp", "max_ulp": 2, "atol": "0.25"})
    expected = bits([0x3C00, 0x3C00, 0x7000, 0x7000], "FLOAT16")
    actual = bits([0x3D00,    # 1.25: 256 ULP away, |diff| = atol
                   0x3D01,    # neither
                   0x7002,    # 8192 + 16: 2 ULP (a ULP is 8 there), |diff| 16 > atol
                   0x7003],   # 8192 + 24: 3 ULP: neither
                  "FLOAT16")
    assert verdicts(spec, "FLOAT16", expected, actual) == [True, False, True, False]


@pytest.mark.xfail(strict=True, reason="known limit: |expected - actual| is computed in float64, where "
                   "0.25 + 2^-149 and 1 + 2^-100 round to the atol itself, so a value just beyond atol passes")
def test_atol_beyond_by_less_than_float64_resolution(make_spec):
    spec = make_spec({"kind": "ulp", "max_ulp": 0, "atol": "abs(x)"})
    expected = bits([0x3E800000, 0x3F800000], "FLOAT32")     # 0.25 (atol 0.25), 1.0 (atol 1)
    actual = bits([0x80000001, 0x8D800000], "FLOAT32")       # -2^-149, -2^-100: just beyond atol
    assert verdicts(spec, "FLOAT32", expected, actual) == [False, False]


@pytest.mark.parametrize("data_type, table", [
    # atol = |x| / 8, x the input (= the reference): 8 -> 1, 1 -> 0.125, -16 -> 2, 0.5 -> 0.0625
    ("FLOAT32", [(0x41000000, 0x41100000, True), (0x41000000, 0x41100001, False),    # 8 vs 9, 9 + 2^-20
                 (0x3F800000, 0x3F900000, True), (0x3F800000, 0x3F900001, False),    # 1 vs 1.125, + 2^-23
                 (0xC1800000, 0xC1900000, True), (0xC1800000, 0xC1900001, False),    # -16 vs -18, - 2^-19
                 (0x3F000000, 0x3F100000, True), (0x3F000000, 0x3F100001, False),    # 0.5 vs 0.5625
                 (0x3F800000, 0x3F880000, True), (0x3F000000, 0x3F400000, False)]),  # 1.0625 ok, 0.75 not
    ("FLOAT16", [(0x4800, 0x4880, True), (0x4800, 0x4881, False),
                 (0x3C00, 0x3C80, True), (0x3C00, 0x3C81, False),
                 (0xCC00, 0xCC80, True), (0xCC00, 0xCC81, False),
                 (0x3800, 0x3880, True), (0x3800, 0x3881, False),
                 (0x3C00, 0x3C40, True), (0x3800, 0x3A00, False)]),
])
def test_atol_expression_is_evaluated_per_element(make_spec, data_type, table):
    spec = make_spec({"kind": "ulp", "max_ulp": 0, "atol": "abs(x) / 8"})
    expected, actual, accepted = zip(*table)
    assert verdicts(spec, data_type, bits(expected, data_type), bits(actual, data_type)) == list(accepted)


@pytest.mark.parametrize("data_type, table", [
    # atol = 2 * ulp_out(x), the spacing of the output type at |x| (x not a power of two, so the
    # spacing is the same on both sides): 1.5 -> 2 * 2^-23, 3.0 -> 2 * 2^-22 (float32)
    ("FLOAT32", [(0x3FC00000, 0x3FC00002, True), (0x3FC00000, 0x3FC00003, False),
                 (0x3FC00000, 0x3FBFFFFE, True), (0x3FC00000, 0x3FBFFFFD, False),
                 (0x40400000, 0x40400002, True), (0x40400000, 0x40400003, False),
                 (0xC0400000, 0xC03FFFFE, True), (0xC0400000, 0xC03FFFFD, False)]),
    ("FLOAT16", [(0x3E00, 0x3E02, True), (0x3E00, 0x3E03, False),
                 (0x3E00, 0x3DFE, True), (0x3E00, 0x3DFD, False),
                 (0x4200, 0x4202, True), (0x4200, 0x4203, False),
                 (0xC200, 0xC1FE, True), (0xC200, 0xC1FD, False)]),
])
def test_atol_in_output_ulps(make_spec, data_type, table):
    spec = make_spec({"kind": "ulp", "max_ulp": 0, "atol": "2 * ulp_out(x)"})
    expected, actual, accepted = zip(*table)
    assert verdicts(spec, data_type, bits(expected, data_type), bits(actual, data_type)) == list(accepted)


# --- NaN, infinities, signed zeros --------------------------------------------------------------------

# the loosest slack there is: max_ulp up to int64's maximum, or an atol that is infinite where the
# reference is (|x| + 1e300: x is the input, the identity's reference) and 1e300 elsewhere
LOOSE = [ulp(0), ulp(1), ulp(1000), ulp(INT64_MAX), {"kind": "ulp", "max_ulp": 5, "atol": "abs(x) + 1e300"}]


@pytest.mark.parametrize("comparison", LOOSE, ids=["ulp0", "ulp1", "ulp1000", "ulp_int64_max", "atol_inf"])
@pytest.mark.parametrize("data_type, nan, other_nans, number, largest, inf", [
    ("FLOAT32", 0x7FC00000, [0x7FC00001, 0xFFC00000, 0x7F800001], 0x3F800000, F32_MAX, 0x7F800000),
    ("FLOAT16", 0x7E00, [0x7E01, 0xFE00, 0x7C01], 0x3C00, F16_MAX, 0x7C00),
])
def test_nan_and_infinity_under_any_slack(make_spec, comparison, data_type, nan, other_nans, number, largest, inf):
    spec = make_spec(comparison)
    sign = 1 << (8 * np.dtype(_DTYPES[data_type][1]).itemsize - 1)
    pairs = [(nan, number, False), (number, nan, False),                        # NaN vs a number, both ways
             *[(nan, other, True) for other in other_nans],                     # NaN vs any NaN: payload ignored
             (inf, largest, False), (largest, inf, False),                      # +inf vs the largest finite
             (inf | sign, largest | sign, False), (largest | sign, inf | sign, False),
             (inf, inf | sign, False), (inf, nan, False)]
    expected, actual, accepted = zip(*pairs)
    assert verdicts(spec, data_type, bits(expected, data_type), bits(actual, data_type)) == list(accepted)


@pytest.mark.parametrize("comparison", LOOSE + [{"kind": "ulp", "max_ulp": 3, "atol": "1"}],
                         ids=["ulp0", "ulp1", "ulp1000", "ulp_int64_max", "atol_inf", "ulp3_atol1"])
@pytest.mark.parametrize("data_type, zero, neg_zero", [("FLOAT32", 0x00000000, 0x80000000), ("FLOAT16", 0x0000, 0x8000)])
def test_zero_sign_must_match_under_any_slack(make_spec, comparison, data_type, zero, neg_zero):
    """docs/spec-format.md: zeros pass only with the same sign; `ulp` adds finite values within
    max_ulp or atol, and the diff keeps -0 vs +0 out of that (ordered_key counts them as one
    point, but `_rules_ok` excludes pairs of zeros from the ULP and atol slack)."""
    spec = make_spec(comparison)
    expected = bits([zero, neg_zero], data_type)
    actual = bits([neg_zero, zero], data_type)
    assert verdicts(spec, data_type, expected, actual) == [False, False]


def test_nan_payload_exact_leaves_other_nans_to_the_precision_model(make_spec):
    """`nan_payload: exact`: the comparison itself accepts only the reference's NaN bits, so another
    NaN is not accepted by it (with `ignore` it is). The precision model, step 3 of the judge, then
    accepts any NaN for a value formula (D3D does not define NaN payloads): the case passes, but as
    'legal' elements, not as elements the comparison accepted."""
    exact = make_spec({"kind": "ulp", "max_ulp": 1000, "nan_payload": "exact"})
    quiet = bits([0x7FC00000], "FLOAT32")
    reference = judged(exact, "FLOAT32", quiet, quiet).expected  # the reference's NaN for a NaN input
    ref_bits = int(reference.outputs["OutputTensor"].reshape(-1).view(np.uint32)[0])
    assert np.isnan(bits([ref_bits], "FLOAT32"))[0]
    others = bits([b for b in (0x7FC00000, 0x7FC00001, 0xFFC00000, 0x7F800001) if b != ref_bits], "FLOAT32")
    inputs = bits([ref_bits] * others.size, "FLOAT32")
    diff = judged(exact, "FLOAT32", inputs, others)
    assert diff.status == Status.PASS and diff.legal_count == others.size, diff.render()
    ignore = make_spec({"kind": "ulp", "max_ulp": 1000})
    assert verdicts(ignore, "FLOAT32", inputs, others) == [True] * others.size  # (legal_count 0 checked there)


# --- ties ---------------------------------------------------------------------------------------------

def test_ties_on_integer_outputs_accept_either_neighbour_only_where_they_hold(make_spec):
    spec = make_spec({"kind": "ulp", "max_ulp": 5, "ties": "x == 7"})
    inputs = np.array([7, 7, 7, 7, 8, 8], np.int32)
    actual = np.array([8, 6, 9, 5, 9, 7], np.int32)
    diff = judged(spec, "INT32", inputs, actual)
    # 7 -> 8 and 7 -> 6: a tie rounded the other way; 7 -> 9, 7 -> 5: not a neighbour; 8 is no tie,
    # and max_ulp gives integer outputs no slack
    assert diff.status == Status.MISMATCH and diff.tie_count == 2 and diff.mismatch_count == 4
    assert diff.legal_count == 0 and diff.unspecified_count == 0
    assert diff.bad_mask.tolist() == [False, False, True, True, True, True]
    only_ties = judged(spec, "INT32", inputs[:2], actual[:2])
    assert only_ties.status == Status.UNSPECIFIED and not only_ties.failed and only_ties.tie_count == 2


@pytest.mark.parametrize("data_type, one, above", [("FLOAT32", 0x3F800000, 0x3F800002), ("FLOAT16", 0x3C00, 0x3C02)])
def test_ties_do_not_apply_to_float_outputs(make_spec, data_type, one, above):
    spec = make_spec({"kind": "ulp", "max_ulp": 1, "ties": "x == 1"})
    assert verdicts(spec, data_type, bits([one], data_type), bits([above], data_type)) == [False]


# --- FLOAT64: ULP distances beyond int64 --------------------------------------------------------------

def test_float64_opposite_signs_are_not_wrapped_into_range(make_spec):
    """The float64 keys of 2.0 and -2.0 are +-2^62, 2^63 apart: beyond int64. The distance must not
    wrap around (it did: |-2^63| stayed negative and passed any max_ulp)."""
    spec = make_spec(ulp(0))
    expected = np.array([2.0, 4.0, 1.0, np.finfo(np.float64).max], np.float64)
    actual = np.array([-2.0, -1.0, -4.0, -np.finfo(np.float64).max], np.float64)
    assert verdicts(spec, "FLOAT64", expected, actual) == [False] * 4
    assert verdicts(make_spec(ulp(1000)), "FLOAT64", expected, actual) == [False] * 4
    # and the ordinary float64 bound, through zero included
    near = bits([0x3FF0000000000000, 0x3FF0000000000000, 0x0000000000000002, 0x0000000000000002], "FLOAT64")
    off = bits([0x3FF0000000000003, 0x3FF0000000000004, 0x8000000000000001, 0x8000000000000002], "FLOAT64")
    assert verdicts(make_spec(ulp(3)), "FLOAT64", near, off) == [True, False, True, False]
