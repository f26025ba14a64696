"""BOOL attribute fields (Windows' BOOL: a 4-byte int, TRUE 1, FALSE 0), on a throw-away copy of
ELEMENT_WISE_ROUND with one more field (no shipped operator has a BOOL yet: AVERAGE_POOLING's
IncludePadding, LRN's CrossChannel, ... will): the spec loads, generation draws both values, the
case file check keeps it within INT's range, and the DirectML request packs it as an int."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, find, settings

from harness.generate.cases import case_from_arrays
from harness.generate.strategies import valid_descriptors
from harness.model.wellformed import CaseFormatError, check_case
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs

FIELD = '  - {name: RoundingMode, role: attribute, c_type: DML_ROUNDING_MODE}\n'


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    specs = tmp_path_factory.mktemp("specs")
    shutil.rmtree(specs)
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "ELEMENT_WISE_ROUND.yaml"
    text = path.read_text()
    assert FIELD in text
    path.write_text(text.replace(FIELD, FIELD + '  - {name: Flag, role: attribute, c_type: BOOL}\n'))
    return load_specs(specs)


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_generation_draws_true_and_false(specs, value):
    spec = specs.operator("ELEMENT_WISE_ROUND")
    found = find(valid_descriptors(spec, "6.4"), lambda d: d.attributes.get("Flag") == value,
                 settings=settings(max_examples=200, suppress_health_check=list(HealthCheck), database=None))
    assert found.attributes["Flag"] == value


def _case(spec, flag):
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    return case_from_arrays(spec, "6.4", types, {"InputTensor": np.array([0.5, 1.5], np.float32)},
                            attributes={"RoundingMode": 0.0, "Flag": flag})


def test_a_bool_holds_an_int(specs):
    spec = specs.operator("ELEMENT_WISE_ROUND")
    check_case(_case(spec, 1.0), spec)
    check_case(_case(spec, -1.0), spec)  # any int: the C member is an int (what DirectML makes of it is its own)
    for bad in (2.0**31, 0.5):
        with pytest.raises(CaseFormatError, match="Flag"):
            check_case(_case(spec, bad), spec)


def test_directml_packs_a_bool_as_a_4_byte_int(specs):
    from backends.directml import DirectMLBackend
    spec = specs.operator("ELEMENT_WISE_ROUND")
    backend = DirectMLBackend(specs)
    header, _ = backend.request_for(_case(spec, 1.0))
    assert header["fields"][2:] == [{"kind": "uint", "value": 0}, {"kind": "int", "value": 1}]
