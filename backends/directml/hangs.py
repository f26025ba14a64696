"""Where a device hangs: each case file run alone on a fresh DirectML runner, many at a time, with
the stage each one finished or hung in (create, compile, initialize, upload, execute, readback).

Why a tool of its own: a conformance run reruns a hung case and judges it; finding out what a hang
is needs the opposite: every case run exactly once, in parallel (a hang costs its whole timeout),
the same cases again under other execution flags, and one line per case that says where it stopped.

    python -m backends.directml.hangs CASE.yaml... [--jobs 16] [--timeout 30] [--exec-flags DISABLE_META_COMMANDS]
           [--vulkan auto] [--dll 1.15.4] [--json OUT.json]

Prints `case  expect  outcome  stage  seconds  detail` per case and a count per outcome and stage.
Exit status: 0 when every case answered, 1 when some hung or crashed, 2 on a bad argument or file.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def probe(path: str, options: dict[str, Any]) -> dict[str, Any]:
    """Run one case file once on its own runner: what came back and the stages' seconds."""
    from backends.directml import DirectMLBackend
    from harness.model.backend import Crashed
    from harness.model.descriptor import Case
    from harness.spec.load import load_specs
    case = Case.load(Path(path))
    backend = DirectMLBackend(load_specs(), **options)
    start = time.perf_counter()
    try:
        ok, why = backend.available()
        if not ok:
            return {"case": path, "expect": "valid" if case.expect_valid else "invalid", "outcome": "unavailable", "stage": "", "seconds": 0.0, "detail": why}
        result, timing = backend.run_batch([case])[0]
    finally:
        backend.close()
    hung = isinstance(result, Crashed) and "(hang" in result.reason
    outcome = "hang" if hung else result.kind
    stages = timing.stages
    last = max(stages, key=lambda s: _ORDER.index(s) if s in _ORDER else -1) if stages else ""
    detail = getattr(result, "reason", "") if not hasattr(result, "buffers") else ""
    return {"case": path, "expect": "valid" if case.expect_valid else "invalid", "outcome": outcome, "stage": last if (hung or outcome == "crashed") else "",
            "seconds": round(time.perf_counter() - start, 2), "stages": stages, "detail": detail[:300]}


_ORDER = ["create", "compile", "initialize", "upload", "execute", "readback"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backends.directml.hangs", description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", help="case files (dmlconform's YAML case format)")
    parser.add_argument("--jobs", type=int, default=8, help="cases at a time, each on its own runner (default 8)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a case may take before it counts as hung (default 30)")
    parser.add_argument("--exec-flags", default="", help="DirectML execution flags, e.g. DISABLE_META_COMMANDS")
    parser.add_argument("--vulkan", default=None, help="auto (default), lavapipe or an ICD json")
    parser.add_argument("--dll", default=None, help="a DirectML version or DirectML.dll path")
    parser.add_argument("--json", default=None, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.jobs < 1 or not 0 < args.timeout <= 3600:
        print("hangs: --jobs must be at least 1 and --timeout within (0, 3600] seconds", file=sys.stderr)
        return EXIT_USAGE
    missing = [c for c in args.cases if not Path(c).is_file()]
    if missing:
        print(f"hangs: no such case file: {missing[0]}", file=sys.stderr)
        return EXIT_USAGE
    options = {"timeout": args.timeout, "exec_flags": args.exec_flags, "vulkan": args.vulkan, "dll": args.dll}
    with ProcessPoolExecutor(max_workers=min(args.jobs, len(args.cases))) as pool:
        rows = list(pool.map(probe, args.cases, [options] * len(args.cases)))
    for row in rows:
        print(f"{Path(row['case']).name}\t{row['expect']}\t{row['outcome']}\t{row['stage'] or '-'}\t{row['seconds']:.1f}\t{row['detail'][:160]}")
    counts = Counter((row["outcome"], row["stage"]) for row in rows)
    print("; ".join(f"{outcome}{' in ' + stage if stage else ''}: {n}" for (outcome, stage), n in sorted(counts.items())))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return EXIT_FAIL if any(row["outcome"] in ("hang", "crashed", "unavailable") for row in rows) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
