"""Family references: one plug-in per family of index-space operators, chosen by the spec's
`formula.family.name` and parameterised entirely by the spec (harness.spec.families declares
what each takes). A plug-in maps a descriptor and its input arrays to a FamilyResult: the exact
outputs, the output elements the docs leave open (the spec's element-wise `unspecified` rules,
lifted to the output elements whose inputs meet them), and the other results a device may
legally give under the precision model, each with the liberty it takes.
"""
from __future__ import annotations

from harness.reference.families import data_movement, gather, matmul, reduce, sort, window
from harness.reference.families.result import Compute, Device

# One entry per family plug-in: its computation, and its legal device where its results may legally
# differ from the exact ones by more than flushed inputs (harness.spec.families declares what each
# family's spec says; test_families checks that every declared family has exactly one plug-in here).
PLUGINS: dict[str, tuple[Compute, Device | None]] = {
    "reduce": (reduce.compute, reduce.legal_device),
    "data_movement": (data_movement.compute, None),
    "sort": (sort.compute, None),
    "matmul": (matmul.compute, None),
    "gather": (gather.compute, None),
    "window": (window.compute, None),
}


def family_compute(name: str) -> Compute:
    """The plug-in of family `name` (the spec loader has checked the name)."""
    return PLUGINS[name][0]


def family_device(name: str) -> Device | None:
    """The plug-in's legal device, where its results may legally differ from the exact ones by more
    than flushed inputs (an arithmetic reduction's order and rounding): the outputs one conforming
    device could give, for the worst legal backend. None: the exact result over the inputs as the
    device sees them is the one to give."""
    return PLUGINS[name][1]
