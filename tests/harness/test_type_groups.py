"""Type assignments by type variables (harness.generate.types.type_groups): tensors tied by an
unconditional same_data_type rule take one type together, so generation enumerates one choice
per group instead of the product over every tensor (exponential in many-tensor operators). The
result must be exactly the per-tensor product filtered by the constraints, in the same order."""
from __future__ import annotations

import itertools
import math
import shutil

from harness.generate import types as T
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from tests.helpers import SPECS


def _product_then_filter(spec, level, member):
    """The definition, by brute force: every tensor's types (absent too where generation may leave it out: optional, not a plain optional output), the
    tensor arrays without holes, then the type constraints."""
    table = spec.table_for(level, member)
    names = [f.name for f in spec.tensor_fields]
    choices = [list(table.tensors[n].types) + ([None] if table.tensors[n].omittable else []) for n in names]
    combos = (dict(zip(names, c)) for c in itertools.product(*choices))
    return [c for c in combos if not T.array_gap(spec, c) and not T.broken_type_constraints(spec, c, member, level)]


def test_grouped_assignments_equal_the_filtered_product_for_every_table():
    checked = 0
    for spec in SPECS.operators.values():
        for level in (lv.name for lv in SPECS.catalog.levels):
            for member in (spec.members_at(level) if spec.variant_key else [None]):
                if spec.table_for(level, member) is None:
                    continue
                assert T.valid_type_assignments(spec, level, member) == _product_then_filter(spec, level, member), \
                    (spec.name, level, member)
                checked += 1
    assert checked > 400


def test_tied_tensors_form_one_group():
    assert sorted(map(sorted, T.type_groups(SPECS.operator("JOIN")))) == [
        ["InputTensors_0", "InputTensors_1", "InputTensors_2", "OutputTensor"]]
    gather = sorted(map(sorted, T.type_groups(SPECS.operator("GATHER"))))
    assert gather == [["IndicesTensor"], ["InputTensor", "OutputTensor"]]


def test_eight_items_cost_one_choice_per_type_and_count(tmp_path):
    """JOIN with 8 items: the product over 9 tensors would be 11 x 12^7 x 11 (4.3e9) assignments
    to filter; grouped it is the 11 types x 8 counts that are valid."""
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "JOIN.yaml"
    path.write_text(path.read_text().replace("max_items: 3", "max_items: 8"))
    join = load_specs(specs).operator("JOIN")
    assignments = T.valid_type_assignments(join, "4.1")
    assert len(assignments) == 11 * 8
    assert all(len({t for t in a.values() if t is not None}) == 1 for a in assignments)


def test_breaking_one_constraint_alone_equals_the_filtered_product_for_every_table():
    """The assignments that break exactly one type constraint (what the invalid generator draws)
    are those of the per-tensor product, also where the constraint is a tie itself."""
    checked = 0
    for spec in SPECS.operators.values():
        type_rules = [c.id for c in spec.constraints if c.is_type_rule]
        for level in (lv.name for lv in SPECS.catalog.levels):
            for member in (spec.members_at(level) if spec.variant_key else [None]):
                table = spec.table_for(level, member)
                if table is None:
                    continue
                names = [f.name for f in spec.tensor_fields]
                choices = [list(table.tensors[n].types) + ([None] if table.tensors[n].omittable else []) for n in names]
                if math.prod(len(c) for c in choices) > T.LARGEST_TYPE_SPACE:
                    _check_retyped(spec, level, member, type_rules, choices, names)
                    continue
                product = [dict(zip(names, c)) for c in itertools.product(*choices)]
                product = [c for c in product if not T.array_gap(spec, c)]
                for rule in type_rules:
                    want = [c for c in product if T.broken_type_constraints(spec, c, member, level) == {rule}]
                    assert T.constraint_breaking_assignments(spec, level, rule, member) == want, (spec.name, level, rule)
                    checked += 1
    assert checked > 100


def _check_retyped(spec, level, member, type_rules, choices, names):
    """A type space too large to walk (13 optional tensors tied by one rule): each assignment given
    lies in the table, breaks exactly its rule, and there is one wherever a valid assignment has a
    present tensor of the rule that its cell lets take another type (types.py _retyped)."""
    for rule in type_rules:
        got = T.constraint_breaking_assignments(spec, level, rule, member)
        for c in got:
            assert all(c[n] in options for n, options in zip(names, choices)), (spec.name, rule, c)
            assert T.broken_type_constraints(spec, c, member, level) == {rule}, (spec.name, rule, c)
        assert got, (spec.name, level, rule)
