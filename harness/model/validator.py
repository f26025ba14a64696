"""The descriptor validator: which rules a descriptor breaks at a feature level.

Rules come from the operator spec (availability, the support table in force, constraints) and
from DirectML's generic buffer-tensor rules. Every rule has a stable id (GENERIC_RULES below, and
`constraint.<id>` from the spec) and a one-line message. All broken rules are reported.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.spec.catalog import Catalog
from harness.model.descriptor import Case, Descriptor, TensorDesc
from harness.model.facts import attribute_names, expression_scope, level_facts, level_guarded
from harness.model.layout import MAX_ELEMENTS, effective_strides, element_count, minimum_bytes, output_overlaps, total_bytes
from harness.model.backend import Rejected, Unsupported
from harness.spec.model import OperatorSpec, SpecSet
from harness.spec.fused import activation_items
from harness.spec.shape_expr import aligned, is_free

KNOWN_FLAGS = 0x1  # DML_TENSOR_FLAG_OWNED_BY_DML
# DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT (DirectML constants page: "Buffer tensors have a minimum base
# address alignment requirement of 16 bytes"). DirectML 1.15.4 rejects GuaranteedBaseOffsetAlignment
# 1..8 for every element size and accepts 16, 32, 64: a guarantee must be at least this.
MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16

# id -> what the rule says (level-dependent rules are marked in LEVEL_RULES)
GENERIC_RULES: dict[str, str] = {
    "operator.unavailable": "the operator is not available at this feature level",
    "descriptor.unknown_field": "the descriptor names a tensor the operator does not have",
    "attribute.enum_value": "an enum attribute holds a value that is not a member of its enum",
    "tensor.missing": "a required tensor is absent",
    "tensor.data_type": "the tensor's data type is not in the support table at this level",
    "tensor.dimension_count": "the tensor's DimensionCount is outside the support table's range at this level",
    "tensor.sizes_length": "Sizes does not have DimensionCount entries",
    "tensor.strides_length": "Strides does not have DimensionCount entries",
    "tensor.zero_size": "a size is 0",
    "tensor.too_many_elements": "the tensor has more than 2^32-1 elements",
    "tensor.total_size_too_small": "TotalTensorSizeInBytes is below the minimum implied size (DMLCalcBufferTensorSize)",
    "tensor.alignment": "GuaranteedBaseOffsetAlignment is neither 0 nor a power of two at least 16 (and the element size)",
    "tensor.flags": "Flags has bits other than DML_TENSOR_FLAG_OWNED_BY_DML",
    "tensor.output_overlap": "the output's strides make distinct elements share memory",
    "in_place.not_allowed": "an output aliases an input, but the operator does not allow in-place execution for that pair",
    "in_place.layout_mismatch": "an aliased output and input differ in data type, sizes, strides or total size",
}
LEVEL_RULES = {"operator.unavailable", "tensor.data_type", "tensor.dimension_count", "tensor.missing"}


@dataclass(frozen=True)
class Violation:
    rule: str
    tensor: str | None
    message: str

    def render(self) -> str:
        return f"[{self.rule}] {self.tensor + ': ' if self.tensor else ''}{self.message}"


@dataclass
class Verdict:
    """Accepted when no rule is broken; otherwise every violation found."""

    violations: list[Violation] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return not self.violations

    @property
    def rule_ids(self) -> set[str]:
        return {v.rule for v in self.violations}

    def summary(self) -> str:
        return "accepted" if self.accepted else "rejected: " + "; ".join(v.render() for v in self.violations)


def _tensor_rules(name: str, desc: TensorDesc, catalog: Catalog, is_output: bool, out: list[Violation]) -> None:
    dtype = catalog.data_types.get(desc.data_type)
    if len(desc.sizes) != desc.dim_count:
        out.append(Violation("tensor.sizes_length", name, f"Sizes has {len(desc.sizes)} entries, DimensionCount is {desc.dim_count}"))
    if desc.strides is not None and len(desc.strides) != desc.dim_count:
        out.append(Violation("tensor.strides_length", name, f"Strides has {len(desc.strides)} entries, DimensionCount is {desc.dim_count}"))
    if any(s == 0 for s in desc.sizes):
        out.append(Violation("tensor.zero_size", name, f"Sizes {desc.sizes} contains 0"))
    if element_count(desc) > MAX_ELEMENTS:
        out.append(Violation("tensor.too_many_elements", name, f"{element_count(desc)} elements > 2^32-1"))
    if desc.flags & ~KNOWN_FLAGS:
        out.append(Violation("tensor.flags", name, f"Flags 0x{desc.flags:x} has unknown bits"))
    if dtype is not None:
        align = desc.alignment
        if align != 0 and (align & (align - 1) or align < max(dtype.size_bytes, MINIMUM_BUFFER_TENSOR_ALIGNMENT)):
            out.append(Violation("tensor.alignment", name, f"GuaranteedBaseOffsetAlignment {align} (must be 0 or a power of two >= "
                                                           f"{max(dtype.size_bytes, MINIMUM_BUFFER_TENSOR_ALIGNMENT)})"))
        structure_ok = len(desc.sizes) == desc.dim_count and (desc.strides is None or len(desc.strides) == len(desc.sizes))
        if structure_ok and desc.total_bytes is not None and not any(s == 0 for s in desc.sizes):
            need = minimum_bytes(desc, dtype)
            if desc.total_bytes < need:
                out.append(Violation("tensor.total_size_too_small", name, f"TotalTensorSizeInBytes {desc.total_bytes} < minimum {need}"))
        if is_output and structure_ok and not any(s == 0 for s in desc.sizes) and element_count(desc) <= MAX_ELEMENTS:
            if output_overlaps(desc):
                out.append(Violation("tensor.output_overlap", name, f"strides {effective_strides(desc)} overlap for sizes {desc.sizes}"))


def _malformed(desc: TensorDesc | None) -> bool:
    """A tensor whose Sizes no relation can be read from: a zero size, or Sizes that do not have
    DimensionCount entries (tensor.zero_size and tensor.sizes_length report it)."""
    return desc is not None and (0 in desc.sizes or len(desc.sizes) != desc.dim_count)


def bad_enum_fields(spec: OperatorSpec, descriptor: Descriptor) -> set[str]:
    """The enum attribute fields whose value is no member of their enum (attribute.enum_value)."""
    out = set()
    for f in spec.attribute_fields:
        if f.enum is not None:
            value = descriptor.attributes.get(f.name, f.default)
            if value is not None and value not in f.enum.values():
                out.add(f.name)
    return out


def _reads_bad_enum(c, bad: set[str]) -> bool:
    """A rule whose expressions read an enum field holding no member is not in force:
    attribute.enum_value reports the cause (no member, no variant table, no guard to decide)."""
    return bool(bad) and bool(bad & c.expression_names)


def expression_violations(spec: OperatorSpec, descriptor: Descriptor, level: str | None = None) -> list[Violation]:
    """The `expression` and `shape` constraints the descriptor breaks. A rule whose expression reads
    what is not there (an absent tensor, an index past a list's end) is not in force: another rule
    reports the cause (tensor.missing, or the rule that keeps the index in range); nor is a rule
    that reads a malformed tensor (a zero size, Sizes not DimensionCount long) or an enum field
    holding no member: the structural rule is the one broken, and a relation over such values
    says nothing."""
    rules = [c for c in spec.constraints if c.rule in ("expression", "shape")]
    if not rules:
        return []
    names, tensors = expression_scope(spec, descriptor)
    if level_guarded(spec) & {"expression", "shape"}:  # a rule in force below a level reads the case's (no level: the newest)
        names.update(level_facts(spec.catalog, level))
    malformed = {n for n, t in descriptor.tensors.items() if _malformed(t)}
    # an enum field holding no member: attribute.enum_value is the rule broken; a relation over it says nothing
    malformed |= {f.name for f in spec.attribute_fields if f.enum is not None
                  and descriptor.attributes.get(f.name, f.default) not in (None, *f.enum.values())}
    out = []
    for c in rules:
        if malformed & c.reads or malformed & c.expression_names:
            continue
        if c.guard is not None and not c.guard.evaluate(names, tensors):
            continue
        if c.rule == "expression":
            if c.check is not None:  # no check: the rule holds
                holds = c.check.evaluate(names, tensors)
                if holds is not None and not holds:
                    out.append(Violation(c.rule_id, None, f"{c.text} ({c.check.text} does not hold)"))
            continue
        tensor = c.tensors[0]
        desc = descriptor.tensors.get(tensor)
        want = c.sizes.evaluate(names, tensors) if c.sizes is not None else None
        if desc is None or want is None:
            continue
        have = list(desc.sizes)
        if c.align is not None and isinstance(want, list):  # a broadcast operand: leading (left: trailing) 1s may be left out or added
            cut = aligned(have, want, c.align)
            if cut is None:
                out.append(Violation(c.rule_id, tensor, f"{c.text} Sizes {have}, expected {want} ({c.align}-aligned)"))
                continue
            have, want = cut
        if c.bound == "upper":
            if len(have) != len(want) or not all(is_free(w) or 1 <= a <= w for a, w in zip(have, want)):
                out.append(Violation(c.rule_id, tensor, f"{c.text} Sizes {list(desc.sizes)}, each must be 1 to {want}"))
        elif len(have) != len(want) or not all(is_free(w) or a == w for a, w in zip(have, want)):
            out.append(Violation(c.rule_id, tensor, f"{c.text} Sizes {list(desc.sizes)}, expected {want}"))  # `free`: any size
    return out


def validate(spec: OperatorSpec, descriptor: Descriptor, level: str) -> Verdict:
    """Every rule `descriptor` breaks for `spec` on a device at feature level `level`."""
    catalog = spec.catalog
    out: list[Violation] = []
    field_names = {f.name for f in spec.tensor_fields}
    for name in descriptor.tensors:
        if name not in field_names:
            out.append(Violation("descriptor.unknown_field", name, f"{spec.name} has no tensor field {name}"))

    for f in spec.attribute_fields:
        if f.enum is not None:
            value = descriptor.attributes.get(f.name, f.default)
            if value is not None and value not in f.enum.values():
                out.append(Violation("attribute.enum_value", None, f"{f.name} = {value:g} is not a member of {f.c_type} "
                                                                   f"({', '.join(f'{k}={v}' for k, v in f.enum.items())})"))

        if f.is_activation_array:  # each activation the array lists must exist at the device's level too
            for slot, (item, _) in enumerate(activation_items(spec, f, descriptor.attributes)):
                if not item.available_at(level):
                    out.append(Violation("fused_activation.unavailable", None, f"{f.name}[{slot}] names {item.name}, introduced at "
                                                                               f"FL {item.introduced}; device is FL {level}"))
        elif f.is_fused_activation:  # the activation a descriptor names must exist at the device's level too
            activation = spec.activations.get(f.name, {}).get(int(descriptor.attributes.get(f.name) or -1))
            if activation is not None and not activation.available_at(level):
                out.append(Violation("fused_activation.unavailable", None, f"{f.name} names {activation.name}, introduced at "
                                                                           f"FL {activation.introduced}; device is FL {level}"))

    if not spec.has_table_at(level):
        out.append(Violation("operator.unavailable", None, f"{spec.name} is introduced at FL {spec.introduced}, device is FL {level}"))
    # the table in force; none where the variant key holds no member (attribute.enum_value says so)
    table = spec.table_at(level, descriptor.attributes)
    where = "" if table is None else f"table FL {table.level}" + (
        f" for {spec.variant_key} in {', '.join(table.variant)}" if table.variant else "")

    for f in spec.tensor_fields:
        desc = descriptor.tensors.get(f.name)
        cell = table.tensors[f.name] if table else None
        if desc is None:
            if cell is not None and not cell.optional:
                out.append(Violation("tensor.missing", f.name, f"{f.name} is required at FL {level} ({where})"))
            continue
        if cell is not None:
            if desc.data_type not in cell.types:
                out.append(Violation("tensor.data_type", f.name, f"{desc.data_type} not in {', '.join(cell.types)} at FL {level} ({where})"))
            lo, hi = cell.dims
            if not lo <= desc.dim_count <= hi:
                out.append(Violation("tensor.dimension_count", f.name, f"DimensionCount {desc.dim_count} outside {lo}..{hi} at FL {level} ({where})"))
        elif desc.data_type not in catalog.data_types:
            out.append(Violation("tensor.data_type", f.name, f"unknown data type {desc.data_type}"))
        _tensor_rules(f.name, desc, catalog, f.role == "output", out)

    present_types = {n: (t.data_type if t is not None else None) for n, t in descriptor.tensors.items()}
    guarded = any(c.guard is not None and c.is_type_rule for c in spec.constraints)
    # what a type rule's guard reads: the variant key, the feature level
    names = {**attribute_names(spec, descriptor.attributes), **level_facts(catalog, level)} if guarded else None
    bad = bad_enum_fields(spec, descriptor)
    for c in spec.constraints:
        if c.rule in ("expression", "shape") or _reads_bad_enum(c, bad) or not c.applies(present_types, names):
            continue
        present = [(n, td) for n in c.tensors if (td := descriptor.tensors.get(n)) is not None]
        offenders = c.type_offenders(present_types, names)
        if c.rule == "same_data_type" and offenders:
            out.append(Violation(c.rule_id, None, c.text + " Found " + ", ".join(f"{n}={t.data_type}" for n, t in present)))
        elif c.rule == "same_shape":
            shapes = {(t.dim_count, tuple(t.sizes)) for _, t in present}
            if len(shapes) > 1:
                out.append(Violation(c.rule_id, None, c.text + " Found " + ", ".join(f"{n}={t.sizes}" for n, t in present)))
        elif c.rule == "data_type_in":
            for n in offenders:
                out.append(Violation(c.rule_id, n, c.text + f" Found {present_types[n]}"))
    out.extend(expression_violations(spec, descriptor, level))

    allowed_pairs = set(spec.in_place_pairs) if spec.in_place_allowed else set()
    for output, inp in descriptor.aliases.items():
        if (output, inp) not in allowed_pairs:
            out.append(Violation("in_place.not_allowed", output, f"{output} aliases {inp}; allowed pairs: {sorted(allowed_pairs) or 'none'}"))
            continue
        a, b = descriptor.tensors.get(output), descriptor.tensors.get(inp)
        if a is None or b is None:
            continue
        same = (a.data_type == b.data_type and list(a.sizes) == list(b.sizes)
                and effective_strides(a) == effective_strides(b))
        if same and a.data_type in catalog.data_types:
            dtype = catalog.dtype(a.data_type)
            same = total_bytes(a, dtype) == total_bytes(b, dtype)
        if not same:
            out.append(Violation("in_place.layout_mismatch", output, f"{output} and {inp} must describe identical memory to alias"))
    return Verdict(out)


def case_verdict(spec: OperatorSpec, case: Case, level: str | None = None) -> Verdict:
    """`validate` of a case's descriptor at `level` (default: the case's), once per case and level.

    The judge, the reference backend, the prefetch and the other backends all ask about the same
    case; the answer is remembered on the case itself (keyed by the descriptor object, so a case
    whose descriptor is replaced is validated again)."""
    level = level or case.feature_level
    memo = case.__dict__.setdefault("_verdicts", {})
    key = (spec.name, level, id(case.descriptor))
    verdict = memo.get(key)
    if verdict is None:
        verdict = memo[key] = validate(spec, case.descriptor, level)
    return verdict


def null_optional_outputs(spec: OperatorSpec, case: Case, level: str | None = None) -> list[str]:
    """The plain optional outputs (TensorSupport.bound_always) a case leaves null: legal, a device
    must accept it, but the references compute every output field, so its values are not judged
    (generation never leaves one out; a case file may)."""
    table = spec.table_at(level or case.feature_level, case.descriptor.attributes)
    if table is None:
        return []
    return [n for n, cell in table.tensors.items() if cell.bound_always and case.descriptor.tensors.get(n) is None]


NULL_OUTPUT_REASON = ("the page lets {names} be null and the descriptor is valid, but the reference computes every "
                      "output field: its values are not judged (a device must accept it: a rejection fails)")


def spec_for_case(specs: SpecSet, case: Case) -> OperatorSpec | Rejected | Unsupported:
    """The operator spec a backend that validates like DirectML computes `case` with, or what it
    answers instead: Unsupported for an operator without a spec, Rejected for an invalid descriptor."""
    spec = specs.operators.get(case.operator)
    if spec is None:
        return Unsupported(f"no spec for operator {case.operator}")
    verdict = case_verdict(spec, case)
    if not verdict.accepted:
        return Rejected(verdict.summary())
    null = null_optional_outputs(spec, case)
    if null:
        return Unsupported(NULL_OUTPUT_REASON.format(names=", ".join(null)))
    return spec
