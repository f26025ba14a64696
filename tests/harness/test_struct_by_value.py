"""Structs held by value in the desc struct (DML_SIZE_2D: ROI_POOLING's PooledSize, UPSAMPLE_2D's
ScaleSize), on a throw-away copy of ELEMENT_WISE_ROUND with one more field and a rule over its
members (no shipped operator holds one yet): the spec names the field once; the model holds one
UINT attribute per member (`Size_Width`, `Size_Height`) that generation draws, expressions read and
the invalid generator breaks; the page's field list keeps one entry; the DirectML request packs
the members as consecutive 4-byte fields, which is DML_SIZE_2D's C layout (two UINTs)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings

from harness.generate.breakers import invalid_cases
from harness.generate.cases import case_from_arrays
from harness.generate.strategies import valid_descriptors
from harness.model.validator import validate
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import SpecError

FIELD = '  - {name: RoundingMode, role: attribute, c_type: DML_ROUNDING_MODE}\n'
SIZE_FIELD = '  - {name: Size, role: attribute, c_type: DML_SIZE_2D}\n'
RULE = ('  - {id: size_positive, rule: expression, expression: "Size_Width >= 1 and Size_Height >= 1",\n'
        '     text: "Both members of Size are at least 1 (a throw-away rule over a struct held by value)."}\n')
POOLS = 'attribute_values:\n  Size_Width: {one_of: "range(1, 4)"}\n  Size_Height: {one_of: "range(1, 4)"}\n'
QUICK = settings(max_examples=30, suppress_health_check=list(HealthCheck), database=None, deadline=None)


def _write(tmp_path_factory, field: str, rule: str = RULE):
    specs = tmp_path_factory.mktemp("specs")
    shutil.rmtree(specs)
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "ELEMENT_WISE_ROUND.yaml"
    text = path.read_text()
    assert FIELD in text and "\nconstraints:\n" in text
    text = text.replace(FIELD, FIELD + field).replace("\nconstraints:\n", "\nconstraints:\n" + rule, 1)
    path.write_text(text + POOLS)
    return specs


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    return load_specs(_write(tmp_path_factory, SIZE_FIELD))


def test_one_field_on_the_page_one_attribute_per_member_in_the_model(specs):
    spec = specs.operator("ELEMENT_WISE_ROUND")
    assert spec.struct_field_names == ["InputTensor", "OutputTensor", "RoundingMode", "Size"]
    members = [(f.name, f.c_type, f.member_of) for f in spec.attribute_fields if f.member_of]
    assert members == [("Size_Width", "UINT", "Size"), ("Size_Height", "UINT", "Size")]


def test_valid_descriptors_keep_the_rule_over_the_members(specs):
    spec = specs.operator("ELEMENT_WISE_ROUND")
    found = find(valid_descriptors(spec, "6.4"), lambda d: d.attributes["Size_Width"] != d.attributes["Size_Height"],
                 settings=QUICK)
    assert found.attributes["Size_Width"] >= 1 and found.attributes["Size_Height"] >= 1
    assert validate(spec, found, "6.4").accepted


def test_the_invalid_generator_breaks_the_rule_alone(specs):
    spec = specs.operator("ELEMENT_WISE_ROUND")

    @QUICK
    @given(invalid_cases(spec, "6.4", "constraint.size_positive"))
    def check(case):
        broken = validate(spec, case.descriptor, "6.4").rule_ids
        assert broken == {"constraint.size_positive"}
        assert min(case.descriptor.attributes["Size_Width"], case.descriptor.attributes["Size_Height"]) < 1
    check()


def test_directml_packs_the_members_consecutively(specs):
    from backends.directml import DirectMLBackend
    spec = specs.operator("ELEMENT_WISE_ROUND")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.array([0.5, 1.5], np.float32)},
                            attributes={"RoundingMode": 0.0, "Size_Width": 3.0, "Size_Height": 5.0})
    header, _ = DirectMLBackend(specs).request_for(case)
    assert header["fields"][2:] == [{"kind": "uint", "value": 0}, {"kind": "uint", "value": 3}, {"kind": "uint", "value": 5}]


def test_a_struct_by_value_takes_no_default(tmp_path_factory):
    bad = '  - {name: Size, role: attribute, c_type: DML_SIZE_2D, default: 1}\n'
    with pytest.raises(SpecError, match=r"ELEMENT_WISE_ROUND.yaml.*Size_MEMBER"):
        load_specs(_write(tmp_path_factory, bad, rule=""))
