"""The DirectML backend's commands, plugged into the command line through the `dmlconform.commands`
entry-point group (pyproject.toml; harness/commands.py), so that the harness imports no backend:

- `directml = "backends.directml.cli:register"`: `dmlconform directml pack|unpack` (pack.py);
- `"directml.dlls" = "backends.directml.dlls:main"`: what `python -m harness.directml_dlls
  list|fetch` runs (dlls.py).
"""
from __future__ import annotations

import argparse

from .pack import add_arguments, run

HELP = "the portable DirectML stack: pack the set-up one into an archive, unpack one"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `directml` (pack/unpack, handled by pack.run) to the `dmlconform` subcommands."""
    directml = subparsers.add_parser("directml", help=HELP)
    directml.set_defaults(func=run)
    add_arguments(directml)
