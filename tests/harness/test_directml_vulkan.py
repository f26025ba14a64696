"""--directml-vulkan resolution and the Wine environment, without Wine: fake ICD directories, fake
device nodes, a fake stack root. The real stack is exercised in test_directml_portable.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.directml.pack import patch_xvfb
from backends.directml.stack import PLACEHOLDER_ADAPTERS, Stack
from backends.directml.vulkan import VulkanChoiceError, candidate_icds, is_software, library_dirs, resolve_vulkan


def icd(directory: Path, name: str, library: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps({"file_format_version": "1.0.0", "ICD": {"library_path": library, "api_version": "1.3.0"}}))
    return path


@pytest.fixture
def lavapipe(tmp_path) -> Path:
    return icd(tmp_path / "stack", "lvp_icd.json", "/stack/libvulkan_lvp.so")


def always(_icd) -> bool:
    return True


def test_auto_picks_the_hardware_icd_and_ignores_software_ones(tmp_path, lavapipe):
    d = tmp_path / "icd.d"
    icd(d, "lvp_icd.x86_64.json", "libvulkan_lvp.so")
    icd(d, "llvmpipe.json", "libvulkan_llvmpipe.so")
    icd(d, "swrast.json", "libvulkan_swrast.so")
    nvidia = icd(d, "nvidia_icd.json", "libGLX_nvidia.so.0")
    driver = resolve_vulkan("auto", lavapipe, dirs=[d], env={}, has_device=always)
    assert driver.kind == "hardware" and driver.icd == nvidia.resolve() and driver.library == "libGLX_nvidia.so.0"
    assert resolve_vulkan(None, lavapipe, dirs=[d], env={}, has_device=always).icd == nvidia.resolve()  # None means auto
    assert is_software(d / "lvp_icd.x86_64.json") and is_software(d / "swrast.json") and not is_software(nvidia)


def test_auto_falls_back_to_lavapipe_without_a_hardware_icd_or_its_device(tmp_path, lavapipe):
    d = tmp_path / "icd.d"
    icd(d, "lvp_icd.x86_64.json", "libvulkan_lvp.so")
    assert resolve_vulkan("auto", lavapipe, dirs=[d], env={}, has_device=always).kind == "lavapipe"
    icd(d, "intel_icd.x86_64.json", "/usr/lib/libvulkan_intel.so")  # installed by mesa, but no Intel GPU here
    driver = resolve_vulkan("auto", lavapipe, dirs=[d], env={}, has_device=lambda _: False)
    assert driver.kind == "lavapipe" and driver.icd == lavapipe
    assert resolve_vulkan("auto", lavapipe, dirs=[tmp_path / "absent"], env={}, has_device=always).kind == "lavapipe"


def test_auto_reads_vk_driver_files_and_vk_icd_filenames_first(tmp_path, lavapipe):
    d = tmp_path / "icd.d"
    icd(d, "radeon_icd.json", "/usr/lib/libvulkan_radeon.so")
    given = icd(tmp_path / "elsewhere", "nvidia_icd.json", "libGLX_nvidia.so.0")
    for var in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        assert candidate_icds([d], {var: str(given)})[0] == given
        assert resolve_vulkan("auto", lavapipe, dirs=[d], env={var: str(given)}, has_device=always).icd == given.resolve()
    assert candidate_icds([d], {"VK_DRIVER_FILES": str(tmp_path / "elsewhere")})[0] == given  # a directory of ICDs


def test_a_bare_library_name_adds_the_directory_that_holds_it(tmp_path, lavapipe):
    prefix = tmp_path / "usr/local/nvidia"
    nvidia = icd(prefix / "share/vulkan/icd.d", "nvidia_icd.json", "libGLX_nvidia.so.0")
    (prefix / "lib64").mkdir(parents=True)
    (prefix / "lib64/libGLX_nvidia.so.0").write_bytes(b"")
    known = tmp_path / "known"
    known.mkdir()
    (known / "libGLX_nvidia.so.0").write_bytes(b"")
    assert library_dirs(nvidia, [known, tmp_path / "nowhere"]) == (prefix / "lib64", known)
    driver = resolve_vulkan(str(nvidia), lavapipe, known_library_dirs=[known])
    assert driver.kind == "given" and driver.library_dirs == (prefix / "lib64", known)
    absolute = icd(tmp_path / "abs", "vendor.json", "/opt/vendor/libvk.so")
    assert library_dirs(absolute, [known]) == ()


def test_lavapipe_and_bad_paths(tmp_path, lavapipe):
    assert resolve_vulkan("lavapipe", lavapipe, dirs=[], env={}).icd == lavapipe
    with pytest.raises(VulkanChoiceError, match="no such file"):
        resolve_vulkan(str(tmp_path / "missing.json"), lavapipe)
    (tmp_path / "not_icd.json").write_text("{}")
    with pytest.raises(VulkanChoiceError, match="not a Vulkan ICD json"):
        resolve_vulkan(str(tmp_path / "not_icd.json"), lavapipe)
    with pytest.raises(VulkanChoiceError, match="no hardware GPU ICD"):
        resolve_vulkan("auto", tmp_path / "no_lavapipe.json", dirs=[], env={})


def test_environment_takes_adapters_from_vulkan_and_names_only_the_chosen_icd(tmp_path, lavapipe):
    nvidia = icd(tmp_path / "nv/share/vulkan/icd.d", "nvidia_icd.json", "libGLX_nvidia.so.0")
    (tmp_path / "nv/lib64").mkdir()
    (tmp_path / "nv/lib64/libGLX_nvidia.so.0").write_bytes(b"")
    driver = resolve_vulkan(str(nvidia), lavapipe)
    stack = tmp_path / "portable"
    stack.mkdir()
    (stack / "manifest.json").write_text("{}")
    env = Stack(stack).environment(driver, ":7", base={"LD_LIBRARY_PATH": "/keep", "PATH": "/bin"})
    assert env["WINE_D3D_CONFIG"] == "renderer=vulkan"  # never wined3d's OpenGL placeholder adapter
    assert env["VK_DRIVER_FILES"] == env["VK_ICD_FILENAMES"] == str(nvidia.resolve())
    assert env["LD_LIBRARY_PATH"].split(":") == [str(stack / "lib"), str(tmp_path / "nv/lib64"), "/keep"]
    assert env["WINELOADER"] == str(stack / "usr/lib/wine/wine64") and env["WINESERVER"] == str(stack / "usr/lib/wine/wineserver")
    assert env["DISPLAY"] == ":7" and env["FONTCONFIG_FILE"] == str(stack / "fonts.conf")
    assert all(str(stack) in env[k] for k in ("WINEPREFIX", "HOME", "XDG_CACHE_HOME"))
    assert "winedbg.exe=d" in env["WINEDLLOVERRIDES"]
    assert PLACEHOLDER_ADAPTERS == ("NVIDIA GeForce GTX 470",)


def test_xvfb_patch_points_xkbcomp_at_a_relative_bin_once():
    data = b"\x7fELF...\0/usr/bin\0/usr/share/X11/xkb\0"
    patched, ok = patch_xvfb(data)
    assert ok and len(patched) == len(data) and b"\0./bin\0" in patched and b"/usr/bin" not in patched
    assert patch_xvfb(data + b"\0/usr/bin\0") == (data + b"\0/usr/bin\0", False)  # ambiguous: left alone


def test_replay_names_the_vulkan_driver_and_stack(tmp_path):
    from backends.directml import DirectMLBackend
    from tests.helpers import SPECS
    backend = DirectMLBackend(SPECS, vulkan="lavapipe", stack=str(tmp_path))
    args = backend.replay_args()
    assert args[args.index("--directml-vulkan") + 1] == "lavapipe"
    assert args[args.index("--directml-stack") + 1] == str(tmp_path)
    assert "--directml-vulkan" not in DirectMLBackend(SPECS).replay_args()  # auto, not resolved yet
