"""Backend discovery through the `dmlconform.backends` entry-point group.

A vendor ships a backend as its own package that declares an entry point in that group; it then
appears in `dmlconform backends` and can be chosen with `--backend NAME`, with no fork.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.spec.model import SpecSet
    from harness.model.backend import Backend

from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from harness.judge.expectations import ExpectationSet, load_expectations

GROUP = "dmlconform.backends"
DEFAULT_BACKENDS = ["numpy", "onnxruntime", "directml"]


@dataclass
class BackendInfo:
    name: str
    target: str
    loadable: bool
    available: bool
    reason: str
    version: str


def backend_entry_points() -> dict[str, Any]:
    """Installed entry points, plus DMLCONFORM_EXTRA_BACKENDS="name=module:Class,..." for a backend
    being developed in a checkout, not yet packaged."""
    import os
    from importlib.metadata import EntryPoint
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    for item in filter(None, os.environ.get("DMLCONFORM_EXTRA_BACKENDS", "").split(",")):
        name, _, target = item.partition("=")
        if name and target:
            found[name.strip()] = EntryPoint(name=name.strip(), value=target.strip(), group=GROUP)
    return found


def split_instance(name: str) -> tuple[str, str | None]:
    """`directml@1.10.1` -> ("directml", "1.10.1"): a backend instance is a backend's name and a
    variant its class understands (`instance_option`: DirectML's DLL version), so that one run
    compares several versions side by side, each under its own name in records and the matrix."""
    base, sep, variant = name.partition("@")
    return base, (variant if sep and variant else None)


def instance_problem(name: str) -> str | None:
    """What is wrong with a backend name or instance name (`base@variant`), found without
    starting the backend: an unknown base, a variant given to a backend that takes none, or a
    variant its class refuses (its optional static `instance_problem(variant)`); None when fine."""
    base, variant = split_instance(name)
    eps = backend_entry_points()
    if base not in eps:
        return f"unknown backend {base!r}; installed: {', '.join(sorted(eps)) or 'none'}"
    if variant is None:
        return None
    cls = eps[base].load()
    if getattr(cls, "instance_option", None) is None:
        return f"backend {base!r} takes no variant (given {name!r})"
    check = getattr(cls, "instance_problem", None)
    problem = check(variant) if callable(check) else None
    return f"--backend {name}: {problem}" if problem else None


def load_backend(name: str, **options: Any) -> Backend:
    """Instantiate a backend by name (or instance name, `base@variant`); ValueError lists the names
    that exist, or says that the backend takes no variant."""
    base, variant = split_instance(name)
    eps = backend_entry_points()
    if base not in eps:
        raise ValueError(f"unknown backend {base!r}; installed: {', '.join(sorted(eps)) or 'none'}")
    cls = eps[base].load()
    if variant is not None:
        option = getattr(cls, "instance_option", None)
        if option is None:
            raise ValueError(f"backend {base!r} takes no variant (given {name!r})")
        options[option] = variant
    backend = cls(**options)
    if variant is not None:
        backend.name = name  # records, the matrix and reports name the instance
    return backend


def describe_backends(**options: Any) -> list[BackendInfo]:
    out = []
    for name, ep in sorted(backend_entry_points().items()):
        try:
            backend = ep.load()(**options)
        except Exception as exc:  # a broken plugin is reported, not fatal
            out.append(BackendInfo(name, ep.value, False, False, f"cannot load: {type(exc).__name__}: {exc}", "-"))
            continue
        available, reason = backend.available()
        version = backend.version() if available else "-"
        out.append(BackendInfo(name, ep.value, True, available, reason, version))
        backend.close()
    return out


def expectations_dir(name: str) -> Path | None:
    """Where backend `name` keeps its expectation files (its class's `expectations_dir`), or None."""
    ep = backend_entry_points().get(name)
    if ep is None:
        return None
    try:
        directory = getattr(ep.load(), "expectations_dir", None)
    except Exception:  # noqa: BLE001 - a broken plugin has no expectations; loading it reports why
        return None
    return Path(directory) if directory is not None else None


def expectations_for(name: str, override: Path | None = None, specs: SpecSet | None = None) -> ExpectationSet:
    """The known divergences of backend `name`: from `override` (--expectations-dir) when given,
    else from the directory the backend ships. An instance (`directml@1.10.1`) has its backend's
    expectations and those of its own files (`directml@1.10.1.yaml`, `directml@1.10.1/*.yaml`)."""
    base, variant = split_instance(name)
    directory = override if override is not None else expectations_dir(base)
    found = load_expectations(base, directory, specs)  # checked against `specs` (None: the shipped specs)
    if variant is not None:
        own = load_expectations(name, directory, specs)
        found = ExpectationSet(name, list(found.items) + list(own.items))
    return found
