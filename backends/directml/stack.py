"""Where the pieces of a DirectML stack are, and the environment Wine runs in.

Two kinds of stack hold the same things (a Wine prefix, the runner, DirectML.dll versions, lavapipe):

- the set-up stack (`.cache/directml/`, made by scripts/setup_directml.sh), which runs the system's
  Wine and Xvfb from Debian packages;
- a portable stack (`dmlconform directml pack`, then unpacked anywhere), marked by `manifest.json`,
  which carries its own Wine loader, wineserver, PE modules, host libraries, Xvfb and xkbcomp under
  `usr/` and `lib/`, with every path inside relative to the unpacked folder. Its environment is
  computed here at run time, so the folder can move between machines.

The environment always sets WINE_D3D_CONFIG=renderer=vulkan: by default Wine's DXGI takes its
adapters from wined3d's OpenGL renderer, which (without GLX on Xvfb) reports a placeholder adapter,
"NVIDIA GeForce GTX 470", whatever device runs. From Vulkan, the adapter is the real device
("llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H100 80GB HBM3"), and that is what reports name.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .vulkan import VulkanDriver

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = "manifest.json"
WINE_LIB = Path("usr/lib/x86_64-linux-gnu/wine")  # Debian's layout, kept so Wine's relative paths hold
PLACEHOLDER_ADAPTERS = ("NVIDIA GeForce GTX 470",)  # wined3d's name when it cannot see the device
HOST_LIB_DIRS = (Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu"), Path("/usr/lib64"), Path("/usr/lib"))


def _system(*candidates: str) -> Path | None:
    """The first of the candidates that exists (an absolute path, or a name found on PATH)."""
    for candidate in candidates:
        found = candidate if os.path.isabs(candidate) and os.access(candidate, os.X_OK) else shutil.which(candidate)
        if found:
            return Path(found)
    return None


@dataclass(frozen=True)
class Stack:
    """One DirectML stack directory, set up or unpacked."""

    root: Path

    @property
    def portable(self) -> bool:
        return (self.root / MANIFEST).is_file()

    def manifest(self) -> dict:
        return json.loads((self.root / MANIFEST).read_text()) if self.portable else {}

    # --- what the runner needs ----------------------------------------------------------------
    @property
    def runner(self) -> Path:
        return self.root / "dmlrunner.exe"

    @property
    def dll_dir(self) -> Path:
        return self.root / "dll"

    @property
    def prefix(self) -> Path:
        return self.root / "wineprefix"

    @property
    def lavapipe_icd(self) -> Path:
        """The stack's own lavapipe ICD json (a relative library path in a portable stack)."""
        return self.root / ("mesa/lvp_icd.json" if self.portable else "lvp_icd.json")

    @property
    def device_pick_layer(self) -> Path:
        """The directory of the device-pick Vulkan layer and its manifest (gpus.py; built by
        scripts/setup_directml.sh, carried by a portable stack)."""
        return self.root / "vk_device_pick"

    @property
    def mesa_lib(self) -> Path:
        return self.root / "mesa" / "usr" / "lib" / "x86_64-linux-gnu"

    # --- programs ------------------------------------------------------------------------------
    def wine_loader(self) -> Path | None:
        if self.portable:
            return self.root / "usr/lib/wine/wine64"
        return _system("/usr/lib/wine/wine64", "wine64", "wine")

    def wineserver(self) -> Path | None:
        if self.portable:
            return self.root / "usr/lib/wine/wineserver"
        return _system("/usr/lib/wine/wineserver64", "/usr/lib/wine/wineserver", "wineserver")

    def xvfb(self) -> Path | None:
        return self.root / "usr/bin/Xvfb" if self.portable else _system("Xvfb")

    def xvfb_arguments(self) -> list[str]:
        """Xvfb runs xkbcomp from a compiled-in directory; the packed Xvfb has it patched to the
        relative `./bin`, resolved from its working directory (`xvfb_cwd`), and reads the bundled
        xkb data through -xkbdir. The built-in font set spares it a font path."""
        if not self.portable:
            return []
        return ["-xkbdir", str(self.root / "usr/share/X11/xkb"), "-fp", "built-ins"]

    def xvfb_cwd(self) -> Path | None:
        return self.root / "usr" if self.portable else None

    # --- environment ---------------------------------------------------------------------------
    def library_path(self, vulkan: VulkanDriver) -> list[Path]:
        """LD_LIBRARY_PATH entries, first to last: the stack's host libraries, its lavapipe, the GPU
        driver's directory (when its ICD names a bare library)."""
        dirs = [self.root / "lib"] if self.portable else []
        if self.mesa_lib.is_dir():
            dirs.append(self.mesa_lib)
        return dirs + [d for d in vulkan.library_dirs if d not in dirs]

    def environment(self, vulkan: VulkanDriver, display: str | None = None, debug: str = "-all",
                    base: dict[str, str] | None = None) -> dict[str, str]:
        """Everything Wine, vkd3d and the Vulkan loader read, for this stack and this driver."""
        env = dict(os.environ if base is None else base)
        ld = [str(d) for d in self.library_path(vulkan)]
        if env.get("LD_LIBRARY_PATH"):
            ld.append(env["LD_LIBRARY_PATH"])
        home = self.root / "home"
        env.update({
            "WINEPREFIX": str(self.prefix),
            "WINEDEBUG": debug,
            # a crash ends the process instead of starting Wine's debugger; no desktop menu entries
            "WINEDLLOVERRIDES": "winedbg.exe=d;winemenubuilder.exe=d",
            "WINE_D3D_CONFIG": "renderer=vulkan",
            "LD_LIBRARY_PATH": os.pathsep.join(ld),
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            **vulkan.environment(),
        })
        loader, server = self.wine_loader(), self.wineserver()
        if loader:
            env["WINELOADER"] = str(loader)
        if server:
            env["WINESERVER"] = str(server)
        if self.portable:
            env["FONTCONFIG_FILE"] = str(self.root / "fonts.conf")
            env.pop("WINEDLLPATH", None)
        if display:
            env["DISPLAY"] = display
        return env

    def missing(self) -> str | None:
        """Why this stack cannot run (a missing piece), or None."""
        if not self.runner.is_file():
            return f"the runner is not built ({self.runner} missing): run scripts/setup_directml.sh, or unpack a stack"
        for what, path in (("Wine loader", self.wine_loader()), ("wineserver", self.wineserver()), ("Xvfb", self.xvfb())):
            if path is None or not path.exists():
                return f"no {what} ({path or 'not on PATH'}): install Wine 8 and Xvfb (scripts/setup_directml.sh) or use a portable stack"
        if not self.prefix.is_dir():
            return f"no Wine prefix at {self.prefix}: run scripts/setup_directml.sh"
        return None


    def lavapipe_problem(self, vulkan: VulkanDriver | None) -> str | None:
        """Why the stack's lavapipe cannot load here, or None: a portable stack packed without its
        LLVM needs those libraries from the host (Debian 12 has them; GPU machines usually do not)."""
        if vulkan is None or vulkan.kind != "lavapipe" or not self.portable:
            return None
        dirs = [Path(d) for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d] + list(HOST_LIB_DIRS)
        absent = [lib for lib in self.manifest().get("lavapipe_needs_host", []) if not any((d / lib).exists() for d in dirs)]
        if absent:
            return (f"the stack's lavapipe needs {', '.join(absent)}, not installed here (the archive was packed without "
                    "lavapipe's LLVM: pack with --with-llvm, or use --directml-vulkan auto|ICD.json for a GPU)")
        return None


def default_stack_dir() -> Path:
    """DMLCONFORM_DIRECTML_STACK (read at each call, so a test or `--directml-stack` may set it), else
    the checkout's .cache/directml (the set-up stack)."""
    return Path(os.environ.get("DMLCONFORM_DIRECTML_STACK") or ROOT / ".cache" / "directml")
