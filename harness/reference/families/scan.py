"""The scan family: each output element combines the input elements up to it along one axis (a
running sum or product), in the traversal order the spec's `reverse` expression picks, with the
element itself (inclusive) or without it (`exclusive`).

An output element is therefore a reduction over its prefix, and this plug-in computes it as one:
each line along the axis becomes a square of groups, group k holding the line's first k + 1 (or
k) elements and the combine's identity elsewhere (-0 for a sum, which leaves every sum's sign as
it is, 1 for a product), and the reduce family's exact combine, bound variables and legal device
(harness.reference.families.reduce) run over those groups. Only `N`, the number of elements a
group really holds, is the scan's own: the spec's bounds (the same formulas as the reduce family's sum
and multiply bounds) grow with the position along the axis. An empty group (the first element of an
exclusive scan) is the identity: +0 or 1.

Integers are exact (Python integers) and written wrapped to the output type; `out_of_range` (an
element variable) tells the spec's unspecified rules where an exact running value does not fit.
The spec's element-wise rules are evaluated over each group's members and lifted to the output
element whose group holds them. fp32 denormal inputs may be flushed (fp32_input_flush, as in
every family).
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.reduce import _bound_variables, _combine, _sequential
from harness.reference.families.result import FamilyPlugin, FamilyResult, evaluate_bound, flush_f32_denormals, one_input, rule_hits
from harness.spec.catalog import DataType
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec


class _Scan:
    """One descriptor's scan: the axis, the traversal, the combine and each group's members."""

    def __init__(self, spec: OperatorSpec, descriptor: Descriptor, x: np.ndarray) -> None:
        family = spec.formula.family
        assert family is not None
        names, facts = expression_scope(spec, descriptor)
        self.axis = int(names[family.params["axis"]])
        reverse, exclusive = family.expression("reverse"), family.expression("exclusive")
        self.reverse = bool(reverse.evaluate(names, facts)) if reverse is not None else False
        self.exclusive = bool(exclusive.evaluate(names, facts)) if exclusive is not None else False
        self.combine = family.choice("combine", names)
        n = x.shape[self.axis]
        k, j = np.arange(n)[:, None], np.arange(n)[None, :]
        self.members = (j < k) if self.exclusive else (j <= k)  # group k (rows) holds line element j (columns)
        self.count = self.members.sum(axis=1).astype(np.float64)  # N per position along the axis

    def lines(self, x: np.ndarray) -> np.ndarray:
        """`x` with the axis last, in traversal order."""
        moved = np.moveaxis(x, self.axis, -1)
        return moved[..., ::-1] if self.reverse else moved

    def back(self, per_position: np.ndarray) -> np.ndarray:
        """Per-position values (axis last, traversal order) back in the input's layout."""
        ordered = per_position[..., ::-1] if self.reverse else per_position
        return np.ascontiguousarray(np.moveaxis(ordered, -1, self.axis))

    def groups(self, x: np.ndarray) -> np.ndarray:
        """(..., position, member): each position's group, the identity where it holds no element."""
        line = self.lines(x)
        if x.dtype.kind == "f":
            identity = x.dtype.type(-0.0 if self.combine == "sum" else 1.0)
        else:
            identity = x.dtype.type(0 if self.combine == "sum" else 1)
        return np.where(self.members, line[..., None, :], identity)

    def empty_is_identity(self, values: np.ndarray) -> np.ndarray:
        """An empty group's result (an exclusive scan's first element) is +0 or 1, never -0."""
        if self.count.min() > 0:
            return values
        identity = values.dtype.type(0 if self.combine == "sum" else 1)
        return np.where(self.count == 0, identity, values).astype(values.dtype)


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, var: str, scan: _Scan, grouped: np.ndarray,
                 out_type: DataType, out_of_range: np.ndarray) -> dict[str, np.ndarray]:
    """The spec's rules over each group's members (and its `out_of_range`), lifted to the group's
    output element."""
    extra = {"out_of_range": np.broadcast_to(out_of_range[..., None], grouped.shape)}
    hits = ((rule, hit & scan.members) for rule, hit in rule_hits(spec, descriptor, {var: grouped}, out_type, grouped.shape, extra))
    return {rule: scan.back(np.asarray(hit.any(axis=-1))) for rule, hit in hits if hit.any()}


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    call = one_input(spec, descriptor, inputs)
    var, x, out_name, out_type = call.var, call.x, call.out_name, call.out_type
    scan = _Scan(spec, descriptor, x)
    grouped = scan.groups(x)
    combined = _combine(grouped, scan.combine, False, out_type)
    result = FamilyResult({out_name: scan.back(scan.empty_is_identity(combined.output))})
    bound = family.bound(scan.combine)
    if bound is not None and combined.exact is not None and out_type.is_float:
        with np.errstate(invalid="ignore"):
            grouped64 = grouped.astype(np.float64)
        variables = _bound_variables(grouped64, scan.combine, combined, out_type)
        variables["N"] = scan.count  # the elements the group really holds, not the padded square's side
        exact = np.where(scan.count == 0, 0.0 if scan.combine == "sum" else 1.0, combined.exact)
        variables["exact"] = exact
        atol = evaluate_bound(bound.atol, variables, combined.output.shape, np.isnan(grouped64).any(axis=-1))
        result.bounds[out_name] = (scan.back(exact), scan.back(atol))
        result.summaries["exact"] = scan.back(exact)
        result.summaries["bound"] = scan.back(atol)
    outside = combined.out_of_range if combined.out_of_range is not None else np.zeros(combined.output.shape, dtype=bool)
    result.unspecified[out_name] = _unspecified(spec, descriptor, var, scan, grouped, out_type, outside.astype(np.int64))
    flushed = flush_f32_denormals(x)
    if flushed is not None:
        alt = _combine(scan.groups(flushed), scan.combine, False, out_type).output
        result.alternatives[out_name] = [("fp32_input_flush", scan.back(scan.empty_is_identity(alt)))]
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The outputs of one legal device (the worst legal backend): each group of a float scan
    accumulated in a random order, one rounding per step in the output's type (or FLOAT32 for a
    FLOAT16 output, at random), as the reduce family's device does; integers are exact."""
    call = one_input(spec, descriptor, inputs)
    x, out_name, out_type = call.x, call.out_name, call.out_type
    exact = compute(spec, descriptor, inputs).outputs
    if not out_type.is_float or x.dtype.kind != "f":
        return exact
    scan = _Scan(spec, descriptor, x)
    compute_type = np.float32 if out_type.numpy == np.float16 and rng.random() < 0.5 else out_type.numpy
    values = _sequential(scan.groups(x).astype(compute_type), scan.combine, rng, np.dtype(compute_type))
    with np.errstate(all="ignore"):
        return {out_name: scan.back(scan.empty_is_identity(values.astype(out_type.numpy)))}


PLUGIN = FamilyPlugin(DECLARATIONS["scan"], compute, legal_device)
