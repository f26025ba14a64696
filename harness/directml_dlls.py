"""`python -m harness.directml_dlls list|fetch`: the DirectML.dll versions dmlconform knows (each
with the maximum feature level it reports) and fetching one; older DLLs are how level-gated
rejections are tested. The versions and the fetching live with the DirectML backend
(backends/directml/dlls.py); this is the name the project's docs give the command."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from backends.directml.dlls import main as dlls_main
    return dlls_main(argv)


if __name__ == "__main__":
    sys.exit(main())
