"""Generation throughput and end-to-end conformance throughput.

1. generation: valid cases (descriptor + data) per second per operator, through Hypothesis;
2. end to end: generate, validate, run, diff, per second, per backend, on small tensors (one core);
3. harness overhead on 2^20-element tensors: the share of a whole case (run_case: prefetch,
   backend call, judge, record) not explained by the backend call alone.

Run: .venv/bin/python benchmarks/bench_pipeline.py [--seconds 3] [--repeats 15] [--only-overhead]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import fresh  # noqa: E402
from harness.run.allocator import keep_freed_memory  # noqa: E402
from harness.generate.cases import case_from_arrays  # noqa: E402
from harness.run.case import run_case  # noqa: E402
from harness.run.registry import load_backend  # noqa: E402
from harness.spec.load import load_specs  # noqa: E402
from harness.generate.strategies import valid_case_batches, valid_cases  # noqa: E402

SPECS = load_specs()
FAST = settings(max_examples=100_000, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def per_second(body, seconds: float, spec, level: str = "6.4", batch: int = 1) -> float:
    """Cases per second of body(case) over Hypothesis-generated valid cases, for `seconds`
    (batch > 1: that many data sets per drawn descriptor, as the suite does by default)."""
    count = 0
    start = time.perf_counter()

    class Done(Exception):
        pass

    @FAST
    @given(valid_cases(spec, level) if batch == 1 else valid_case_batches(spec, level, per_descriptor=batch))
    def loop(drawn):
        nonlocal count
        for case in drawn if isinstance(drawn, list) else [drawn]:
            body(case)
            count += 1
        if time.perf_counter() - start > seconds:
            raise Done
    try:
        loop()
    except Done:
        pass
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--only-overhead", action="store_true", help="run section 3 only")
    args = parser.parse_args()
    keep_freed_memory()
    if args.only_overhead:
        overhead_table(args.repeats)
        return
    print("1. generation (descriptor + data), cases/s: one descriptor per case / 8 / 16 data sets per descriptor")
    for spec in SPECS.operators.values():
        rates = [per_second(lambda c: None, args.seconds, spec, batch=b) for b in (1, 8, 16)]
        print(f"   {spec.name:30} " + " ".join(f"{r:8.0f}" for r in rates))

    print("2. end to end (generate, run_case: validate, run, diff, record), cases/s on one core, tensors <= 64 elements;")
    print("   one descriptor per case / eight data sets per descriptor (the suite default)")
    for name in ("numpy", "onnxruntime"):
        backend = load_backend(name, specs=SPECS)
        for spec in SPECS.operators.values():
            def body(case, spec=spec):  # what the suite does per case (without writing records)
                run_case(backend, spec, case, "valid")
            single = per_second(body, args.seconds, spec)
            batched = per_second(body, args.seconds, spec, batch=8)
            print(f"   {name:12} {spec.name:30} {single:8.0f} {batched:8.0f}")

    print("3. harness overhead on 2^20 elements: 1 - (backend call alone) / (whole run_case), medians of")
    print(f"   {args.repeats} runs, each on a fresh Case (no reference result carried over between runs)")
    overhead_table(args.repeats)


def overhead_table(repeats: int) -> None:
    rng = np.random.default_rng(0)
    n = 1 << 20
    workloads = [
        ("ACTIVATION_HARD_SIGMOID", "FLOAT32", rng.standard_normal(n).astype(np.float32)),
        ("ELEMENT_WISE_SIGN", "INT32", rng.integers(-5, 5, n).astype(np.int32)),
        ("ELEMENT_WISE_SIGN", "FLOAT32", rng.standard_normal(n).astype(np.float32)),
        ("ELEMENT_WISE_BIT_NOT", "UINT8", rng.integers(0, 256, n).astype(np.uint8)),
        ("ELEMENT_WISE_QUANTIZE_LINEAR", "FLOAT32", (rng.standard_normal(n) * 100).astype(np.float32)),
    ]
    for name in ("numpy", "onnxruntime", "directml"):
        backend = load_backend(name, specs=SPECS)
        if not backend.available()[0]:
            print(f"   {name}: not available here ({backend.available()[1]})")
            continue
        for op, dtype, values in workloads:
            spec = SPECS.operator(op)
            arrays = {"InputTensor": values}
            types = {"InputTensor": dtype, "OutputTensor": dtype}
            if op == "ELEMENT_WISE_QUANTIZE_LINEAR":
                arrays["ScaleTensor"] = np.full(n, 0.37, np.float32)
                arrays["ZeroPointTensor"] = np.full(n, 3, np.int8)
                types.update(ScaleTensor="FLOAT32", ZeroPointTensor="INT8", OutputTensor="INT8")
            case = case_from_arrays(spec, "6.4", types, arrays, sizes=[n])
            backend.run(fresh(case))  # warm caches (sessions, compiled operators)
            alone, whole = [], []
            status = ""
            for _ in range(repeats):
                c = fresh(case)
                t0 = time.perf_counter()
                backend.run(c)
                alone.append(time.perf_counter() - t0)
                c = fresh(case)
                t0 = time.perf_counter()
                status = run_case(backend, spec, c, "valid").status
                whole.append(time.perf_counter() - t0)
            b, w = statistics.median(alone), statistics.median(whole)
            print(f"   {name:12} {op:29} {dtype:8} backend alone {1e3 * b:7.2f} ms, whole case {1e3 * w:7.2f} ms, "
                  f"overhead {100 * max(0.0, 1 - b / w):5.1f}%  ({status})")
        backend.close()

if __name__ == "__main__":
    main()
