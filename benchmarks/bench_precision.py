"""The precision model's cost: judging a result whose every element differs from the exact value
(what a GPU that flushes every fp32 denormal, or rounds every product the other way, returns),
against the bit-identical fast path, at 2^16 and 2^20 elements.

Run: .venv/bin/python benchmarks/bench_precision.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.worst_legal import WorstLegalBackend  # noqa: E402
from harness.generate.cases import case_from_arrays  # noqa: E402
from harness.judge.diff import judge  # noqa: E402
from harness.model.backend import Outputs  # noqa: E402
from harness.model.layout import pack_buffer  # noqa: E402
from harness.reference.evaluate import expected_for  # noqa: E402
from harness.spec.load import load_specs  # noqa: E402

SPECS = load_specs()
F32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}


def _judge(spec, case, values) -> tuple[float, str]:
    desc = case.descriptor.tensors[spec.formula.output]
    buffers = {spec.formula.output: pack_buffer(values, desc, SPECS.catalog.dtype(desc.data_type))}
    start = time.perf_counter()
    diff = judge(spec, case, Outputs(buffers), True)
    return time.perf_counter() - start, f"{diff.status}: {diff.legal_count} legal; {diff.liberties or diff.summary[:60]}"


def scenarios(n: int):
    """(name, spec, case, the backend's values): every element legal only through a liberty."""
    sign = SPECS.operator("ELEMENT_WISE_SIGN")
    x = (np.arange(n, dtype=np.uint32) % 0x7FFFFF + 1).view(np.float32)  # fp32 denormals
    case = case_from_arrays(sign, "6.4", F32, {"InputTensor": x})
    yield "SIGN, every fp32 denormal flushed", sign, case, np.zeros(n, np.float32)
    hs = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    x = np.random.default_rng(1).uniform(-2.4, 2.4, n).astype(np.float32)
    case = case_from_arrays(hs, "6.4", F32, {"InputTensor": x}, attributes={"Alpha": 0.3, "Beta": 0.25})
    exact = expected_for(hs, case).outputs["OutputTensor"].reshape(-1)
    device = WorstLegalBackend(SPECS).run(case).buffers["OutputTensor"]
    yield "HARD_SIGMOID, the worst legal device's result", hs, case, np.frombuffer(device, np.float32).copy()
    yield "HARD_SIGMOID, bit-identical (fast path)", hs, case, exact.copy()


def main() -> None:
    print(f"{'scenario':45s} {'elements':>9s} {'judge s':>8s} {'ns/element':>10s}  result")
    for log2 in (16, 20):
        n = 1 << log2
        for name, spec, case, values in scenarios(n):
            expected_for(spec, case)  # the exact reference is not what is measured
            seconds, result = _judge(spec, case, values)
            print(f"{name:45s} {n:9d} {seconds:8.3f} {seconds / n * 1e9:10.1f}  {result[:70]}")


if __name__ == "__main__":
    main()
