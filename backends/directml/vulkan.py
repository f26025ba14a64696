"""Which Vulkan driver Wine's Direct3D 12 (vkd3d) runs on: `--directml-vulkan auto|lavapipe|ICD.json`.

Wine reaches the GPU only through Vulkan, and the Vulkan loader picks its drivers from ICD json files.
The runner is pointed at exactly one of them (VK_DRIVER_FILES, and VK_ICD_FILENAMES for older
loaders), so that what a run measured is never in doubt:

- `lavapipe`: the stack's own Mesa lavapipe (a CPU device; what CI has);
- `auto`: a hardware GPU's ICD when one is installed and its device node exists, else lavapipe.
  Software ICDs (lavapipe, llvmpipe, swrast) are never "hardware": a run on them would be reported
  as a GPU run;
- a path to an ICD json: that driver, as given.

An ICD whose `library_path` is a bare file name (NVIDIA's `libGLX_nvidia.so.0`) is found by the
dynamic linker's search path; container images often keep the driver outside it (e.g.
/usr/local/nvidia/lib64), so a known directory holding that library is added to LD_LIBRARY_PATH.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

ICD_DIRS: tuple[Path, ...] = (Path("/usr/share/vulkan/icd.d"), Path("/etc/vulkan/icd.d"), Path("/usr/local/share/vulkan/icd.d"),
                              Path("/usr/local/nvidia/share/vulkan/icd.d"))
# where a bare ICD library name may live outside the linker's default path (container images)
LIBRARY_DIRS: tuple[Path, ...] = (Path("/usr/local/nvidia/lib64"), Path("/usr/local/nvidia/lib"),
                                  Path("/usr/lib/x86_64-linux-gnu/nvidia/current"), Path("/usr/lib64/nvidia"))
SOFTWARE_MARKERS = ("lvp", "lavapipe", "llvmpipe", "swrast", "softpipe")
CHOICES = ("auto", "lavapipe")


class VulkanChoiceError(ValueError):
    """A --directml-vulkan value that names no usable ICD json."""


@dataclass(frozen=True)
class VulkanDriver:
    """The Vulkan driver the runner is given: its ICD json, why it was chosen, and the directories
    its library needs on LD_LIBRARY_PATH."""

    icd: Path
    kind: str  # "hardware" (auto found a GPU), "lavapipe", or "given" (a path on the command line)
    library: str = ""
    library_dirs: tuple[Path, ...] = field(default=())

    def environment(self) -> dict[str, str]:
        """VK_DRIVER_FILES (loader 1.3.207+) and VK_ICD_FILENAMES (older loaders) naming only this ICD."""
        return {"VK_DRIVER_FILES": str(self.icd), "VK_ICD_FILENAMES": str(self.icd)}

    def describe(self) -> str:
        return f"{self.kind} Vulkan driver {self.icd}" + (f" ({self.library})" if self.library else "")


def icd_library(icd: Path) -> str:
    """The ICD's `library_path` ("" when the file is not an ICD json)."""
    try:
        data = json.loads(Path(icd).read_text())
    except (OSError, ValueError):
        return ""
    entry = data.get("ICD") if isinstance(data, dict) else None
    return str(entry.get("library_path", "")) if isinstance(entry, dict) else ""


def is_software(icd: Path) -> bool:
    """A CPU driver (lavapipe, llvmpipe, swrast), by the json's name or its library's name."""
    text = (Path(icd).name + " " + Path(icd_library(icd)).name).lower()
    return any(marker in text for marker in SOFTWARE_MARKERS)


def candidate_icds(dirs: Sequence[Path] = ICD_DIRS, env: Mapping[str, str] | None = None) -> list[Path]:
    """ICD json files in the order the Vulkan loader would consider them: VK_DRIVER_FILES, then
    VK_ICD_FILENAMES (files or directories, ':'-separated), then the standard directories."""
    env = os.environ if env is None else env
    found: list[Path] = []
    for var in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        for item in filter(None, env.get(var, "").split(os.pathsep)):
            path = Path(item)
            found += sorted(path.glob("*.json")) if path.is_dir() else [path] if path.is_file() else []
    for directory in dirs:
        if directory.is_dir():
            found += sorted(directory.glob("*.json"))
    unique: list[Path] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def library_dirs(icd: Path, known: Sequence[Path] = LIBRARY_DIRS) -> tuple[Path, ...]:
    """Directories to add to LD_LIBRARY_PATH for the ICD's library: only for a bare name (an absolute
    or json-relative path is opened as written by the loader), and only where that library exists:
    the ICD's own prefix (…/share/vulkan/icd.d -> …/lib64, …/lib) and the known driver directories."""
    library = icd_library(icd)
    if not library or "/" in library:
        return ()
    prefix = Path(icd).resolve().parent.parent.parent.parent  # <prefix>/share/vulkan/icd.d/x.json
    out: list[Path] = []
    for directory in [prefix / "lib64", prefix / "lib", *known]:
        if (directory / library).exists() and directory not in out:
            out.append(directory)
    return tuple(out)


def device_present(icd: Path, dev: Path = Path("/dev")) -> bool:
    """Whether a device node the ICD could drive exists: /dev/nvidia0.. for NVIDIA's driver,
    /dev/dri/renderD* for Mesa's hardware drivers. A driver package installed without its GPU
    (mesa-vulkan-drivers brings Intel and AMD ICDs everywhere) enumerates no device."""
    text = (Path(icd).name + " " + icd_library(icd)).lower()
    if "nvidia" in text:
        return bool(glob.glob(str(dev / "nvidia[0-9]*")))
    return bool(glob.glob(str(dev / "dri" / "renderD*")))


def resolve_vulkan(choice: str | None, lavapipe_icd: Path | None, dirs: Sequence[Path] = ICD_DIRS,
                   env: Mapping[str, str] | None = None, known_library_dirs: Sequence[Path] = LIBRARY_DIRS,
                   has_device: Callable[[Path], bool] = device_present) -> VulkanDriver:
    """The driver for `choice` (None means auto). Raises VulkanChoiceError when it names nothing usable."""
    choice = choice or "auto"
    if choice == "lavapipe" or choice == "auto":
        if choice == "auto":
            for icd in candidate_icds(dirs, env):
                if icd_library(icd) and not is_software(icd) and has_device(icd):
                    return VulkanDriver(icd.resolve(), "hardware", icd_library(icd), library_dirs(icd, known_library_dirs))
        if lavapipe_icd is None or not Path(lavapipe_icd).is_file():
            raise VulkanChoiceError(f"--directml-vulkan {choice}: no hardware GPU ICD found and the stack has no lavapipe "
                                    f"({lavapipe_icd or 'none'}); give an ICD json path")
        return VulkanDriver(Path(lavapipe_icd), "lavapipe", icd_library(Path(lavapipe_icd)))
    path = Path(choice)
    if not path.is_file():
        raise VulkanChoiceError(f"--directml-vulkan {choice}: 'auto', 'lavapipe' or the path of a Vulkan ICD json (no such file)")
    if not icd_library(path):
        raise VulkanChoiceError(f"--directml-vulkan {choice}: not a Vulkan ICD json (no ICD.library_path)")
    return VulkanDriver(path.resolve(), "lavapipe" if is_software(path) else "given", icd_library(path),
                        library_dirs(path, known_library_dirs))
