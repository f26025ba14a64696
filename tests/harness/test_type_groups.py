"""Type assignments by type variables (harness.generate.types.type_groups): tensors tied by an
unconditional same_data_type rule take one type together, so generation enumerates one choice
per group instead of the product over every tensor (exponential in many-tensor operators). The
result must be exactly the per-tensor product filtered by the constraints, in the same order."""
from __future__ import annotations

import itertools
import math
import random
import shutil

from harness.generate import types as T
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from tests.helpers import SPECS


def _product_then_filter(spec, level, member):
    """The definition, by brute force: every tensor's types (absent too where generation may leave it out: optional, not a plain optional output), the
    tensor arrays without holes, then the type constraints."""
    names = [f.name for f in spec.tensor_fields]
    combos = (dict(zip(names, c)) for c in itertools.product(*_type_choices(spec, level, member)))
    return [c for c in combos if not T.array_gap(spec, c) and not T.broken_type_constraints(spec, c, member, level)]


def _type_choices(spec, level, member, nullable=frozenset()):
    """Each tensor's types, and None where generation may leave it out: an optional input or a later
    array item; a plain optional output only where `nullable` names it (to break a presence rule)."""
    table = spec.table_for(level, member)
    cells = [(f.name, table.tensors[f.name]) for f in spec.tensor_fields]
    return [list(c.types) + ([None] if c.omittable or (n in nullable and c.optional) else []) for n, c in cells]


def test_grouped_assignments_equal_the_filtered_product_for_every_table():
    checked = sampled = 0
    for spec in SPECS.operators.values():
        for level in (lv.name for lv in SPECS.catalog.levels):
            for member in (spec.members_at(level) if spec.variant_key else [None]):
                if spec.table_for(level, member) is None:
                    continue
                if math.prod(map(len, _type_choices(spec, level, member))) > T.LARGEST_TYPE_SPACE:
                    _check_sampled_product(spec, level, member)
                    sampled += 1
                    continue
                assert T.valid_type_assignments(spec, level, member) == _product_then_filter(spec, level, member), \
                    (spec.name, level, member)
                checked += 1
    assert checked > 400 and sampled > 0


def _check_sampled_product(spec, level, member, draws=3000):
    """A product too large to walk in the test budget (the attention operators': 10^6 per table at
    each of their levels): every assignment given is sound (in the table, no array gap, no broken
    constraint), given once, and every valid one among a seeded sample of the product, and every
    one-tensor change of a given assignment that is valid, is given (completeness, sampled)."""
    names = [f.name for f in spec.tensor_fields]
    choices = _type_choices(spec, level, member)
    got = T.valid_type_assignments(spec, level, member)
    keys = {tuple(a[n] for n in names) for a in got}
    assert len(keys) == len(got), (spec.name, level, member)
    for a in got:
        assert all(a[n] in options for n, options in zip(names, choices)), (spec.name, level, a)
        assert not T.array_gap(spec, a) and not T.broken_type_constraints(spec, a, member, level), (spec.name, a)
    rng = random.Random(f"{spec.name}/{level}/{member}")
    candidates = [[rng.choice(options) for options in choices] for _ in range(draws)]
    for a in got[:: max(1, len(got) // 200)]:
        for i, options in enumerate(choices):
            candidates.extend([*(a[n] for n in names[:i]), t, *(a[n] for n in names[i + 1:])] for t in options)
    for combo in candidates:
        c = dict(zip(names, combo))
        valid = not T.array_gap(spec, c) and not T.broken_type_constraints(spec, c, member, level)
        assert valid == (tuple(combo) in keys), (spec.name, level, member, c)


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
    """The assignments that break exactly one type or presence constraint (what the invalid
    generator draws) are those of the per-tensor product, also where the constraint is a tie
    itself, and where a presence rule over plain optional outputs leaves them null."""
    checked = 0
    for spec in SPECS.operators.values():
        rules = [c.id for c in spec.constraints if c.is_type_rule or T.presence_only(spec, c)]
        names = [f.name for f in spec.tensor_fields]
        for level in (lv.name for lv in SPECS.catalog.levels):
            for member in (spec.members_at(level) if spec.variant_key else [None]):
                if spec.table_for(level, member) is None:
                    continue
                for rule in rules:
                    choices = _type_choices(spec, level, member, nullable=T.nullable_outputs(spec, rule))
                    if math.prod(len(c) for c in choices) > T.LARGEST_TYPE_SPACE:
                        _check_retyped(spec, level, member, [rule], choices, names)
                        continue
                    product = [dict(zip(names, c)) for c in itertools.product(*choices)]
                    product = [c for c in product if not T.array_gap(spec, c)]
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
