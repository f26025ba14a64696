"""Small helpers shared by the harness tests."""
from __future__ import annotations

import numpy as np

from backends.numpy_reference import NumpyReferenceBackend
from harness.generate.cases import case_from_arrays, output_values
from harness.spec.operator import load_specs

SPECS = load_specs()
REFERENCE = NumpyReferenceBackend(SPECS)


def run_reference(op: str, types: dict, values: dict, level: str = "6.4", **kw) -> np.ndarray:
    """Run the reference on packed tensors and return the output's logical values."""
    spec = SPECS.operator(op)
    case = case_from_arrays(spec, level, types, {k: np.asarray(v) for k, v in values.items()}, **kw)
    result = REFERENCE.run(case)
    assert result.kind == "outputs", result
    return output_values(spec, case, result.buffers)[spec.formula.output]


def bits(values, dtype) -> np.ndarray:
    arr = np.asarray(values, dtype=dtype)
    return arr.view(f"uint{arr.dtype.itemsize * 8}")


def from_bits(patterns, dtype) -> np.ndarray:
    width = np.dtype(dtype).itemsize * 8
    return np.asarray(patterns, dtype=f"uint{width}").view(dtype)


def directml_or_skip(**options):
    """A started DirectML backend, or a skip with the reason; a failure instead when the stack is
    required (DMLCONFORM_REQUIRE_DIRECTML=1, as in .ci/run)."""
    import os

    import pytest

    from backends.directml import DirectMLBackend
    backend = DirectMLBackend(SPECS, **options)
    ok, reason = backend.available()
    if not ok:
        backend.close()
        if os.environ.get("DMLCONFORM_REQUIRE_DIRECTML") == "1":
            pytest.fail(f"DirectML stack required but not available: {reason}")
        pytest.skip(f"DirectML stack not available: {reason}")
    return backend
