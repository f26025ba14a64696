"""Fused activations (`const DML_OPERATOR_DESC*` fields): ELEMENT_WISE_ADD1 names an activation
spec by its operator type; the reference composes that spec's formula over its own, the case check
refuses what DirectML's struct cannot hold, and the runner gets a nested operator desc."""
import re
import shutil

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck

from backends.directml import DirectMLBackend
from harness.generate.cases import case_from_arrays
from harness.generate.strategies import valid_descriptors
from harness.model.validator import validate
from harness.model.wellformed import CaseFormatError, check_case
from harness.spec.fused import with_fused_activations
from harness.spec.lint import lint_specs
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import SpecError
from tests.helpers import REFERENCE, SPECS, directml_or_skip

F32 = {"ATensor": "FLOAT32", "BTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
ELU, HARD_SIGMOID = 35, 37  # DML_OPERATOR_TYPE values (DirectML.h)


def _case(attributes=None):
    spec = SPECS.operator("ELEMENT_WISE_ADD1")
    a = np.array([-0.5, 0.75, 2.0, -4.0], np.float32)
    b = np.array([-0.5, 1.25, -2.0, 1.0], np.float32)
    return spec, case_from_arrays(spec, "6.4", F32, {"ATensor": a, "BTensor": b}, attributes=attributes)


def test_the_named_activation_is_applied_to_the_sum():
    """Hand-computed: sums -1, 2, 0, -3. Null: the sums. HARD_SIGMOID(0.25, 0.5): max(0, min(s/4 + 1/2, 1))
    = 0.25, 1, 0.5, 0 (-0.25 clamps to 0)."""
    spec, case = _case()
    assert REFERENCE.run(case).buffers["OutputTensor"] == np.array([-1.0, 2.0, 0.0, -3.0], np.float32).tobytes()
    spec, case = _case({"FusedActivation": HARD_SIGMOID, "FusedActivation.Alpha": 0.25, "FusedActivation.Beta": 0.5})
    assert REFERENCE.run(case).buffers["OutputTensor"] == np.array([0.25, 1.0, 0.5, 0.0], np.float32).tobytes()


def test_composition_prefixes_the_activation_names_and_keeps_its_unspecified_rules():
    spec, case = _case({"FusedActivation": HARD_SIGMOID, "FusedActivation.Alpha": 0.25, "FusedActivation.Beta": 0.5})
    fused = with_fused_activations(spec, case.descriptor)
    assert fused.formula.expression.text == "max(0, min(FusedActivation_Alpha * (a + b) + FusedActivation_Beta, 1))"
    assert {u.id for u in fused.unspecified} == {"FusedActivation.nan_into_min_max", "FusedActivation.sign_of_zero_from_max"}
    assert with_fused_activations(spec, _case()[1].descriptor) is spec  # a null pointer: the formula as written


def test_an_activation_that_is_not_allowed_or_incomplete_is_refused():
    spec, case = _case({"FusedActivation": 4.0})  # ELEMENT_WISE_ADD's type: not in the field's list
    with pytest.raises(CaseFormatError, match="not the operator type of an allowed fused activation"):
        check_case(case, spec)
    spec, case = _case({"FusedActivation": HARD_SIGMOID, "FusedActivation.Alpha": 0.25})
    with pytest.raises(CaseFormatError, match="missing FusedActivation.Beta"):
        check_case(case, spec)
    spec, case = _case({"FusedActivation": ELU, "FusedActivation.Alpha": 1.0, "FusedActivation.Beta": 0.5})
    with pytest.raises(CaseFormatError, match="has no attribute"):
        check_case(case, spec)


def test_an_activation_newer_than_the_device_breaks_a_named_rule(tmp_path):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "ACTIVATION_ELU.yaml"
    text = re.sub(r'  - level: "(2\.0|1\.0)"\n    tensors:\n(      .*\n)+', "", path.read_text())
    path.write_text(text.replace('introduced: "1.0"', 'introduced: "3.0"'))  # as if ELU came with FL 3.0
    spec = load_specs(specs).operator("ELEMENT_WISE_ADD1")
    ones = np.ones((1, 1, 1, 4), np.float32)
    case = case_from_arrays(spec, "2.1", F32, {"ATensor": ones, "BTensor": ones},
                            attributes={"FusedActivation": ELU, "FusedActivation.Alpha": 1.0})
    assert {v.rule for v in validate(spec, case.descriptor, "2.1").violations} == {"fused_activation.unavailable"}
    assert validate(spec, case.descriptor, "3.0").accepted


@pytest.mark.parametrize("name, message", [("ACTIVATION_RELU_X", "is not an operator spec of this directory"),
                                           ("ELEMENT_WISE_ADD", "not an element-wise formula of one input"),
                                           ("ELEMENT_WISE_ROUND", "are not FLOAT scalars")])
def test_a_field_naming_what_cannot_be_fused_is_a_spec_error(tmp_path, name, message):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "ELEMENT_WISE_ADD1.yaml"
    path.write_text(path.read_text().replace("activations: [ACTIVATION_ELU, ACTIVATION_HARD_SIGMOID]", f"activations: [ACTIVATION_ELU, {name}]"))
    with pytest.raises(SpecError) as raised:
        load_specs(specs)
    text = str(raised.value)
    assert "ELEMENT_WISE_ADD1.yaml:" in text and "fields[3].activations[1]" in text and message in text
    (error,) = lint_specs([path], specs)
    assert message in str(error)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=__import__("hypothesis").strategies.data())
def test_generation_draws_null_and_each_allowed_activation_with_its_fields(data):
    spec = SPECS.operator("ELEMENT_WISE_ADD1")
    d = data.draw(valid_descriptors(spec, "6.4"))
    value = d.attributes.get("FusedActivation")
    if value is None:
        assert not any(k.startswith("FusedActivation.") for k in d.attributes)
    else:
        activation = spec.activations["FusedActivation"][int(value)]
        assert {k for k in d.attributes if k.startswith("FusedActivation.")} == {f"FusedActivation.{f.name}" for f in activation.attribute_fields}
    assert validate(spec, d, "6.4").accepted


def test_the_runner_request_nests_the_activation_desc_with_null_tensors():
    backend = DirectMLBackend(specs=SPECS)
    spec, case = _case({"FusedActivation": HARD_SIGMOID, "FusedActivation.Alpha": 0.25, "FusedActivation.Beta": 0.5})
    header, _ = backend.request_for(case)
    assert header["fields"][3] == {"kind": "opdesc", "present": 1, "op_type": HARD_SIGMOID, "fields": [
        {"kind": "tensor", "tensor": -1}, {"kind": "tensor", "tensor": -1},
        {"kind": "float", "value": 0.25}, {"kind": "float", "value": 0.5}]}
    header, _ = backend.request_for(_case()[1])
    assert header["fields"][3] == {"kind": "opdesc", "present": 0}


def test_directml_applies_the_fused_activation():
    backend = directml_or_skip()
    try:
        spec, case = _case({"FusedActivation": HARD_SIGMOID, "FusedActivation.Alpha": 0.25, "FusedActivation.Beta": 0.5})
        assert backend.run(case).buffers["OutputTensor"] == np.array([0.25, 1.0, 0.5, 0.0], np.float32).tobytes()
        spec, case = _case()
        assert backend.run(case).buffers["OutputTensor"] == np.array([-1.0, 2.0, 0.0, -3.0], np.float32).tobytes()
    finally:
        backend.close()
