"""Family references: one plug-in module per family of index-space operators, chosen by the spec's
`formula.family.name` and parameterised entirely by the spec (harness.spec.families declares
what each takes). A plug-in maps a descriptor and its input arrays to a FamilyResult: the exact
outputs, the output elements the docs leave open (the spec's element-wise `unspecified` rules,
lifted to the output elements whose inputs meet them), and the other results a device may
legally give under the precision model, each with the liberty it takes.

Each plug-in module registers itself: it ends with `PLUGIN = FamilyPlugin(DECLARATIONS[name],
compute, device)` (harness.reference.families.result), and this registry collects the PLUGIN of
every module of this package, so adding a family is adding its declaration and its module.
"""
from __future__ import annotations

import importlib
import pkgutil

from harness.reference.families.result import Compute, Device, FamilyPlugin


def _collect() -> dict[str, FamilyPlugin]:
    plugins: dict[str, FamilyPlugin] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        plugin = getattr(importlib.import_module(f"{__name__}.{info.name}"), "PLUGIN", None)
        if isinstance(plugin, FamilyPlugin):
            if plugin.name in plugins:
                raise RuntimeError(f"two plug-ins for family {plugin.name!r}: {info.name} and another module")
            plugins[plugin.name] = plugin
    return plugins


PLUGINS: dict[str, FamilyPlugin] = _collect()


def family_compute(name: str) -> Compute:
    """The plug-in of family `name` (the spec loader has checked the name)."""
    return PLUGINS[name].compute


def family_device(name: str) -> Device | None:
    """The plug-in's legal device (FamilyPlugin.device), or None: the exact result over the
    inputs as the device sees them is the one to give."""
    return PLUGINS[name].device
