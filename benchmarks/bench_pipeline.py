"""Generation throughput and end-to-end conformance throughput.

1. generation: valid cases (descriptor + data) per second per operator, through Hypothesis;
2. end to end: generate, validate, run, diff, per second, per backend, on small tensors (one core);
3. harness overhead on 2^20-element tensors: time outside the backend call / total.

Run: .venv/bin/python benchmarks/bench_pipeline.py [--seconds 3]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cases import case_from_arrays  # noqa: E402
from harness.diff import judge  # noqa: E402
from harness.registry import load_backend  # noqa: E402
from harness.spec import load_specs  # noqa: E402
from harness.strategies import valid_case_batches, valid_cases  # noqa: E402
from harness.validator import validate  # noqa: E402

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
    args = parser.parse_args()
    print("1. generation (descriptor + data), cases/s: one descriptor per case / 8 / 16 data sets per descriptor")
    for spec in SPECS.operators.values():
        rates = [per_second(lambda c: None, args.seconds, spec, batch=b) for b in (1, 8, 16)]
        print(f"   {spec.name:30} " + " ".join(f"{r:8.0f}" for r in rates))

    print("2. end to end (generate, validate, run, diff), cases/s on one core, tensors <= 64 elements;")
    print("   one descriptor per case / eight data sets per descriptor (the suite default)")
    for name in ("numpy", "onnxruntime"):
        backend = load_backend(name, specs=SPECS)
        for spec in SPECS.operators.values():
            def body(case, spec=spec):
                validate(spec, case.descriptor, case.feature_level)
                judge(spec, case, backend.run(case), backend.capabilities().validates_descriptors)
            single = per_second(body, args.seconds, spec)
            batched = per_second(body, args.seconds, spec, batch=8)
            print(f"   {name:12} {spec.name:30} {single:8.0f} {batched:8.0f}")

    print("3. harness overhead on 2^20 elements (outside the backend call / total)")
    rng = np.random.default_rng(0)
    n = 1 << 20
    for name in ("numpy", "onnxruntime", "directml"):
        backend = load_backend(name, specs=SPECS)
        if not backend.available()[0]:
            print(f"   {name}: not available here ({backend.available()[1]})")
            continue
        for op, types, values in [
            ("ACTIVATION_HARD_SIGMOID", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
             {"InputTensor": rng.standard_normal(n).astype(np.float32)}),
            ("ELEMENT_WISE_SIGN", {"InputTensor": "INT32", "OutputTensor": "INT32"},
             {"InputTensor": rng.integers(-5, 5, n).astype(np.int32)}),
        ]:
            spec = SPECS.operator(op)
            case = case_from_arrays(spec, "6.4", types, values, sizes=[n])
            backend.run(case)  # warm the session cache
            t0 = time.perf_counter()
            result = backend.run(case)
            t1 = time.perf_counter()
            validate(spec, case.descriptor, case.feature_level)
            judge(spec, case, result, backend.capabilities().validates_descriptors)
            t2 = time.perf_counter()
            print(f"   {name:12} {op:26} backend {1e3 * (t1 - t0):7.1f} ms, harness {1e3 * (t2 - t1):7.1f} ms, "
                  f"overhead {100 * (t2 - t1) / (t2 - t0):5.1f}%")


if __name__ == "__main__":
    main()
