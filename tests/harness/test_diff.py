"""The diff engine on constructed outputs: every classification, ULP edge cases, ties."""
import numpy as np
import pytest

from harness.model.backend import Crashed, Outputs, Rejected, Unsupported
from harness.generate.cases import case_from_arrays
from harness.model.descriptor import TensorDesc
from harness.judge.diff import judge, ulp_distance
from harness.model.layout import pack_buffer
from tests.helpers import SPECS, from_bits

F32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}


def _outputs(spec, case, values):
    desc = case.descriptor.tensors[spec.formula.output]
    return Outputs({spec.formula.output: pack_buffer(np.asarray(values), desc, SPECS.catalog.dtype(desc.data_type))})


def sign_case(x, dtype="FLOAT32"):
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    return spec, case_from_arrays(spec, "6.4", {"InputTensor": dtype, "OutputTensor": dtype}, {"InputTensor": np.asarray(x)})


def hsig_case(x, **attrs):
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    return spec, case_from_arrays(spec, "6.4", F32, {"InputTensor": np.asarray(x, np.float32)}, attributes=attrs)


def test_ulp_distance_edges():
    f = lambda *v: np.array(v, np.float32)
    assert ulp_distance(f(0.0), f(-0.0)).tolist() == [0]
    tiny = np.float32(1e-45)
    assert ulp_distance(f(tiny), f(-tiny)).tolist() == [2]          # adjacent across zero
    assert ulp_distance(f(1.0), f(np.nextafter(np.float32(1), np.float32(2)))).tolist() == [1]
    assert ulp_distance(f(np.inf), f(np.finfo(np.float32).max)).tolist() == [1]


def test_pass_and_sign_of_zero_is_exact():
    spec, case = sign_case(np.array([-1.0, 0.0, 2.0], np.float32))
    assert judge(spec, case, _outputs(spec, case, np.array([-1.0, 0.0, 1.0], np.float32)), True).status == "pass"
    diff = judge(spec, case, _outputs(spec, case, np.array([-1.0, -0.0, 1.0], np.float32)), True)
    assert diff.status == "mismatch" and diff.mismatch_count == 1
    assert diff.first[0].expected_hex == "0x00000000" and diff.first[0].actual_hex == "0x80000000"


def test_ulp_comparison_zero_signs_nan_and_inf():
    spec, case = hsig_case([0.1, -100.0, np.inf, np.nan, 1.0], Alpha=1.0, Beta=0.0)
    ref = np.array([0.1, 0.0, 1.0, np.nan, 1.0], np.float32)
    assert judge(spec, case, _outputs(spec, case, ref), True).status == "pass"
    # Alpha = 1, Beta = 0: x * 1.0 and x + 0.0 are exact in D3D, so even 1 ULP is a mismatch
    off = ref.copy(); off[0] = np.nextafter(off[0], np.float32(1))
    assert judge(spec, case, _outputs(spec, case, off), True).status == "mismatch"
    far = ref.copy(); far[0] = np.float32(0.1000001)                         # several ULP
    assert judge(spec, case, _outputs(spec, case, far), True).status == "mismatch"
    neg = ref.copy(); neg[1] = -0.0                                          # max(0, -100) must be +0
    assert judge(spec, case, _outputs(spec, case, neg), True).status == "mismatch"


def test_nan_vs_nan_payload_ignored_for_floats_but_not_for_bit_not():
    spec, case = sign_case(np.array([1.0], np.float32))
    spec2 = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    case2 = case_from_arrays(spec2, "6.4", F32, {"InputTensor": from_bits([0x7FC00001], np.float32)})
    diff = judge(spec2, case2, _outputs(spec2, case2, from_bits([0x7FC00000], np.float32)), True)
    assert diff.status == "pass"  # NaN in, NaN out: payload ignored (and NaN into min/max is unspecified anyway)
    bn = SPECS.operator("ELEMENT_WISE_BIT_NOT")
    case3 = case_from_arrays(bn, "6.4", F32, {"InputTensor": from_bits([0x807FFFFE], np.float32)})
    good = from_bits([0x7F800001], np.float32)
    assert judge(bn, case3, _outputs(bn, case3, good), True).status == "pass"
    other_nan = from_bits([0x7FC00000], np.float32)
    assert judge(bn, case3, _outputs(bn, case3, other_nan), True).status == "mismatch"


def test_nan_where_a_number_is_expected_is_a_mismatch():
    spec, case = hsig_case([1.0])
    diff = judge(spec, case, _outputs(spec, case, np.array([np.nan], np.float32)), True)
    assert diff.status == "mismatch" and diff.first[0].ulp is None


def test_unspecified_divergence_is_informational():
    spec, case = sign_case(np.array([0.0], np.float32))
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    case = case_from_arrays(spec, "6.4", F32, {"InputTensor": np.array([np.nan, 1.0], np.float32)})
    diff = judge(spec, case, _outputs(spec, case, np.array([0.0, 0.7], np.float32)), True)
    assert diff.status == "diverges-on-unspecified" and not diff.failed
    assert "nan_into_min_max" in diff.summary


def test_fp32_denormal_flush_is_accepted_for_sign():
    spec, case = sign_case(np.array([1e-40, -1e-40, 1.0], np.float32))
    flushed = judge(spec, case, _outputs(spec, case, np.array([0.0, 0.0, 1.0], np.float32)), True)
    assert flushed.status == "pass" and flushed.legal_count == 2
    assert flushed.liberties == {"fp32 denormal input flushed": 2}
    wrong = judge(spec, case, _outputs(spec, case, np.array([0.0, 0.0, 0.0], np.float32)), True)
    assert wrong.status == "mismatch"


def test_fp16_denormals_may_not_be_flushed():
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT16", "OutputTensor": "FLOAT16"},
                            {"InputTensor": from_bits([0x0001], np.float16)})
    assert judge(spec, case, _outputs(spec, case, np.array([0.0], np.float16)), True).status == "mismatch"


def test_quantize_ties_accept_either_neighbour():
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    types = {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": np.array([2.5, 2.4], np.float32),
                                                "ScaleTensor": np.ones(2, np.float32), "ZeroPointTensor": np.zeros(2)})
    assert judge(spec, case, _outputs(spec, case, np.array([2, 2], np.uint8)), True).status == "pass"
    away = judge(spec, case, _outputs(spec, case, np.array([3, 2], np.uint8)), True)
    assert away.status == "diverges-on-unspecified" and away.tie_count == 1
    assert judge(spec, case, _outputs(spec, case, np.array([2, 3], np.uint8)), True).status == "mismatch"  # 2.4 is no tie
    assert judge(spec, case, _outputs(spec, case, np.array([4, 2], np.uint8)), True).status == "mismatch"  # not a neighbour


def test_result_kinds_are_classified():
    spec, case = sign_case(np.array([1.0], np.float32))
    assert judge(spec, case, Crashed("boom"), True).status == "crashed"
    assert judge(spec, case, Unsupported("no FLOAT32"), True).status == "unsupported"
    assert judge(spec, case, Rejected("E_INVALIDARG"), True).status == "rejected-valid"
    bad = case.descriptor.with_tensor("OutputTensor", TensorDesc("INT8", [1]))
    case.descriptor = bad
    assert judge(spec, case, Rejected("E_INVALIDARG"), True).status == "rejected-invalid"
    assert judge(spec, case, Outputs({"OutputTensor": b"\0\0\0\0"}), True).status == "accepted-invalid"
    assert judge(spec, case, Outputs({"OutputTensor": b"\0\0\0\0"}), False).status == "unsupported"


def test_mismatch_report_names_index_inputs_and_bits():
    spec, case = sign_case(np.array([[3.0, -2.0], [0.5, -0.0]], np.float32))
    diff = judge(spec, case, _outputs(spec, case, np.array([[1.0, -1.0], [0.0, 0.0]], np.float32)), True)
    assert diff.status == "mismatch" and diff.mismatch_count == 1
    table = diff.table()
    assert "[1, 0]" in table and "x=0.5 (0x3f000000)" in table and "0x3f800000" in table


def test_unspecified_reasons_do_not_leak_between_backends_of_one_case():
    """The reference of a case is memoised and shared by every backend's judgement: the unspecified
    rules one backend's output met are that judgement's, not the next backend's. Backend A writes
    0.5 where HARD_SIGMOID reads a NaN (unspecified: nan_into_min_max); backend B writes a NaN of
    another payload there, which the comparison accepts (payloads ignored): B names no rule."""
    from harness.judge.diff import compare_outputs
    from harness.reference.evaluate import expected_for
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": np.array([np.nan, 0.25], np.float32)})
    expected = expected_for(spec, case)
    reference = expected.outputs["OutputTensor"]
    a = reference.copy()
    a[0] = 0.5
    b = reference.copy()
    b.view(np.uint32)[0] = 0x7FC00001
    desc = case.descriptor.tensors["OutputTensor"]
    catalog = spec.catalog
    first = compare_outputs(spec, case, {"OutputTensor": pack_buffer(a, desc, catalog.dtype("FLOAT32"))}, expected)
    second = compare_outputs(spec, case, {"OutputTensor": pack_buffer(b, desc, catalog.dtype("FLOAT32"))}, expected)
    assert first.status == "diverges-on-unspecified" and first.unspecified_reasons == ["nan_into_min_max"]
    assert second.status == "pass" and second.unspecified_reasons == []


def test_the_judge_settles_from_plain_facts():
    """The judge is a function of the values and the reference's ElementFacts (no reference object):
    five differing INT32 elements, each settled by one fact, by hand: element 0 is a legal value,
    1 rounds a tie (1 away), 2 lies where the docs leave the result open, 3 reaches an unspecified
    rule only under a liberty, 4 is none of these and fails."""
    from harness.judge.diff import _settle_differences
    from harness.reference.facts import ElementFacts
    spec = SPECS.operator("ELEMENT_WISE_ADD")
    want = np.array([10, 20, 30, 40, 50], np.int32)
    got = np.array([11, 21, 99, 99, 99], np.int32)
    none = np.zeros(5, dtype=bool)
    facts = ElementFacts(index=np.arange(5), atol=None,
                         legal=np.array([True, False, False, False, False]), legal_tags=np.array([4, 0, 0, 0, 0], np.uint16),
                         model_applies=True, legal_note=None, ties=np.array([False, True, False, False, True]),
                         unspecified=np.array([False, False, True, False, False]), unspecified_reasons=("rule_a",),
                         reachable=(("rule_b (under the precision model: flush)", np.array([False, False, False, True, False])),
                                    ("rule_c", none)))
    settled = _settle_differences(spec.comparison_for("INT32"), facts, SPECS.catalog.dtype("INT32"), want, got)
    assert settled.legal.tolist() == [True, False, False, False, False] and settled.tags.tolist() == [4, 0, 0, 0, 0]
    assert settled.ties.tolist() == [False, True, False, False, False]  # element 4 is a tie but 49 away: no
    assert settled.unspecified.tolist() == [False, False, True, True, False]
    assert settled.bad.tolist() == [False, False, False, False, True]
    assert settled.reasons == ["rule_a", "rule_b (under the precision model: flush)"] and settled.model_asked
