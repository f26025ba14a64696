"""The NumPy reference backend: the spec formulas, evaluated exactly, with the spec's validator.

It is what every other backend is diffed against. It rejects invalid descriptors with the
validator's rule ids, and writes outputs through the output strides into a buffer of the
output's TotalTensorSizeInBytes (an in-place output writes into the aliased input's buffer).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from harness import __version__
from harness.model.descriptor import Case
from harness.model.layout import output_buffers
from harness.reference.evaluate import expected_for
from harness.spec.load import load_specs
from harness.spec.model import OperatorSpec, SpecSet
from harness.model.validator import spec_for_case

from harness.model.backend import Capabilities, Outputs, RunResult


class NumpyReferenceBackend:
    name = "numpy"
    expectations_dir = Path(__file__).resolve().parent / "expectations"  # known divergences, per backend

    def __init__(self, specs: SpecSet | None = None, **_: object) -> None:
        self.specs = specs or load_specs()

    def version(self) -> str:
        return f"dmlconform-reference {__version__} (numpy {np.__version__})"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def capabilities(self) -> Capabilities:
        return Capabilities(validates_descriptors=True, is_reference=True, notes=["the reference: spec formulas and the spec validator"])

    def run(self, case: Case) -> RunResult:
        spec = spec_for_case(self.specs, case)
        if not isinstance(spec, OperatorSpec):
            return spec  # no spec, or an invalid descriptor: rejected as DirectML would
        outputs = expected_for(spec, case).outputs  # computed once per case, shared with the diff
        return Outputs(output_buffers(spec, case, outputs if len(outputs) > 1 else outputs[spec.formula.output]))

    def close(self) -> None:
        pass
