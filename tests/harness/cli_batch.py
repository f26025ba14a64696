"""Many `dmlconform` command lines in one Python process, each with its own stdout, stderr and exit code.

The hostile-input tests run well over a hundred command lines; a fresh interpreter for each
(importing NumPy, the harness and the specs) was most of their time. This runs them one after the
other through `harness.cli.main`, as the `dmlconform` script does, capturing what each prints; an
exception that escapes `main` is printed as Python would (a traceback on stderr, exit code 1), so
a test still sees it. What a process boundary alone can show (a segfault, an abort) ends this
process: the caller then runs that batch's command lines again, each in its own process.

Input on stdin: a JSON list of argument lists. Output on stdout: a JSON list of
{"code": int, "stdout": str, "stderr": str}, in order.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback


def run_one(argv: list[str]) -> dict[str, object]:
    from harness.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors, as the script would exit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - what the interpreter would print for the script
            traceback.print_exc()
            code = 1
    return {"code": int(code or 0), "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> int:
    commands = json.load(sys.stdin)
    results = [run_one([str(a) for a in argv]) for argv in commands]
    real_stdout = sys.__stdout__
    assert real_stdout is not None
    real_stdout.write(json.dumps(results))
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
