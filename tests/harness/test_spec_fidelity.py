"""The spec tables equal the seed documents, cell for cell.

The expected cells below were written by hand from the DirectML reference pages (SIGN in French and
English, which agree; HARD_SIGMOID and BIT_NOT in German; QUANTIZE_LINEAR in French), independently
of the YAML files, so that a typo in either is caught.
"""
import pytest

from harness.spec.operator import load_specs

SIGN_41 = ["FLOAT32", "FLOAT16", "INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32", "UINT16", "UINT8"]
SIGN_30 = ["FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"]
BITNOT_41 = ["FLOAT64", "FLOAT32", "FLOAT16", "INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32", "UINT16", "UINT8"]

# (operator, table level) -> {tensor: (kind, (min dims, max dims), types)}
SEED_TABLES = {
    ("ELEMENT_WISE_SIGN", "4.1"): {"InputTensor": ("input", (1, 8), SIGN_41), "OutputTensor": ("output", (1, 8), SIGN_41)},
    ("ELEMENT_WISE_SIGN", "3.0"): {"InputTensor": ("input", (1, 8), SIGN_30), "OutputTensor": ("output", (1, 8), SIGN_30)},
    ("ELEMENT_WISE_SIGN", "2.1"): {"InputTensor": ("input", (4, 4), SIGN_30), "OutputTensor": ("output", (4, 4), SIGN_30)},
    ("ELEMENT_WISE_SIGN", "2.0"): {"InputTensor": ("input", (4, 4), ["FLOAT32", "FLOAT16"]),
                                   "OutputTensor": ("output", (4, 4), ["FLOAT32", "FLOAT16"])},
    ("ACTIVATION_HARD_SIGMOID", "3.0"): {"InputTensor": ("input", (1, 8), ["FLOAT32", "FLOAT16"]),
                                         "OutputTensor": ("output", (1, 8), ["FLOAT32", "FLOAT16"])},
    ("ACTIVATION_HARD_SIGMOID", "2.0"): {"InputTensor": ("input", (4, 5), ["FLOAT32", "FLOAT16"]),
                                         "OutputTensor": ("output", (4, 5), ["FLOAT32", "FLOAT16"])},
    ("ACTIVATION_HARD_SIGMOID", "1.0"): {"InputTensor": ("input", (4, 4), ["FLOAT32", "FLOAT16"]),
                                         "OutputTensor": ("output", (4, 4), ["FLOAT32", "FLOAT16"])},
    ("ELEMENT_WISE_QUANTIZE_LINEAR", "6.2"): {
        "InputTensor": ("input", (1, 8), ["FLOAT32", "FLOAT16", "INT32"]),
        "ScaleTensor": ("input", (1, 8), ["FLOAT32", "FLOAT16"]),
        "ZeroPointTensor": ("optional_input", (1, 8), ["INT8", "UINT8"]),
        "OutputTensor": ("output", (1, 8), ["INT8", "UINT8"])},
    ("ELEMENT_WISE_QUANTIZE_LINEAR", "6.0"): {
        "InputTensor": ("input", (1, 8), ["FLOAT32", "FLOAT16", "INT32"]),
        "ScaleTensor": ("input", (1, 8), ["FLOAT32", "FLOAT16"]),
        "ZeroPointTensor": ("input", (1, 8), ["INT8", "UINT8"]),
        "OutputTensor": ("output", (1, 8), ["INT8", "UINT8"])},
    ("ELEMENT_WISE_QUANTIZE_LINEAR", "3.0"): {
        "InputTensor": ("input", (1, 8), ["FLOAT32", "INT32"]),
        "ScaleTensor": ("input", (1, 8), ["FLOAT32"]),
        "ZeroPointTensor": ("input", (1, 8), ["INT8", "UINT8"]),
        "OutputTensor": ("output", (1, 8), ["INT8", "UINT8"])},
    ("ELEMENT_WISE_QUANTIZE_LINEAR", "2.1"): {
        "InputTensor": ("input", (4, 4), ["FLOAT32", "INT32"]),
        "ScaleTensor": ("input", (4, 4), ["FLOAT32"]),
        "ZeroPointTensor": ("input", (4, 4), ["INT8", "UINT8"]),
        "OutputTensor": ("output", (4, 4), ["INT8", "UINT8"])},
    ("ELEMENT_WISE_QUANTIZE_LINEAR", "1.0"): {
        "InputTensor": ("input", (4, 4), ["FLOAT32"]),
        "ScaleTensor": ("input", (4, 4), ["FLOAT32"]),
        "ZeroPointTensor": ("input", (4, 4), ["UINT8"]),
        "OutputTensor": ("output", (4, 4), ["UINT8"])},
    ("ELEMENT_WISE_BIT_NOT", "4.1"): {"InputTensor": ("input", (1, 8), BITNOT_41), "OutputTensor": ("output", (1, 8), BITNOT_41)},
    ("ELEMENT_WISE_BIT_NOT", "3.0"): {"InputTensor": ("input", (1, 8), ["UINT32", "UINT16", "UINT8"]),
                                      "OutputTensor": ("output", (1, 8), ["UINT32", "UINT16", "UINT8"])},
}
INTRODUCED = {"ELEMENT_WISE_SIGN": "2.0", "ACTIVATION_HARD_SIGMOID": "1.0",
              "ELEMENT_WISE_QUANTIZE_LINEAR": "1.0", "ELEMENT_WISE_BIT_NOT": "3.0"}


@pytest.fixture(scope="module")
def specs():
    return load_specs()


def test_fourteen_tables_in_total(specs):
    assert sum(len(op.support) for op in specs.operators.values()) == 14
    assert {(op.name, t.level) for op in specs.operators.values() for t in op.support} == set(SEED_TABLES)


@pytest.mark.parametrize("operator,level", sorted(SEED_TABLES))
def test_table_cells_equal_the_seed(specs, operator, level):
    table = specs.operator(operator).table_at(level)
    assert table is not None and table.level == level
    expected = SEED_TABLES[(operator, level)]
    assert set(table.tensors) == set(expected)
    for tensor, (kind, dims, types) in expected.items():
        cell = table.tensors[tensor]
        assert cell.kind == kind, tensor
        assert cell.dims == dims, tensor
        assert sorted(cell.types) == sorted(types), tensor


@pytest.mark.parametrize("operator", sorted(INTRODUCED))
def test_effective_table_at_every_level(specs, operator):
    """Between documented levels the older table holds; before introduction there is none."""
    op = specs.operator(operator)
    documented = sorted((lvl for (name, lvl) in SEED_TABLES if name == operator), key=specs.catalog.level_order)
    for level in specs.catalog.levels:
        table = op.table_at(level.name)
        in_force = [d for d in documented if specs.catalog.level_order(d) <= level.order]
        if not in_force:
            assert table is None and not op.available_at(level.name)
            assert specs.catalog.level_order(INTRODUCED[operator]) > level.order
        else:
            assert table is not None and table.level == in_force[-1]


def test_attributes_and_in_place(specs):
    hs = specs.operator("ACTIVATION_HARD_SIGMOID")
    assert hs.default_attributes() == pytest.approx({"Alpha": 0.2, "Beta": 0.5})
    assert [f.name for f in hs.fields] == ["InputTensor", "OutputTensor", "Alpha", "Beta"]
    assert [f.name for f in specs.operator("ELEMENT_WISE_QUANTIZE_LINEAR").fields] == [
        "InputTensor", "ScaleTensor", "ZeroPointTensor", "OutputTensor"]
    assert {n: op.in_place_allowed for n, op in specs.operators.items()} == {
        "ELEMENT_WISE_SIGN": True, "ACTIVATION_HARD_SIGMOID": True,
        "ELEMENT_WISE_QUANTIZE_LINEAR": False, "ELEMENT_WISE_BIT_NOT": True}
    assert {n: op.operator_type for n, op in specs.operators.items()} == {
        "ELEMENT_WISE_SIGN": 79, "ACTIVATION_HARD_SIGMOID": 37,
        "ELEMENT_WISE_QUANTIZE_LINEAR": 33, "ELEMENT_WISE_BIT_NOT": 124}


def test_quantize_constraints_are_conditional(specs):
    q = specs.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    by_id = {c.id: c for c in q.constraints}
    int32 = by_id["scale_float32_for_int32_input"]
    assert int32.when.holds({"InputTensor": "INT32"}) and not int32.when.holds({"InputTensor": "FLOAT32"})
    same = by_id["scale_same_type_as_input"]
    assert same.when.holds({"InputTensor": "FLOAT16"}) and not same.when.holds({"InputTensor": "INT32"})
    assert set(by_id["same_shape"].tensors) == {"InputTensor", "ScaleTensor", "ZeroPointTensor", "OutputTensor"}
