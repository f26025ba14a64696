"""How fast a runner crash is seen and the runner is back: the time from sending the runner's
`crash` test hook to the `crashed` result (detection), then to the next case's result (restart).

Detection is bounded by when the reader sees EOF on the runner's stdout: any process that inherited
that pipe (Wine's wineboot, services, explorer when the runner was the session's first process)
keeps it open. docs/performance.md records the numbers.

Run: .venv/bin/python benchmarks/bench_directml_crash.py [--repeat 3] [--directml-vulkan auto]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.directml import DirectMLBackend  # noqa: E402
from harness.generate.cases import case_from_arrays  # noqa: E402
from harness.spec.load import load_specs  # noqa: E402

SPECS = load_specs()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--directml-vulkan", default=None)
    args = parser.parse_args(argv)
    options = {"vulkan": args.directml_vulkan} if args.directml_vulkan else {}
    backend = DirectMLBackend(SPECS, timeout=60, **options)
    t0 = time.perf_counter()
    ok, reason = backend.available()
    if not ok:
        print(f"DirectML not available: {reason}")
        return 1
    print(f"first start: {time.perf_counter() - t0:.2f} s; {backend.version()}")
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "INT8", "OutputTensor": "INT8"}, {"InputTensor": np.array([-1, 0, 1], np.int8)})
    try:
        for i in range(args.repeat):
            backend.run(case)  # a warm runner
            t0 = time.perf_counter()
            result = backend._send({"cmd": "crash"}, [], spec)
            detect = time.perf_counter() - t0
            t0 = time.perf_counter()
            after = backend.run(case)
            restart = time.perf_counter() - t0
            print(f"crash {i + 1}: detected in {detect:.2f} s ({result.kind}); next case after {restart:.2f} s ({after.kind})")
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
