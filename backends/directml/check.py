"""One tiny case through the whole DirectML stack (used by scripts/setup_directml.sh, by the pack's
module trace, and on a GPU machine to see which device runs).

`python -m backends.directml.check [--directml-vulkan auto|lavapipe|ICD.json] [--directml-stack DIR]
[--directml-dll VERSION]` prints the DirectML version, the adapter and the Vulkan driver, and
BIT_NOT of four bytes; exit 0 when the result is right.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from harness.generate.cases import case_from_arrays, output_values
from harness.model.backend import Outputs
from harness.model.descriptor import Case
from harness.spec.load import load_specs
from harness.spec.model import OperatorSpec, SpecSet

from backends.directml import DirectMLBackend

EXPECTED = [[255, 127], [213, 0]]


def bit_not_case(specs: SpecSet, level: str) -> tuple[OperatorSpec, Case]:
    """BIT_NOT of [[0,128],[42,255]] as UINT8: every supported device must give EXPECTED."""
    spec = specs.operator("ELEMENT_WISE_BIT_NOT")
    case = case_from_arrays(spec, level, {"InputTensor": "UINT8", "OutputTensor": "UINT8"},
                            {"InputTensor": np.array([[0, 128], [42, 255]], np.uint8)})
    return spec, case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backends.directml.check")
    parser.add_argument("--directml-vulkan", default=None, help="auto (default), lavapipe, or a Vulkan ICD json")
    parser.add_argument("--directml-stack", default=None, help="an unpacked portable stack (default: the set-up one)")
    parser.add_argument("--directml-dll", default=None, help="DirectML.dll path or version")
    args = parser.parse_args(argv)
    specs = load_specs()
    backend = DirectMLBackend(specs, dll=args.directml_dll, vulkan=args.directml_vulkan, stack=args.directml_stack)
    ok, reason = backend.available()
    if not ok:
        print(f"check: {reason}", file=sys.stderr)
        return 1
    spec, case = bit_not_case(specs, backend.max_level())
    result = backend.run(case)
    version = backend.version()
    backend.close()
    if result.kind != "outputs":
        print(f"check: BIT_NOT did not run: {result}", file=sys.stderr)
        return 1
    assert isinstance(result, Outputs)  # the only result of kind "outputs"
    got = output_values(spec, case, result.buffers)["OutputTensor"].tolist()
    print(f"check: {version}: BIT_NOT([[0,128],[42,255]]) = {got}")
    return 0 if got == EXPECTED else 1


if __name__ == "__main__":
    sys.exit(main())
