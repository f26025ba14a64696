"""Hand-checked vectors for the NumPy reference, on the values implementations get wrong.

The vectors of each operator live in tests/golden/OPERATOR.yaml (inputs, attributes, types, the
expected outputs and how each was checked by hand); `test_golden_vectors` runs them for every
operator of the specs, so an operator without a file fails with "no golden data for OP". The tests
below it check mechanisms (float32 attributes, a single rounding, unspecified and tie masks) on
one operator each.
"""
import numpy as np
import pytest

from harness.model.descriptor import TensorDesc
from harness.generate.cases import case_from_arrays, example_case, output_values
from harness.reference.evaluate import expected_for
from tests.helpers import GOLDEN_DIR, REFERENCE, SPECS, bits, from_bits, golden, golden_array, load_golden, run_reference

F32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
NAN_PAYLOADS_F32 = [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7FC12345]
OPERATORS = sorted(SPECS.operators)


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
        if got.dtype.kind == "f" and spec.comparison_for(str(case.descriptor.tensors[name].data_type)).kind != "bitwise":
            # a computed NaN's sign and payload are not the operator's (D3D: any NaN); the
            # data-movement operators' examples, compared bit for bit, keep theirs
            nan = np.isnan(got) & np.isnan(want)
            got, want = np.where(nan, 0, got), np.where(nan, 0, want)
        assert np.array_equal(bits(got, got.dtype), bits(want, got.dtype)), (got, want)


def _run_vector(spec, vector) -> list[str]:
    """Run one golden vector through the reference; what differs from its expected outputs, bit for bit."""
    types = vector["types"]
    numpy_type = {tensor: SPECS.catalog.dtype(t).numpy for tensor, t in types.items()}
    inputs = {tensor: golden_array(values, numpy_type[tensor]) for tensor, values in vector["inputs"].items()}
    layouts = None
    if "tensor_sizes" in vector:  # an index-space operator: each tensor has its own Sizes
        layouts = {tensor: TensorDesc(t, list(vector["tensor_sizes"][tensor])) for tensor, t in types.items()}
        inputs = {tensor: values.reshape(vector["tensor_sizes"][tensor]) for tensor, values in inputs.items()}
    case = case_from_arrays(spec, vector.get("feature_level", SPECS.catalog.newest_level.name), types, inputs,
                            sizes=vector.get("sizes"), attributes=vector.get("attributes"), layouts=layouts)
    result = REFERENCE.run(case)
    if result.kind != "outputs":
        return [f"{vector['name']}: the reference answered {result!r}"]
    outputs = output_values(spec, case, result.buffers)
    wrong = []
    for tensor, values in vector["expected"].items():
        got = outputs[tensor].ravel()
        want = golden_array(values, numpy_type[tensor])
        if got.shape == want.shape and got.dtype.kind == "f" and spec.comparison_for(types[tensor]).kind != "bitwise":
            # a computed NaN is compared as a NaN: D3D lets a device return any NaN, and the
            # reference writes the canonical one (test_computed_nans_are_canonical); data movement,
            # compared bit for bit, keeps its payloads
            nan = np.isnan(got) & np.isnan(want)
            got, want = np.where(nan, 0, got).astype(got.dtype), np.where(nan, 0, want).astype(want.dtype)
        if got.shape != want.shape or not np.array_equal(bits(got, got.dtype), bits(want, want.dtype)):
            wrong.append(f"{vector['name']}: {tensor} is {got.tolist()} (bits {[hex(b) for b in bits(got, got.dtype).tolist()]}), "
                         f"expected {want.tolist()} (bits {[hex(b) for b in bits(want, want.dtype).tolist()]})")
    return wrong


@pytest.mark.parametrize("op", OPERATORS)
def test_golden_vectors(op):
    """Every hand-checked vector of tests/golden/OP.yaml gives its expected outputs, bit for bit."""
    spec = SPECS.operator(op)
    vectors = golden(op)["vectors"]
    assert vectors, f"tests/golden/{op}.yaml holds no vectors"
    wrong = [line for vector in vectors for line in _run_vector(spec, vector)]
    assert not wrong, "\n".join(wrong)


class TestHardSigmoid:
    """Mechanisms on HARD_SIGMOID: float32 attributes, one rounding, NaN into min/max."""

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

    def test_nan_is_marked_unspecified(self):
        spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
        case = case_from_arrays(spec, "6.4", F32, {"InputTensor": from_bits(NAN_PAYLOADS_F32 + [0x3F800000], np.float32)})
        expected = expected_for(spec, case)
        assert expected.unspecified("OutputTensor").tolist() == [True] * len(NAN_PAYLOADS_F32) + [False]
        assert expected.unspecified_reasons["OutputTensor"] == ["nan_into_min_max"]


QUANT_TYPES = {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"}


class TestQuantizeLinear:
    """Mechanisms on QUANTIZE_LINEAR: unspecified elements and the tie mask."""

    def test_nan_and_zero_scale_are_unspecified_not_invented(self):
        spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
        case = case_from_arrays(spec, "6.4", QUANT_TYPES, {
            "InputTensor": np.array([np.nan, 1.0, 1.0, 0.0, 2.0], np.float32),
            "ScaleTensor": np.array([1.0, 0.0, np.nan, 0.0, 1.0], np.float32), "ZeroPointTensor": np.zeros(5)})
        expected = expected_for(spec, case)
        assert expected.unspecified("OutputTensor").tolist() == [True, True, True, True, False]
        assert set(expected.unspecified_reasons["OutputTensor"]) == {"nan_quotient", "zero_scale"}

    def test_tie_mask(self):
        spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
        case = case_from_arrays(spec, "6.4", QUANT_TYPES, {
            "InputTensor": np.array([2.5, 2.4, -0.5, 3.0], np.float32), "ScaleTensor": np.ones(4, np.float32),
            "ZeroPointTensor": np.zeros(4)})
        assert expected_for(spec, case).ties("OutputTensor").tolist() == [True, False, True, False]



def test_every_golden_file_is_well_formed_and_names_an_operator_of_the_specs():
    """A golden file for an operator the specs no longer hold (renamed, removed) is stale data."""
    files = sorted(GOLDEN_DIR.glob("*.yaml"))
    assert files
    for path in files:
        load_golden(path)
        assert path.stem in SPECS.operators, f"tests/golden/{path.name}: no operator {path.stem} in {SPECS.directory}"
