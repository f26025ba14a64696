"""Per-backend expectation files: known, explained divergences, each with a probe case that shows
whether it still reproduces (a probe that no longer diverges makes the expectation stale)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from harness.model.descriptor import Case, Descriptor
    from harness.spec.expr import EvalContext
    from harness.spec.model import OperatorSpec
    from harness.reference.evaluate import Expected
    from harness.spec.model import SpecSet

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.judge.diff import DiffResult
from harness.judge.status import Status
from harness.spec.expr import Formula, FormulaError, is_f32_denormal, parse_formula
from harness.spec.shape_expr import ShapeExpr, parse_shape_expr
from harness.spec.source import SpecError, load_yaml

EXPECTED_DIVERGENCE = Status.EXPECTED_DIVERGENCE


@dataclass
class Expectation:
    id: str
    operator: str
    data_types: tuple[str, ...]
    when: Formula
    why: str
    input_types: tuple[str, ...] | None = None  # primary input types it applies to (None: all)
    status: str = "mismatch"                    # the classification it explains
    rule: str | None = None                     # for invalid cases: the rule the case breaks
    reason_contains: str | None = None          # for status expectations: text the backend's reason holds
    attributes_present: tuple[str, ...] = ()    # for status expectations: attributes the descriptor sets
    tensor_types: tuple[str, ...] = ()          # for status expectations: some tensor has one of these types
    probe: dict | None = None                   # a fixed case that shows the divergence (staleness is judged on it)
    descriptor_when: ShapeExpr | None = None    # for mismatches: the descriptors it applies to (a shape expression)
    devices: tuple[str, ...] = ()               # where it was seen: text of the backend's version (its adapter); () every device


@dataclass
class ExpectationSet:
    backend: str
    items: list[Expectation] = field(default_factory=list)

    def on_device(self, description: str) -> "ExpectationSet":
        """The expectations that hold on the device `description` names (a backend's version():
        DirectML's names its adapter, 'llvmpipe' or 'NVIDIA H200'): those without `devices`, and
        those one of whose `devices` it contains (case-insensitive). A divergence seen only on
        lavapipe explains nothing on a GPU and is not probed there: were it to show, it would be news."""
        text = description.lower()
        return ExpectationSet(self.backend, [i for i in self.items
                                             if not i.devices or any(d.lower() in text for d in i.devices)])

    def for_backend(self, version: Callable[[], str]) -> "ExpectationSet":
        """on_device(version()), asking `version` (which may start a device) only where some
        expectation names devices."""
        return self.on_device(version()) if any(item.devices for item in self.items) else self

    def explain_status(self, operator: str, status: str, rule: str | None, reason: str,
                       data_type: str | None = None, attributes: dict | None = None,
                       tensor_types: tuple[str, ...] | None = None,
                       descriptor_holds: Callable[[ShapeExpr], bool] | None = None) -> Expectation | None:
        """The expectation that explains a whole-case outcome (a crash, a wrong rejection), if one
        does; one that names data_types explains cases of those (primary input) types only, one
        that names tensor_types cases where some tensor (input or output) has one of them, one
        with a descriptor_when the cases whose descriptor it holds for (`descriptor_holds`
        evaluates it; without one such an entry explains nothing)."""
        for item in self.items:
            if item.status == "mismatch" or item.operator != operator:
                continue
            if item.descriptor_when is not None and (descriptor_holds is None or not descriptor_holds(item.descriptor_when)):
                continue
            if item.data_types and data_type is not None and data_type not in item.data_types:
                continue
            if item.tensor_types and not set(item.tensor_types) & set(tensor_types or ()):
                continue
            if item.attributes_present and not all(a in (attributes or {}) for a in item.attributes_present):
                continue
            if item.rule is not None and item.rule != rule:
                continue
            if item.status == status and (item.reason_contains is None or item.reason_contains in reason):
                return item
        return None

    def explain(self, operator: str, data_type: str | None, diff: DiffResult, input_type: str | None = None) -> Expectation | None:
        """The expectation that explains every mismatching element of `diff`, if one does; else,
        when several together do (one element hit by one known divergence, another by a second:
        a random case of POW drew a denormal base beside a huge even exponent), their union, named
        `id1+id2` (each still explains only the elements its `when` holds for)."""
        if diff.bad_mask is None or diff.expected is None or not diff.bad_mask.any():
            return None
        candidates = []  # (item, its mask on the values as given), none of which covers alone
        ctx = diff.expected.context  # the formula's names: inputs, attributes, enum members, constants
        for item in self.items:
            if item.status != "mismatch" or item.operator != operator or data_type not in item.data_types:
                continue
            if item.input_types is not None and input_type not in item.input_types:
                continue
            if item.descriptor_when is not None and not _holds(item.descriptor_when, diff.expected):
                continue
            given = np.broadcast_to(np.asarray(item.when.evaluate(ctx), dtype=bool), diff.bad_mask.shape)
            if not (diff.bad_mask & ~given).any():
                return item  # explained on the values as given: the reading every device shares
            candidates.append((item, given))
        # then also on the values a flushing device reads (an expectation that explains a case on its
        # own values, as its probe's, was preferred above)
        flushed = _flushed(ctx, diff.expected.spec, data_type) if candidates else None
        covering = []
        for item, given in candidates:
            mask = given if flushed is None else given | np.broadcast_to(np.asarray(item.when.evaluate(flushed), dtype=bool), diff.bad_mask.shape)
            if not (diff.bad_mask & ~mask).any():
                return item
            if (diff.bad_mask & mask).any():
                covering.append((item, mask))
        if not covering:
            return None
        union = np.logical_or.reduce([mask for _, mask in covering])
        if (diff.bad_mask & ~union).any():
            return None
        items = [item for item, _ in covering]
        return Expectation(id="+".join(i.id for i in items), operator=operator, data_types=items[0].data_types,
                           when=items[0].when, why=" | ".join(i.why for i in items))


# A device may flush an fp32 denormal input or attribute to a zero of its sign where the precision
# model's compute type flushes (specs/_arithmetic.yaml: FLOAT32; a FLOAT16 case may be computed in
# FLOAT32, its attributes are FLOAT32; FLOAT64 is IEEE): a known divergence then shows at the zero,
# not at the denormal the case holds (a GPU flushes x = -1.2e-38 and DirectML's tanh(-0) = +0
# follows). So an expectation's `when` is also read on the flushed values.
def _flushed(ctx: "EvalContext", spec: "OperatorSpec", data_type: str | None) -> "EvalContext | None":
    """`ctx` with every fp32 denormal (expr.is_f32_denormal, the one definition) a zero of its sign;
    None where no compute type of `data_type` flushes or no value is a denormal."""
    model = spec.catalog.arithmetic
    if not any(model.types[c].flush_denormals for c in model.compute_in.get(data_type or "", ())):
        return None
    variables, changed = dict(ctx.variables), False
    for name, value in ctx.variables.items():
        denormal = is_f32_denormal(value)
        if denormal.any():
            array = np.asarray(value)
            variables[name] = np.where(denormal, np.copysign(0.0, array), array).astype(array.dtype)
            changed = True
    return dataclasses.replace(ctx, variables=variables) if changed else None


def _parse_descriptor_when(text: str) -> ShapeExpr:
    """A shape expression over the operator's fields, parsed without the spec (the node and
    function whitelist is what keeps it safe; a name the operator lacks makes it not apply)."""
    import ast
    tree = ast.parse(text, mode="eval") if len(text) <= 1000 else None
    if tree is None:
        raise FormulaError("longer than 1000 characters")
    tensors = {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - tensors
    return parse_shape_expr(text, names, tensors)


def _holds(expr: ShapeExpr, expected: "Expected") -> bool:
    return descriptor_holds(expr, expected.spec, expected.case.descriptor)


def descriptor_holds(expr: ShapeExpr, spec: "OperatorSpec", descriptor: "Descriptor") -> bool:
    """Whether an expectation's descriptor_when holds for `descriptor` of operator `spec`."""
    from harness.model.facts import expression_scope
    try:
        return bool(expr.evaluate(*expression_scope(spec, descriptor)))
    except FormulaError:  # an expression that does not fit this descriptor does not explain it
        return False


def expectation_files(backend: str, directory: Path) -> list[Path]:
    """`directory`/BACKEND.yaml and every `directory`/BACKEND/*.yaml (one file per operator family,
    so that the divergences of a family stay together), in that order."""
    files = [Path(directory) / f"{backend}.yaml"]
    split = Path(directory) / backend
    if split.is_dir():
        files += sorted(split.glob("*.yaml"))
    return [f for f in files if f.exists()]


def load_expectations(backend: str, directory: Path | None) -> ExpectationSet:
    """The expectations of `backend` in `directory`/BACKEND.yaml and `directory`/BACKEND/*.yaml;
    none when there is no such file (a backend ships its own directory:
    `harness.run.registry.expectations_for` finds it). An id used twice is an error: a report names
    expectations by id."""
    if directory is None:
        return ExpectationSet(backend)
    items: list[Expectation] = []
    seen: dict[str, Path] = {}
    for path in expectation_files(backend, Path(directory)):
        for item in _load_file(path):
            if item.id in seen:
                raise SpecError(path, None, ("expectations",), f"expectation id {item.id!r} is also used in {seen[item.id]}")
            seen[item.id] = path
            items.append(item)
    return ExpectationSet(backend, items)


def _load_file(path: Path) -> list[Expectation]:
    src = load_yaml(path)
    items = []
    for index, raw in enumerate((src.data or {}).get("expectations", [])):
        status = raw.get("status", "mismatch")
        needed = ("id", "operator", "data_types", "when", "why") if status == "mismatch" else ("id", "operator", "why")
        for key in needed:
            if key not in raw:
                raise src.error(("expectations", index), f"missing key {key!r}")
        try:
            when = parse_formula(raw.get("when", "0"))
        except FormulaError as exc:
            raise src.error(("expectations", index, "when"), str(exc)) from None
        _check_input_bits(src, index, raw.get("probe"))
        descriptor_when = None
        if "descriptor_when" in raw:
            try:
                descriptor_when = _parse_descriptor_when(str(raw["descriptor_when"]))
            except FormulaError as exc:
                raise src.error(("expectations", index, "descriptor_when"), str(exc)) from None
        items.append(Expectation(raw["id"], raw["operator"], tuple(raw.get("data_types", ())), when, raw["why"],
                                 tuple(raw["input_types"]) if "input_types" in raw else None, status,
                                 raw.get("rule"), raw.get("reason_contains"),
                                 attributes_present=tuple(raw.get("attributes_present", ())),
                                 tensor_types=tuple(raw.get("tensor_types", ())), probe=raw.get("probe"),
                                 descriptor_when=descriptor_when, devices=_devices(src, index, raw.get("devices", []))))
    return items


def _devices(src, index: int, devices: object) -> tuple[str, ...]:
    """`devices`: a list of non-empty texts, each matched against the backend's version."""
    if not isinstance(devices, list) or not all(isinstance(d, str) and d.strip() for d in devices):
        raise src.error(("expectations", index, "devices"), "expected a list of device names (text of the backend's version, e.g. llvmpipe)")
    return tuple(devices)


def _check_input_bits(src, index: int, probe: object) -> None:
    """A probe's `input_bits`: tensor -> list of whole numbers, each tensor typed by the probe's
    `types` (its bits have no meaning otherwise) and not given in `inputs` too."""
    if not isinstance(probe, dict) or "input_bits" not in probe:
        return
    where = ("expectations", index, "probe", "input_bits")
    bits, types, inputs = probe["input_bits"], probe.get("types") or {}, probe.get("inputs") or {}
    if not isinstance(bits, dict):
        raise src.error(where, "expected a mapping of tensor -> list of bit patterns")
    for name, patterns in bits.items():
        if name not in types or name in inputs:
            raise src.error(where + (name,), f"{name} must be typed in the probe's types and not also given in inputs")
        if not isinstance(patterns, list) or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in patterns):
            raise src.error(where + (name,), "expected a list of non-negative integer bit patterns")


STALE = Status.STALE


def probe_case(item: Expectation, specs: SpecSet, level: str) -> Case | None:
    """The expectation's probe as a case (None when it has no probe). `inputs` are decimal values;
    `input_bits` gives a tensor's elements as raw bit patterns of its type instead, for values a
    decimal cannot name (a signaling NaN, a NaN's payload); a tensor may be in one or the other."""
    if not item.probe:
        return None
    import numpy as np
    from harness.generate.cases import case_from_arrays
    spec = specs.operator(item.operator)
    from harness.model.descriptor import TensorDesc
    types = dict(item.probe["types"])
    layouts = None
    values = {k: np.asarray(v, dtype=np.float64) for k, v in item.probe.get("inputs", {}).items()}
    for name, bits in item.probe.get("input_bits", {}).items():
        dtype = specs.catalog.dtype(types[name])  # the bits viewed as the type: no conversion touches them
        if any(not 0 <= int(b) < 1 << dtype.bits for b in bits):
            raise ValueError(f"probe of {item.id}: input_bits of {name} must be {dtype.bits}-bit patterns of {dtype.name}")
        if dtype.bits < 8:  # a nibble: INT4's 0x8..0xF are -8..-1
            raw = np.asarray([int(b) for b in bits], dtype=np.int64)
            values[name] = np.where((raw >= 8) & (dtype.kind == "signed"), raw - 16, raw).astype(dtype.numpy)
        else:
            values[name] = np.asarray([int(b) for b in bits], dtype=dtype.bits_numpy).view(dtype.numpy)
    if "tensor_sizes" in item.probe:  # index-space operators: each tensor its own Sizes
        layouts = {n: TensorDesc(t, list(item.probe["tensor_sizes"][n])) for n, t in types.items()}
        values = {k: v.reshape(item.probe["tensor_sizes"][k]) for k, v in values.items()}
    case = case_from_arrays(spec, level, types, values, origin=f"probe:{item.id}", layouts=layouts,
                            attributes=dict(item.probe.get("attributes", {})) or None)
    if item.probe.get("rule"):
        case.expect_valid, case.broken_rule = False, item.probe["rule"]
    return case


__all__ = ["EXPECTED_DIVERGENCE", "Expectation", "ExpectationSet", "SpecError", "load_expectations"]
