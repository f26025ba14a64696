"""Every validator rule: a descriptor that breaks only that rule is rejected with exactly its id,
and a close valid descriptor is accepted."""
import copy

import pytest

from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.validator import GENERIC_RULES, validate
from tests.helpers import SPECS


def sign(dtype="FLOAT32", sizes=(1, 1, 2, 4), **kw):
    return Descriptor("ELEMENT_WISE_SIGN", {"InputTensor": TensorDesc(dtype, list(sizes)),
                                            "OutputTensor": TensorDesc(dtype, list(sizes))}, **kw)


def quant(inp="FLOAT32", scale="FLOAT32", zp="UINT8", out="UINT8", sizes=(1, 1, 2, 4)):
    t = lambda d: TensorDesc(d, list(sizes)) if d else None
    return Descriptor("ELEMENT_WISE_QUANTIZE_LINEAR", {"InputTensor": t(inp), "ScaleTensor": t(scale),
                                                       "ZeroPointTensor": t(zp), "OutputTensor": t(out)})


def edit(desc, tensor, **changes):
    d = copy.deepcopy(desc)
    for k, v in changes.items():
        setattr(d.tensors[tensor], k, v)
    return d


def round_(mode: float) -> Descriptor:
    return Descriptor("ELEMENT_WISE_ROUND", {"InputTensor": TensorDesc("FLOAT32", [1, 1, 2, 4]),
                                            "OutputTensor": TensorDesc("FLOAT32", [1, 1, 2, 4])}, {"RoundingMode": mode})


def argmax(in_sizes, out_sizes, axes, out="UINT32") -> Descriptor:
    return Descriptor("ARGMAX", {"InputTensor": TensorDesc("FLOAT32", list(in_sizes)), "OutputTensor": TensorDesc(out, list(out_sizes))},
                      {"Axes": list(axes), "AxisDirection": 0.0})


def slice1(in_sizes, out_sizes, offsets, sizes, strides) -> Descriptor:
    return Descriptor("SLICE1", {"InputTensor": TensorDesc("FLOAT32", list(in_sizes)), "OutputTensor": TensorDesc("FLOAT32", list(out_sizes))},
                      {"InputWindowOffsets": list(offsets), "InputWindowSizes": list(sizes), "InputWindowStrides": list(strides)})


def pad1(in_sizes, out_sizes, start, end, value_type=1, out="FLOAT32") -> Descriptor:
    """PADDING1, CONSTANT 0; value_type is PaddingValueDataType's DML_TENSOR_DATA_TYPE value (FLOAT32 = 1)."""
    return Descriptor("PADDING1", {"InputTensor": TensorDesc("FLOAT32", list(in_sizes)), "OutputTensor": TensorDesc(out, list(out_sizes))},
                      {"PaddingMode": 0.0, "PaddingValueDataType": float(value_type), "PaddingValue": 0.0,
                       "StartPadding": list(start), "EndPadding": list(end)})


def topk(in_sizes, value_sizes, index_sizes, axis, k) -> Descriptor:
    return Descriptor("TOP_K1", {"InputTensor": TensorDesc("FLOAT32", list(in_sizes)), "OutputValueTensor": TensorDesc("FLOAT32", list(value_sizes)),
                                 "OutputIndexTensor": TensorDesc("UINT32", list(index_sizes))}, {"Axis": float(axis), "K": float(k), "AxisDirection": 1.0})


def gemm(a, b, c, out, trans_b=0.0) -> Descriptor:
    """GEMM without a fused activation; c None: no CTensor."""
    t = lambda sizes: TensorDesc("FLOAT32", list(sizes)) if sizes is not None else None
    return Descriptor("GEMM", {"ATensor": t(a), "BTensor": t(b), "CTensor": t(c), "OutputTensor": t(out)},
                      {"TransA": 0.0, "TransB": trans_b, "Alpha": 1.0, "Beta": 1.0})


def join(item_sizes, out_sizes, axis) -> Descriptor:
    tensors = {f"InputTensors_{i}": (TensorDesc("FLOAT32", list(s)) if i < len(item_sizes) else None) for i, s in
               enumerate(list(item_sizes) + [None] * (3 - len(item_sizes)))}
    return Descriptor("JOIN", tensors | {"OutputTensor": TensorDesc("FLOAT32", list(out_sizes))}, {"Axis": float(axis)}, {})


def split(in_sizes, item_sizes, axis) -> Descriptor:
    tensors = {f"OutputTensors_{i}": (TensorDesc("FLOAT32", list(s)) if i < len(item_sizes) else None) for i, s in
               enumerate(list(item_sizes) + [None] * (3 - len(item_sizes)))}
    return Descriptor("SPLIT", {"InputTensor": TensorDesc("FLOAT32", list(in_sizes))} | tensors, {"Axis": float(axis)}, {})


def gather(in_sizes, index_sizes, out_sizes, axis, index_dims, index_type="UINT32") -> Descriptor:
    return Descriptor("GATHER", {"InputTensor": TensorDesc("FLOAT32", list(in_sizes)), "IndicesTensor": TensorDesc(index_type, list(index_sizes)),
                                 "OutputTensor": TensorDesc("FLOAT32", list(out_sizes))}, {"Axis": float(axis), "IndexDimensions": float(index_dims)})


def conv(x, w, out, bias=None, groups=1, direction=0, strides=(1, 1), dilations=(1, 1), start=(0, 0), end=(0, 0),
         output_padding=(0, 0)) -> Descriptor:
    """CONVOLUTION (cross-correlation) without a fused activation; bias None: no BiasTensor."""
    t = lambda sizes: TensorDesc("FLOAT32", list(sizes)) if sizes is not None else None
    return Descriptor("CONVOLUTION", {"InputTensor": t(x), "FilterTensor": t(w), "BiasTensor": t(bias), "OutputTensor": t(out)},
                      {"Mode": 1.0, "Direction": float(direction), "Strides": list(strides), "Dilations": list(dilations),
                       "StartPadding": list(start), "EndPadding": list(end), "OutputPadding": list(output_padding),
                       "GroupCount": float(groups)})


# CONVOLUTION: x {1, C=2, 3, 3}, GroupCount 2, filter {M=2, C/G=1, 2, 2}, output {1, 2, 2, 2}, bias {1, 2, 1, 1}
CONV = conv([1, 2, 3, 3], [2, 1, 2, 2], [1, 2, 2, 2], bias=[1, 2, 1, 1], groups=2)

# rule id -> (valid descriptor, level, broken descriptor, level)
CASES = {
    "attribute.enum_value": (round_(2.0), "4.1", round_(3.0), "4.1"),  # DML_ROUNDING_MODE has members 0, 1, 2
    "operator.unavailable": (sign(), "2.0", sign(), "1.0"),
    "descriptor.unknown_field": (sign(), "4.1", Descriptor("ELEMENT_WISE_SIGN", {**sign().tensors, "BiasTensor": TensorDesc("FLOAT32", [1, 1, 2, 4])}), "4.1"),
    "tensor.missing": (quant(zp=None), "6.2", quant(zp=None), "6.1"),
    "tensor.data_type": (sign("INT32"), "2.1", sign("INT32"), "2.0"),
    "tensor.dimension_count": (sign(sizes=(2, 4)), "3.0", sign(sizes=(2, 4)), "2.1"),
    "tensor.sizes_length": (sign(), "4.1", edit(edit(sign(), "InputTensor", dimension_count=3), "OutputTensor", dimension_count=3), "4.1"),
    "tensor.strides_length": (edit(sign(), "InputTensor", strides=[8, 8, 4, 1]), "4.1", edit(sign(), "InputTensor", strides=[8, 4, 1]), "4.1"),
    "tensor.zero_size": (sign(), "4.1", sign(sizes=(1, 0, 2, 4)), "4.1"),
    "tensor.too_many_elements": (sign(sizes=(1, 1, 65535, 65537)), "4.1", sign(sizes=(1, 1, 65536, 65536)), "4.1"),
    "tensor.total_size_too_small": (edit(sign(), "InputTensor", total_bytes=32), "4.1", edit(sign(), "InputTensor", total_bytes=28), "4.1"),
    "tensor.alignment": (edit(sign(), "InputTensor", alignment=16), "4.1", edit(sign(), "InputTensor", alignment=8), "4.1"),
    "tensor.flags": (edit(sign(), "InputTensor", flags=1), "4.1", edit(sign(), "InputTensor", flags=2), "4.1"),
    "tensor.output_overlap": (edit(sign(), "InputTensor", strides=[0, 0, 0, 1]), "4.1", edit(sign(), "OutputTensor", strides=[0, 0, 0, 1]), "4.1"),
    "in_place.not_allowed": (sign(aliases={"OutputTensor": "InputTensor"}), "4.1",
                             Descriptor("ELEMENT_WISE_QUANTIZE_LINEAR", quant(inp="FLOAT32", zp="UINT8", out="UINT8").tensors,
                                        aliases={"OutputTensor": "InputTensor"}), "4.1"),
    "in_place.layout_mismatch": (sign(aliases={"OutputTensor": "InputTensor"}), "4.1",
                                 edit(sign(aliases={"OutputTensor": "InputTensor"}), "OutputTensor", strides=[16, 16, 8, 2], total_bytes=64), "4.1"),
    "constraint.same_data_type": (sign("INT8"), "4.1", edit(sign("INT8"), "OutputTensor", data_type="UINT8"), "4.1"),
    # ARGMAX (and ARGMIN, same ids): a rank mismatch is reported alone (the shape rule is guarded by equal ranks)
    "constraint.same_dimension_count": (argmax([2, 3], [2, 1], [1]), "4.1", argmax([2, 3], [2], [1]), "4.1"),
    "constraint.axes_in_range": (argmax([2, 3], [1, 1], [0, 1]), "4.1", argmax([2, 3], [2, 3], [2]), "4.1"),
    "constraint.output_sizes": (argmax([2, 3], [2, 1], [1]), "4.1", argmax([2, 3], [1, 3], [1]), "4.1"),
    # GEMM: A {1, 1, M=2, K=3} x B {1, 1, K=3, N=4} + C {1, 1, 2, 4}; N is B's own (`free`)
    "constraint.b_sizes": (gemm([1, 1, 2, 3], [1, 1, 3, 4], None, [1, 1, 2, 4]), "6.4",
                           gemm([1, 1, 2, 3], [1, 1, 4, 4], None, [1, 1, 2, 4]), "6.4"),
    "constraint.c_same_dimension_count": (gemm([1, 2, 3], [1, 3, 5], [1, 2, 5], [1, 2, 5]), "6.4",
                                          gemm([1, 2, 3], [1, 3, 5], [1, 1, 2, 5], [1, 2, 5]), "6.4"),
    "constraint.c_same_sizes": (gemm([1, 1, 2, 3], [1, 1, 3, 4], [1, 1, 2, 4], [1, 1, 2, 4]), "6.4",
                                gemm([1, 1, 2, 3], [1, 1, 3, 4], [1, 1, 2, 1], [1, 1, 2, 4]), "6.4"),
    # SLICE1: each rule's neighbours are guarded so that it breaks alone (an upper-bound shape rule for the output)
    "constraint.dimension_count_matches": (slice1([4], [2], [0], [4], [2]), "4.1", slice1([4], [2], [0, 0], [4, 1], [2, 1]), "4.1"),
    "constraint.window_not_empty": (slice1([4], [1], [0], [1], [1]), "4.1", slice1([4], [1], [0], [0], [1]), "4.1"),
    "constraint.window_in_bounds": (slice1([4], [1], [1], [3], [1]), "4.1", slice1([4], [1], [2], [3], [1]), "4.1"),
    # TOP_K1: the shape rules are guarded by a valid Axis and K, so each of those breaks alone
    "constraint.axis_in_range": (topk([4], [2], [2], 0, 2), "5.0", topk([4], [2], [2], 1, 2), "5.0"),
    "constraint.k_positive": (topk([4], [1], [1], 0, 1), "5.0", topk([4], [1], [1], 0, 0), "5.0"),
    "constraint.k_below_axis_size": (topk([4], [3], [3], 0, 3), "5.0", topk([4], [4], [4], 0, 4), "5.0"),
    "constraint.value_sizes": (topk([2, 4], [2, 2], [2, 2], 1, 2), "5.0", topk([2, 4], [2, 3], [2, 2], 1, 2), "5.0"),
    "constraint.index_sizes": (topk([2, 4], [1, 4], [1, 4], 0, 1), "5.0", topk([2, 4], [1, 4], [2, 4], 0, 1), "5.0"),
    "constraint.strides_not_zero": (slice1([4], [1], [0], [4], [-3]), "4.1", slice1([4], [1], [0], [4], [0]), "4.1"),
    # PADDING1: one array per dimension (the shape rule is guarded by it); the union's type (FLOAT16 = 2)
    "constraint.padding_dimension_count": (pad1([2, 3], [3, 3], [1, 0], [0, 0]), "5.0", pad1([2, 3], [3, 3], [1], [0]), "5.0"),
    "constraint.padding_value_data_type": (pad1([3], [5], [1], [1]), "5.0", pad1([3], [5], [1], [1], value_type=2), "5.0"),
    # GATHER: the page's Example 2 (rows 0,1,1,2 of a {3, 2} input) and Example 5 (Axis 1, two index dims, a
    # cropped leading 1); the shape rules are guarded by equal ranks and a valid Axis and IndexDimensions
    "constraint.indices_dimension_count": (gather([3, 2], [1, 4], [4, 2], 0, 1), "4.1", gather([3, 2], [4], [4, 2], 0, 1), "4.1"),
    "constraint.output_dimension_count": (gather([3, 2], [1, 4], [4, 2], 0, 1), "4.1", gather([3, 2], [1, 4], [1, 4, 2], 0, 1), "4.1"),
    "constraint.index_dimensions_in_range": (gather([3, 2], [1, 4], [4, 2], 0, 1), "4.1", gather([3, 2], [1, 4], [4, 2], 0, 3), "4.1"),
    "constraint.input_leading_ones": (gather([1, 3, 2], [1, 2, 2], [2, 2, 2], 1, 2), "4.1",
                                      gather([2, 3, 2], [1, 2, 2], [2, 2, 2], 1, 2), "4.1"),
    # JOIN: the page's Example 1 ({1,1,2,3} and {1,1,2,4} on axis 3) and Example 2 (three {1,1,2,2} on axis 1)
    "constraint.item_1_dimension_count": (join([[1, 1, 2, 3], [1, 1, 2, 4]], [1, 1, 2, 7], 3), "6.4",
                                          join([[1, 1, 2, 3], [1, 2, 4]], [1, 1, 2, 7], 3), "6.4"),
    "constraint.item_2_dimension_count": (join([[1, 1, 2, 2]] * 3, [1, 3, 2, 2], 1), "6.4",
                                          join([[1, 1, 2, 2], [1, 1, 2, 2], [1, 1, 1, 2, 2]], [1, 3, 2, 2], 1), "6.4"),
    "constraint.item_1_sizes": (join([[1, 1, 2, 3], [1, 1, 2, 4]], [1, 1, 2, 7], 3), "6.4",
                                join([[1, 1, 2, 3], [1, 1, 3, 4]], [1, 1, 2, 7], 3), "6.4"),
    "constraint.item_2_sizes": (join([[1, 1, 2, 2]] * 3, [1, 3, 2, 2], 1), "6.4",
                                join([[1, 1, 2, 2], [1, 1, 2, 2], [1, 1, 2, 1]], [1, 3, 2, 2], 1), "6.4"),
    # SPLIT: the page's Example 1 ({1,1,6,2} into 2, 1 and 3 rows on axis 2)
    "constraint.item_0_dimension_count": (split([1, 1, 6, 2], [[1, 1, 2, 2], [1, 1, 1, 2], [1, 1, 3, 2]], 2), "6.4",
                                          split([1, 1, 6, 2], [[1, 2, 2], [1, 1, 1, 2], [1, 1, 3, 2]], 2), "6.4"),
    "constraint.input_sizes": (split([1, 1, 6, 2], [[1, 1, 2, 2], [1, 1, 1, 2], [1, 1, 3, 2]], 2), "6.4",
                               split([1, 1, 7, 2], [[1, 1, 2, 2], [1, 1, 1, 2], [1, 1, 3, 2]], 2), "6.4"),
    "constraint.indices_sizes": (gather([3, 2], [1, 4], [4, 2], 0, 1), "4.1", gather([3, 2], [2, 4], [4, 2], 0, 1), "4.1"),
    "constraint.same_shape": (sign(), "4.1", edit(sign(), "OutputTensor", sizes=[1, 1, 4, 2]), "4.1"),
    "constraint.scale_float32_for_int32_input": (quant("INT32", "FLOAT32"), "6.4", quant("INT32", "FLOAT16"), "6.4"),
    "constraint.scale_same_type_as_input": (quant("FLOAT16", "FLOAT16"), "6.4", quant("FLOAT16", "FLOAT32"), "6.4"),
    "constraint.zero_point_same_type_as_output": (quant(zp="INT8", out="INT8"), "6.4", quant(zp="INT8", out="UINT8"), "6.4"),
    # CONVOLUTION: each shape rule is guarded by equal ranks and arrays of the spatial rank, so each rule breaks alone
    "constraint.groups_divide_input_channels": (CONV, "6.4", conv([1, 3, 3, 3], [2, 1, 2, 2], [1, 2, 2, 2], groups=2), "6.4"),
    "constraint.groups_divide_output_channels": (CONV, "6.4", conv([1, 2, 3, 3], [3, 1, 2, 2], [1, 3, 2, 2], groups=2), "6.4"),
    "constraint.dilations_not_zero": (CONV, "6.4", conv([1, 2, 3, 3], [2, 1, 2, 2], [1, 2, 3, 2], groups=2, dilations=(0, 1)), "6.4"),
    "constraint.spatial_dimension_count": (CONV, "6.4", conv([1, 2, 3, 3], [2, 1, 2, 2], [1, 2, 2, 2], groups=2, strides=(1, 1, 1),
                                                            dilations=(1, 1, 1), start=(0, 0, 0), end=(0, 0, 0),
                                                            output_padding=(0, 0, 0)), "6.4"),
    "constraint.window_fits": (conv([1, 2, 2, 2], [2, 1, 2, 2], [1, 2, 1, 1], groups=2), "6.4",
                               conv([1, 2, 1, 2], [2, 1, 2, 2], [1, 2, 1, 1], groups=2), "6.4"),
    "constraint.bias_same_dimension_count": (CONV, "6.4", conv([1, 2, 3, 3], [2, 1, 2, 2], [1, 2, 2, 2], bias=[2, 1, 1], groups=2), "6.4"),
    "constraint.filter_sizes": (CONV, "6.4", conv([1, 2, 3, 3], [2, 2, 2, 2], [1, 2, 2, 2], groups=2), "6.4"),
    "constraint.bias_sizes": (CONV, "6.4", conv([1, 2, 3, 3], [2, 1, 2, 2], [1, 2, 2, 2], bias=[1, 3, 1, 1], groups=2), "6.4"),
}


def test_every_rule_id_has_a_case():
    """Every generic rule and every constraint of the operators that brought a rule kind has a
    hand-written case here; the constraints of the hundred element-wise specs of issue 16 (most
    of them same_data_type / same_shape again) are broken alone by the invalid generator instead
    (test_generation: test_invalid_cases_break_exactly_their_rule, and every rule id is reached)."""
    rule_ids = set(GENERIC_RULES)
    for op in SPECS.operators.values():
        rule_ids |= {c.rule_id for c in op.constraints}
    assert set(CASES) <= rule_ids, set(CASES) - rule_ids  # no case for a rule that no longer exists
    assert set(GENERIC_RULES) <= set(CASES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_alone_is_reported_and_neighbour_is_accepted(rule):
    valid, valid_level, broken, broken_level = CASES[rule]
    spec = SPECS.operator(broken.operator)
    good = validate(SPECS.operator(valid.operator), valid, valid_level)
    assert good.accepted, good.summary()
    verdict = validate(spec, broken, broken_level)
    assert verdict.rule_ids == {rule}, verdict.summary()
    assert all(v.message for v in verdict.violations)


def test_all_broken_rules_are_reported():
    d = edit(edit(sign("FLOAT64"), "OutputTensor", sizes=[1, 1, 1, 4]), "InputTensor", alignment=3)
    verdict = validate(SPECS.operator("ELEMENT_WISE_SIGN"), d, "4.1")
    assert verdict.rule_ids == {"tensor.data_type", "constraint.same_shape", "tensor.alignment"}


def test_level_gated_rejection_is_not_invalid_on_newer_levels():
    """A descriptor invalid only at a lower level is valid on a newer device."""
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    d = quant("FLOAT16", "FLOAT16", "INT8", "INT8")
    assert validate(spec, d, "5.2").rule_ids == {"tensor.data_type"}
    assert validate(spec, d, "6.0").accepted and validate(spec, d, "6.4").accepted


@pytest.mark.parametrize("backend_name", ["numpy", "onnxruntime"])
def test_a_case_is_validated_once(monkeypatch, backend_name):
    """The judge, the backend and the prefetch share one verdict per case and level."""
    import numpy as np

    import harness.model.validator as validator
    from harness.generate.cases import case_from_arrays
    from harness.run.case import run_case
    from harness.run.registry import load_backend
    calls = []
    real = validator.validate
    monkeypatch.setattr(validator, "validate", lambda *a, **k: calls.append(a) or real(*a, **k))
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    backend = load_backend(backend_name, specs=SPECS)
    for n in (4, 70_000):  # small, and large enough for the reference prefetch
        case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                                {"InputTensor": np.linspace(-2, 2, n, dtype=np.float32)})
        calls.clear()
        assert run_case(backend, spec, case, "valid").status == "pass"
        assert len(calls) == 1, f"validated {len(calls)} times"


def test_an_upper_bound_shape_rule_takes_any_size_from_one_to_the_bound():
    spec = SPECS.operator("SLICE1")
    for out in (1, 2):  # 1 + (4 - 1) // 2 = 2 elements reachable
        assert validate(spec, slice1([4], [out], [0], [4], [2]), "4.1").accepted
    assert validate(spec, slice1([4], [3], [0], [4], [2]), "4.1").rule_ids == {"constraint.output_sizes"}
    assert validate(spec, slice1([4], [2], [0], [4], [-2]), "4.1").accepted  # the sign does not change the count


def test_arrays_sharing_a_count_must_have_one_length():
    from harness.model.descriptor import Case
    from harness.model.wellformed import CaseFormatError, check_case
    spec = SPECS.operator("SLICE1")
    d = slice1([4], [2], [0], [4, 1], [2])
    with pytest.raises(CaseFormatError) as raised:
        check_case(Case(d, "4.1", {"InputTensor": bytes(16)}), spec)
    assert "share the count DimensionCount" in str(raised.value)


def test_a_free_size_takes_any_value_and_the_fixed_ones_must_match():
    """GEMM's b_sizes leaves N `free`: B {K, N} with any N is valid; a K other than A's is not
    (also with TransB, where B is {N, K})."""
    spec = SPECS.operator("GEMM")
    for n in (1, 7, 64):
        assert validate(spec, gemm([2, 3], [3, n], None, [2, n]), "6.4").accepted
        assert validate(spec, gemm([2, 3], [n, 3], None, [2, n], trans_b=1.0), "6.4").accepted
    assert validate(spec, gemm([2, 3], [3, 2], None, [2, 3], trans_b=1.0), "6.4").rule_ids == {"constraint.b_sizes"}


def test_gather_page_example_3_as_printed_is_invalid():
    """The page's Example 3 prints IndexDimensions 2 for a {1, 2} IndicesTensor on a {3, 2} input
    at Axis 1: the concatenation {3} + {1, 2} is 3 long and would crop the 3, not a leading 1, so no
    2-D output fits (a page defect; with IndexDimensions 1 the page's {3, 2} output is exact)."""
    spec = SPECS.operator("GATHER")
    assert validate(spec, gather([3, 2], [1, 2], [3, 2], 1, 1), "4.1").accepted
    assert validate(spec, gather([3, 2], [1, 2], [3, 2], 1, 2), "4.1").rule_ids == {"constraint.input_leading_ones", "constraint.output_sizes"}


def test_gather_index_dimensions_zero_and_negative_index_types():
    """IndexDimensions 0: a scalar index (the indices all 1s), the axis dropped and a leading 1
    added; signed index types exist from FL 3.0 only."""
    spec = SPECS.operator("GATHER")
    assert validate(spec, gather([3, 2], [1, 1], [1, 2], 0, 0), "4.1").accepted
    assert validate(spec, gather([3, 2], [2, 1], [1, 2], 0, 0), "4.1").rule_ids == {"constraint.indices_sizes"}
    four = gather([1, 1, 3, 2], [1, 1, 1, 4], [1, 1, 4, 2], 2, 1, index_type="INT32")
    assert validate(spec, four, "3.0").accepted
    assert validate(spec, four, "2.1").rule_ids == {"tensor.data_type"}
