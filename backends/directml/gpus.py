"""Which GPU a runner uses on a host with several: `--directml-gpus all|LIST`.

Under Wine, Direct3D 12 reaches a GPU through wined3d's one Vulkan adapter, and wined3d makes it
of the first physical device the Vulkan loader lists ("TODO: Create wined3d_adapter for each
device"); vkd3d then finds that device again by its UUID. So a DXGI adapter index
(`--directml-adapter`) cannot pick a GPU there, but what the loader lists can: the stack's own
instance layer (vk_device_pick.c, VK_LAYER_DMLCONFORM_device_pick) lists only the device
DMLCONFORM_VK_DEVICE numbers, and a runner given it runs there. A number the drivers do not have
makes the runner fail to start with the layer's line, never run elsewhere.

Devices are numbered as the Vulkan drivers list them (NVIDIA's: by PCI bus, as nvidia-smi's
default order). `all` is every GPU of the host: PCI display devices (class 0x03) bound to a kernel
driver that has a Vulkan driver (nvidia, amdgpu, i915, xe, radeon, nouveau); a virtual machine's
emulated VGA has none of those and is not counted. pytest-xdist worker `gwK` takes the (K mod n)th
GPU of the list, so `--directml-gpus all` makes one worker group per adapter; one shard per
adapter is `--shard I/N --directml-gpus I-1` on each.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

PCI_DEVICES = Path("/sys/bus/pci/devices")
GPU_DRIVERS = frozenset({"nvidia", "amdgpu", "radeon", "i915", "xe", "nouveau"})
LAYER_NAME = "VK_LAYER_DMLCONFORM_device_pick"
LAYER_MANIFEST = "VkLayer_DMLCONFORM_device_pick.json"
LAYER_LIBRARY = "libdmlconform_vk_device_pick.so"


class GpuChoiceError(ValueError):
    """A --directml-gpus value that names no GPU."""


def count_gpus(devices: Path = PCI_DEVICES) -> int:
    """How many GPUs the host has: display-class PCI devices whose kernel driver is a GPU driver
    with a Vulkan implementation (0 where sysfs cannot be read)."""
    count = 0
    try:
        entries = sorted(devices.iterdir())
    except OSError:
        return 0
    for entry in entries:
        try:
            pci_class = (entry / "class").read_text().strip()
            driver = (entry / "driver").resolve().name if (entry / "driver").exists() else ""
        except OSError:
            continue
        count += pci_class.startswith("0x03") and driver in GPU_DRIVERS
    return count


def parse_gpus(text: str, host_gpus: int) -> list[int]:
    """The Vulkan device numbers `text` names: `all` (0 .. host_gpus - 1) or a comma-separated list."""
    from harness.run.options import directml_gpus_problem
    problem = directml_gpus_problem(text)
    if problem:
        raise GpuChoiceError(problem)
    text = text.strip()
    if text == "all":
        if host_gpus < 1:
            raise GpuChoiceError(f"--directml-gpus all: no GPU found in {PCI_DEVICES} (display-class devices bound to "
                                 f"{', '.join(sorted(GPU_DRIVERS))}); give the Vulkan device numbers, e.g. 0,1")
        return list(range(host_gpus))
    return [int(item) for item in text.split(",")]


def gpu_for_worker(gpus: Sequence[int], worker: str | None) -> int:
    """The device of pytest-xdist worker `gwK` (the (K mod n)th of `gpus`); the first outside xdist."""
    number = int(worker[2:]) if worker and worker.startswith("gw") and worker[2:].isdigit() else 0
    return gpus[number % len(gpus)]


def pinned_environment(device: int, layer_dir: Path, base: Mapping[str, str]) -> dict[str, str]:
    """The variables that make the Vulkan loader list only device `device`: the layer's manifest
    directory on VK_LAYER_PATH, the layer enabled, and the device number it reads."""
    if not (layer_dir / LAYER_MANIFEST).is_file():
        raise GpuChoiceError(f"--directml-gpus needs the device-pick layer ({layer_dir / LAYER_MANIFEST}), which this "
                             "DirectML stack lacks: run scripts/setup_directml.sh again (or pack the stack again)")
    paths = [str(layer_dir), *filter(None, base.get("VK_LAYER_PATH", "").split(":"))]
    layers = [LAYER_NAME, *filter(None, base.get("VK_INSTANCE_LAYERS", "").split(":"))]
    return {"VK_LAYER_PATH": ":".join(paths), "VK_INSTANCE_LAYERS": ":".join(layers), "DMLCONFORM_VK_DEVICE": str(device)}
