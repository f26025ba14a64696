"""The generators: valid cases are valid, invalid cases break exactly their rule, every rule and
every table cell is reached, and sweeps cover every 16-bit pattern exactly once."""
import numpy as np
import pytest
from hypothesis.errors import Unsatisfiable
from hypothesis import HealthCheck, given, settings

from harness.model.layout import read_logical
from harness.generate.breakers import candidate_rules, invalid_cases, rule_reachable
from harness.generate.strategies import valid_cases, valid_descriptors
from harness.generate.types import (constraint_breaking_assignments, coverage_plan, reachable_cells, table_cells,
                                    valid_type_assignments)
from harness.generate.sweeps import sweep_case, sweeps
from harness.model.validator import validate
from harness.model.wellformed import check_case
from tests.helpers import SPECS, levels_where_tables_change, round_trip

OPERATORS = sorted(SPECS.operators)
LEVELS = [l.name for l in SPECS.catalog.levels]
QUICK = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))


def _levels(op):
    return [lvl for lvl in LEVELS if SPECS.operator(op).has_table_at(lvl)]


@pytest.mark.parametrize("op", OPERATORS)
def test_valid_cases_are_accepted(op):
    """Valid cases per operator (10 per level: a hundred operators run here), spread over the levels
    where its tables change (between two of them the validator judges alike), all accepted by the
    validator; the conformance suite's numpy cells validate every case they draw too."""
    spec = SPECS.operator(op)
    seen = []
    levels = [lvl for lvl in levels_where_tables_change(spec) if spec.has_table_at(lvl)]
    for level in levels:
        @settings(QUICK, max_examples=10)
        @given(valid_cases(spec, level))
        def check(case):
            verdict = validate(spec, case.descriptor, level)
            assert verdict.accepted, verdict.summary()
            seen.append(case)
        check()
    assert len(seen) >= 7 * len(levels)


def testlevels_where_tables_change():
    """GATHER's tables are FL 1.0, 2.1, 3.0 and 4.1: those, the levels just before them, and 6.4."""
    got = levels_where_tables_change(SPECS.operator("GATHER"))
    assert {"1.0", "2.0", "2.1", "3.0", "4.0", "4.1", LEVELS[-1]} <= set(got)
    assert "5.0" not in got and "6.0" not in got


@pytest.mark.parametrize("op", OPERATORS)
def test_invalid_cases_break_exactly_their_rule(op):
    spec = SPECS.operator(op)
    reached = set()
    levels = levels_where_tables_change(spec)
    for level in levels:
        for rule in candidate_rules(spec):
            if not rule_reachable(spec, level, rule):
                continue

            # one drawing at each level: every (level, rule) pair is broken and checked (and the
            # conformance suite's invalid cells break each rule of the newest level again, several
            # times, on every backend), at a fraction of the cost for the operators of many tables
            @settings(QUICK, max_examples=1)
            @given(invalid_cases(spec, level, rule))
            def check(case):
                verdict = validate(spec, case.descriptor, case.feature_level)
                assert verdict.rule_ids == {rule}, f"{rule}: {verdict.summary()}"
                assert case.broken_rule == rule and not case.expect_valid
                # well-formed as built and after a trip through the case file format (what
                # test_hostile_cases checks of valid cases; the invalid ones are drawn once, here)
                check_case(case, spec)
                if not tripped:  # through the case file format once per rule (YAML of the data is slow)
                    check_case(round_trip(case), spec)
                    tripped.append(rule)
            tripped: list[str] = []
            check()
            reached.add(rule)
    assert set(candidate_rules(spec)) - reached == _unreachable_rules(spec)


def _unreachable_rules(spec) -> set[str]:
    """The rules no descriptor of this operator can break alone, from the spec's own facts:
    operator.unavailable needs a level older than the introduction, in_place.not_allowed an
    (output, input) pair the spec does not allow, in_place.layout_mismatch an allowed one,
    attribute.enum_value an enum attribute."""
    unreachable = set()
    if all(spec.available_at(lvl) for lvl in LEVELS):
        unreachable.add("operator.unavailable")
    pairs = {(o.name, i.name) for o in spec.output_fields for i in spec.input_fields}
    if pairs <= set(spec.in_place_pairs):
        unreachable.add("in_place.not_allowed")
    if not spec.in_place_allowed:
        unreachable.add("in_place.layout_mismatch")
    if not any(f.enum for f in spec.attribute_fields):
        unreachable.add("attribute.enum_value")
    return unreachable


def test_unreachable_rules_of_the_seed_operators():
    """The derivation above, on the four seed operators: HARD_SIGMOID and QUANTIZE_LINEAR exist
    from FL 1.0; QUANTIZE_LINEAR has no in-place pair, the others allow their only one; none has
    an enum attribute (ELEMENT_WISE_ROUND's RoundingMode makes attribute.enum_value reachable)."""
    none = "attribute.enum_value"
    assert _unreachable_rules(SPECS.operator("ACTIVATION_HARD_SIGMOID")) == {"operator.unavailable", "in_place.not_allowed", none}
    assert _unreachable_rules(SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")) == {"operator.unavailable", "in_place.layout_mismatch", none}
    assert _unreachable_rules(SPECS.operator("ELEMENT_WISE_SIGN")) == {"in_place.not_allowed", none}
    assert _unreachable_rules(SPECS.operator("ELEMENT_WISE_BIT_NOT")) == {"in_place.not_allowed", none}
    assert _unreachable_rules(SPECS.operator("ELEMENT_WISE_ROUND")) == {"in_place.not_allowed"}


def test_every_rule_id_is_reached_by_some_operator():
    from harness.model.validator import GENERIC_RULES
    reached = {r for op in SPECS.operators.values() for lvl in levels_where_tables_change(op)
               for r in candidate_rules(op) if rule_reachable(op, lvl, r)}
    all_rules = set(GENERIC_RULES) | {c.rule_id for op in SPECS.operators.values() for c in op.constraints}
    assert reached == all_rules


@pytest.mark.parametrize("op", OPERATORS)
def test_every_table_cell_is_generated(op, capsys):
    """A bounded run (one valid descriptor per coverage-plan entry) reaches every table cell (of
    every variant group, where the tables depend on an enum attribute)."""
    spec = SPECS.operator(op)
    expected = reachable_cells(spec)  # a cell a type rule excludes from every valid descriptor is its invalid cases'
    covered = set()
    for table in spec.support:
        for member in (table.variant or (None,))[:1]:  # a group's members share its table: one covers its cells
            for cell in coverage_plan(spec, table.level, member=member):
                def draw(examples: int) -> None:
                    @settings(QUICK, max_examples=examples)
                    @given(valid_descriptors(spec, table.level, cell=cell))
                    def collect(descriptor):
                        assert validate(spec, descriptor, table.level).accepted
                        assert spec.variant_member(descriptor.attributes) == member
                        for name, desc in descriptor.tensors.items():
                            if desc is not None:
                                covered.add((op, table.level, name, desc.data_type, desc.dim_count, table.variant))
                    collect()
                try:
                    draw(1)
                except Unsatisfiable:  # attribute rules that reject most draws (MULTIHEAD_ATTENTION1 without a
                    draw(5)            # mask: MaskType NONE, and head counts that divide): a larger budget, once
    missing = expected - covered
    with capsys.disabled():
        print(f"\n{op}: covered {len(expected & covered)} of {len(expected)} table cells")
    assert not missing, sorted(missing)[:10]
    # every other cell is excluded by a type rule, whose invalid cases hold it
    for _, level, tensor, data_type, _, variant in sorted(table_cells(spec) - expected):
        member = (variant or (None,))[0]
        assert any(types.get(tensor) == data_type for c in spec.constraints
                   for types in constraint_breaking_assignments(spec, level, c.id, member)), (tensor, data_type)


def test_type_assignments_respect_conditional_constraints():
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    combos = valid_type_assignments(spec, "6.4")
    assert all(c["ScaleTensor"] == "FLOAT32" for c in combos if c["InputTensor"] == "INT32")
    assert all(c["ScaleTensor"] == c["InputTensor"] for c in combos if c["InputTensor"] != "INT32")
    assert any(c["ZeroPointTensor"] is None for c in combos)
    assert not any(c["ZeroPointTensor"] is None for c in valid_type_assignments(spec, "6.1"))


@QUICK
@given(valid_cases(SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR"), "6.4"))
def test_valid_quantize_data_never_has_zero_scale(case):
    desc = case.descriptor.tensors["ScaleTensor"]
    scale = read_logical(case.inputs["ScaleTensor"], desc, SPECS.catalog.dtype(desc.data_type).numpy)
    assert not (scale == 0).any()


def test_quantize_data_favours_ties_and_saturation_edges():
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    ties = edges = 0

    @QUICK
    @given(valid_cases(spec, "6.4", data_type="FLOAT32"))
    def collect(case):
        nonlocal ties, edges
        d = case.descriptor
        with np.errstate(all="ignore"):
            x = read_logical(case.inputs["InputTensor"], d.tensors["InputTensor"], np.float32).astype(np.float64)
            s = read_logical(case.inputs["ScaleTensor"], d.tensors["ScaleTensor"], np.float32).astype(np.float64)
            q = x / s
            ties += int((np.isfinite(q) & (q - np.floor(q) == 0.5)).sum())
            edges += int((np.isfinite(q) & (np.abs(q) >= 100) & (np.abs(q) <= 300)).sum())
    collect()
    assert ties > 20 and edges > 5


def test_sweep_produces_each_16_bit_pattern_once():
    found = {w.id: w for w in sweeps(SPECS)}
    assert "ELEMENT_WISE_SIGN-FL6.4-FLOAT16" in found and "ELEMENT_WISE_BIT_NOT-FL6.4-INT8" in found
    case = sweep_case(SPECS, found["ELEMENT_WISE_SIGN-FL6.4-FLOAT16"])
    desc = case.descriptor.tensors["InputTensor"]
    patterns = read_logical(case.inputs["InputTensor"], desc, np.uint16).ravel()
    assert len(patterns) == 65536 and len(np.unique(patterns)) == 65536
    assert validate(SPECS.operator("ELEMENT_WISE_SIGN"), case.descriptor, case.feature_level).accepted


def test_sweeps_cover_only_supported_unary_pairs():
    ids = {w.id for w in sweeps(SPECS)}
    assert not any("QUANTIZE" in i for i in ids), "QUANTIZE_LINEAR has three inputs: not unary"
    assert "ACTIVATION_HARD_SIGMOID-FL6.4-FLOAT16" in ids and not any(i.startswith("ACTIVATION_HARD_SIGMOID-FL6.4-INT") for i in ids)
    old = sweeps(SPECS, level="2.0")
    by_operator = {}
    for w in old:
        by_operator.setdefault(w.operator, set()).add(w.data_type)
    # FL 2.0: SIGN and HARD_SIGMOID take FLOAT32 and FLOAT16 (only FLOAT16 is 16-bit), BIT_NOT
    # does not exist yet, QUANTIZE_LINEAR is not unary
    assert by_operator["ACTIVATION_HARD_SIGMOID"] == {"FLOAT16"} and by_operator["ELEMENT_WISE_SIGN"] == {"FLOAT16"}
    assert "ELEMENT_WISE_BIT_NOT" not in by_operator and "ELEMENT_WISE_QUANTIZE_LINEAR" not in by_operator
    for w in old:  # any other operator: a supported 8/16-bit input type (8-bit for two inputs) and output type
        spec = SPECS.operator(w.operator)
        table = spec.table_for("2.0", w.member)
        assert len(spec.input_fields) in (1, 2) and table is not None, w.id
        assert SPECS.catalog.dtype(w.data_type).bits in ((8, 16) if len(spec.input_fields) == 1 else (8,)), w.id
        assert all(w.data_type in table.tensors[f.name].types for f in spec.input_fields), w.id
        assert (w.output_type or w.data_type) in table.tensors[spec.formula.output].types, w.id


@pytest.mark.parametrize("attrs,same_in_float32", [
    ({"Alpha": 1 + 2.0**-24, "Beta": 0.0}, {"Alpha": 1.0, "Beta": 0.0}),                # float32(1 + 2^-24) = 1
    ({"Alpha": 1.0, "Beta": 2.0**-25 + 2.0**-52}, {"Alpha": 1.0, "Beta": 2.0**-25}),  # float32 drops the 2^-52
], ids=["alpha", "beta"])
def test_generation_uses_the_float32_attributes(tmp_path, attrs, same_in_float32):
    """Alpha and Beta are FLOAT in the desc struct: values the generator favours are computed from
    their float32 values, so two descriptors holding the same float32 attributes get the same data.
    HARD_SIGMOID is given a favour that reads them (the inputs where the output reaches 0 and 1):
    for k = 1 the double attributes give 1 - 2^-24 where the float32 ones give 1.0."""
    import shutil

    from harness.model.descriptor import Descriptor, TensorDesc
    from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
    from harness.generate.data import make_input_batch
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "ACTIVATION_HARD_SIGMOID.yaml"
    favour = 'generation:\n  favour:\n    - {tensor: InputTensor, expression: "(k - Beta) / Alpha", k: [0, 1], why: "clamp edges"}\n'
    path.write_text(path.read_text().replace("\nexamples:\n", f"\n{favour}\nexamples:\n", 1))
    spec = load_specs(specs).operator("ACTIVATION_HARD_SIGMOID")
    assert spec.favour

    def inputs(attributes):
        tensors = {"InputTensor": TensorDesc("FLOAT32", [64]), "OutputTensor": TensorDesc("FLOAT32", [64])}
        buffer = make_input_batch(spec, Descriptor(spec.name, tensors, dict(attributes)), seed=0, count=1)[0]["InputTensor"]
        return np.frombuffer(buffer, np.float32)

    given_attrs, rounded = inputs(attrs), inputs(same_in_float32)
    assert (rounded == 1.0).sum() >= 5, "the favour must be exercised"
    assert given_attrs.tobytes() == rounded.tobytes()


def test_drawn_attributes_are_float32_values():
    """FLOAT attributes are float32 in the desc struct: a case records the value the struct holds
    (0.2 in the spec's pools is drawn as float32(0.2)), so its file and id name what ran."""
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    seen = set()

    @QUICK
    @given(valid_descriptors(spec, "6.4"))
    def check(d):
        for name, value in d.attributes.items():
            assert np.isnan(value) or float(np.float32(value)) == value, (name, value)
            seen.add(value)
    check()
    assert float(np.float32(0.2)) in seen and 0.2 not in seen


def test_presence_and_attribute_rules_are_kept_before_the_tensors_are_drawn():
    """The rules a cell's tensor presence and the scalar attributes decide (MaskType NONE with a
    bound MaskTensor; QueryHeadCount % KeyValueHeadCount when KeyValueHeadCount >= 1) are checked
    as soon as the attributes are drawn, and judge as the validator does; a rule that reads a
    tensor's Sizes waits for the tensors."""
    from harness.generate.strategies import _presence_attribute_rules_hold
    from harness.generate.types import presence_attribute_rules
    spec = SPECS.operator("MULTIHEAD_ATTENTION1")
    early = {c.id for c, _ in presence_attribute_rules(spec)}
    assert {"mask_with_mask_type", "key_value_heads_divide_query_heads", "stacked_query_head_counts_equal"} <= early
    assert "query_heads_divide" not in early  # QueryTensor.Sizes[-1] % QueryHeadCount
    types = {f.name: None for f in spec.tensor_fields}
    types.update(QueryTensor="FLOAT32", KeyTensor="FLOAT32", ValueTensor="FLOAT32", OutputTensor="FLOAT32", MaskTensor="INT32")
    enums = {f.name: f.enum for f in spec.attribute_fields if f.enum is not None}
    none = enums["MaskType"]["NONE"]
    base = {**spec.default_attributes(), "QueryHeadCount": 4.0, "KeyValueHeadCount": 2.0}
    assert _presence_attribute_rules_hold(spec, {**base, "MaskType": float(none + 1)}, types, "6.4")
    assert not _presence_attribute_rules_hold(spec, {**base, "MaskType": float(none)}, types, "6.4")
    assert not _presence_attribute_rules_hold(spec, {**base, "MaskType": float(none + 1), "KeyValueHeadCount": 3.0}, types, "6.4")
    # TopK's K is drawn from the tensors' sizes, after this check: its rule waits for the full one
    top_k = SPECS.operator("TOP_K")
    assert _presence_attribute_rules_hold(top_k, {}, {f.name: "FLOAT32" for f in top_k.tensor_fields}, "6.4")
