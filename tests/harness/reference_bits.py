"""The reference's output bits of every transcendental element-wise operator over a large random
and special input set: run as `python -m tests.harness.reference_bits OUT.npz`, once per NumPy SIMD
level (NPY_DISABLE_CPU_FEATURES), by tests/harness/test_cpu_independence.py, which compares them.

The operators are the specs' element-wise operators whose formula calls a transcendental function
(harness.spec.expr.TRANSCENDENTAL_FUNCTIONS), each at FLOAT32 and FLOAT16 where a type assignment of
the newest level has that primary type; so a new such operator is drawn without a change here.
Inputs: every bit pattern class (uniform random bits: all magnitudes, denormals, infinities, NaNs
of every payload), NaN/inf/zero specials, and uniform values over the ranges where the functions
turn (|x| <= 4, the float32 and float16 overflow edges of exp).
"""
from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.generate.types import dim_range, primary_input, valid_type_assignments
from harness.model.descriptor import TensorDesc
from harness.reference.evaluate import expected_for
from harness.spec.load import load_specs

ELEMENTS = 1 << 16  # per input tensor, per operator and type
SEED = 20261128


def transcendental_operators(specs) -> list:
    return sorted((o for o in specs.operators.values()
                   if o.formula is not None and o.formula.family is None and o.formula.expression.transcendental),
                  key=lambda o: o.name)


def _values(dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
    """n values of a float type: a quarter random bit patterns, the rest values where functions turn."""
    bits_type = {2: np.uint16, 4: np.uint32}[dtype.itemsize]
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 88.72, 88.73, -87.34, -103.98,
                         11.09, 11.1, -9.7, -17.3, 1e-40, -1e-40, 1e-7, 65504.0, 3.4028235e38], dtype=np.float64)
    with np.errstate(over="ignore"):
        specials = specials.astype(dtype)
    quarter = n // 4
    random_bits = rng.integers(0, np.iinfo(bits_type).max, size=quarter, dtype=bits_type, endpoint=True).view(dtype)
    small = rng.uniform(-4, 4, size=quarter).astype(dtype)
    unit = rng.uniform(-1.01, 1.01, size=quarter).astype(dtype)
    edge = rng.uniform(-105, 90, size=n - 3 * quarter - specials.size).astype(dtype)
    values = np.concatenate([specials, random_bits, small, unit, edge])
    rng.shuffle(values)
    return values


def _cases(spec, level: str):
    """(label, case) for the first type assignment of each float primary type the level allows."""
    primary = primary_input(spec)
    seen = set()
    for types in valid_type_assignments(spec, level):
        kind = types.get(primary)
        if kind not in ("FLOAT32", "FLOAT16") or kind in seen:
            continue
        seen.add(kind)
        present = {t: v for t, v in types.items() if v is not None}
        inputs = [f.name for f in spec.tensor_fields if f.role == "input" and f.name in present]
        lo, _ = dim_range(spec, level, list(present))
        sizes = [1] * (max(lo, 1) - 1) + [ELEMENTS]
        rng = np.random.default_rng([SEED, len(spec.name), sum(map(ord, spec.name)), len(seen)])
        values = {}
        for name in inputs:
            dtype = spec.catalog.dtype(present[name])
            if dtype.is_float:
                values[name] = _values(np.dtype(dtype.numpy), rng, ELEMENTS).reshape(sizes)
            else:  # an integer operand (a training step): small counts
                values[name] = rng.integers(0, 100, size=ELEMENTS).reshape(sizes)
        yield f"{spec.name}/{kind}", case_from_arrays(spec, level, present, values, sizes=sizes)


GROUP = 4  # elements reduced per output element by the REDUCE cases


def _reduce_cases(specs, level: str):
    """REDUCE's logarithmic reductions (NumPy's float64 log, exp and logaddexp differ between SIMD
    paths), over groups of GROUP values along the last axis."""
    spec = specs.operators.get("REDUCE")
    if spec is None:
        return
    rng = np.random.default_rng([SEED, 1])
    groups = ELEMENTS // GROUP
    for function in ("LOG_SUM", "LOG_SUM_EXP"):
        for kind in ("FLOAT32", "FLOAT16"):
            dtype = np.dtype(spec.catalog.dtype(kind).numpy)
            x = np.abs(_values(dtype, rng, groups * GROUP)) if function == "LOG_SUM" else _values(dtype, rng, groups * GROUP)
            layouts = {"InputTensor": TensorDesc(kind, [groups, GROUP]), "OutputTensor": TensorDesc(kind, [groups, 1])}
            case = case_from_arrays(spec, level, {"InputTensor": kind, "OutputTensor": kind},
                                    {"InputTensor": x.reshape(groups, GROUP)}, layouts=layouts,
                                    attributes={"Function": spec.field("Function").enum[function], "Axes": [1]})
            yield f"REDUCE-{function}/{kind}", spec, case


def reference_bits() -> dict[str, np.ndarray]:
    specs = load_specs()
    level = specs.catalog.newest_level.name
    out: dict[str, np.ndarray] = {}
    cases = [(label, spec, case) for spec in transcendental_operators(specs) for label, case in _cases(spec, level)]
    for label, spec, case in cases + list(_reduce_cases(specs, level)):
        result = expected_for(spec, case).outputs[spec.formula.output]
        out[label] = np.ascontiguousarray(result).reshape(-1)
        for name, tensor in case.descriptor.tensors.items():
            if name in case.inputs and tensor is not None:
                out[f"{label}/input/{name}"] = np.frombuffer(case.inputs[name], dtype=np.uint8)
    return out


def main(argv: list[str]) -> int:
    bits = reference_bits()
    np.savez(argv[0], **{k.replace("/", "|"): v for k, v in bits.items()})
    digests = {k: hashlib.sha256(v.tobytes()).hexdigest() for k, v in bits.items() if "/input/" not in k}
    print(json.dumps(digests, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
