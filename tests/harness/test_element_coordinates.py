"""Element coordinates in element-wise formulas (coord0..coord7, linear_index): how the spec, the
reference, the precision model and generation bind them. Expected values are worked by hand."""
import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.generate.types import primary_input, primary_type
from harness.reference.evaluate import expected_for
from harness.reference.legal import Operand, contains, legal_values
from harness.spec.context import element_coordinates, element_names_read, formula_context
from harness.spec.expr import ELEMENT_NAMES, EvalContext, parse_formula
from tests.helpers import SPECS


def test_coordinates_count_from_the_last_dimension():
    c = element_coordinates([2, 3], ["coord0", "coord1", "coord2", "linear_index"])
    # a 2x3 matrix: column index, row index, 0 beyond the rank, row-major index
    assert c["coord0"].tolist() == [[0, 1, 2], [0, 1, 2]]
    assert c["coord1"].tolist() == [[0, 0, 0], [1, 1, 1]]
    assert c["coord2"].tolist() == [[0, 0, 0], [0, 0, 0]]
    assert c["linear_index"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert all(v.dtype == np.int64 for v in c.values())


def test_linear_index_of_a_four_dimensional_tensor_and_uint64():
    c = element_coordinates([2, 1, 2, 2], ["linear_index", "coord3"], np.uint64)
    assert c["linear_index"].dtype == np.uint64
    assert c["linear_index"].ravel().tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert c["coord3"].ravel().tolist() == [0, 0, 0, 0, 1, 1, 1, 1]  # the batch dimension


def test_formula_of_coordinates_evaluates_as_integers():
    c = element_coordinates([3, 3], ELEMENT_NAMES)
    f = parse_formula("where(coord1 + 1 == coord0, 5, 0)")
    got = f.evaluate(EvalContext(variables=dict(c)))
    assert np.asarray(got).tolist() == [[0, 5, 0], [0, 0, 5], [0, 0, 0]]


@pytest.mark.parametrize("op", ["DIAGONAL_MATRIX", "FILL_VALUE_SEQUENCE"])
def test_only_the_names_read_are_bound(op):
    spec = SPECS.operator(op)
    reads = element_names_read(spec)
    assert reads == ({"coord0", "coord1"} if op == "DIAGONAL_MATRIX" else {"linear_index"})
    ctx = formula_context(spec, {"OutputTensor": "FLOAT32"}, {}, {}, output_sizes=[2, 2])
    assert set(ctx.variables) & ELEMENT_NAMES == reads
    assert not set(formula_context(spec, {"OutputTensor": "FLOAT32"}, {}, {}).variables) & ELEMENT_NAMES


def test_other_operators_bind_no_coordinates():
    assert element_names_read(SPECS.operator("ELEMENT_WISE_ADD")) == frozenset()


def test_reference_sequence_by_hand():
    # FILL_VALUE_SEQUENCE, FLOAT32 {2, 3}: 0.5 + i * 0.25 -> 0.5, 0.75, 1, 1.25, 1.5, 1.75
    spec = SPECS.operator("FILL_VALUE_SEQUENCE")
    case = case_from_arrays(spec, "5.0", {"OutputTensor": "FLOAT32"}, {}, sizes=[2, 3],
                            attributes={"ValueDataType": 1, "ValueStart": 0.5, "ValueDelta": 0.25})
    out = expected_for(spec, case).outputs["OutputTensor"]
    assert out.ravel().tolist() == [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]


def test_reference_uint64_sequence_stays_exact():
    # UINT64: start 2^63 + 1, delta 2^62 - 1 (hand): i=1: 2^63 + 2^62 = 13835058055282163712;
    # i=2: 2^63 + 1 + 2^63 - 2 = 2^64 - 1 = 18446744073709551615; i=3 wraps: 2^64 - 1 + 2^62 - 1 - 2^64 = 2^62 - 2
    spec = SPECS.operator("FILL_VALUE_SEQUENCE")
    case = case_from_arrays(spec, "5.0", {"OutputTensor": "UINT64"}, {}, sizes=[4],
                            attributes={"ValueDataType": 10, "ValueStart": 2 ** 63 + 1, "ValueDelta": 2 ** 62 - 1})
    out = expected_for(spec, case).outputs["OutputTensor"]
    assert out.tolist() == [2 ** 63 + 1, 13835058055282163712, 18446744073709551615, 2 ** 62 - 2]


def test_precision_model_reads_coordinates_as_exact_integers():
    # 2^24 + 1 is not a float32: linear_index * 1.0 at index 2^24 + 1 in FLOAT32 rounds to 2^24 or
    # 2^24 + 2 (the model rounds an integer operand to the compute type, nearest: 2^24), while index 3
    # is exact: the model must see the index itself, not a float copy
    spec = SPECS.operator("FILL_VALUE_SEQUENCE")
    f = parse_formula("linear_index * ValueDelta")
    index = np.array([3, 2 ** 24 + 1], dtype=np.int64)
    operands = {"linear_index": Operand(index, "constant", None), "ValueDelta": Operand(np.float64(1.0), "attribute", None)}
    ctx = EvalContext(variables={"linear_index": index, "ValueDelta": np.float64(1.0)})
    parts = legal_values(spec.catalog.arithmetic, f, operands, 2, ctx, "FLOAT32", ["FLOAT32"])
    ok, _ = contains(parts, np.array([3.0, 2.0 ** 24]))
    assert ok.tolist() == [True, True]
    wrong, _ = contains(parts, np.array([4.0, 2.0 ** 24 + 4]))
    assert wrong.tolist() == [False, False]


def test_primary_type_without_input_is_the_output():
    spec = SPECS.operator("FILL_VALUE_CONSTANT")
    assert primary_input(spec) == "OutputTensor"
    diag1 = SPECS.operator("DIAGONAL_MATRIX1")
    assert primary_type(diag1, {"InputTensor": None, "OutputTensor": "INT8"}) == "INT8"
    assert primary_type(diag1, {"InputTensor": "UINT8", "OutputTensor": "UINT8"}) == "UINT8"


def test_unknown_coordinate_name_is_refused():
    from harness.spec.expr import FormulaError
    f = parse_formula("coord8 + 1")
    with pytest.raises(FormulaError):
        f.evaluate(EvalContext(variables=element_coordinates([2], ELEMENT_NAMES)))
