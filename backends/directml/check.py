"""One tiny case through the whole DirectML stack (used by scripts/setup_directml.sh)."""
from __future__ import annotations

import sys

import numpy as np

from harness.generate.cases import case_from_arrays, output_values
from harness.spec.operator import load_specs

from backends.directml import DirectMLBackend


def main() -> int:
    specs = load_specs()
    backend = DirectMLBackend(specs)
    ok, reason = backend.available()
    if not ok:
        print(f"check: {reason}", file=sys.stderr)
        return 1
    spec = specs.operator("ELEMENT_WISE_BIT_NOT")
    case = case_from_arrays(spec, backend.max_level(), {"InputTensor": "UINT8", "OutputTensor": "UINT8"},
                            {"InputTensor": np.array([[0, 128], [42, 255]], np.uint8)})
    result = backend.run(case)
    version = backend.version()
    backend.close()
    if result.kind != "outputs":
        print(f"check: BIT_NOT did not run: {result}", file=sys.stderr)
        return 1
    got = output_values(spec, case, result.buffers)["OutputTensor"].tolist()
    print(f"check: {version}: BIT_NOT([[0,128],[42,255]]) = {got}")
    return 0 if got == [[255, 127], [213, 0]] else 1


if __name__ == "__main__":
    sys.exit(main())
