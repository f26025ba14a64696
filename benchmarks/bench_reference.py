"""Reference backend throughput: elements/second per operator and data type family, at 1, 2^16
and 2^24 elements, and the ratio to the equivalent hand-written NumPy expression (same precision:
float64 evaluation rounded once to the output type) on the largest size.

Run: .venv/bin/python benchmarks/bench_reference.py [--max-log2 24]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.numpy_reference import NumpyReferenceBackend  # noqa: E402
from common import fresh  # noqa: E402
from harness.run.allocator import keep_freed_memory  # noqa: E402
from harness.generate.cases import case_from_arrays  # noqa: E402
from harness.spec.load import load_specs  # noqa: E402

SPECS = load_specs()
REF = NumpyReferenceBackend(SPECS)
RNG = np.random.default_rng(1)

# (operator, family, tensor types, hand-written equivalent on the logical inputs). The SIGN one is
# the formula in NumPy, not np.sign: np.sign(NaN) is NaN where the DirectML formula gives 0.
A32, B32 = np.float64(np.float32(0.2)), np.float64(np.float32(0.5))
CONFIGS = [
    ("ELEMENT_WISE_SIGN", "float32", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
     lambda v: np.where(v["InputTensor"] < 0, -1, np.where(v["InputTensor"] > 0, 1, 0)).astype(np.float32)),
    ("ELEMENT_WISE_SIGN", "int32", {"InputTensor": "INT32", "OutputTensor": "INT32"},
     lambda v: np.where(v["InputTensor"] < 0, -1, np.where(v["InputTensor"] > 0, 1, 0)).astype(np.int32)),
    ("ACTIVATION_HARD_SIGMOID", "float32", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
     lambda v: np.clip(A32 * v["InputTensor"].astype(np.float64) + B32, 0, 1).astype(np.float32)),
    ("ACTIVATION_HARD_SIGMOID", "float16", {"InputTensor": "FLOAT16", "OutputTensor": "FLOAT16"},
     lambda v: np.clip(A32 * v["InputTensor"].astype(np.float64) + B32, 0, 1).astype(np.float16)),
    ("ELEMENT_WISE_QUANTIZE_LINEAR", "float32->uint8",
     {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"},
     lambda v: np.clip(np.rint(v["InputTensor"].astype(np.float64) / v["ScaleTensor"]) + v["ZeroPointTensor"], 0, 255).astype(np.uint8)),
    ("ELEMENT_WISE_BIT_NOT", "uint8", {"InputTensor": "UINT8", "OutputTensor": "UINT8"},
     lambda v: np.invert(v["InputTensor"])),
    ("ELEMENT_WISE_BIT_NOT", "float32", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
     lambda v: np.invert(v["InputTensor"].view(np.uint32)).view(np.float32)),
]


def values_for(types: dict[str, str], n: int) -> dict[str, np.ndarray]:
    out = {}
    for name, tname in types.items():
        if name == "OutputTensor":
            continue
        t = SPECS.catalog.dtype(tname)
        if name == "ScaleTensor":
            out[name] = RNG.uniform(0.1, 4.0, n).astype(t.numpy)
        elif t.is_float:
            out[name] = (RNG.standard_normal(n) * 10).astype(t.numpy)
        else:
            out[name] = RNG.integers(t.min, t.max, n, endpoint=True).astype(t.numpy)
    return out


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-log2", type=int, default=24)
    args = parser.parse_args()
    keep_freed_memory()  # as the CLI and the suite do
    sizes = [1, 2**16, 2**args.max_log2]
    print(f"{'operator':30} {'family':16} {'elements':>10} {'elem/s':>12} {'vs hand NumPy':>14}")
    for op, family, types, hand in CONFIGS:
        spec = SPECS.operator(op)
        for n in sizes:
            values = values_for(types, n)
            case = case_from_arrays(spec, "6.4", types, values, sizes=[n])
            repeat = 20 if n <= 2**16 else 3
            t_ref = best_of(lambda: REF.run(fresh(case)), repeat)  # fresh: no memoised reference
            ratio = ""
            if n == sizes[-1]:
                t_hand = best_of(lambda: hand(values).tobytes(), repeat)  # both produce the output buffer
                ratio = f"{t_ref / t_hand:.2f}x"
            print(f"{op:30} {family:16} {n:>10} {n / t_ref:>12.3g} {ratio:>14}")


if __name__ == "__main__":
    main()
