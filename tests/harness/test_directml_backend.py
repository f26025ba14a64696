"""The DirectML backend on the real DirectML.dll (Wine + vkd3d + lavapipe here, native on Windows).

Skipped with the reason when the stack is not set up (scripts/setup_directml.sh), unless
DMLCONFORM_REQUIRE_DIRECTML=1 (as in .ci/run), where a missing stack fails.
"""
import os
import signal

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.model.descriptor import TensorDesc
from harness.run.case import run_case
from tests.helpers import SPECS, directml_or_skip


_backend = directml_or_skip


@pytest.fixture(scope="module")
def dml():
    backend = _backend(timeout=20)
    yield backend
    backend.close()


def sign_case(level="6.4"):
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    return spec, case_from_arrays(spec, level, {"InputTensor": "INT8", "OutputTensor": "INT8"},
                                  {"InputTensor": np.array([-128, -1, 0, 1, 127], np.int8)})


def send_runner_command(backend, command: str):
    """A bare runner command (crash, hang), sent and classified by the backend's own `_send`, the path
    every case takes: a dead or hung runner is `crashed` and closed, so the next case starts a new one."""
    return backend._send({"cmd": command}, [], SPECS.operator("ELEMENT_WISE_SIGN"))


def test_device_reports_level_and_types(dml):
    assert dml.max_level() == "6.4"
    assert {"FLOAT32", "FLOAT16", "INT8", "UINT64"} <= dml.supported_types()
    assert "DirectML 1.15.4" in dml.version()


def test_facts_values_reproduce(dml):
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    types = {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": np.array([-2.5, 0.5, 1.5, 2.5, 300, 3.49, 127.5], np.float32),
                                                 "ScaleTensor": np.ones(7, np.float32), "ZeroPointTensor": np.zeros(7)})
    outcome = run_case(dml, spec, case, "valid")
    assert outcome.status == "pass", outcome.message


@pytest.mark.parametrize("layout", ["padded", "broadcast", "transposed", "in-place", "large-buffer"])
def test_layouts_on_directml(dml, layout):
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    sizes = [2, 3, 4]
    x = np.random.default_rng(3).standard_normal(sizes).astype(np.float32) * 4
    desc_in = {"padded": TensorDesc("FLOAT32", sizes, [20, 6, 1]), "broadcast": TensorDesc("FLOAT32", sizes, [0, 4, 1]),
               "transposed": TensorDesc("FLOAT32", sizes, [1, 2, 6]), "in-place": TensorDesc("FLOAT32", sizes, [16, 5, 1]),
               "large-buffer": TensorDesc("FLOAT32", sizes, None, total_bytes=256, alignment=16)}[layout]
    if layout == "broadcast":
        x = np.broadcast_to(x[:1], sizes).copy()
    out = desc_in if layout == "in-place" else TensorDesc("FLOAT32", sizes, [24, 8, 2])
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": x},
                            layouts={"InputTensor": desc_in, "OutputTensor": out},
                            aliases={"OutputTensor": "InputTensor"} if layout == "in-place" else None)
    outcome = run_case(dml, spec, case, "valid")
    assert outcome.status == "pass", outcome.message


def test_runner_crash_is_a_crashed_case_and_the_next_case_runs(dml):
    result = send_runner_command(dml, "crash")
    assert result.kind == "crashed" and "last words" in result.reason
    spec, case = sign_case()
    assert run_case(dml, spec, case, "valid").status == "pass"


def test_runner_hang_times_out_and_restarts():
    backend = _backend(timeout=5)
    try:
        result = send_runner_command(backend, "hang")
        assert result.kind == "crashed" and "hang" in result.reason
        spec, case = sign_case()
        assert run_case(backend, spec, case, "valid").status == "pass"
    finally:
        backend.close()


def test_removed_device_is_reported_and_recovered(dml):
    spec, case = sign_case()
    header, buffers = dml.request_for(case)
    header["drop_binding"] = 1  # a wrong binding count removes the device
    header["key"] += "-drop"
    result = dml._send(header, buffers, spec)
    assert result.kind == "crashed" and "device removed" in result.reason, result
    assert run_case(dml, spec, case, "valid").status == "pass"


def test_killed_runner_process_is_replaced(dml):
    """A runner killed between cases (an OOM killer, a user) is restarted before the next case."""
    spec, case = sign_case()
    assert run_case(dml, spec, case, "valid").status == "pass"
    process = dml._process
    starts = process.starts
    os.killpg(process.proc.pid, signal.SIGKILL)
    process.proc.wait(timeout=10)
    assert run_case(dml, spec, case, "valid").status == "pass"
    assert process.starts == starts + 1


def test_older_directml_rejects_a_descriptor_that_needs_a_newer_level():
    """DirectML 1.10.1 (wheel 1.14.1) reports FL 5.2: FLOAT16 quantize (FL 6.0) and a missing zero
    point (FL 6.2) must be rejected there, and are accepted by 1.15.4 (FL 6.4)."""
    old = _backend(dll="1.10.1")
    new = _backend()
    try:
        assert old.max_level() == "5.2" and "1.10.1" in old.version()
        spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
        f16 = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT16", "ScaleTensor": "FLOAT16", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"},
                               {"InputTensor": np.array([1.5, 2.5], np.float16), "ScaleTensor": np.ones(2, np.float16), "ZeroPointTensor": np.zeros(2)})
        no_zp = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "OutputTensor": "INT8"},
                                 {"InputTensor": np.array([1.5, -2.5], np.float32), "ScaleTensor": np.ones(2, np.float32)})
        for case in (f16, no_zp):
            # judged at the old device's level (5.2) the case is invalid, and it is rejected
            assert run_case(old, spec, case, "invalid").status == "rejected-invalid"
            assert run_case(new, spec, case, "valid").status == "pass"
        spec_s, sign = sign_case()
        assert run_case(old, spec_s, sign, "valid").status == "pass"
    finally:
        old.close()
        new.close()
