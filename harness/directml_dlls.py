"""`python -m harness.directml_dlls list|fetch`: the DirectML.dll versions dmlconform knows (each
with the maximum feature level it reports) and fetching one; older DLLs are how level-gated
rejections are tested. The versions and the fetching live with the DirectML backend
(backends/directml/dlls.py); this is the name the project's docs give the command. The harness
imports no backend: the tool is found through the `dmlconform.commands` entry points, as the
`directml.dlls` entry (harness/commands.py); without it, one line and exit 2."""
from __future__ import annotations

import sys

TOOL = "directml.dlls"


def main(argv: list[str] | None = None) -> int:
    from harness.commands import CommandUnavailable, run_tool
    try:
        return run_tool(TOOL, argv)
    except CommandUnavailable as exc:
        print(f"python -m harness.directml_dlls: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
