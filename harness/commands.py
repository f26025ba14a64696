"""Commands that backends plug into the command line: the `dmlconform.commands` entry-point group.

The harness never imports a backend (docs/architecture.md), so a backend's own commands are
declared by the backend, in this group, and found at run time. An entry is one of two kinds, told
apart by its name:

- `NAME = "module:register"`: `register(subparsers)` adds the subcommand `dmlconform NAME` (its
  help, arguments and handler: `set_defaults(func=handler)`, `handler(args)` returns the exit
  code). DirectML declares `directml = "backends.directml.cli:register"` (pack, unpack).
- `NAME.TOOL = "module:main"`: a tool, `main(argv) -> int`, that a harness module launches under
  the name the docs give it: `python -m harness.directml_dlls` runs `directml.dlls`.

Plus DMLCONFORM_EXTRA_COMMANDS="name=module:function,..." for a backend being developed in a
checkout, not yet packaged (as DMLCONFORM_EXTRA_BACKENDS does for backends, harness/run/registry.py).

A command the project documents (DOCUMENTED) that is not installed, or whose entry point does not
load, is `unavailable`: the command line says so in one line (exit 2) instead of failing on an
unknown command.
"""
from __future__ import annotations

import os
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable

GROUP = "dmlconform.commands"
EXTRA_ENV = "DMLCONFORM_EXTRA_COMMANDS"
# commands of the project's own backends, by entry name: what provides each (for the message when
# it is missing). Names only: the harness imports none of them.
DOCUMENTED = {"directml": "the DirectML backend", "directml.dlls": "the DirectML backend"}


class CommandUnavailable(Exception):
    """A backend command that is not installed or does not load; the message is one line."""


def command_entry_points() -> dict[str, EntryPoint]:
    """Installed entry points of the group, plus DMLCONFORM_EXTRA_COMMANDS (which wins on a name)."""
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    for item in filter(None, os.environ.get(EXTRA_ENV, "").split(",")):
        name, _, target = item.partition("=")
        if name.strip() and target.strip():
            found[name.strip()] = EntryPoint(name=name.strip(), value=target.strip(), group=GROUP)
    return found


def _provider(name: str) -> str:
    return DOCUMENTED.get(name, f"the backend that provides {name!r}")


def _not_installed(name: str) -> str:
    return f"unavailable: {_provider(name)} is not installed (no {name!r} entry point in the {GROUP} group)"


def load_command(name: str, entry: EntryPoint | None = None) -> Callable[..., Any]:
    """The object entry point `name` names (a register function or a tool's main): `entry`, or
    the installed one; CommandUnavailable (one line) when it is not installed or does not load."""
    entry = entry if entry is not None else command_entry_points().get(name)
    if entry is None:
        raise CommandUnavailable(_not_installed(name))
    try:
        return entry.load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin makes its command unavailable, not the CLI
        raise CommandUnavailable(" ".join(f"unavailable: {_provider(name)} does not load ({entry.value}): "
                                          f"{type(exc).__name__}: {exc}".split())) from None


def subcommands() -> list[tuple[str, Callable[..., Any] | None, str]]:
    """(name, register, why) for each backend subcommand: installed ones (sorted by name) with
    their register function, or None and why not when the entry point does not load; then the
    documented ones that are not installed, with None and why."""
    eps = {name: ep for name, ep in command_entry_points().items() if "." not in name}
    out: list[tuple[str, Callable[..., Any] | None, str]] = []
    for name in sorted(eps):
        try:
            out.append((name, load_command(name, eps[name]), ""))
        except CommandUnavailable as exc:
            out.append((name, None, str(exc)))
    out += [(name, None, _not_installed(name)) for name in sorted(DOCUMENTED) if "." not in name and name not in eps]
    return out


def run_tool(name: str, argv: list[str] | None = None) -> int:
    """Run tool entry `name` (`COMMAND.TOOL`) with `argv`; CommandUnavailable when it is missing."""
    return int(load_command(name)(argv))
