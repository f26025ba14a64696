"""The spec tables equal the seed documents, cell for cell.

The expected facts live in tests/golden/OPERATOR.yaml under `spec`: written by hand from the
DirectML reference pages (each file says which), independently of the YAML specs, so that a typo in
either is caught. Every operator of the specs is checked; one without a golden file fails with
"no golden data for OP".
"""
import pytest

from tests.helpers import SPECS, golden, golden_tables

OPERATORS = sorted(SPECS.operators)


@pytest.mark.parametrize("operator", OPERATORS)
def test_table_cells_equal_the_seed(operator):
    """The spec has exactly the documented tables (per variant group, where the page groups them
    by an enum attribute), and each cell (kind, dimension range, data types) equals the seed."""
    seed = golden(operator)["spec"]
    op = SPECS.operator(operator)
    assert op.variant_key == seed.get("variant_key")
    documented = golden_tables(seed)
    assert sorted((t.variant or (), t.level) for t in op.support) == sorted((v or (), lvl) for v, lvl, _ in documented), \
        "the spec's tables differ from the documented ones"
    for variant, level, expected in documented:
        table = op.table_for(level, variant[0] if variant else None)
        assert table is not None and table.level == level and table.variant == variant, (variant, level)
        arrays = op.tensor_arrays  # a tensor array's row (one on the page) holds for each item
        assert {op.field(t).array_of or t for t in table.tensors} == set(expected), level
        for array, items in arrays.items():
            first = table.tensors[items[0]]
            assert all(table.tensors[i].kind == "optional_" + first.kind and (table.tensors[i].dims, table.tensors[i].types)
                       == (first.dims, first.types) for i in items[1:]), (level, array)
        for tensor, (kind, dims, types) in expected.items():
            cell = table.tensors[arrays[tensor][0] if tensor in arrays else tensor]
            assert cell.kind == kind, (level, tensor)
            assert cell.dims == tuple(dims), (level, tensor)
            assert sorted(cell.types) == sorted(types), (level, tensor)


@pytest.mark.parametrize("operator", OPERATORS)
def test_effective_table_at_every_level(operator):
    """Between documented levels the older table holds (of the same variant group); before
    introduction there is none; every member of the variant key belongs to one documented group."""
    seed = golden(operator)["spec"]
    op = SPECS.operator(operator)
    documented = golden_tables(seed)
    groups = list(dict.fromkeys(v for v, _, _ in documented))
    if op.variant_key is not None:
        assert sorted(m for g in groups for m in g) == sorted(op.variant_members)
    for group in groups:
        levels = sorted({lvl for v, lvl, _ in documented if v == group}, key=SPECS.catalog.level_order)
        for member in group or [None]:
            for level in SPECS.catalog.levels:
                table = op.table_for(level.name, member)
                in_force = [d for d in levels if SPECS.catalog.level_order(d) <= level.order]
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
    assert op.struct_field_names == seed["fields"]
    assert op.default_attributes() == pytest.approx(seed.get("default_attributes", {}))


def test_quantize_constraints_are_conditional():
    q = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    by_id = {c.id: c for c in q.constraints}
    int32 = by_id["scale_float32_for_int32_input"]
    assert int32.when.holds({"InputTensor": "INT32"}) and not int32.when.holds({"InputTensor": "FLOAT32"})
    same = by_id["scale_same_type_as_input"]
    assert same.when.holds({"InputTensor": "FLOAT16"}) and not same.when.holds({"InputTensor": "INT32"})
    assert set(by_id["same_shape"].tensors) == {"InputTensor", "ScaleTensor", "ZeroPointTensor", "OutputTensor"}
