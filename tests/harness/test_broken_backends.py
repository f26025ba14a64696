"""A deliberately broken backend is caught, classified and explained; plugins load via entry points."""
from importlib.metadata import EntryPoint

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck

from harness.run import registry
from harness.generate.cases import case_from_arrays
from harness.generate.breakers import invalid_cases
from harness.run.case import run_case
from tests.helpers import SPECS
from tests.plugins.broken_backend import AcceptEverythingBackend, CrashingBackend, FlushNegZeroBackend


def test_wrong_zero_sign_is_a_mismatch_with_a_useful_report(tmp_path):
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.array([-0.0, 0.0, 5.0, np.nan], np.float32)})
    outcome = run_case(FlushNegZeroBackend(SPECS), spec, case, "valid", cases_dir=tmp_path)
    assert outcome.status == "mismatch"
    assert outcome.diff.mismatch_count == 3
    assert "expected hex" in outcome.message and "0x80000000" in outcome.message
    assert outcome.case_file is not None and outcome.case_file.exists()
    assert f"dmlconform replay {outcome.case_file} --backend broken-negzero" in outcome.message


def test_ulp_error_beyond_tolerance_is_a_mismatch():
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.array([0.5, 1.0, -4.0], np.float32)})
    outcome = run_case(FlushNegZeroBackend(SPECS), spec, case, "valid")
    assert outcome.status == "mismatch" and outcome.diff.first[0].ulp == 4


@settings(max_examples=10, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(invalid_cases(SPECS.operator("ELEMENT_WISE_SIGN"), "6.4", "constraint.same_data_type"))
def test_accepting_an_invalid_descriptor_is_caught(case):
    outcome = run_case(AcceptEverythingBackend(SPECS), SPECS.operator("ELEMENT_WISE_SIGN"), case, "invalid")
    assert outcome.status == "accepted-invalid"
    assert "constraint.same_data_type" in outcome.message


def test_a_crash_is_a_result_and_the_run_goes_on():
    spec = SPECS.operator("ELEMENT_WISE_BIT_NOT")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "UINT8", "OutputTensor": "UINT8"}, {"InputTensor": np.arange(4, dtype=np.uint8)})
    outcome = run_case(CrashingBackend(SPECS), spec, case, "valid")
    assert outcome.status == "crashed" and "segfault" in outcome.message


def test_backends_are_discovered_through_entry_points(monkeypatch):
    fake = EntryPoint(name="broken-negzero", value="tests.plugins.broken_backend:FlushNegZeroBackend", group=registry.GROUP)
    real = registry.entry_points

    def patched(group=None):
        found = list(real(group=group))
        return found + [fake] if group == registry.GROUP else found
    monkeypatch.setattr(registry, "entry_points", patched)
    backend = registry.load_backend("broken-negzero", specs=SPECS)
    assert isinstance(backend, FlushNegZeroBackend)
    names = {info.name: info for info in registry.describe_backends(specs=SPECS)}
    assert {"numpy", "onnxruntime", "broken-negzero"} <= set(names)
    assert names["numpy"].available
    with pytest.raises(ValueError, match="installed: "):
        registry.load_backend("nope")


def test_short_output_buffer_is_a_mismatch_not_an_out_of_bounds_read():
    """A backend that returns fewer bytes than the output's layout spans: judged, never read past."""
    from harness.model.backend import Outputs

    class ShortOutput(FlushNegZeroBackend):
        def run(self, case):
            return Outputs({"OutputTensor": b"\0" * 3})

    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "INT32", "OutputTensor": "INT32"},
                            {"InputTensor": np.array([-5, 0, 7], np.int32)})
    outcome = run_case(ShortOutput(SPECS), spec, case, "valid")
    assert outcome.status == "mismatch"
    assert "the backend returned 3 bytes of OutputTensor; its layout needs 12" in outcome.message
