"""Hand-checked vectors for the NumPy reference, on the values implementations get wrong."""
import numpy as np
import pytest

from harness.generate.cases import example_case, output_values
from harness.reference.evaluate import expected_for
from tests.helpers import REFERENCE, SPECS, bits, from_bits, run_reference

F32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
F16 = {"InputTensor": "FLOAT16", "OutputTensor": "FLOAT16"}
NAN_PAYLOADS_F32 = [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7FC12345]
NAN_PAYLOADS_F16 = [0x7E00, 0xFE00, 0x7C01, 0x7DFF, 0xFFFF]


@pytest.mark.parametrize("op,example", [(op.name, ex) for op in SPECS.operators.values() for ex in op.examples],
                         ids=lambda v: getattr(v, "name", v))
def test_spec_worked_examples(op, example):
    spec = SPECS.operator(op)
    case = example_case(spec, example)
    result = REFERENCE.run(case)
    assert result.kind == "outputs"
    for name, expected in example.expected.items():
        got = output_values(spec, case, result.buffers)[name].ravel()
        want = np.asarray(expected, dtype=got.dtype)
        assert np.array_equal(bits(got, got.dtype), bits(want, got.dtype)), (got, want)


class TestSign:
    def test_float32_specials(self):
        x = np.array([-3.0, -0.0, 0.0, 2.5, -np.inf, np.inf, 1e-40, -1e-40, np.finfo(np.float32).max], np.float32)
        out = run_reference("ELEMENT_WISE_SIGN", F32, {"InputTensor": x})
        assert out.tolist() == [-1, 0, 0, 1, -1, 1, 1, -1, 1]
        assert not np.signbit(out[1]), "sign(-0.0) is +0 (the 'otherwise' branch gives 0)"

    @pytest.mark.parametrize("dtype,payloads", [(np.float32, NAN_PAYLOADS_F32), (np.float16, NAN_PAYLOADS_F16)])
    def test_nan_payloads_give_zero(self, dtype, payloads):
        types = F32 if dtype == np.float32 else F16
        out = run_reference("ELEMENT_WISE_SIGN", types, {"InputTensor": from_bits(payloads, dtype)})
        assert out.tolist() == [0] * len(payloads)
        assert not np.signbit(out).any()

    def test_float16_denormals_and_extremes(self):
        x = from_bits([0x0001, 0x8001, 0x03FF, 0x7BFF, 0xFBFF, 0x8000], np.float16)
        assert run_reference("ELEMENT_WISE_SIGN", F16, {"InputTensor": x}).tolist() == [1, -1, 1, 1, -1, 0]

    @pytest.mark.parametrize("dtype", ["INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"])
    def test_integer_min_max(self, dtype):
        t = SPECS.catalog.dtype(dtype)
        x = np.array([t.min, t.min + 1, 0, 1, t.max], dtype=t.numpy)
        out = run_reference("ELEMENT_WISE_SIGN", {"InputTensor": dtype, "OutputTensor": dtype}, {"InputTensor": x})
        expected = [-1 if v < 0 else (1 if v > 0 else 0) for v in [t.min, t.min + 1, 0, 1, t.max]]
        assert out.tolist() == expected


class TestHardSigmoid:
    def test_defaults(self):
        x = np.array([-3.0, -2.5, -0.0, 0.0, 1.0, 2.5, 3.0, -np.inf, np.inf, 1e-40], np.float32)
        out = run_reference("ACTIVATION_HARD_SIGMOID", F32, {"InputTensor": x})
        a, b = np.float64(np.float32(0.2)), np.float64(np.float32(0.5))
        want = np.clip(a * x.astype(np.float64) + b, 0, 1).astype(np.float32)
        assert np.array_equal(out, want)
        assert out[2] == 0.5 and out[0] == 0 and out[6] == 1

    @pytest.mark.parametrize("alpha,beta,x,want", [
        (0.0, 0.25, [-1e30, 5.0, -0.0], [0.25, 0.25, 0.25]),          # Alpha 0: the constant Beta
        (-1.0, 0.5, [0.25, -0.25, 1.0, -1.0], [0.25, 0.75, 0.0, 1.0]),  # negative Alpha mirrors
        (1.0, -0.5, [0.0, 0.75, 2.0, 0.5], [0.0, 0.25, 1.0, 0.0]),     # negative Beta
        (2.0, 0.0, [0.125, 0.75, -0.125], [0.25, 1.0, 0.0]),
    ])
    def test_non_default_attributes(self, alpha, beta, x, want):
        out = run_reference("ACTIVATION_HARD_SIGMOID", F32, {"InputTensor": np.array(x, np.float32)},
                            attributes={"Alpha": alpha, "Beta": beta})
        assert out.tolist() == want

    @pytest.mark.parametrize("alpha,beta,x,want", [
        # float32(1 + 2^-24) is 1.0 (a tie, to even), so the output is x itself; with the double
        # Alpha the product is 1 - 2^-48, which rounds to 1.0.
        (1 + 2.0**-24, 0.0, 1 - 2.0**-24, 1 - 2.0**-24),
        # float32(2^-25 + 2^-52) is 2^-25: 0.5 + 2^-25 is a tie and rounds to even, 0.5; with the
        # double Beta the sum lies above the tie and rounds up to 0.5 + 2^-24.
        (1.0, 2.0**-25 + 2.0**-52, 0.5, 0.5),
    ], ids=["alpha", "beta"])
    def test_attributes_are_float32(self, alpha, beta, x, want):
        # Alpha and Beta are FLOAT in the desc struct: the reference computes with their float32
        # values. Each vector's result differs when the doubles are used (checked below), so this
        # fails if the rounding goes.
        assert float(np.float32(alpha)) != alpha or float(np.float32(beta)) != beta  # not float32 values
        out = run_reference("ACTIVATION_HARD_SIGMOID", F32, {"InputTensor": np.array([x], np.float32)},
                            attributes={"Alpha": alpha, "Beta": beta})
        assert out[0] == np.float32(want)
        with_doubles = np.float32(min(max(alpha * x + beta, 0.0), 1.0))  # exact in float64 for these vectors
        assert with_doubles != np.float32(want), "test vector: the doubles must give another result"

    def test_correct_rounding_where_float64_lands_on_a_float32_midpoint(self):
        # Exact value 0.5 + 2^-25 + 2^-71: float64 rounds it onto the float32 midpoint 0.5 + 2^-25, and a
        # second rounding (ties to even) would give 0.5. Correctly rounded once, it is 0.5 + 2^-24.
        alpha = 1 + 2.0**-23
        beta = 0.5 * (1 + 2.0**-23)
        x = np.array([-(2.0**-25) * (1 - 2.0**-23)], np.float32)
        out = run_reference("ACTIVATION_HARD_SIGMOID", F32, {"InputTensor": x}, attributes={"Alpha": alpha, "Beta": beta})
        assert out[0] == np.float32(0.5 + 2.0**-24)
        naive = np.float32(np.float64(alpha) * np.float64(x[0]) + np.float64(beta))
        assert naive == np.float32(0.5), "the double-rounded value differs, so this vector tests the fix"

    def test_float16_denormals(self):
        x = from_bits([0x0001, 0x8001, 0x03FF], np.float16)
        out = run_reference("ACTIVATION_HARD_SIGMOID", F16, {"InputTensor": x}, attributes={"Alpha": 1.0, "Beta": 0.0})
        assert bits(out, np.float16).tolist() == [0x0001, 0x0000, 0x03FF]

    def test_nan_is_marked_unspecified(self):
        spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
        from harness.generate.cases import case_from_arrays
        case = case_from_arrays(spec, "6.4", F32, {"InputTensor": from_bits(NAN_PAYLOADS_F32 + [0x3F800000], np.float32)})
        expected = expected_for(spec, case)
        assert expected.unspecified("OutputTensor").tolist() == [True] * len(NAN_PAYLOADS_F32) + [False]
        assert expected.unspecified_reasons["OutputTensor"] == ["nan_into_min_max"]


QUANT_TYPES = {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"}


class TestQuantizeLinear:
    @pytest.mark.parametrize("out_type,zp,x,want", [
        ("UINT8", 0, [0.5, 1.5, 2.5, 3.5, 254.5, 253.5], [0, 2, 2, 4, 254, 254]),
        ("INT8", 0, [-0.5, -1.5, -2.5, -3.5, -127.5, 126.5], [0, -2, -2, -4, -128, 126]),
        ("INT8", 0, [0.5, 1.5, 2.5], [0, 2, 2]),
        ("UINT8", 10, [-0.5, 0.5, -10.5], [10, 10, 0]),
    ])
    def test_ties_round_half_to_even(self, out_type, zp, x, want):
        types = dict(QUANT_TYPES, ZeroPointTensor=out_type, OutputTensor=out_type)
        n = len(x)
        out = run_reference("ELEMENT_WISE_QUANTIZE_LINEAR", types, {
            "InputTensor": np.array(x, np.float32), "ScaleTensor": np.ones(n, np.float32),
            "ZeroPointTensor": np.full(n, zp)})
        assert out.tolist() == want

    def test_ties_with_non_unit_scale(self):
        # 0.75 / 0.5 = 1.5 -> 2; 1.25 / 0.5 = 2.5 -> 2; -0.25 / 0.5 = -0.5 -> -0 -> zp
        out = run_reference("ELEMENT_WISE_QUANTIZE_LINEAR", dict(QUANT_TYPES, ZeroPointTensor="INT8", OutputTensor="INT8"), {
            "InputTensor": np.array([0.75, 1.25, -0.25], np.float32), "ScaleTensor": np.full(3, 0.5, np.float32),
            "ZeroPointTensor": np.zeros(3)})
        assert out.tolist() == [2, 2, 0]

    @pytest.mark.parametrize("out_type,x,want", [
        ("UINT8", [-1e30, -1.0, 255.0, 255.4, 256.0, 1e30, np.inf, -np.inf], [0, 0, 255, 255, 255, 255, 255, 0]),
        ("INT8", [-1e30, -128.0, -129.0, 127.0, 128.0, 1e30, np.inf, -np.inf], [-128, -128, -128, 127, 127, 127, 127, -128]),
    ])
    def test_saturation_at_both_ends(self, out_type, x, want):
        n = len(x)
        types = dict(QUANT_TYPES, ZeroPointTensor=out_type, OutputTensor=out_type)
        out = run_reference("ELEMENT_WISE_QUANTIZE_LINEAR", types, {
            "InputTensor": np.array(x, np.float32), "ScaleTensor": np.ones(n, np.float32), "ZeroPointTensor": np.zeros(n)})
        assert out.tolist() == want

    def test_absent_zero_point_means_zero(self):
        types = {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "OutputTensor": "INT8"}
        out = run_reference("ELEMENT_WISE_QUANTIZE_LINEAR", types, {
            "InputTensor": np.array([-3.0, 7.5, 1000.0], np.float32), "ScaleTensor": np.full(3, 2.0, np.float32)})
        assert out.tolist() == [-2, 4, 127]

    def test_int32_input_with_float32_scale(self):
        types = {"InputTensor": "INT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "INT8", "OutputTensor": "INT8"}
        out = run_reference("ELEMENT_WISE_QUANTIZE_LINEAR", types, {
            "InputTensor": np.array([-2**31, -5, 5, 7, 2**31 - 1], np.int32), "ScaleTensor": np.full(5, 2.0, np.float32),
            "ZeroPointTensor": np.array([0, 0, 0, 0, 0])})
        assert out.tolist() == [-128, -2, 2, 4, 127]

    def test_float16_input(self):
        types = {"InputTensor": "FLOAT16", "ScaleTensor": "FLOAT16", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"}
        x = np.array([0.5, 1.5, 65504.0, from_bits([0x0001], np.float16)[0]], np.float16)
        out = run_reference("ELEMENT_WISE_QUANTIZE_LINEAR", types, {
            "InputTensor": x, "ScaleTensor": np.ones(4, np.float16), "ZeroPointTensor": np.full(4, 3)})
        assert out.tolist() == [3, 5, 255, 3]

    def test_nan_and_zero_scale_are_unspecified_not_invented(self):
        spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
        from harness.generate.cases import case_from_arrays
        case = case_from_arrays(spec, "6.4", QUANT_TYPES, {
            "InputTensor": np.array([np.nan, 1.0, 1.0, 0.0, 2.0], np.float32),
            "ScaleTensor": np.array([1.0, 0.0, np.nan, 0.0, 1.0], np.float32), "ZeroPointTensor": np.zeros(5)})
        expected = expected_for(spec, case)
        assert expected.unspecified("OutputTensor").tolist() == [True, True, True, True, False]
        assert set(expected.unspecified_reasons["OutputTensor"]) == {"nan_quotient", "zero_scale"}

    def test_tie_mask(self):
        spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
        from harness.generate.cases import case_from_arrays
        case = case_from_arrays(spec, "6.4", QUANT_TYPES, {
            "InputTensor": np.array([2.5, 2.4, -0.5, 3.0], np.float32), "ScaleTensor": np.ones(4, np.float32),
            "ZeroPointTensor": np.zeros(4)})
        assert expected_for(spec, case).ties("OutputTensor").tolist() == [True, False, True, False]


class TestBitNot:
    def test_docs_uint8_example(self):
        out = run_reference("ELEMENT_WISE_BIT_NOT", {"InputTensor": "UINT8", "OutputTensor": "UINT8"},
                            {"InputTensor": np.array([[0, 128], [42, 255]], np.uint8)}, sizes=[2, 2])
        assert out.tolist() == [[255, 127], [213, 0]]

    def test_float16_bit_patterns(self):
        patterns = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x3C00, 0xFFFF]
        out = run_reference("ELEMENT_WISE_BIT_NOT", F16, {"InputTensor": from_bits(patterns, np.float16)})
        assert bits(out, np.float16).tolist() == [(~p) & 0xFFFF for p in patterns]

    def test_float64_bit_patterns(self):
        patterns = [0, 0x8000000000000000, 0x7FF0000000000000, 0x7FF8000000000001, 0x3FF0000000000000, 1]
        out = run_reference("ELEMENT_WISE_BIT_NOT", {"InputTensor": "FLOAT64", "OutputTensor": "FLOAT64"},
                            {"InputTensor": from_bits(patterns, np.float64)})
        assert bits(out, np.float64).tolist() == [(~p) & 0xFFFFFFFFFFFFFFFF for p in patterns]

    def test_float32_nan_payload_is_data(self):
        out = run_reference("ELEMENT_WISE_BIT_NOT", F32, {"InputTensor": from_bits(NAN_PAYLOADS_F32, np.float32)})
        assert bits(out, np.float32).tolist() == [(~p) & 0xFFFFFFFF for p in NAN_PAYLOADS_F32]

    @pytest.mark.parametrize("dtype", ["INT8", "INT16", "INT32", "INT64"])
    def test_signed_is_twos_complement(self, dtype):
        t = SPECS.catalog.dtype(dtype)
        x = np.array([t.min, -1, 0, 1, t.max], dtype=t.numpy)
        out = run_reference("ELEMENT_WISE_BIT_NOT", {"InputTensor": dtype, "OutputTensor": dtype}, {"InputTensor": x})
        assert out.tolist() == [t.max, 0, -1, -2, t.min]
