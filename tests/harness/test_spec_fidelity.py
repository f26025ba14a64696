"""The spec tables equal the seed documents, cell for cell.

The expected facts live in tests/golden/OPERATOR.yaml under `spec`: written by hand from the
DirectML reference pages (each file says which), independently of the YAML specs, so that a typo in
either is caught. Every operator of the specs is checked; one without a golden file fails with
"no golden data for OP".
"""
import pytest

from tests.helpers import SPECS, golden

OPERATORS = sorted(SPECS.operators)


@pytest.mark.parametrize("operator", OPERATORS)
def test_table_cells_equal_the_seed(operator):
    """The spec has exactly the documented tables, and each cell (kind, dimension range, data
    types) of each table equals the seed."""
    seed = golden(operator)["spec"]["tables"]
    op = SPECS.operator(operator)
    assert sorted(t.level for t in op.support) == sorted(seed), "the spec's tables differ from the documented ones"
    for level, expected in seed.items():
        table = op.table_at(level)
        assert table is not None and table.level == level, level
        assert set(table.tensors) == set(expected), level
        for tensor, (kind, dims, types) in expected.items():
            cell = table.tensors[tensor]
            assert cell.kind == kind, (level, tensor)
            assert cell.dims == tuple(dims), (level, tensor)
            assert sorted(cell.types) == sorted(types), (level, tensor)


@pytest.mark.parametrize("operator", OPERATORS)
def test_effective_table_at_every_level(operator):
    """Between documented levels the older table holds; before introduction there is none."""
    seed = golden(operator)["spec"]
    op = SPECS.operator(operator)
    documented = sorted(seed["tables"], key=SPECS.catalog.level_order)
    for level in SPECS.catalog.levels:
        table = op.table_at(level.name)
        in_force = [d for d in documented if SPECS.catalog.level_order(d) <= level.order]
        if not in_force:
            assert table is None and not op.available_at(level.name)
            assert SPECS.catalog.level_order(seed["introduced"]) > level.order
        else:
            assert table is not None and table.level == in_force[-1]


@pytest.mark.parametrize("operator", OPERATORS)
def test_documented_facts(operator):
    """DML_OPERATOR_TYPE, the introducing level, in-place support, the desc struct's fields in
    struct order and the attributes' documented defaults."""
    seed = golden(operator)["spec"]
    op = SPECS.operator(operator)
    assert op.operator_type == seed["operator_type"]
    assert op.introduced == seed["introduced"]
    assert op.in_place_allowed is seed["in_place_allowed"]
    assert [f.name for f in op.fields] == seed["fields"]
    assert op.default_attributes() == pytest.approx(seed.get("default_attributes", {}))


def test_quantize_constraints_are_conditional():
    q = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    by_id = {c.id: c for c in q.constraints}
    int32 = by_id["scale_float32_for_int32_input"]
    assert int32.when.holds({"InputTensor": "INT32"}) and not int32.when.holds({"InputTensor": "FLOAT32"})
    same = by_id["scale_same_type_as_input"]
    assert same.when.holds({"InputTensor": "FLOAT16"}) and not same.when.holds({"InputTensor": "INT32"})
    assert set(by_id["same_shape"].tensors) == {"InputTensor", "ScaleTensor", "ZeroPointTensor", "OutputTensor"}
