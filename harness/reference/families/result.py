"""What a family plug-in returns (FamilyResult) and the helpers every arithmetic plug-in shares
(the bound variables, the bound's evaluation, fp32 denormal flushing). Apart from the registry
(harness.reference.families), so that a plug-in imports these without importing the registry
that imports it."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from harness.model.descriptor import Descriptor
from harness.spec.catalog import DataType
from harness.spec.context import formula_context
from harness.spec.expr import EvalContext, Formula
from harness.spec.families import FamilyDeclaration
from harness.spec.model import OperatorSpec


@dataclass
class FamilyResult:
    outputs: dict[str, np.ndarray]
    unspecified: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # output -> rule id -> mask
    alternatives: dict[str, list[tuple[str, np.ndarray]]] = field(default_factory=dict)  # output -> (liberty id, values)
    summaries: dict[str, np.ndarray] = field(default_factory=dict)  # output-shaped values shown in failure reports
    # output -> (exact float64 value, bound): a result within `bound` of the exact value is legal
    # (the spec's error bound of an arithmetic reduction; inf accepts every result)
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # output -> the spec expression's variables per output element, each (values, half-width): the
    # output is the expression over them, and a conforming device's output is the expression under
    # the precision model with each variable anywhere in [value - half-width, value + half-width]
    # (matmul: the dot product `ab` within its bound; Alpha, Beta, C and a fused activation are
    # the element-wise model's as for any element-wise operator)
    epilogue: dict[str, dict[str, tuple[np.ndarray, np.ndarray | None]]] = field(default_factory=dict)
    # output -> legal alternatives of the epilogue's computed values: (liberty id, {variable: values}),
    # each judged like the values themselves (matmul: the dot product over fp32-flushed factors)
    epilogue_alternatives: dict[str, list[tuple[str, dict[str, np.ndarray]]]] = field(default_factory=dict)
    contexts: dict[str, Any] = field(default_factory=dict)  # output -> the EvalContext of its epilogue (output-shaped)


@dataclass(frozen=True)
class OneInput:
    """What a family of one input and one output (a reduction, a scan, a normalisation) reads first:
    the formula's input variable and its array, the output's name and data type."""

    var: str
    x: np.ndarray
    out_name: str
    out_type: DataType


def one_input(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> OneInput:
    """The spec's first formula input and its output, for a case's descriptor and inputs."""
    var = next(iter(spec.formula.inputs))
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None  # a valid case describes its output
    return OneInput(var, np.asarray(inputs[var]), out_name, spec.catalog.dtype(out_desc.data_type))


def rule_hits(spec: OperatorSpec, descriptor: Descriptor, variables: dict[str, np.ndarray], out_type: DataType,
              shape: tuple[int, ...], extra: dict[str, np.ndarray] | None = None) -> Iterator[tuple[str, np.ndarray]]:
    """Each of the spec's element-wise `unspecified` rules that concerns the output in `out_type`,
    evaluated over `variables` (a family's grouped elements, and `extra` names such as a scan's
    `out_of_range`) and broadcast to `shape`: (rule id, where it holds). A family lifts these to
    the output elements the held elements feed."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, variables, descriptor.attributes)
    ctx.variables.update(extra or {})
    for rule in spec.unspecified:
        if rule.concerns(spec.formula.output, out_type.name):
            yield rule.id, np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), shape)


def output_rule_masks(spec: OperatorSpec, out_name: str, out_type: DataType, ctx: EvalContext,
                      shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The spec's `unspecified` rules that concern `out_name` in `out_type`, each evaluated
    element-wise over the output's own elements (`ctx` holds the family's per-element variables,
    such as a dot product or a normalised value) and broadcast to `shape`; only the rules that
    hold somewhere. For the families whose rules read the output's elements, not the input's."""
    masks = {}
    for rule in spec.unspecified:
        if rule.concerns(out_name, out_type.name):
            with np.errstate(all="ignore"):
                hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), shape)
            if hit.any():
                masks[rule.id] = hit
    return masks


F32_SMALLEST_NORMAL = 2.0 ** -126


def type_bound_variables(out_numpy: np.dtype) -> dict[str, np.float64]:
    """The bound variables every arithmetic family shares (the family's bound_variables (harness.spec.families)):
    one faithful step `eps` and the range of the output type, FLOAT32's smallest normal `tiny`
    (what D3D may flush), and `inf`."""
    info = np.finfo(out_numpy)
    return {"eps": np.float64(info.eps), "tiny": np.float64(F32_SMALLEST_NORMAL), "tiny_out": np.float64(info.tiny),
            "max_out": np.float64(info.max), "inf": np.float64(np.inf)}


def evaluate_bound(atol: Formula, variables: dict[str, object], shape: tuple[int, ...],
                   nan_in: np.ndarray | np.bool_ | None) -> np.ndarray:
    """A spec's bound formula per output element (float64, `shape`). An element whose inputs hold a
    NaN (`nan_in`) gets no slack: IEEE propagates it through every arithmetic step; a bound that is
    itself NaN (inf * 0 in the formula) is no slack either."""
    with np.errstate(all="ignore"):
        bound = np.broadcast_to(np.asarray(atol.evaluate(EvalContext(variables=variables)), dtype=np.float64), shape)
    if nan_in is not None:
        bound = np.where(nan_in, 0.0, bound)
    return np.where(np.isnan(bound), 0.0, bound)


def flush_f32_denormals(x: np.ndarray) -> np.ndarray | None:
    """`x` with its fp32 denormals flushed to zeros of their sign (what a D3D device may read), or
    None when there is none to flush (the one definition of a denormal: expr.is_f32_denormal)."""
    from harness.spec.expr import is_f32_denormal
    if x.dtype != np.float32:
        return None
    denormal = is_f32_denormal(x)
    if not denormal.any():
        return None
    return np.where(denormal, np.copysign(np.float32(0), x), x).astype(np.float32)


EDGE = 0.999  # where a legal device lands within a bound: the rest of it absorbs what it did not model


def toward_the_bound(exact: np.ndarray, atol: np.ndarray, dtype: np.dtype, sign: float,
                     reserve: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(`exact` moved by EDGE of `atol`, less `reserve`, the `sign` way, in `dtype`; where it moves).

    The worst legal device of the accumulating families: as far from the exact value as the
    spec's bound allows, so a bound that is too tight fails it. The move is rounded towards the
    exact value when `dtype` would carry it past the room; `reserve` keeps room for what the
    device's inputs lost to fp32 flushes (the judge measures from the unflushed inputs). An
    infinite or empty room, or a non-finite exact value, does not move (False)."""
    with np.errstate(all="ignore"):
        room = np.maximum(EDGE * atol - reserve, 0.0)
        usable = np.isfinite(atol) & (room > 0) & np.isfinite(exact)
        moved = np.where(usable, exact + sign * room, exact).astype(dtype)
        beyond = usable & ~(np.abs(moved.astype(np.float64) - exact) <= room)
        moved = np.where(beyond, np.nextafter(moved, exact.astype(dtype)), moved)
    return moved.astype(dtype), usable


def every_bound_toward_its_edge(result: FamilyResult, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A family result's outputs with every bounded output moved toward the edge of its bound
    (toward_the_bound), all up or all down for the case (at random): the worst legal device of a
    family whose outputs each carry their own bound (the recurrent ones, mean_variance's gradients)."""
    sign = 1.0 if rng.random() < 0.5 else -1.0
    outputs = dict(result.outputs)
    for name, (exact, atol) in result.bounds.items():
        dtype = outputs[name].dtype
        moved, usable = toward_the_bound(exact, atol, dtype, sign)
        outputs[name] = np.where(usable, moved, outputs[name]).astype(dtype)
    return outputs


Compute = Callable[[OperatorSpec, Descriptor, dict[str, np.ndarray]], FamilyResult]
Device = Callable[[OperatorSpec, Descriptor, dict[str, np.ndarray], np.random.Generator], dict[str, np.ndarray]]


@dataclass(frozen=True)
class FamilyPlugin:
    """One family's reference, declared in one place: the module that computes it ends with
    `PLUGIN = FamilyPlugin(DECLARATIONS[name], compute, device)`, and the registry
    (harness.reference.families) collects every module's PLUGIN. `declaration` is what a spec may
    say of the family (harness.spec.families); `device`, where set, gives the outputs of one
    conforming device whose results may legally differ from the exact ones by more than flushed
    inputs (an arithmetic reduction's order and rounding), for the worst legal backend."""

    declaration: FamilyDeclaration
    compute: Compute
    device: Device | None = None

    @property
    def name(self) -> str:
        return self.declaration.name


def family_input(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], key: str) -> np.ndarray | None:
    """The input tensor the family parameter `key` names, as float64 (None when the spec names none
    or the descriptor leaves it out): how the recurrent and attention plug-ins read their operands."""
    family = spec.formula.family
    assert family is not None
    tensor = family.params.get(key)
    if tensor is None or descriptor.tensors.get(tensor) is None:
        return None
    var = next(v for v, t in spec.formula.inputs.items() if t == tensor)
    with np.errstate(invalid="ignore"):
        return np.asarray(inputs[var]).astype(np.float64)
