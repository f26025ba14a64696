"""A portable DirectML stack: `dmlconform directml pack OUT.tar.xz` and `... unpack ARCHIVE DIR`.

GPU machines often have a driver and Python but no package access. The archive carries what the
set-up installed (scripts/setup_directml.sh), relocatable: every path inside is relative to the
unpacked folder, and stack.py computes the environment at run time. It holds

- Wine: the wine64 loader and wineserver, all x86_64-unix libraries, and only the PE modules a run
  loads (traced with WINEDEBUG=+loaddll while the check case runs in a throw-away copy of the
  prefix, plus their static import closure and the few a crash or a console needs), stripped of
  debug sections (`strip --strip-debug` keeps the "Wine builtin DLL" marker Wine checks);
  share/wine (nls, fonts, wine.inf);
- host libraries: the ldd closure of those (and of what Wine dlopens: Vulkan loader, X11
  extensions, fontconfig, freetype, ...), minus glibc, libgcc_s and libstdc++, which every target
  has in a compatible (newer) version;
- Xvfb, patched to run xkbcomp from `./bin` relative to its working directory (its compiled-in
  /usr/bin is absent on most GPU machines; no option changes it), xkbcomp and the xkb data;
- lavapipe (the set-up's Mesa), with a relative ICD json. Its LLVM (libLLVM-15, z3, ICU, libxml2:
  about 40 MiB xz) is left out unless `--with-llvm`, so a GPU archive stays small; without it the
  stack's lavapipe loads only where those libraries are installed (Debian 12 and its CI);
- a Wine prefix from the set-up's (registry made by wineboot, `.update-timestamp` = disable so no
  update runs), whose system32 holds relative symlinks to the PE modules instead of 700 copies;
- the runner, every DirectML.dll version of the set-up, a fontconfig file with relative paths,
  and manifest.json (versions, sizes, what was left out).

`unpack` takes an archive from anywhere, so it trusts nothing in it: it accepts exactly what `pack`
writes (directories, regular files, symlinks that stay inside), within bounds checked before
anything is written, into a temporary directory renamed into place only on success (backends/directml/unpack.py).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Literal

from .stack import MANIFEST, WINE_LIB, Stack, default_stack_dir
from .unpack import MAX_BYTES, MAX_MEMBERS, _positive, parse_size, run_unpack

SYSTEM_WINE_LIB = Path("/usr") / WINE_LIB.relative_to("usr")
SYSTEM_WINE_SHARE = Path("/usr/share/wine")
HOST_LIB_DIRS = (Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu"))
# PE modules a run may need that a lavapipe trace does not show: the api-set schema (mapped as
# data, so never "Loaded"; without it every api-ms-win-* import of DirectML.dll fails with 126), a
# crash's debugger and console path, and modules loaded late (certificates, hashing)
EXTRA_MODULES = ("apisetschema.dll", "dbghelp.dll", "conhost.exe", "start.exe", "cmd.exe", "winedbg.exe", "bcrypt.dll", "crypt32.dll",
                 "wineboot.exe", "services.exe", "explorer.exe", "winedevice.exe", "plugplay.exe", "svchost.exe", "rpcss.exe")
# libraries Wine's unix side dlopens (never in an ldd closure); each is taken when installed
DLOPENED = ("libvulkan.so.1", "libfontconfig.so.1", "libfreetype.so.6", "libX11.so.6", "libX11-xcb.so.1", "libXext.so.6",
            "libXrender.so.1", "libXrandr.so.2", "libXi.so.6", "libXcursor.so.1", "libXinerama.so.1", "libXcomposite.so.1",
            "libXfixes.so.3", "libXxf86vm.so.1", "libudev.so.1", "libusb-1.0.so.0", "libdbus-1.so.3", "libunwind.so.8",
            # glvnd: NVIDIA's Vulkan ICD (libGLX_nvidia.so.0) is a glvnd vendor library; where the host has no
            # glvnd its vk_icdGetInstanceProcAddr returns no vkCreateInstance ("Found no drivers")
            "libGLdispatch.so.0", "libGLX.so.0", "libGL.so.1", "libEGL.so.1", "libOpenGL.so.0", "libGLESv2.so.2")
# every target has these, in a version at least as new as Debian 12's
HOST_PROVIDED = re.compile(r"^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|"
                           r"libgcc_s|libstdc\+\+)[.-]")
LLVM_LIBRARIES = re.compile(r"^(libLLVM|libz3|libicu|libxml2)")
XKB_DIR = Path("/usr/share/X11/xkb")
XzPreset = Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # xz's compression presets (--xz-preset's choices)
BUILTIN_MARKER = b"Wine builtin DLL"


class PackError(RuntimeError):
    """The set-up stack lacks something the archive needs; the message says what."""


def _log(message: str) -> None:
    print(f"pack: {message}", file=sys.stderr, flush=True)


# --- which PE modules ----------------------------------------------------------------------------

def trace_modules(stack: Stack, work: Path) -> set[str]:
    """The PE modules a run loads (lower-case file names), from WINEDEBUG=+loaddll while the check
    case runs on lavapipe in a copy of the set-up prefix (its own wineserver, so every boot process
    is started, and traced, afresh)."""
    from harness.spec.load import load_specs

    from . import DirectMLBackend
    from .check import bit_not_case
    from .process import RunnerProcess

    trace = work / "trace"
    trace.mkdir()
    for name in ("dll", "mesa", "dmlrunner.exe", "lvp_icd.json"):
        (trace / name).symlink_to(stack.root / name)
    (trace / "home").mkdir()
    subprocess.run(["cp", "-a", str(stack.prefix), str(trace / "wineprefix")], check=True)
    log = work / "loaddll.log"
    specs = load_specs()
    backend = DirectMLBackend(specs, stack=trace, vulkan="lavapipe", timeout=120)
    config = backend._config()
    config.wine_debug, config.stderr_log = "+loaddll", log
    backend._process = RunnerProcess(config)
    try:
        ok, reason = backend.available()
        if not ok:
            raise PackError(f"the set-up stack does not run the check case: {reason}")
        spec, case = bit_not_case(specs, backend.max_level())
        result = backend.run(case)
        if result.kind != "outputs":
            raise PackError(f"the check case did not run while tracing: {result}")
    finally:
        backend.close()
        env = Stack(trace).environment(backend.vulkan() or _lavapipe(trace))
        subprocess.run([str(Stack(trace).wineserver()), "-k"], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # our private server
    names = set(re.findall(r'Loaded L"(?:[^"]*\\)?([^"\\]+)" at [0-9A-Fa-f]+: builtin', log.read_text(errors="replace")))
    if not names:
        raise PackError(f"no module loads traced (see {log})")
    return {n.lower() for n in names}


def _lavapipe(root: Path):
    from .vulkan import resolve_vulkan
    return resolve_vulkan("lavapipe", Stack(root).lavapipe_icd)


def pe_imports(path: Path) -> list[str]:
    """A PE file's static imports (lower-case), from objdump's private headers."""
    objdump = shutil.which("x86_64-w64-mingw32-objdump") or shutil.which("objdump")
    if objdump is None:
        raise PackError("objdump not found (binutils or binutils-mingw-w64)")
    out = subprocess.run([objdump, "-p", str(path)], capture_output=True, text=True, check=False).stdout
    return [m.lower() for m in re.findall(r"DLL Name: (\S+)", out)]


def module_closure(seeds: set[str], windows_dir: Path) -> dict[str, Path]:
    """Seeds plus their static import closure, as name -> file in Wine's x86_64-windows directory."""
    available = {p.name.lower(): p for p in windows_dir.iterdir()}
    todo, found = sorted(seeds), {}
    while todo:
        name = todo.pop()
        if name in found or name not in available:
            continue
        found[name] = available[name]
        todo += [d for d in pe_imports(available[name]) if d not in found]
    return found


# --- host libraries ---------------------------------------------------------------------------------

def ldd_closure(binaries: list[Path], env: dict[str, str] | None = None) -> dict[str, Path]:
    """soname -> resolved file for every library the binaries need, recursively (ldd's answer)."""
    found: dict[str, Path] = {}
    for binary in binaries:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False, env=env).stdout
        for soname, path in re.findall(r"^\s*(\S+) => (/\S+)", out, flags=re.M):
            found.setdefault(soname, Path(path))
    return found


def _host_library(name: str) -> Path | None:
    return next((d / name for d in HOST_LIB_DIRS if (d / name).exists()), None)


# --- the archive's tree ---------------------------------------------------------------------------------

def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst, follow_symlinks=True)


def _strip(path: Path) -> None:
    strip = shutil.which("x86_64-w64-mingw32-strip") or shutil.which("strip")
    if strip:
        subprocess.run([strip, "--strip-debug", str(path)], check=False, capture_output=True)
    if BUILTIN_MARKER not in path.read_bytes()[:256]:
        raise PackError(f"{path.name}: the Wine builtin marker is gone after strip")


def patch_xvfb(data: bytes) -> tuple[bytes, bool]:
    """Xvfb with its xkbcomp directory ("/usr/bin", compiled in) replaced by "./bin" (same length
    with padding NULs), resolved from Xvfb's working directory: the stack's usr/. Unchanged (and
    False) unless the string occurs exactly once."""
    old = b"\0/usr/bin\0"
    if data.count(old) != 1:
        return data, False
    return data.replace(old, b"\0./bin\0\0\0\0"), True


def write_prefix(source: Path, dest: Path, modules: dict[str, Path], shared: dict[str, Path] | None = None) -> int:
    """The prefix: the set-up's registry and tree, with every Wine builtin file replaced by a
    relative symlink to the staged module of its name (or left out when not staged), and every
    file identical to a staged one of `shared` (the nls tables wineboot copies) a link to it too;
    returns the number of links."""
    shared = shared or {}
    links = 0
    for name in ("system.reg", "user.reg", "userdef.reg"):
        shutil.copy2(source / name, dest / name)
    (dest / ".update-timestamp").write_text("disable\n")
    (dest / "dosdevices").mkdir()
    (dest / "dosdevices" / "c:").symlink_to("../drive_c")
    (dest / "dosdevices" / "z:").symlink_to("/")
    for src in sorted((source / "drive_c").rglob("*")):
        rel = src.relative_to(source)
        out = dest / rel
        if src.is_symlink():
            continue  # users' folders link into $HOME of the machine that made the prefix
        if src.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        with open(src, "rb") as f:
            head = f.read(256)
        if BUILTIN_MARKER in head:
            staged = modules.get(src.name.lower())
            if staged is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.symlink_to(os.path.relpath(staged, out.parent))
                links += 1
            continue
        twin = shared.get(src.name.lower())
        if twin is not None and twin.stat().st_size == src.stat().st_size and twin.read_bytes() == src.read_bytes():
            out.parent.mkdir(parents=True, exist_ok=True)
            out.symlink_to(os.path.relpath(twin, out.parent))
            links += 1
            continue
        _copy(src, out)
    return links


FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<!-- the stack's own fonts (relative to this file); the cache under $XDG_CACHE_HOME, which the stack sets to its home/.cache -->
<fontconfig>
  <dir prefix="relative">usr/share/wine/fonts</dir>
  <cachedir prefix="xdg">fontconfig</cachedir>
</fontconfig>
"""


def _package_version(name: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def build_tree(stack: Stack, out: Path, work: Path, with_llvm: bool = False) -> dict:
    """Write the stack's tree into `out` (empty) and return its manifest."""
    if stack.portable:
        raise PackError(f"{stack.root} is already a portable stack: copy it, or its archive")
    missing = stack.missing()
    if missing:
        raise PackError(missing)
    windows = SYSTEM_WINE_LIB / "x86_64-windows"
    _log("tracing the PE modules a run loads (the check case, +loaddll)")
    traced = trace_modules(stack, work)
    exe = {"dmlrunner.exe", "directml.dll"}
    imports = {d for p in [stack.runner, *stack.dll_dir.glob("*/DirectML.dll")] for d in pe_imports(p)}
    modules = module_closure((traced - exe) | imports | set(EXTRA_MODULES), windows)
    _log(f"{len(traced)} modules traced, {len(modules)} with imports and extras")

    wine = out / WINE_LIB
    for name, src in modules.items():
        _copy(src, wine / "x86_64-windows" / name)
        _strip(wine / "x86_64-windows" / name)
    staged = {name: wine / "x86_64-windows" / name for name in modules}
    shutil.copytree(SYSTEM_WINE_LIB / "x86_64-unix", wine / "x86_64-unix", symlinks=True)
    loader, server = stack.wine_loader(), stack.wineserver()
    assert loader is not None and server is not None  # stack.missing() found both
    _copy(loader.resolve(), out / "usr/lib/wine/wine64")
    _copy(server.resolve(), out / "usr/lib/wine/wineserver")
    share = out / "usr/share/wine"
    for sub in ("nls", "fonts"):
        shutil.copytree(SYSTEM_WINE_SHARE / sub, share / sub) if (SYSTEM_WINE_SHARE / sub).is_dir() else (share / sub).mkdir(parents=True)
    if (SYSTEM_WINE_SHARE / "wine.inf").exists():
        _copy(SYSTEM_WINE_SHARE / "wine.inf", share / "wine.inf")

    _log("Xvfb, xkbcomp, xkb data")
    xvfb_binary = stack.xvfb()
    assert xvfb_binary is not None  # stack.missing() found it
    xvfb, patched = patch_xvfb(xvfb_binary.read_bytes())
    (out / "usr/bin").mkdir(parents=True)
    (out / "usr/bin/Xvfb").write_bytes(xvfb)
    os.chmod(out / "usr/bin/Xvfb", 0o755)
    xkbcomp = shutil.which("xkbcomp")
    if xkbcomp is None or not XKB_DIR.is_dir():
        raise PackError("xkbcomp or the xkb data is missing (Debian: x11-xkb-utils, xkb-data; Xvfb's dependencies)")
    _copy(Path(xkbcomp), out / "usr/bin/xkbcomp")
    shutil.copytree(XKB_DIR, out / "usr/share/X11/xkb", symlinks=False, ignore_dangling_symlinks=True)

    _log("lavapipe")
    mesa_out = out / "mesa/usr/lib/x86_64-linux-gnu"
    for lib in ["libvulkan_lvp.so", *sorted(p.name for p in stack.mesa_lib.glob("libdrm*"))]:
        _copy(stack.mesa_lib / lib, mesa_out / lib)
    (out / "mesa/lvp_icd.json").write_text(json.dumps(
        {"file_format_version": "1.0.0", "ICD": {"library_path": "usr/lib/x86_64-linux-gnu/libvulkan_lvp.so", "api_version": "1.4.305"}}))

    _log("host libraries (ldd closure)")
    unix = wine / "x86_64-unix"
    wanted_unix = [unix / (Path(n).stem + ".so") for n in modules if (unix / (Path(n).stem + ".so")).exists()] + [unix / "ntdll.so"]
    binaries = [out / "usr/lib/wine/wine64", out / "usr/lib/wine/wineserver", out / "usr/bin/xkbcomp", xvfb_binary,
                mesa_out / "libvulkan_lvp.so", *wanted_unix]
    binaries += [p for p in (_host_library(n) for n in DLOPENED) if p is not None]
    env = dict(os.environ, LD_LIBRARY_PATH=str(stack.mesa_lib))
    libraries = ldd_closure(binaries, env)
    for name in DLOPENED:
        if name not in libraries and (host := _host_library(name)) is not None:
            libraries[name] = host
    left_out = sorted(n for n in libraries if LLVM_LIBRARIES.match(n)) if not with_llvm else []
    for soname, path in sorted(libraries.items()):
        if HOST_PROVIDED.match(soname) or soname in left_out or path.parent == stack.mesa_lib.resolve():
            continue
        if path.is_relative_to(out):
            continue
        _copy(path, out / "lib" / soname)

    _log("prefix, runner, DirectML.dll versions")
    (out / "wineprefix").mkdir()
    links = write_prefix(stack.prefix, out / "wineprefix", staged, {p.name.lower(): p for p in (share / "nls").iterdir()})
    _copy(stack.runner, out / "dmlrunner.exe")
    shutil.copytree(stack.dll_dir, out / "dll")
    if stack.device_pick_layer.is_dir():  # --directml-gpus (a stack set up before the layer existed has none)
        shutil.copytree(stack.device_pick_layer, out / stack.device_pick_layer.name)
    (out / "fonts.conf").write_text(FONTS_CONF)
    (out / "home/.cache").mkdir(parents=True)

    from .dlls import dll_file_version
    sizes = {part: _size(out / part) for part in ("usr", "lib", "mesa", "wineprefix", "dll", "dmlrunner.exe")}
    return {
        "format": 1,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "wine": _package_version("wine64"), "libwine": _package_version("libwine"), "xvfb": _package_version("xvfb"),
        "lavapipe": next((p.name for p in (stack.root / "debs").glob("mesa-vulkan-drivers_*.deb")), "unknown"),
        "lavapipe_llvm": "bundled" if with_llvm else f"not bundled: needs {', '.join(left_out)} on the host",
        "lavapipe_needs_host": left_out,
        "directml": {p.parent.name: dll_file_version(p) for p in sorted((out / "dll").glob("*/DirectML.dll"))},
        "pe_modules": len(modules), "traced_modules": sorted(traced - exe), "host_libraries": len(list((out / "lib").iterdir())),
        "prefix_links": links, "xvfb_xkbcomp_patched": patched,
        "unpacked_bytes": sizes,
    }


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def pack(archive: Path, stack_dir: Path | None = None, with_llvm: bool = False, preset: XzPreset = 6) -> dict:
    """Write the archive (tar + xz) of the set-up stack; returns the manifest (with the archive size)."""
    stack = Stack(Path(stack_dir or default_stack_dir()).resolve())
    archive = Path(archive).resolve()
    with tempfile.TemporaryDirectory(prefix="dmlconform-pack-") as tmp:
        tree = Path(tmp) / "stack"
        tree.mkdir()
        manifest = build_tree(stack, tree, Path(tmp), with_llvm)
        (tree / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        _log(f"writing {archive} (xz -{preset})")
        archive.parent.mkdir(parents=True, exist_ok=True)
        xz = shutil.which("xz")
        if xz:
            with open(archive, "wb") as f:
                tar = subprocess.Popen(["tar", "-C", str(tree), "-cf", "-", "."], stdout=subprocess.PIPE)
                subprocess.run([xz, "-T0", f"-{preset}", "-c"], stdin=tar.stdout, stdout=f, check=True)
                if tar.wait() != 0:
                    raise PackError("tar failed")
        else:
            with tarfile.open(archive, "w:xz", preset=preset) as tf:
                tf.add(tree, arcname=".")
    manifest["archive_bytes"] = archive.stat().st_size
    return manifest


def main(argv: list[str] | None = None) -> int:
    """`dmlconform directml pack|unpack` (also `python -m backends.directml.pack`)."""
    parser = argparse.ArgumentParser(prog="dmlconform directml")
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """pack/unpack's arguments, in one place: for `python -m backends.directml.pack` and for the
    `dmlconform directml` subcommand (cli.py registers it through the dmlconform.commands entry points)."""
    sub = parser.add_subparsers(dest="directml_command", required=True)
    p = sub.add_parser("pack", help="write a relocatable archive of the set-up DirectML stack (Wine, Xvfb, libraries, prefix, runner, DLLs)")
    p.add_argument("archive", help="output file, e.g. stack.tar.xz")
    p.add_argument("--stack", default=None, help="the set-up stack to pack (default: DMLCONFORM_DIRECTML_STACK or .cache/directml)")
    p.add_argument("--with-llvm", action="store_true", help="bundle lavapipe's LLVM too (about +40 MiB xz; for CPU-only targets without Debian 12's LLVM 15)")
    p.add_argument("--xz-preset", type=int, default=6, choices=range(0, 10), metavar="0-9", help="xz compression preset (default 6)")
    u = sub.add_parser("unpack", help="unpack an archive into a directory, for --directml-stack DIR; refuses members that would "
                                      "escape it or exhaust the machine (exit 2)")
    u.add_argument("archive")
    u.add_argument("dir", help="created; an existing one must be empty (or --force)")
    u.add_argument("--force", action="store_true", help="replace DIR even if it is not empty (everything in it is removed)")
    u.add_argument("--max-bytes", type=parse_size, default=None, metavar="SIZE",
                   help=f"refuse an archive whose files hold more than SIZE in all (default {MAX_BYTES // 2**30}G)")
    u.add_argument("--max-members", type=_positive, default=None, metavar="N",
                   help=f"refuse an archive of more than N members (default {MAX_MEMBERS})")


def run(args: argparse.Namespace) -> int:
    if args.directml_command == "unpack":
        return run_unpack(args)
    try:
        manifest = pack(Path(args.archive), Path(args.stack) if args.stack else None, args.with_llvm, args.xz_preset)
        print(f"{args.archive}: {manifest['archive_bytes'] / 2**20:.1f} MiB, {manifest['pe_modules']} PE modules, "
              f"{manifest['host_libraries']} host libraries, DirectML {', '.join(manifest['directml'].values())}; "
              f"lavapipe's LLVM {manifest['lavapipe_llvm']}")
        return 0
    except (PackError, OSError, subprocess.CalledProcessError, tarfile.TarError) as exc:
        print(f"dmlconform directml {args.directml_command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
