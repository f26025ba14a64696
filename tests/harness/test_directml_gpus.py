"""--directml-gpus: one GPU per runner on a host with several (backends/directml/gpus.py).

Without Wine: the option's grammar, worker-to-GPU assignment, GPU counting on a fake sysfs tree,
the loader variables. With the DirectML stack (lavapipe: one Vulkan device): device 0 runs a case
and says so in the backend's version and replay arguments; device 1 does not exist, and the
runner fails to start with the device-pick layer's line instead of running on device 0.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from backends.directml.gpus import (LAYER_MANIFEST, LAYER_NAME, GpuChoiceError, count_gpus, gpu_for_worker,
                                    parse_gpus, pinned_environment)
from harness.cli import main
from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from tests.helpers import SPECS, directml_or_skip


def pci_device(root: Path, address: str, pci_class: str, driver: str | None) -> None:
    device = root / "devices" / address
    device.mkdir(parents=True)
    (device / "class").write_text(pci_class + "\n")
    if driver:
        (root / "drivers" / driver).mkdir(parents=True, exist_ok=True)
        (device / "driver").symlink_to(root / "drivers" / driver)


def test_gpus_are_display_devices_with_a_vulkan_capable_driver(tmp_path):
    pci_device(tmp_path, "0000:00:02.0", "0x030000", "bochs-drm")   # a VM's emulated VGA: not a GPU
    pci_device(tmp_path, "0000:00:06.0", "0x030200", "nvidia")
    pci_device(tmp_path, "0000:00:07.0", "0x030200", "nvidia")
    pci_device(tmp_path, "0000:00:08.0", "0x020000", "mlx5_core")   # a network card
    pci_device(tmp_path, "0000:00:09.0", "0x030200", None)          # no driver bound: unusable
    assert count_gpus(tmp_path / "devices") == 2
    assert count_gpus(tmp_path / "missing") == 0


def test_the_option_names_all_or_device_numbers():
    assert parse_gpus("all", 2) == [0, 1]
    assert parse_gpus("1", 0) == [1]
    assert parse_gpus(" 1, 0 ", 0) == [1, 0]
    for bad in ["", "gpu0", "0,,1", "-1", "256", "all,1"]:
        with pytest.raises(GpuChoiceError, match="--directml-gpus"):
            parse_gpus(bad, 2)
    with pytest.raises(GpuChoiceError, match="no GPU found"):
        parse_gpus("all", 0)


def test_each_xdist_worker_takes_the_next_gpu():
    assert [gpu_for_worker([0, 1], f"gw{k}") for k in range(5)] == [0, 1, 0, 1, 0]
    assert gpu_for_worker([3, 1], None) == 3          # outside xdist: the first listed
    assert gpu_for_worker([3, 1], "main") == 3


def test_pinned_environment_enables_the_layer_before_any_other(tmp_path):
    with pytest.raises(GpuChoiceError, match="device-pick layer"):
        pinned_environment(0, tmp_path, {})
    (tmp_path / LAYER_MANIFEST).write_text("{}")
    env = pinned_environment(1, tmp_path, {"VK_LAYER_PATH": "/other", "VK_INSTANCE_LAYERS": "VK_LAYER_x"})
    assert env == {"VK_LAYER_PATH": f"{tmp_path}:/other", "VK_INSTANCE_LAYERS": f"{LAYER_NAME}:VK_LAYER_x",
                   "DMLCONFORM_VK_DEVICE": "1"}


def test_a_malformed_value_is_a_usage_error_before_the_run(tmp_path, capsys):
    assert main(["run", "--reports-dir", str(tmp_path), "--directml-gpus", "gpu0"]) == 2
    assert "--directml-gpus 'gpu0'" in capsys.readouterr().err
    assert not (tmp_path / "junit.xml").exists()


@pytest.fixture(scope="module")
def stack_with_layer():
    backend = directml_or_skip()
    if not (backend.stack.device_pick_layer / LAYER_MANIFEST).is_file():
        pytest.skip(f"the DirectML stack has no device-pick layer ({backend.stack.device_pick_layer}): "
                    "run scripts/setup_directml.sh")
    return backend.stack


def test_device_zero_runs_and_is_named(stack_with_layer):
    from backends.directml import DirectMLBackend
    backend = DirectMLBackend(SPECS, gpus="0", stack=stack_with_layer.root, timeout=120)
    try:
        ok, why = backend.available()
        assert ok, why
        spec = SPECS.operator("ELEMENT_WISE_SIGN")
        x = np.array([-2.0, 0.0, 3.5], dtype=np.float32)
        case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}, {"InputTensor": x},
                                sizes=[3])
        result = backend.run(case)
        assert np.frombuffer(result.buffers["OutputTensor"], np.float32).tolist() == [-1.0, 0.0, 1.0]  # SIGN, by hand
        verdict = judge(spec, case, result, True)
        assert verdict.status.value == "pass", verdict.summary
        assert "[Vulkan device 0]" in backend.version()
        args = backend.replay_args()
        assert args[args.index("--directml-gpus") + 1] == "0"
    finally:
        backend.close()


def test_a_device_the_drivers_lack_never_runs_elsewhere(stack_with_layer):
    from backends.directml import DirectMLBackend
    devices = int(os.environ.get("DMLCONFORM_TEST_VK_DEVICES", "1"))  # lavapipe lists one
    backend = DirectMLBackend(SPECS, gpus=str(devices), stack=stack_with_layer.root, timeout=120)
    try:
        ok, why = backend.available()
        assert not ok
        assert f"DMLCONFORM_VK_DEVICE={devices} but the Vulkan drivers list {devices} device(s)" in why
    finally:
        backend.close()
