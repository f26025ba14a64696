"""Fetching DirectML.dll from onnxruntime-directml wheels on PyPI, and naming DLL versions.

`python -m backends.directml.dlls fetch WHEEL_VERSION --dest DIR` downloads the win_amd64 wheel with
pip (no install), extracts DirectML.dll into DIR/WHEEL_VERSION/, and prints the DLL's file version.
`resolve(name)` turns a path, a DirectML version ("1.13.1") or a wheel version into a DLL path.
"""
from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

from .process import STACK_DIR

CACHE = STACK_DIR / "dll"
VERSIONS_FILE = Path(__file__).resolve().parent / "versions.yaml"


def known_versions() -> list[dict]:
    return yaml.safe_load(VERSIONS_FILE.read_text())["versions"]


def dll_file_version(path: Path) -> str:
    """The FILEVERSION of a PE file's VS_FIXEDFILEINFO (found by its signature)."""
    data = Path(path).read_bytes()
    at = data.find(struct.pack("<I", 0xFEEF04BD))
    if at < 0:
        return "unknown"
    ms, ls = struct.unpack_from("<II", data, at + 8)
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


def fetch(wheel_version: str, dest: Path = CACHE) -> Path:
    """Download onnxruntime-directml==wheel_version (win_amd64) and extract its DirectML.dll."""
    entry = next((v for v in known_versions() if v["wheel"] == wheel_version), None)
    python = entry["python"] if entry else "3.11"
    out = dest / wheel_version / "DirectML.dll"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--platform", "win_amd64",
               "--only-binary=:all:", "--python-version", python, f"onnxruntime-directml=={wheel_version}", "-d", tmp]
        subprocess.run(cmd, check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if n.endswith("/DirectML.dll") and "onnxruntime/capi/" in n]
            if not names:
                raise RuntimeError(f"{wheel.name} has no DirectML.dll")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(z.read(names[0]))
    return out


def resolve(name: str | None, dll_dir: Path | None = None) -> Path:
    """A DLL path from a path, a DirectML version or a wheel version (default: the pinned newest),
    looked up in `dll_dir` (a stack's dll/; default: the default stack's), fetched there if missing."""
    versions = known_versions()
    if name is None:
        name = versions[0]["wheel"]
    path = Path(name)
    if path.suffix.lower() == ".dll":
        if not path.exists():
            raise FileNotFoundError(f"no DirectML.dll at {path}")
        return path.resolve()
    for v in versions:
        if name in (v["wheel"], v["directml"]):
            return fetch(v["wheel"], dll_dir or CACHE)
    allowed = ", ".join(f"{v['directml']} (wheel {v['wheel']})" for v in versions)
    raise ValueError(f"unknown DirectML version {name!r}; give a path to DirectML.dll or one of: {allowed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backends.directml.dlls")
    sub = parser.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("wheel_version")
    f.add_argument("--dest", default=str(CACHE))
    sub.add_parser("list")
    args = parser.parse_args(argv)
    if args.cmd == "list":
        for v in known_versions():
            print(f"wheel {v['wheel']:8} DirectML {v['directml']:8} max FL {v['max_feature_level']}")
        return 0
    path = fetch(args.wheel_version, Path(args.dest))
    print(f"{path} (file version {dll_file_version(path)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
