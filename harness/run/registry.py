"""Backend discovery through the `dmlconform.backends` entry-point group.

A vendor ships a backend as its own package that declares an entry point in that group; it then
appears in `dmlconform backends` and can be chosen with `--backend NAME`, with no fork.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def load_backend(name: str, **options: Any) -> Backend:
    """Instantiate a backend by name; ValueError lists the names that exist."""
    eps = backend_entry_points()
    if name not in eps:
        raise ValueError(f"unknown backend {name!r}; installed: {', '.join(sorted(eps)) or 'none'}")
    cls = eps[name].load()
    return cls(**options)


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


def expectations_for(name: str, override: Path | None = None) -> ExpectationSet:
    """The known divergences of backend `name`: from `override` (--expectations-dir) when given,
    else from the directory the backend ships."""
    return load_expectations(name, override if override is not None else expectations_dir(name))
