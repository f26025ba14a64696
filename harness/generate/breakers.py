"""Invalid cases (TOSA's ERROR_IF design): for each validator rule id a breaker starts from a valid
descriptor and breaks exactly that rule. The breakers carry their own knowledge of the rules
(they do not ask the validator), so checking their output against the validator is a real
cross-check of both.
"""
from __future__ import annotations

import copy
from functools import lru_cache
from typing import Callable

import numpy as np
from hypothesis import reject, strategies as st

from harness.model.wellformed import CaseFormatError, check_union
from harness.model.descriptor import Case, Descriptor, TensorDesc
from harness.model.layout import element_count, minimum_bytes, pack_nibbles, packed_strides, total_bytes
from harness.spec.model import OperatorSpec
from harness.model.validator import GENERIC_RULES
from harness.generate.values import random_values
from harness.generate.types import (broken_type_constraints, constraint_breaking_assignments, dim_range, member_of, names_for,
                                    presence_only, shape_group)
from harness.generate.layouts import DEFAULT_CONFIG, GenConfig, reset_layout, layout_tags
from harness.generate.strategies import derive_sizes, valid_descriptors
from harness.spec.shape_expr import is_free
from harness.generate.reachability_memo import memo_for_code
from harness.spec.load import spec_digest
from harness.generate.expression_breakers import expression_breaker, first_array_values, reachable, rederive
from harness.model.validator import validate


INVALID_CASE_MAX_BUFFER = 1 << 20  # invalid cases carry input data only below this many bytes


Breaker = Callable[[st.DrawFn, OperatorSpec, str, Descriptor], "tuple[Descriptor, str] | None"]


def _drop_aliases(d: Descriptor, tensor: str) -> None:
    d.aliases = {o: i for o, i in d.aliases.items() if tensor not in (o, i)}


def _set_group_sizes(spec: OperatorSpec, d: Descriptor, sizes: list[int], dimension_count: int | None = None) -> None:
    """Give the shape group (every tensor when there is none) these sizes; a tensor whose Sizes a
    shape rule derives is left to `_keep_shapes_derived`."""
    for name in _resized(spec, d):
        t = _tensor(d, name)
        t.sizes = list(sizes)
        t.dimension_count = dimension_count
        reset_layout(t)


def _resized(spec: OperatorSpec, d: Descriptor) -> list[str]:
    """The present tensors a generic breaker resizes: the shape group (every tensor a shape rule
    does not derive, when there is none); where every present tensor is derived (each Sizes a
    shape rule's: multi-head attention's sources of the query), the first present one, which
    `_keep_shapes_derived` keeps while it re-derives the others from it."""
    derived = {c.tensors[0] for c in spec.shape_rules}
    group = shape_group(spec) or {f.name for f in spec.tensor_fields if f.name not in derived}
    present = [n for n in _present(d) if n in group]
    reads = {c.tensors[0]: c.reads - {c.tensors[0]} for c in spec.shape_rules}
    roots = [n for n in _present(d) if not reads.get(n)]  # derived from the attributes alone
    return present or roots[:1] or _present(d)[:1]


def _present(d: Descriptor) -> list[str]:
    return [n for n, t in d.tensors.items() if t is not None]


def _tensor(d: Descriptor, name: str) -> TensorDesc:
    """The tensor `name`, which the caller knows is present (one of `_present(d)`)."""
    t = d.tensors[name]
    assert t is not None, name
    return t


def _break_unavailable(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
    """The device (at `level`) predates the operator; the descriptor is valid at the introduction."""
    if spec.available_at(level):
        return None
    return d, level


def _break_unknown_field(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    source = d.tensors[draw(st.sampled_from(_present(d)))]
    d.tensors["UnknownTensor"] = copy.deepcopy(source)
    return d, level


def _break_enum_value(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
    """An enum attribute set just past its members, or to 2^32 - 1 (None: the operator has no enum)."""
    enums = [f for f in spec.attribute_fields if f.enum]
    if not enums:
        return None
    f = draw(st.sampled_from(enums))
    assert f.enum is not None
    value = draw(st.sampled_from([max(f.enum.values()) + 1, 0xFFFFFFFF]))
    d.attributes[f.name] = float(value)
    return d, level


def _break_missing(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    table = spec.table_at(level, d.attributes)
    assert table is not None
    required = [n for n in _present(d) if not table.tensors[n].optional]
    name = draw(st.sampled_from(required))
    dropped = [name]
    f = spec.field(name)
    if f.array_of is not None:  # an array has no holes: its items after this one go too (InputCount = slot)
        dropped = spec.tensor_arrays[f.array_of][f.slot or 0:]
    for gone in dropped:
        if gone in d.tensors:
            d.tensors[gone] = None
            _drop_aliases(d, gone)
    return d, level


def _break_data_type(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
    catalog = spec.catalog
    table = spec.table_at(level, d.attributes)  # the table of the descriptor's variant group
    assert table is not None
    member = member_of(spec, d.attributes)
    names = [n for n in _present(d)]
    current: dict[str, str | None] = {n: (t.data_type if t else None) for n, t in d.tensors.items()}
    candidates: list[dict[str, str | None]] = []
    for name in names:
        for t in catalog.data_types:
            if t in table.tensors[name].types:
                continue
            trial = dict(current)
            trial[name] = t
            # tensors tied by a same-type constraint in force whatever the types follow, so that
            # only the table rule breaks
            for c in spec.constraints:
                if c.rule == "same_data_type" and c.when is None and name in c.tensors and c.applies(trial, names_for(spec, member, level)):
                    for other in c.tensors:
                        if trial.get(other) is not None:
                            trial[other] = t
            if broken_type_constraints(spec, trial, member, level):
                continue
            if all(trial[o] in table.tensors[o].types for o in names if trial[o] is not None and trial[o] != current[o]) :
                continue
            candidates.append(trial)
    if not candidates:
        return None
    chosen = draw(st.sampled_from(candidates))
    for n, data_type in chosen.items():
        tensor = d.tensors[n]
        if data_type is not None and tensor is not None:
            tensor.data_type = data_type
            tensor.alignment = 0
            reset_layout(tensor)
    return d, level


def _break_dimension_count(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
    # the count must lie outside the range of the tensors _set_group_sizes resizes: a derived tensor
    # with a narrower range (a 3D-only output of a 3-to-8D input) keeps its Sizes, so a count outside
    # its range alone would break nothing
    derived = {c.tensors[0] for c in spec.shape_rules}
    resized = shape_group(spec) or {f.name for f in spec.tensor_fields if f.name not in derived}
    lo, hi = dim_range(spec, level, [n for n in _present(d) if n in resized] or _present(d), member_of(spec, d.attributes))
    outside = [n for n in range(1, 10) if not lo <= n <= hi]
    if not outside:
        return None
    resized_now = _resized(spec, d)
    above = [n for n in outside if n > hi]
    if resized_now and resized_now[0] in derived:
        if not above or not any(c.align == "leading_ones" for c in spec.shape_rules if c.tensors[0] == resized_now[0]):
            reject()  # its rule takes no more dimensions (a stacked layout's five): another descriptor
        # every tensor derived: the root keeps its sizes with 1s added before them, so that its own
        # rule (leading 1s allowed) and the rules reading its last sizes still hold
        n = draw(st.sampled_from(above))  # fewer dimensions would leave out sizes its rule needs
        t = _tensor(d, resized_now[0])
        t.sizes = [1] * (n - len(t.sizes)) + list(t.sizes)
        t.dimension_count = None
        reset_layout(t)
        return d, level
    n = draw(st.sampled_from(outside))
    _set_group_sizes(spec, d, [1] * (n - 1) + [2])
    return d, level


def _break_sizes_length(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    group_tensor = _tensor(d, _present(d)[0])
    count = group_tensor.dim_count
    _set_group_sizes(spec, d, list(group_tensor.sizes) + [1], dimension_count=count)
    return d, level


def _break_strides_length(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    name = draw(st.sampled_from(_present(d)))
    t = _tensor(d, name)
    n = t.dim_count
    t.strides = packed_strides(t.sizes) + [1] if draw(st.booleans()) or n == 1 else packed_strides(t.sizes)[1:]
    _drop_aliases(d, name)
    return d, level


def _break_zero_size(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    sizes = list(_tensor(d, _present(d)[0]).sizes)
    sizes[draw(st.integers(0, len(sizes) - 1))] = 0
    _set_group_sizes(spec, d, sizes, dimension_count=None)
    return d, level


def _break_too_many(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
    resized = _resized(spec, d)
    if resized and resized[0] in {c.tensors[0] for c in spec.shape_rules}:
        return _too_many_where_free(spec, level, d, resized[0])
    lo, hi = dim_range(spec, level, _present(d), member_of(spec, d.attributes))
    rank = _tensor(d, _present(d)[0]).dim_count
    n = rank if lo <= rank <= hi and rank >= 2 else max(lo, 2)  # the same rank keeps array attributes in range
    if n > hi:
        return None  # one UINT32 size cannot exceed 2^32-1 elements
    _set_group_sizes(spec, d, [1] * (n - 2) + [65536, 65536])
    return d, level


def _too_many_where_free(spec: OperatorSpec, level: str, d: Descriptor, name: str) -> tuple[Descriptor, str] | None:
    """Too many elements in a derived tensor: 65536 at each `free` position its shape rule leaves
    (at least two: one UINT32 size cannot pass 2^32 - 1 elements), the rule's sizes elsewhere, so
    that the rule itself still holds (a stacked [batch, sequence, heads, 3, head_size] keeps its 3
    and its head count). None where the rule leaves fewer than two free positions."""
    try:
        want = derive_sizes(spec, d, name)
    except ValueError:
        return None
    free = [i for i, v in enumerate(want) if is_free(v) and getattr(v, "values", None) is None]
    if len(free) < 2:
        return None
    t = _tensor(d, name)
    old = t.sizes[len(t.sizes) - len(want):] if len(t.sizes) >= len(want) else [1] * len(want)  # right-aligned
    t.sizes = [65536 if i in free else (old[i] if is_free(v) else int(v)) for i, v in enumerate(want)]
    t.dimension_count = None
    reset_layout(t)
    return d, level


def _break_total_size(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    name = draw(st.sampled_from(_present(d)))
    partners = {name} | {o for o, i in d.aliases.items() if i == name} | {i for o, i in d.aliases.items() if o == name}
    t = _tensor(d, name)
    need = minimum_bytes(t, spec.catalog.dtype(t.data_type))
    too_small = need - draw(st.sampled_from([1, 4]))
    for p in partners:  # aliased tensors keep identical layouts
        _tensor(d, p).total_bytes = too_small
    return d, level


def _break_alignment(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    name = draw(st.sampled_from(_present(d)))
    _tensor(d, name).alignment = draw(st.sampled_from([1, 4, 8, 12, 24]))
    return d, level


def _break_flags(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    name = draw(st.sampled_from(_present(d)))
    _tensor(d, name).flags = draw(st.sampled_from([0x2, 0x4, 0x80000000]))
    return d, level


def _break_output_overlap(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str]:
    out = spec.formula.output
    t = _tensor(d, out)
    if all(s == 1 for s in t.sizes):
        if out in {c.tensors[0] for c in spec.shape_rules}:
            reject()  # the spec derives a single-element output here (a full reduction, a 1-element window): no overlap possible
        sizes = list(t.sizes)
        sizes[-1] = 2
        _set_group_sizes(spec, d, sizes)
    t = _tensor(d, out)
    strides = packed_strides(t.sizes)
    axis = draw(st.sampled_from([i for i, s in enumerate(t.sizes) if s > 1]))
    strides[axis] = 0
    t.strides = strides
    t.total_bytes = None
    _drop_aliases(d, out)
    return d, level


def _break_in_place_not_allowed(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
    allowed = set(spec.in_place_pairs) if spec.in_place_allowed else set()
    pairs = [(o.name, i.name) for o in spec.output_fields for i in spec.input_fields
             if (o.name, i.name) not in allowed and d.tensors.get(i.name) is not None and d.tensors.get(o.name) is not None]
    if not pairs:
        return None
    output, inp = draw(st.sampled_from(pairs))
    d.aliases = {output: inp}
    return d, level


def _break_in_place_layout(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
    if not spec.in_place_allowed:
        return None
    output, inp = draw(st.sampled_from(list(spec.in_place_pairs)))
    a, b = d.tensors.get(output), d.tensors.get(inp)
    if a is None or b is None or a.data_type != b.data_type:
        return None
    if b.strides and 0 in b.strides:
        reset_layout(b)
    a.sizes = list(b.sizes)
    a.dimension_count = b.dimension_count
    a.strides = [s * 2 for s in packed_strides(b.sizes)]
    if a.strides == (b.strides or packed_strides(b.sizes)):
        a.strides = [s * 3 for s in packed_strides(b.sizes)]
    a.total_bytes = None
    d.aliases = {output: inp}
    return d, level


def _constraint_breaker(constraint_id: str) -> Breaker:
    def breaker(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
        c = next(c for c in spec.constraints if c.id == constraint_id)
        if c.rule in ("expression", "shape") and not presence_only(spec, c):
            return expression_breaker(c.rule_id)(draw, spec, level, d)
        if c.rule == "same_shape":
            names = [n for n in c.tensors if d.tensors.get(n) is not None]
            name = draw(st.sampled_from(names))
            t = _tensor(d, name)
            t.sizes = list(t.sizes[:-1]) + [t.sizes[-1] + 1]
            reset_layout(t)
            _drop_aliases(d, name)
            return d, level
        options = constraint_breaking_assignments(spec, level, constraint_id, member_of(spec, d.attributes))
        if not options:
            return None
        # the tensors present stay the ones present where some option allows it: a new or dropped
        # tensor may break a rule of its own (an array's item count tied to an attribute)
        def changed(o: dict) -> int:  # tensors added or dropped
            return sum((t is None) != (d.tensors.get(n) is None) for n, t in o.items())
        fewest = min(changed(o) for o in options)  # 0 where some option keeps them (a presence rule needs 1)
        types = draw(st.sampled_from([o for o in options if changed(o) == fewest]))
        for n, data_type in types.items():
            if data_type is None:
                d.tensors[n] = None
                _drop_aliases(d, n)
            else:
                tensor = d.tensors.get(n)
                if tensor is None:
                    ref = next(x for x in d.tensors.values() if x is not None)
                    tensor = d.tensors[n] = TensorDesc(data_type, list(ref.sizes), dimension_count=ref.dimension_count)
                tensor.data_type = data_type
                tensor.alignment = 0
                reset_layout(tensor)
                _drop_aliases(d, n)
        return d, level
    return breaker


BREAKERS: dict[str, Breaker] = {
    "operator.unavailable": _break_unavailable,
    "descriptor.unknown_field": _break_unknown_field,
    "attribute.enum_value": _break_enum_value,
    "tensor.missing": _break_missing,
    "tensor.data_type": _break_data_type,
    "tensor.dimension_count": _break_dimension_count,
    "tensor.sizes_length": _break_sizes_length,
    "tensor.strides_length": _break_strides_length,
    "tensor.zero_size": _break_zero_size,
    "tensor.too_many_elements": _break_too_many,
    "tensor.total_size_too_small": _break_total_size,
    "tensor.alignment": _break_alignment,
    "tensor.flags": _break_flags,
    "tensor.output_overlap": _break_output_overlap,
    "in_place.not_allowed": _break_in_place_not_allowed,
    "in_place.layout_mismatch": _break_in_place_layout,
}
assert set(BREAKERS) == set(GENERIC_RULES), "every generic validator rule needs a breaker"


def breaker_for(rule: str) -> Breaker:
    if rule.startswith("constraint."):
        return _constraint_breaker(rule.split(".", 1)[1])
    return BREAKERS[rule]


def candidate_rules(spec: OperatorSpec) -> list[str]:
    return list(BREAKERS) + [c.rule_id for c in spec.constraints]


def rule_reachable(spec: OperatorSpec, level: str, rule: str) -> bool:
    """Whether a breaker can break `rule` alone at `level` (structural facts only, no drawing):
    for some member of the variant key, where the tables depend on one."""
    return bool(reachable_members(spec, level, rule))


@lru_cache(maxsize=None)
def reachable_members(spec: OperatorSpec, level: str, rule: str) -> list[str | None]:
    """The variant key's members from whose descriptors a breaker can break `rule` alone at
    `level` ([None]: the spec has no variant key and the rule is reachable; []: unreachable)."""
    digest = spec_digest(spec)
    memo = memo_for_code() if digest is not None else None
    found = memo.get(digest, spec.name, level, rule) if memo is not None and digest is not None else None
    if found is None:
        found = _search_members(spec, level, rule)
        if memo is not None and digest is not None:
            memo.put(digest, spec.name, level, rule, found)
    return found


def _search_members(spec: OperatorSpec, level: str, rule: str) -> list[str | None]:
    """reachable_members, searched for."""
    if rule == "operator.unavailable":  # the descriptor is drawn at the introduction, where every member has a table
        return ([None] if spec.variant_key is None else list(spec.variant_members)) if not spec.available_at(level) else []
    answers: dict[tuple, bool] = {}  # members that no rule tells apart share one answer (one search)
    out = []
    for member in spec.members_at(level):
        key = _member_class(spec, member)
        if key not in answers:
            answers[key] = _reachable_for(spec, level, rule, member)
        if answers[key]:
            out.append(member)
    return out


def _member_class(spec: OperatorSpec, member: str | None) -> tuple:
    """What tells a member's descriptors apart for the breakers: its variant group and the value
    of every rule expression that reads the variant key (a member itself where an expression or
    shape rule reads the key: its value may matter anywhere)."""
    key = spec.variant_key
    if key is None or member is None:
        return (member,)
    readers = [c for c in spec.constraints if key in c.expression_names]
    if any(not c.is_type_rule for c in readers):
        return (member,)
    names = names_for(spec, member)
    assert names is not None  # a variant key: the member's attributes
    return (spec.group_of(member), *(bool(c.guard.evaluate(names, {})) for c in readers if c.guard is not None))


def _reachable_for(spec: OperatorSpec, level: str, rule: str, member: str | None) -> bool:
    table = spec.table_for(level, member)
    if table is None:
        return False
    if rule == "tensor.missing":
        return any(not cell.optional for cell in table.tensors.values())
    if rule == "attribute.enum_value":
        return any(f.enum for f in spec.attribute_fields)
    if rule == "tensor.dimension_count":
        lo, hi = dim_range(spec, level, list(table.tensors), member)
        return lo > 1 or hi < 9
    if rule == "tensor.too_many_elements":
        return dim_range(spec, level, list(table.tensors), member)[1] >= 2
    if rule == "in_place.not_allowed":
        allowed = set(spec.in_place_pairs)
        return any((o.name, i.name) not in allowed for o in spec.output_fields for i in spec.input_fields)
    if rule == "in_place.layout_mismatch":
        return spec.in_place_allowed
    if rule == "tensor.data_type":
        return any(set(spec.catalog.data_types) - set(cell.types) for cell in table.tensors.values())
    if rule.startswith("constraint."):
        c = next(c for c in spec.constraints if c.rule_id == rule)
        if c.rule in ("expression", "shape") and not presence_only(spec, c):
            return reachable(spec, level, rule, member)
        return c.rule == "same_shape" or bool(constraint_breaking_assignments(spec, level, c.id, member))
    return True


def _tensors_read(spec: OperatorSpec, rule: str) -> frozenset[str]:
    """The tensors an expression or shape rule reads: the valid descriptor it starts from must
    have them (a rule over an optional tensor, such as a matrix product's optional addend, breaks only where that tensor is present)."""
    c = next((c for c in spec.constraints if c.rule_id == rule and c.rule in ("expression", "shape", "same_shape", "same_data_type")), None)
    if c is not None and c.rule in ("same_shape", "same_data_type"):  # two sizes or types to make differ: both tensors present
        return frozenset(c.tensors)
    return frozenset(c.reads) if c is not None else frozenset()


def _searched_rules(spec: OperatorSpec) -> set[str]:
    """The expression and shape rules, which the mutation search breaks (per descriptor)."""
    return {c.rule_id for c in spec.constraints if c.rule in ("expression", "shape")}


@st.composite
def invalid_cases(draw: st.DrawFn, spec: OperatorSpec, level: str, rule: str,
                  config: GenConfig = DEFAULT_CONFIG) -> Case:
    """A case that breaks exactly `rule` at `level` (the device level); carries the rule id."""
    base_level = spec.introduced if rule == "operator.unavailable" else level
    members = None
    if spec.variant_key is not None:  # start from a member whose table lets the rule break alone
        members = tuple(m for m in reachable_members(spec, level, rule) if m is not None)
    descriptor = copy.deepcopy(draw(valid_descriptors(spec, base_level, config=config, members=members,
                                                      present=_tensors_read(spec, rule))))
    result = breaker_for(rule)(draw, spec, level, descriptor)
    if result is None and rule in _searched_rules(spec) and rule_reachable(spec, level, rule):
        # some valid descriptors leave a shape rule nothing to break alone (an index tensor's shape rule
        # fixes no size where every index dim is meaningful): draw another one
        reject()
    if result is None and rule == "in_place.not_allowed" and rule_reachable(spec, level, rule):
        reject()  # the drawn descriptor left its optional input out: nothing to alias; draw another
    if result is None:
        raise ValueError(f"rule {rule} cannot be broken alone for {spec.name} at FL {level}")
    broken, case_level = result
    # the mutation search keeps these alone; a presence-only rule is broken by a type assignment
    # (a tensor added or dropped), whose new tensor takes its Sizes from the re-derivation
    searched = {c.rule_id for c in spec.constraints if c.rule in ("expression", "shape") and not presence_only(spec, c)}
    if rule not in searched:
        broken = _keep_shapes_derived(spec, broken, case_level, rule)
    _fit_unions(spec, broken)
    seed = draw(st.integers(0, 2**32 - 1))
    inputs = _invalid_inputs(spec, broken, seed, config)
    return Case(broken, case_level, inputs, expect_valid=False, broken_rule=rule,
                origin=f"generated:invalid:{rule}:seed={seed}" + (f":{broken.__dict__['mutation']}" if "mutation" in broken.__dict__ else ""), tags=layout_tags(broken))


def _fit_unions(spec: OperatorSpec, d: Descriptor) -> None:
    """A DML_SCALAR_UNION whose type field a breaker (or the re-derivation after it) changed may
    hold a value the new type cannot (NaN in an INT64): it becomes 0, which every type holds, so
    the case file stays expressible and the broken rule stays the only one."""
    for f in spec.attribute_fields:
        if f.is_scalar_union and f.name in d.attributes:
            try:
                check_union(f.name, d.attributes[f.name], d.attributes.get(f.typed_by or ""), spec.catalog)
            except CaseFormatError:
                d.attributes[f.name] = 0


def _keep_shapes_derived(spec: OperatorSpec, d: Descriptor, level: str, rule: str) -> Descriptor:
    """A generic breaker edits tensors without knowing the spec's shape rules or the fields drawn
    from the tensors (a type field `one_of` T.DataType): where that also breaks another rule,
    re-derive the derived tensors (and, second, those fields), keeping the one the breaker changed
    (each is tried) so that the case breaks `rule` alone. Unchanged when no choice does (the validator
    then reports both, and the suite's exactly-one-rule test says so)."""
    if validate(spec, d, level).rule_ids == {rule}:
        return d
    # the arrays drawn for the old sizes may no longer fit the new ones; a derived tensor's `free_in`
    # size kept from the old sizes may break a rule over the new ones (a broadcast mean of width 1
    # beside an input whose width the breaker grew, where Spatial FALSE forbids it): its first value
    for fresh_arrays, fresh_sizes in ((False, False), (True, False), (False, True), (True, True)):
        keeps: list[set[str]] = [set()] + [{name} for name in d.tensors]
        for keep in keeps:
            candidate = copy.deepcopy(d)
            if fresh_arrays:
                candidate.attributes.update(first_array_values(spec, candidate))
            if rederive(spec, candidate, keep, fresh_sizes) and validate(spec, candidate, level).rule_ids == {rule}:
                return candidate
    return d


def _invalid_inputs(spec: OperatorSpec, d: Descriptor, seed: int, config: GenConfig) -> dict[str, bytes]:
    """Input buffers where they can be made (known type, sane size); a backend must reject before reading."""
    catalog = spec.catalog
    buffers = {}
    rng = np.random.default_rng(seed)
    for f in spec.input_fields:
        t = d.tensors.get(f.name)
        if t is None or t.data_type not in catalog.data_types:
            continue
        dtype = catalog.dtype(t.data_type)
        try:
            size = max(total_bytes(t, dtype), 0)
        except Exception:  # malformed structure: no buffer
            continue
        if size > INVALID_CASE_MAX_BUFFER or element_count(t) > INVALID_CASE_MAX_BUFFER:
            continue
        if dtype.bits < 8:  # two elements per byte
            buffers[f.name] = pack_nibbles(random_values(dtype, 2 * max(size, 0), rng)).tobytes()
            continue
        count = max(size // dtype.size_bytes, 0)
        buffers[f.name] = random_values(dtype, count, rng).tobytes().ljust(size, b"\0")
    return buffers
