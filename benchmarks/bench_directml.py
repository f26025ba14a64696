"""DirectML backend throughput: cases/s cold (new operator each case: CreateOperator, compile,
initialise) and warm (operator cache hit), one case per request and in batches (issue 31: one
request, one submit and fence for many cases), the runner's (re)start time, and the time of one
exhaustive FLOAT16 sweep per operator.

Run: .venv/bin/python benchmarks/bench_directml.py [--no-sweeps]
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
    batched(backend, spec, rng)
    restarts(backend)
    if "--no-sweeps" in sys.argv:
        backend.close()
        return
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


def batched(backend: DirectMLBackend, spec, rng) -> None:
    """Small cases as a conformance cell has them (8 data sets per descriptor), judged, one per
    request against batches of 8 (the default), 64 and 256: cases/s per worker."""
    import backends.directml as directml
    cases = [case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                              {"InputTensor": rng.standard_normal(n).astype(np.float32)}, sizes=[n])
             for n in range(41, 81) for _ in range(8)]  # new descriptors: the first data set compiles
    default = directml.BATCH_CASES
    for size in (1, 8, 64, 256):
        directml.BATCH_CASES = size
        run = list(map(fresh, cases))
        t0 = time.perf_counter()
        answers = backend.run_batch(run) if size > 1 else [(backend.run(c), None) for c in run]
        for case, (result, _) in zip(run, answers):
            judge(spec, case, result, True)
        elapsed = time.perf_counter() - t0
        print(f"small cases, {'one per request' if size == 1 else f'batches of {size}'}: {len(run) / elapsed:.0f} cases/s "
              f"(320 cases, 40 descriptors x 8 data sets, judged)")
    directml.BATCH_CASES = default


def restarts(backend: DirectMLBackend) -> None:
    """What a crash costs beyond the case: stopping the runner and starting another (Wine, the
    D3D12 and DirectML devices)."""
    times = []
    for _ in range(3):
        backend._drop_runner()
        t0 = time.perf_counter()
        backend._ensure()
        times.append(time.perf_counter() - t0)
    print("runner restart: " + ", ".join(f"{t:.2f} s" for t in times))


if __name__ == "__main__":
    main()
