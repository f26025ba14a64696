"""Enum-keyed support variants (`variant_key`): support tables grouped by the members of an enum
attribute, each group's tables newest first. Checked on throw-away specs
(tests/fixtures/variants/): the lint, the table lookup, the validator, generation (valid and
invalid cases, the coverage plan, sweeps per group), `spec show` and `spec diff`."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from harness.generate.breakers import candidate_rules, invalid_cases, reachable_members, rule_reachable
from harness.generate.strategies import valid_cases, valid_descriptors
from harness.generate.sweeps import sweep_case, sweeps
from harness.generate.types import coverage_plan, table_cells, valid_type_assignments
from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.validator import validate
from harness.spec.compare import diff_specs
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.show import render_spec
from harness.spec.source import SpecError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "variants"
QUICK = settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
HALVES, ZERO, AWAY = 0.0, 1.0, 2.0  # DML_ROUNDING_MODE


def _specs_dir(tmp_path: Path, edit: tuple[str, str] | None = None) -> Path:
    """The shipped catalog and the two fixtures in a temporary specs directory; `edit` replaces
    text in VARIANT_ROUND.yaml (to make it wrong)."""
    specs = tmp_path / "specs"
    specs.mkdir(parents=True)
    for path in DEFAULT_SPECS_DIR.glob("_*.yaml"):
        shutil.copy(path, specs / path.name)
    for path in FIXTURES.glob("*.yaml"):
        shutil.copy(path, specs / path.name)
    if edit is not None:
        target = specs / "VARIANT_ROUND.yaml"
        text = target.read_text()
        assert edit[0] in text, edit[0]
        target.write_text(text.replace(edit[0], edit[1], 1))
    return specs


@pytest.fixture(scope="module")
def fixture_specs(tmp_path_factory):
    return load_specs(_specs_dir(tmp_path_factory.mktemp("variants")))


@pytest.fixture(scope="module")
def spec(fixture_specs):
    return fixture_specs.operator("VARIANT_ROUND")


def _descriptor(in_type: str, out_type: str, mode: float | None, sizes=(2, 3)) -> Descriptor:
    attributes = {} if mode is None else {"RoundingMode": mode}
    return Descriptor("VARIANT_ROUND", {"InputTensor": TensorDesc(in_type, list(sizes)),
                                        "OutputTensor": TensorDesc(out_type, list(sizes))}, attributes)


# --- the model ------------------------------------------------------------------------------------

def test_tables_are_looked_up_per_variant_group(spec):
    assert spec.variant_key == "RoundingMode"
    assert spec.variant_groups == [("HALVES_TO_NEAREST_EVEN",), ("TOWARD_ZERO", "TOWARD_INFINITY")]
    assert spec.table_at("6.4", {"RoundingMode": HALVES}).level == "5.0"
    assert spec.table_at("4.1", {"RoundingMode": HALVES}).level == "2.0"      # the group's older table holds
    assert spec.table_at("6.4", {"RoundingMode": AWAY}).level == "2.0"        # not the other group's 5.0
    assert spec.table_at("6.4", {}).variant == ("TOWARD_ZERO", "TOWARD_INFINITY")  # the default, 1
    assert spec.table_at("6.4", {"RoundingMode": 7.0}) is None                 # no member: no table
    assert spec.table_at("1.0", {"RoundingMode": HALVES}) is None
    with pytest.raises(ValueError, match="depend on RoundingMode"):
        spec.table_at("6.4")
    assert [t.level for t in spec.tables_at("6.4")] == ["5.0", "2.0"]
    assert spec.has_table_at("2.0") and not spec.has_table_at("1.0")
    assert spec.members_at("6.4") == ["HALVES_TO_NEAREST_EVEN", "TOWARD_ZERO", "TOWARD_INFINITY"]
    assert spec.table_for("6.4", "TOWARD_INFINITY") is spec.table_at("6.4", {"RoundingMode": AWAY})


@pytest.mark.parametrize("edit,message", [
    (("variant_key: RoundingMode", "variant_key: InputTensor"), "variant_key must name an enum attribute field"),
    (("  - variant: [TOWARD_ZERO, TOWARD_INFINITY]", "  - variant: [TOWARD_ZERO, UPWARD]"), "'UPWARD' is not a member of DML_ROUNDING_MODE"),
    (("  - variant: [TOWARD_ZERO, TOWARD_INFINITY]", "  - variant: [TOWARD_ZERO]"), "TOWARD_INFINITY of DML_ROUNDING_MODE has no support table"),
    (("  - variant: [TOWARD_ZERO, TOWARD_INFINITY]", "  - variant: [TOWARD_ZERO, HALVES_TO_NEAREST_EVEN]"), "is in two variant groups"),
    (("    level: \"2.0\"\n    tensors:\n      InputTensor: {kind: input, dims: [4, 4]", "    level: \"6.0\"\n    tensors:\n      InputTensor: {kind: input, dims: [4, 4]"),
     "newest level first, each level once (within the variant [HALVES_TO_NEAREST_EVEN])"),
    (("variant_key: RoundingMode\n", ""), "a support table names a variant only when the spec has a variant_key"),
    (("when: \"RoundingMode == HALVES_TO_NEAREST_EVEN\"", "when: \"InputTensor.DimensionCount == 2\""), "reads only the variant key RoundingMode"),
])
def test_lint_names_what_is_wrong_with_the_variants(tmp_path, edit, message):
    specs = _specs_dir(tmp_path, edit)
    with pytest.raises(SpecError) as raised:
        load_specs(specs)
    assert message in str(raised.value), str(raised.value)


def test_a_group_must_start_at_the_introduction_and_be_listed_together(tmp_path):
    late = ("  - variant: [TOWARD_ZERO, TOWARD_INFINITY]\n    level: \"2.0\"", "  - variant: [TOWARD_ZERO, TOWARD_INFINITY]\n    level: \"3.0\"")
    with pytest.raises(SpecError, match=r"the oldest table of the variant \[TOWARD_ZERO, TOWARD_INFINITY\] \(FL 3.0\) must be at"):
        load_specs(_specs_dir(tmp_path / "a", late))
    # a group's tables split by another group's
    text = (FIXTURES / "VARIANT_ROUND.yaml").read_text()
    first = text.index("  - variant: [HALVES_TO_NEAREST_EVEN]\n    level: \"2.0\"")
    last = text.index("  - variant: [TOWARD_ZERO, TOWARD_INFINITY]")
    end = text.index("\nconstraints:")
    swapped = text[:first] + text[last:end] + "\n" + text[first:last].rstrip("\n") + text[end:]
    specs = _specs_dir(tmp_path / "b")
    (specs / "VARIANT_ROUND.yaml").write_text(swapped)
    with pytest.raises(SpecError, match="must be listed together"):
        load_specs(specs)


# --- the validator ----------------------------------------------------------------------------------

@pytest.mark.parametrize("in_type,out_type,mode,level,rules", [
    ("FLOAT16", "FLOAT16", HALVES, "6.4", set()),
    ("FLOAT16", "FLOAT16", HALVES, "4.1", {"tensor.data_type"}),                  # HALVES' FL 2.0 table: FLOAT32 only
    ("INT8", "INT8", HALVES, "6.4", {"tensor.data_type"}),                       # in the other group's table, not this one's
    ("INT8", "FLOAT16", ZERO, "2.0", set()),                                     # the guard does not hold: types may differ
    ("FLOAT32", "FLOAT16", HALVES, "6.4", {"constraint.same_type_when_nearest"}),
    ("FLOAT32", "FLOAT32", ZERO, "6.4", {"tensor.data_type"}),
    ("FLOAT16", "FLOAT16", 7.0, "6.4", {"attribute.enum_value"}),                # no table, no guard: the enum rule alone
    ("FLOAT32", "FLOAT16", 3.0, "6.4", {"attribute.enum_value"}),
    ("FLOAT16", "FLOAT16", ZERO, "1.0", {"operator.unavailable"}),
])
def test_the_validator_reads_the_table_of_the_descriptors_group(spec, in_type, out_type, mode, level, rules):
    sizes = (2, 2, 2, 2) if level in ("4.1", "2.0", "1.0") and mode == HALVES else (2, 3)
    assert validate(spec, _descriptor(in_type, out_type, mode, sizes), level).rule_ids == rules


def test_an_unset_variant_key_takes_its_default(spec):
    assert validate(spec, _descriptor("INT8", "INT8", None), "6.4").accepted                 # default TOWARD_ZERO
    assert validate(spec, _descriptor("FLOAT32", "FLOAT32", None), "6.4").rule_ids == {"tensor.data_type"}


# --- generation -------------------------------------------------------------------------------------

def test_coverage_plan_and_type_assignments_are_per_member(spec):
    assert {(c["InputTensor"], c["OutputTensor"]) for c in valid_type_assignments(spec, "6.4", "HALVES_TO_NEAREST_EVEN")} == \
        {("FLOAT32", "FLOAT32"), ("FLOAT16", "FLOAT16")}
    assert len(valid_type_assignments(spec, "6.4", "TOWARD_ZERO")) == 4                      # the guard is off: every pair
    plan = coverage_plan(spec, "6.4")
    assert {cell.member for cell in plan} == {"HALVES_TO_NEAREST_EVEN", "TOWARD_ZERO", "TOWARD_INFINITY"}
    assert {cell.dim_count for cell in plan if cell.member == "HALVES_TO_NEAREST_EVEN"} == {1, 2, 3, 4}
    covered = {(spec.name, spec.table_for(lvl, c.member).level, t, typ, c.dim_count, spec.table_for(lvl, c.member).variant)
               for lvl in ("6.4", "4.1") for c in coverage_plan(spec, lvl) for t, typ in c.types.items()}
    assert covered == table_cells(spec)


def test_valid_cases_draw_the_member_first_and_are_accepted(spec):
    members = set()
    for level in ("6.4", "2.0"):
        @QUICK
        @given(valid_cases(spec, level))
        def check(case):
            verdict = validate(spec, case.descriptor, level)
            assert verdict.accepted, verdict.summary()
            members.add(spec.variant_member(case.descriptor.attributes))
        check()
    assert members == {"HALVES_TO_NEAREST_EVEN", "TOWARD_ZERO", "TOWARD_INFINITY"}

    @QUICK
    @given(valid_descriptors(spec, "6.4", data_type="INT8"))
    def int8_only_in_the_second_group(d):
        assert spec.variant_member(d.attributes) in ("TOWARD_ZERO", "TOWARD_INFINITY")
    int8_only_in_the_second_group()


def test_invalid_cases_break_exactly_their_rule(spec):
    reached = set()
    for level in ("6.4", "2.0", "1.0"):
        for rule in candidate_rules(spec):
            if not rule_reachable(spec, level, rule):
                continue

            @settings(QUICK, max_examples=6)
            @given(invalid_cases(spec, level, rule))
            def check(case):
                assert validate(spec, case.descriptor, case.feature_level).rule_ids == {rule}
            check()
            reached.add(rule)
    assert {"tensor.data_type", "attribute.enum_value", "operator.unavailable", "tensor.dimension_count",
            "constraint.same_type_when_nearest", "constraint.same_shape"} <= reached
    # the guarded type rule breaks from its member alone, and not where its table has one type
    assert reachable_members(spec, "6.4", "constraint.same_type_when_nearest") == ["HALVES_TO_NEAREST_EVEN"]
    assert reachable_members(spec, "2.0", "constraint.same_type_when_nearest") == []


def test_sweeps_run_once_per_variant_group(fixture_specs, spec):
    found = sweeps(fixture_specs, operators=["VARIANT_ROUND"], level="6.4")
    by_member = {}
    for sweep in found:
        by_member.setdefault(sweep.member, set()).add((sweep.data_type, sweep.output_type))
    # one member per group: the default (TOWARD_ZERO) for its own group, the first member elsewhere
    assert by_member == {"HALVES_TO_NEAREST_EVEN": {("FLOAT16", None)},
                         "TOWARD_ZERO": {("FLOAT16", None), ("FLOAT16", "INT8"), ("INT8", None), ("INT8", "FLOAT16")}}
    ids = {s.id for s in found}
    assert "VARIANT_ROUND-FL6.4-FLOAT16-HALVES_TO_NEAREST_EVEN" in ids and "VARIANT_ROUND-FL6.4-INT8-to-FLOAT16-TOWARD_ZERO" in ids
    for sweep in found:
        case = sweep_case(fixture_specs, sweep)
        assert spec.variant_member(case.descriptor.attributes) == sweep.member
        assert validate(spec, case.descriptor, "6.4").accepted
    assert {s.member for s in sweeps(fixture_specs, operators=["VARIANT_ROUND"], level="4.1")} == {"TOWARD_ZERO"}


# --- spec show and spec diff ------------------------------------------------------------------------

def test_spec_show_prints_every_group(spec):
    text = render_spec(spec, "6.4")
    assert "support at FL 6.4, RoundingMode in HALVES_TO_NEAREST_EVEN (table 'FL 5.0 and above')" in text
    assert "support at FL 6.4, RoundingMode in TOWARD_ZERO, TOWARD_INFINITY (table 'FL 2.0 and above')" in text
    assert "when: RoundingMode == HALVES_TO_NEAREST_EVEN" in text
    assert "not available at FL 1.0" in render_spec(spec, "1.0")


def test_spec_diff_names_the_member(tmp_path, fixture_specs):
    changed = load_specs(_specs_dir(tmp_path, ("      InputTensor: {kind: input, dims: [1, 8], types: [FLOAT16, INT8]}",
                                               "      InputTensor: {kind: input, dims: [1, 8], types: [FLOAT16, INT8, UINT8]}")))
    changes = diff_specs(fixture_specs, changed)["VARIANT_ROUND"]
    assert "FL 2.0 RoundingMode=TOWARD_ZERO InputTensor: data types added UINT8" in changes
    assert not any("HALVES_TO_NEAREST_EVEN" in line for line in changes)


def test_specs_without_a_variant_key_keep_one_series(fixture_specs):
    """Every shipped operator without a variant key: one group (None), tables as before."""
    shipped = load_specs(DEFAULT_SPECS_DIR)
    for op in shipped.operators.values():
        if op.variant_key is None:
            assert op.variant_groups == [None] and op.variant_member({"x": 1}) is None
            assert op.table_at("6.4") is op.table_at("6.4", {"anything": 3.0}) is op.table_for("6.4", None)
            assert all(cell.member is None for cell in coverage_plan(op, "6.4")) if op.has_table_at("6.4") else True
    assert np.array_equal([1], [1])
