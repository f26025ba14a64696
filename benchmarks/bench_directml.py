"""DirectML backend throughput: cases/s cold (new operator each case: CreateOperator, compile,
initialise) and warm (operator cache hit), and the time of one exhaustive FLOAT16 sweep per operator.

Run: .venv/bin/python benchmarks/bench_directml.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.directml import DirectMLBackend  # noqa: E402
from common import fresh  # noqa: E402
from harness.generate.cases import case_from_arrays  # noqa: E402
from harness.judge.diff import judge  # noqa: E402
from harness.spec.load import load_specs  # noqa: E402
from harness.generate.sweeps import sweep_case, sweeps  # noqa: E402

SPECS = load_specs()


def main() -> None:
    backend = DirectMLBackend(SPECS)
    t0 = time.perf_counter()
    ok, reason = backend.available()
    if not ok:
        print(f"DirectML not available: {reason}")
        return
    print(f"runner start-up (Wine + device): {time.perf_counter() - t0:.1f} s; {backend.version()}")
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    rng = np.random.default_rng(0)
    cold = [case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                             {"InputTensor": rng.standard_normal(n).astype(np.float32)}, sizes=[n]) for n in range(1, 41)]
    t0 = time.perf_counter()
    for case in cold:
        judge(spec, case, backend.run(case), True)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    for case in map(fresh, cold):  # the same cases again, as new objects: no memoised reference
        judge(spec, case, backend.run(case), True)
    t_warm = time.perf_counter() - t0
    print(f"small cases: cold {len(cold) / t_cold:.0f} cases/s, warm (operator cached) {len(cold) / t_warm:.0f} cases/s")
    for sweep in sweeps(SPECS):
        if sweep.data_type != "FLOAT16":
            continue
        case = sweep_case(SPECS, sweep)
        t0 = time.perf_counter()
        result = backend.run(case)
        t_run = time.perf_counter() - t0
        diff = judge(SPECS.operator(sweep.operator), case, result, True)
        print(f"FLOAT16 sweep {sweep.operator:26} 65536 values: {t_run * 1e3:7.1f} ms on DirectML, "
              f"{(time.perf_counter() - t0) * 1e3:7.1f} ms with the diff ({diff.status})")
    backend.close()


if __name__ == "__main__":
    main()
