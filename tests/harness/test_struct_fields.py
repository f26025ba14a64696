"""Struct-pointer fields (specs/_structs.yaml): DML_SCALE_BIAS on ELEMENT_WISE_ABS, from the spec
to the reference, the case file check and the real DirectML.dll's desc struct."""
import shutil

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.model.wellformed import CaseFormatError, check_case
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import SpecError
from tests.helpers import REFERENCE, SPECS, directml_or_skip

F32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}


def _abs_case(attributes=None):
    spec = SPECS.operator("ELEMENT_WISE_ABS")
    return spec, case_from_arrays(spec, "6.4", F32, {"InputTensor": np.array([0.25, 3.0, -1.0, -0.0], np.float32)},
                                  attributes=attributes)


def test_a_scale_bias_needs_every_member_or_none():
    spec, case = _abs_case({"ScaleBias.Scale": 2.0})
    with pytest.raises(CaseFormatError, match="needs every member or none"):
        check_case(case, spec)


def test_the_formula_sees_a_null_pointer_as_no_scale_and_bias():
    """Null: abs(x) (-0 -> +0); Scale 2, Bias -1: abs(2x - 1), hand-computed."""
    spec, case = _abs_case()
    assert REFERENCE.run(case).buffers["OutputTensor"] == np.array([0.25, 3.0, 1.0, 0.0], np.float32).tobytes()
    spec, case = _abs_case({"ScaleBias.Scale": 2.0, "ScaleBias.Bias": -1.0})
    assert REFERENCE.run(case).buffers["OutputTensor"] == np.array([0.5, 5.0, 3.0, 1.0], np.float32).tobytes()


def test_directml_receives_the_scale_bias_through_its_pointer():
    backend = directml_or_skip()
    try:
        spec, case = _abs_case({"ScaleBias.Scale": 2.0, "ScaleBias.Bias": -1.0})
        assert backend.run(case).buffers["OutputTensor"] == np.array([0.5, 5.0, 3.0, 1.0], np.float32).tobytes()
        spec, case = _abs_case()
        assert backend.run(case).buffers["OutputTensor"] == np.array([0.25, 3.0, 1.0, 0.0], np.float32).tobytes()
    finally:
        backend.close()


def test_an_unknown_struct_is_named_with_the_known_ones(tmp_path):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "ELEMENT_WISE_ABS.yaml"
    path.write_text(path.read_text().replace('c_type: "const DML_SCALE_BIAS*"', 'c_type: "const DML_SCALE_BIAS_2*"'))
    with pytest.raises(SpecError) as raised:
        load_specs(specs)
    message = str(raised.value)
    assert "ELEMENT_WISE_ABS.yaml" in message and "const DML_SCALE_BIAS*" in message and "DML_SCALE_BIAS_2" in message
