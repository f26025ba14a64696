"""ExpectationSet.explain: known divergences explain a mismatch only when the expectations for
this operator and output (and input) type cover EVERY mismatching element (one alone if one does,
else together); a mismatch they cover in part stays a failure."""
import numpy as np
import pytest

from harness.model.backend import Outputs
from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.judge.expectations import Expectation, ExpectationSet
from harness.run.registry import expectations_for
from harness.spec.expr import parse_formula
from harness.model.layout import pack_buffer
from tests.helpers import SPECS

SIGN = "ELEMENT_WISE_SIGN"
HSIG = "ACTIVATION_HARD_SIGMOID"


def _item(when: str, operator: str = SIGN, data_types=("FLOAT32", "FLOAT16"), input_types=None, id_="e") -> Expectation:
    return Expectation(id_, operator, tuple(data_types), parse_formula(when), "why", input_types)


def _diff(op: str, x, actual, dtype: str = "FLOAT32", **attrs):
    """The diff of a backend that returned `actual` for input `x` (packed tensors of `dtype`)."""
    spec = SPECS.operator(op)
    np_type = SPECS.catalog.dtype(dtype).numpy
    case = case_from_arrays(spec, "6.4", {"InputTensor": dtype, "OutputTensor": dtype}, {"InputTensor": np.asarray(x, np_type)},
                            attributes=attrs or None)
    desc = case.descriptor.tensors["OutputTensor"]
    diff = judge(spec, case, Outputs({"OutputTensor": pack_buffer(np.asarray(actual, np_type), desc, SPECS.catalog.dtype(dtype))}), True)
    return diff


def test_every_mismatching_element_explained_returns_the_expectation():
    item = _item("isnan(x)")
    diff = _diff(SIGN, [np.nan, 1.0, -2.0, np.nan], [np.nan, 1.0, -1.0, np.nan])  # Sign(NaN) = NaN, twice
    assert diff.status == "mismatch" and diff.mismatch_count == 2
    assert ExpectationSet("b", [item]).explain(SIGN, "FLOAT32", diff, "FLOAT32") is item


@pytest.mark.parametrize("x,actual", [
    ([np.nan, 1.0, -2.0], [np.nan, 1.0, 1.0]),    # explained element first, unexplained last
    ([-2.0, 1.0, np.nan], [1.0, 1.0, np.nan]),    # unexplained first, explained last
    ([[np.nan, 3.0], [-4.0, np.nan]], [[np.nan, -1.0], [-1.0, np.nan]]),  # 2-D: one of three unexplained
], ids=["explained-first", "unexplained-first", "2d"])
def test_a_partly_explained_mismatch_is_not_explained(x, actual):
    diff = _diff(SIGN, x, actual)
    assert diff.status == "mismatch" and diff.mismatch_count >= 2
    assert ExpectationSet("b", [_item("isnan(x)")]).explain(SIGN, "FLOAT32", diff, "FLOAT32") is None


def test_two_expectations_each_covering_a_part_explain_the_whole_together():
    # a random case can show two known divergences at once (POW: a denormal base in one element, a
    # huge even exponent in another): their union explains it, under both ids
    diff = _diff(SIGN, [np.nan, -2.0, 3.0], [np.nan, 1.0, 1.0])
    items = [_item("isnan(x)", id_="nan"), _item("x > 5", id_="unrelated"), _item("x < 0", id_="negative")]
    found = ExpectationSet("b", items).explain(SIGN, "FLOAT32", diff, "FLOAT32")
    assert found is not None and found.id == "nan+negative"


def test_a_union_that_leaves_one_element_out_explains_nothing():
    diff = _diff(SIGN, [np.nan, -2.0, 3.0], [np.nan, 1.0, -1.0])  # Sign(3) = -1: neither explains it
    items = [_item("isnan(x)", id_="nan"), _item("x < 0", id_="negative")]
    assert ExpectationSet("b", items).explain(SIGN, "FLOAT32", diff, "FLOAT32") is None


def test_the_first_expectation_that_covers_everything_is_returned():
    diff = _diff(SIGN, [np.nan, -2.0], [np.nan, 1.0])
    partial, full = _item("isnan(x)", id_="partial"), _item("isnan(x) | (x < 0)", id_="full")
    assert ExpectationSet("b", [partial, full]).explain(SIGN, "FLOAT32", diff, "FLOAT32") is full


FITS = dict(operator=SIGN, data_types=("FLOAT32",), input_types=("FLOAT32",))


@pytest.mark.parametrize("change,ask", [
    ({"operator": HSIG}, {}),                  # an expectation of another operator
    ({"data_types": ("FLOAT16",)}, {}),        # of another output type
    ({"input_types": ("FLOAT16",)}, {}),       # of another input type
    ({}, {"operator": HSIG}),                  # asked about another operator
    ({}, {"data_type": None}),                 # asked with no output type
    ({}, {"input_type": "FLOAT16"}),           # asked about another input type
], ids=["item-operator", "item-data-type", "item-input-type", "ask-operator", "ask-no-data-type", "ask-input-type"])
def test_an_expectation_for_something_else_explains_nothing(change, ask):
    diff = _diff(SIGN, [np.nan, 1.0], [np.nan, 1.0])
    call = {"operator": SIGN, "data_type": "FLOAT32", "input_type": "FLOAT32"}
    fits = _item("isnan(x)", **FITS)
    assert ExpectationSet("b", [fits]).explain(call["operator"], call["data_type"], diff, call["input_type"]) is fits  # control
    item = _item("isnan(x)", **{**FITS, **change})
    call.update(ask)
    assert ExpectationSet("b", [item]).explain(call["operator"], call["data_type"], diff, call["input_type"]) is None


def test_nothing_to_explain():
    items = [_item("isnan(x)"), _item("x == x")]
    passed = _diff(SIGN, [1.0, -2.0], [1.0, -1.0])
    assert passed.status == "pass" and ExpectationSet("b", items).explain(SIGN, "FLOAT32", passed, "FLOAT32") is None
    unspecified = _diff(HSIG, [np.nan, 1.0], [0.0, 0.7])  # NaN into min/max: informational, no mismatching element
    assert unspecified.status == "diverges-on-unspecified"
    assert ExpectationSet("b", [_item("x == x", operator=HSIG)]).explain(HSIG, "FLOAT32", unspecified, "FLOAT32") is None


def test_when_may_read_attributes():
    item = _item("Alpha < 0", operator=HSIG)
    wrong = _diff(HSIG, [0.25, 0.5], [0.9, 0.9], Alpha=-1.0, Beta=0.5)   # want 0.25, 0.0
    assert wrong.mismatch_count == 2
    assert ExpectationSet("b", [item]).explain(HSIG, "FLOAT32", wrong, "FLOAT32") is item
    wrong_default = _diff(HSIG, [0.25, 0.5], [0.9, 0.9])                  # Alpha 0.2: not covered
    assert ExpectationSet("b", [item]).explain(HSIG, "FLOAT32", wrong_default, "FLOAT32") is None


def test_the_real_onnxruntime_sign_expectation():
    expectations = expectations_for("onnxruntime")
    explained = _diff(SIGN, [np.nan, 1.0, -2.0], [np.nan, 1.0, -1.0])
    found = expectations.explain(SIGN, "FLOAT32", explained, "FLOAT32")
    assert found is not None and found.id == "ort-sign-nan-propagates"
    also_wrong = _diff(SIGN, [np.nan, 1.0, -2.0], [np.nan, 1.0, 0.0])
    assert expectations.explain(SIGN, "FLOAT32", also_wrong, "FLOAT32") is None


def test_a_status_expectation_may_name_the_descriptors_it_explains():
    """descriptor_when on a status expectation: only cases whose descriptor it holds for (a
    crash that depends on an attribute's value, not on its presence)."""
    from harness.judge.expectations import _parse_descriptor_when, descriptor_holds
    spec = SPECS.operator(HSIG)
    item = Expectation("c", HSIG, (), parse_formula("0"), "why", status="crashed", reason_contains="boom",
                       descriptor_when=_parse_descriptor_when("InputTensor.DimensionCount == 2"))
    expectations = ExpectationSet("b", [item])
    for sizes, explained in (([2, 2], True), ([4], False)):
        case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                                {"InputTensor": np.zeros(sizes, np.float32)}, sizes=sizes)
        found = expectations.explain_status(HSIG, "crashed", None, "boom", "FLOAT32",
                                            descriptor_holds=lambda expr: descriptor_holds(expr, spec, case.descriptor))
        assert (found is item) is explained
    assert expectations.explain_status(HSIG, "crashed", None, "boom", "FLOAT32") is None  # nothing to evaluate it on


def _probe_file(tmp_path, probe: str):
    from harness.judge.expectations import load_expectations
    (tmp_path / "b.yaml").write_text(
        "backend: b\nexpectations:\n"
        "  - {id: p, operator: PADDING1, data_types: [FLOAT16], when: 'isnan(x)', why: w,\n"
        f"     probe: {probe}}}\n")
    return load_expectations("b", tmp_path)


def test_a_probe_may_give_inputs_as_raw_bits(tmp_path):
    """`input_bits`: what no decimal names (a signaling NaN, a NaN's payload) reaches the input
    buffer bit for bit."""
    from harness.judge.expectations import probe_case
    expectations = _probe_file(tmp_path, "{types: {InputTensor: FLOAT16, OutputTensor: FLOAT16}, "
                                         "tensor_sizes: {InputTensor: [1, 3], OutputTensor: [1, 4]}, "
                                         "attributes: {PaddingMode: 1, PaddingValueDataType: 2, PaddingValue: 0.0, "
                                         "StartPadding: [0, 1], EndPadding: [0, 0]}, "
                                         "input_bits: {InputTensor: [0x7C01, 0xFE05, 0x8000]}}")
    case = probe_case(expectations.items[0], SPECS, "6.4")
    assert np.frombuffer(case.inputs["InputTensor"], np.uint16)[:3].tolist() == [0x7C01, 0xFE05, 0x8000]  # then alignment padding


def test_a_probe_may_lay_a_tensor_out_strided(tmp_path):
    """`tensor_strides`: a divergence only a strided layout shows (ONE_HOT's OnValue) gets a probe;
    the logical elements land at their strided offsets, the gaps zero (checked by hand: Sizes
    {1, 3} with Strides {4, 2}: elements at 0, 2 and 4 of a 5-element buffer)."""
    from harness.judge.expectations import probe_case
    from harness.spec.source import SpecError
    expectations = _probe_file(tmp_path, "{types: {InputTensor: FLOAT16, OutputTensor: FLOAT16}, "
                                         "tensor_sizes: {InputTensor: [1, 3], OutputTensor: [1, 4]}, "
                                         "tensor_strides: {InputTensor: [4, 2]}, "
                                         "attributes: {PaddingMode: 1, PaddingValueDataType: 2, PaddingValue: 0.0, "
                                         "StartPadding: [0, 1], EndPadding: [0, 0]}, "
                                         "inputs: {InputTensor: [1.0, 2.0, 3.0]}}")
    case = probe_case(expectations.items[0], SPECS, "6.4")
    assert case.descriptor.tensors["InputTensor"].strides == [4, 2]
    assert np.frombuffer(case.inputs["InputTensor"], np.float16)[:5].tolist() == [1.0, 0.0, 2.0, 0.0, 3.0]
    with pytest.raises(SpecError) as raised:  # strides without the Sizes they lay out
        _probe_file(tmp_path, "{types: {InputTensor: FLOAT16, OutputTensor: FLOAT16}, tensor_strides: {InputTensor: [1]}}")
    assert "tensor_sizes" in str(raised.value)


@pytest.mark.parametrize("bits", ["{OutputTensor: [1]}", "{InputTensor: 7}", "{InputTensor: [-1]}", "{InputTensor: [1.5]}"])
def test_input_bits_are_checked_when_the_file_is_read(tmp_path, bits):
    from harness.spec.source import SpecError
    with pytest.raises(SpecError) as raised:
        _probe_file(tmp_path, "{types: {InputTensor: FLOAT16, OutputTensor: FLOAT16}, inputs: {OutputTensor: [1]}, "
                              f"input_bits: {bits}}}")
    assert "input_bits" in str(raised.value)


def test_an_expectation_is_also_read_on_the_values_a_device_flushes():
    # a device may flush an fp32 denormal to a zero of its sign; a known divergence at zero then
    # shows at the denormal (a GPU flushed x = -1.2e-38 and DirectML's tanh(-0) = +0 followed)
    item = _item("x == 0", data_types=("FLOAT32", "FLOAT64"))
    flushed_then_diverged = _diff(SIGN, [-1e-40, 2.0], [1.0, 1.0])  # page -1 (or -0 flushed); got 1
    assert flushed_then_diverged.status == "mismatch"
    assert ExpectationSet("b", [item]).explain(SIGN, "FLOAT32", flushed_then_diverged, "FLOAT32") is item
    normal = _diff(SIGN, [-1e-30, 2.0], [1.0, 1.0])  # not a denormal: nothing to flush
    assert ExpectationSet("b", [item]).explain(SIGN, "FLOAT32", normal, "FLOAT32") is None
    identity = _item("x == 0", operator="ELEMENT_WISE_IDENTITY", data_types=("FLOAT64",))
    ieee = _diff("ELEMENT_WISE_IDENTITY", [-1e-40, 2.0], [1.0, 2.0], dtype="FLOAT64")  # FLOAT64 is IEEE: never flushed
    assert ieee.status == "mismatch"
    assert ExpectationSet("b", [identity]).explain("ELEMENT_WISE_IDENTITY", "FLOAT64", ieee, "FLOAT64") is None
