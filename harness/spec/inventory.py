"""The operator inventory: each shipped spec by family, with what runs it, as the README's table.

The family is read from the spec, not kept in a list: an index-space family plug-in
(`formula.family`) names its own; otherwise the operator's name and inputs say it (ACTIVATION_*,
the quantization operators, element-wise with one input or several). `dmlconform spec table`
prints the table; a test keeps the README's copy current."""
from __future__ import annotations

from dataclasses import dataclass

from harness.spec.model import OperatorSpec, SpecSet

_FAMILY_TITLES = {"matmul": "matrix multiplication", "window": "window (convolution, pooling)", "reduce": "reduction",
                  "gather": "gather", "sort": "sort (top-k)", "data_movement": "data movement",
                  "normalize": "axis-wise normalization", "gradient": "training gradient (adjoint)"}
_ORDER = ["element-wise, one input", "element-wise, several inputs", "activation", "quantization",
          "element-wise, coordinate-dependent", *_FAMILY_TITLES.values(), "other"]


def family_of(spec: OperatorSpec) -> str:
    """The inventory family of an operator (see the module docstring)."""
    if spec.formula.family is not None:
        return _FAMILY_TITLES.get(spec.formula.family.name, spec.formula.family.name)
    if spec.name.startswith("ACTIVATION_"):
        return "activation"
    if "QUANTIZ" in spec.name:
        return "quantization"
    if not spec.formula.inputs:
        return "element-wise, coordinate-dependent"
    return "element-wise, one input" if len(spec.formula.inputs) == 1 else "element-wise, several inputs"


@dataclass(frozen=True)
class FamilyRow:
    family: str
    operators: tuple[str, ...]
    onnx_mapped: tuple[str, ...]


def family_rows(specs: SpecSet, onnx_mapped: set[str]) -> list[FamilyRow]:
    by: dict[str, list[str]] = {}
    for name in sorted(specs.operators):
        by.setdefault(family_of(specs.operators[name]), []).append(name)
    order = {f: i for i, f in enumerate(_ORDER)}
    return [FamilyRow(f, tuple(ops), tuple(o for o in ops if o in onnx_mapped))
            for f, ops in sorted(by.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))]


def _short(name: str) -> str:
    return name.removeprefix("ELEMENT_WISE_").removeprefix("ACTIVATION_")


def inventory_markdown(specs: SpecSet, onnx_mapped: set[str]) -> str:
    """The README's operator table: per family, how many operators, which, and how many of them
    ONNX Runtime maps (the others are reported unsupported there, with the reason). numpy (the
    reference), the worst-legal device and DirectML run every one."""
    rows = family_rows(specs, onnx_mapped)
    total = sum(len(r.operators) for r in rows)
    mapped = sum(len(r.onnx_mapped) for r in rows)
    lines = ["| family | operators | ONNX Runtime maps | which (ELEMENT_WISE_ and ACTIVATION_ dropped; *: no ONNX Runtime mapping) |",
             "| --- | --- | --- | --- |"]
    for r in rows:
        names = ", ".join(_short(o) + ("" if o in r.onnx_mapped else "*") for o in r.operators)
        lines.append(f"| {r.family} | {len(r.operators)} | {len(r.onnx_mapped)} | {names} |")
    lines.append(f"| **all** | **{total}** | **{mapped}** | numpy, worst-legal and DirectML run every operator |")
    return "\n".join(lines)
