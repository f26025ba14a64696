"""Deliberately broken backends, to prove the harness catches real bugs.

FlushNegZeroBackend: the reference, except that SIGN's -0.0/+0.0 results come back as -0.0 and
HARD_SIGMOID outputs are off by 4 ULP. AcceptEverythingBackend: claims to validate descriptors
but accepts invalid ones. CrashingBackend: raises on every run.
"""
from __future__ import annotations

import numpy as np

from harness.model.backend import Capabilities, Outputs
from backends.numpy_reference import NumpyReferenceBackend
from harness.generate.cases import output_values
from harness.model.layout import write_logical
from harness.reference.evaluate import compute_outputs


class FlushNegZeroBackend(NumpyReferenceBackend):
    name = "broken-negzero"

    def run(self, case):
        result = super().run(case)
        if result.kind != "outputs":
            return result
        spec = self.specs.operator(case.operator)
        out = spec.formula.output
        values = output_values(spec, case, result.buffers)[out].copy()
        if values.dtype.kind == "f":
            if case.operator == "ELEMENT_WISE_SIGN":
                values[values == 0] = -0.0
            elif case.operator == "ACTIVATION_HARD_SIGMOID":
                bits = values.view(f"uint{values.dtype.itemsize * 8}")
                finite = np.isfinite(values) & (values > 0.01)
                bits[finite] += 4
        buffer = bytearray(result.buffers[out])
        write_logical(buffer, case.descriptor.tensors[out], values)
        return Outputs({out: bytes(buffer)})


class AcceptEverythingBackend(NumpyReferenceBackend):
    name = "broken-accepts"

    def capabilities(self):
        return Capabilities(validates_descriptors=True)

    def run(self, case):
        spec = self.specs.operator(case.operator)
        try:
            result, _, _ = compute_outputs(spec, case.descriptor, case.inputs)
        except Exception:  # noqa: BLE001 - malformed descriptors: return zeros
            return Outputs({spec.formula.output: b"\0" * 4})
        return Outputs({spec.formula.output: result.tobytes()})


class CrashingBackend(NumpyReferenceBackend):
    name = "broken-crash"

    def run(self, case):
        raise RuntimeError("segfault in the driver (simulated)")


class CrashEveryThirdBackend(NumpyReferenceBackend):
    """The reference, except that every third case raises (a driver crash in the middle of a cell)."""

    name = "broken-every-third"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0

    def run(self, case):
        self.calls += 1
        if self.calls % 3 == 0:
            raise RuntimeError(f"driver crash on call {self.calls} (simulated)")
        return super().run(case)


class KillsItsWorkerBackend(NumpyReferenceBackend):
    """The reference, except that a UINT8 case kills the whole process running it (SIGKILL), as a
    driver that takes the test process down would: the pytest-xdist worker dies mid-cell."""

    name = "broken-kills-worker"

    def run(self, case):
        import os
        import signal
        t = next((d for d in case.descriptor.tensors.values() if d is not None), None)
        if t is not None and t.data_type == "UINT8":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run(case)



class HangsInTwoStagesBackend(NumpyReferenceBackend):
    """The reference, except that an INT16 case hangs: in initialize the first time it is sent, in
    execute the second (what an NVIDIA H200 did to a known hang's probe when the hang probes ran
    together at the end of a run)."""

    name = "broken-hangs-twice"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent: dict[str, int] = {}

    def capabilities(self):  # a device: its failures are run again (the reference's are not)
        import dataclasses
        return dataclasses.replace(super().capabilities(), is_reference=False)

    def run(self, case):
        from harness.model.backend import Crashed
        t = next((d for d in case.descriptor.tensors.values() if d is not None), None)
        if t is None or t.data_type != "INT16":
            return super().run(case)
        self.sent[case.case_id] = self.sent.get(case.case_id, 0) + 1
        stage = "initialize" if self.sent[case.case_id] == 1 else "execute"
        return Crashed(f"runner did not answer within 10 s (hang in {stage} 1/1, 10.0 s after it began) (simulated)")

# One liberty beyond the D3D precision model each (see backends/worst_legal.py): every one must fail.
from backends.worst_legal import WorstLegalBackend  # noqa: E402


class Division3UlpBackend(WorstLegalBackend):
    name = "broken-division-3ulp"
    beyond = "division_3ulp"


class Add2UlpBackend(WorstLegalBackend):
    name = "broken-add-2ulp"
    beyond = "add_2ulp"


class Fp16DenormalFlushBackend(WorstLegalBackend):
    name = "broken-fp16-denormal-flush"
    beyond = "fp16_denormal_flush"


class NanDroppedBackend(WorstLegalBackend):
    name = "broken-nan-dropped"
    beyond = "nan_dropped"
