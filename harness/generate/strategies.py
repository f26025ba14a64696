"""Hypothesis strategies for valid descriptors and cases, derived from the operator specs only:
types from harness.generate.types, layouts from harness.generate.layouts, data from
harness.generate.data, attributes at their defaults or from the spec's pools.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Callable, Literal
from functools import lru_cache
from math import prod

import numpy as np
from hypothesis import reject, strategies as st

from harness.model.descriptor import Case, Descriptor, TensorDesc
from harness.model.facts import attribute_names, expression_scope, level_facts, level_guarded
from harness.model.validator import expression_violations
from harness.spec.catalog import DataType
from harness.spec.model import AttributePool, FieldSpec, OperatorSpec, enum_members
from harness.spec.fused import item_field
from harness.spec.shape_expr import is_free, parse_shape_expr
from harness.generate.draw import BOOL, SEED, choice, ints, uniform
from harness.generate.types import PlanCell, coverage_plan, dim_range, presence_attribute_rules, shape_group
from harness.generate.layouts import DEFAULT_CONFIG, GenConfig, reset_layout, layout_strategy, layout_tags, sizes_strategy
from harness.generate.data import make_input_batch, make_inputs


@lru_cache(maxsize=None)
def _attribute_values(spec: OperatorSpec) -> dict[str, st.SearchStrategy[float]]:
    out = {}
    for f in spec.attribute_fields:
        if f.is_array or f.is_count or "one_of" in spec.attribute_values.get(f.name, {}):
            continue  # drawn by _array_values, after the free tensors (a count field is its array's length)
        if f.enum is not None:  # every member, evenly
            out[f.name] = st.sampled_from(sorted(float(v) for v in f.enum.values()))
            continue
        if f.struct is not None or f.is_fused_activation or f.is_scalar_union:
            continue  # drawn whole by _struct_values / _fused_values, or last (_union_values: its type is another field)
        pools = spec.attribute_values.get(f.name, {})
        choices = [f.default] if f.default is not None else []
        ordinary = st.sampled_from(list(pools.get("ordinary", [])) or [0.0])
        edge = st.sampled_from(list(pools.get("edge", [])) or [0.0])
        if f.c_type == "BOOL":  # TRUE or FALSE (another value is DirectML's to read; no page says how)
            floats = st.sampled_from([0.0, 1.0])
        elif f.c_type in ("UINT", "INT"):  # whole numbers in the C type's range (pools hold the interesting ones)
            low = 0 if f.c_type == "UINT" else -8
            floats = st.integers(low, 8).map(float)
        else:
            floats = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-8.0, max_value=8.0)
        drawn = st.one_of(st.sampled_from(choices or [0.0]), ordinary, edge, floats)
        if f.c_type == "BOOL" and not pools and f.default is None:
            drawn = floats  # TRUE as often as FALSE
        # a FLOAT field holds a float32: record the value the desc struct holds, not the pool's
        # double, so a case file names what ran and one descriptor has one case id
        out[f.name] = drawn.map(lambda v: float(np.float32(v))) if f.c_type == "FLOAT" else drawn
    return out


@st.composite
def _struct_values(draw: st.DrawFn, spec: OperatorSpec) -> dict[str, float]:
    """Each struct-pointer field: a null pointer (no attributes) a third of the time, else every
    member as `Field.Member`, from the spec's pools (`attribute_values` keyed Field.Member) or
    float32 values."""
    out: dict[str, float] = {}
    for f in spec.attribute_fields:
        if f.struct is None or draw(st.integers(0, 2)) == 0:
            continue
        for member, c_type in f.struct:
            pools = spec.attribute_values.get(f"{f.name}.{member}", {})
            choices = list(pools.get("ordinary", [])) + list(pools.get("edge", []))
            floats = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-8.0, max_value=8.0)
            value = draw(st.one_of(st.sampled_from(choices), floats) if choices else floats)
            out[f"{f.name}.{member}"] = float(np.float32(value)) if c_type == "FLOAT" else float(value)
    return out


def _draw_cell(draw: st.DrawFn, spec: OperatorSpec, level: str, data_type: str | None,
               members: tuple[str, ...] | None, present: frozenset[str] = frozenset()) -> PlanCell:
    """A cell of the coverage plan. With a variant key, the member first (evenly among those
    whose table allows `data_type`, and among `members` when given), then a cell of its table:
    a member with a small table is drawn as often as one with a large table."""
    if spec.variant_key is None:
        plan = coverage_plan(spec, level, data_type)
    else:
        candidates = [m for m in spec.members_at(level) if (members is None or m in members)
                      and coverage_plan(spec, level, data_type, m)]
        plan = coverage_plan(spec, level, data_type, uniform(draw, candidates)) if candidates else []
    if not plan:
        raise ValueError(f"{spec.name} has no valid type assignment at FL {level} with {data_type}")
    if present:  # cells where these (optional) tensors are there, where the table has any
        plan = [c for c in plan if all(c.types.get(name) is not None for name in present)] or plan
    return uniform(draw, plan)


@st.composite
def _fused_values(draw: st.DrawFn, spec: OperatorSpec, level: str) -> dict[str, float]:
    """Each fused-activation field: a null pointer a third of the time, else one of the allowed
    activations available at `level` (its operator type) with its fields drawn from its own spec
    (`Field.Member`)."""
    out: dict[str, float] = {}
    for f in spec.attribute_fields:
        if not f.is_fused_activation or f.is_activation_array:
            continue
        allowed = [a for _, a in sorted(spec.activations.get(f.name, {}).items()) if a.available_at(level)]
        if not allowed or draw(st.integers(0, 2)) == 0:
            continue
        activation = draw(st.sampled_from(allowed))
        out[f.name] = float(activation.operator_type)
        strategies = _attribute_values(activation)
        for a in activation.attribute_fields:
            out[f"{f.name}.{a.name}"] = float(draw(strategies[a.name]))
    return out


def _activation_slots(spec: OperatorSpec, level: str,
                      attributes: dict[str, Any]) -> Iterator[tuple[FieldSpec, list[OperatorSpec], int]]:
    """Each array of fused activations, the activations it allows at `level`, and the number of
    items its `items` expression asks over `attributes` (the direction decides it)."""
    for f in spec.attribute_fields:
        if not f.is_activation_array or f.items is None:
            continue
        allowed = [a for _, a in sorted(spec.activations.get(f.name, {}).items()) if a.available_at(level)]
        names = attribute_names(spec, attributes)
        yield f, allowed, int(parse_shape_expr(f.items, set(names), set()).evaluate(names, {}))


@st.composite
def _activation_array_values(draw: st.DrawFn, spec: OperatorSpec, level: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """Each array of fused activations: as many items as its `items` expression says over the
    attributes drawn so far (the direction), each an allowed activation available at `level` with
    its fields from its own `attribute_values` (`<Field>_<k>.<Member>`)."""
    out: dict[str, Any] = {}
    for f, allowed, count in _activation_slots(spec, level, attributes):
        if not allowed and count:
            reject()
        types: list[float] = []
        for slot in range(count):
            activation = draw(st.sampled_from(allowed))
            types.append(float(activation.operator_type))
            strategies = _attribute_values(activation)
            for a in activation.attribute_fields:
                out[f"{item_field(f.name, slot)}.{a.name}"] = float(draw(strategies[a.name]))
        out[f.name] = types
    return out


def first_activation_values(spec: OperatorSpec, level: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """Each array of fused activations as its `items` expression says, every item the first allowed
    activation available at `level` with each field's first pool value (a fixed valid descriptor:
    harness.generate.expression_breakers.reachable)."""
    out: dict[str, Any] = {}
    for f, allowed, count in _activation_slots(spec, level, attributes):
        count = count if allowed else 0
        for slot in range(count):
            activation = allowed[0]
            for a in activation.attribute_fields:
                pools = activation.attribute_values.get(a.name, {})
                first = (list(pools.get("ordinary", [])) or [a.default if a.default is not None else 0.0])[0]
                out[f"{item_field(f.name, slot)}.{a.name}"] = float(np.float32(first))
        out[f.name] = [float(allowed[0].operator_type)] * count if allowed else []
    return out


def union_value_strategy(dtype: DataType) -> st.SearchStrategy[float]:
    """Values of one DML_SCALAR_UNION member: the type's extremes and special values, or any value
    the type holds exactly."""
    if dtype.is_float:
        info = np.finfo(dtype.numpy)
        widths: dict[int, Literal[16, 32, 64]] = {16: 16, 32: 32}
        width = widths.get(dtype.bits, 64)
        specials = [0.0, -0.0, 1.5, -2.0, float(info.max), -float(info.max), float(info.smallest_subnormal), np.inf, -np.inf, np.nan]
        return st.one_of(st.sampled_from(specials), st.floats(width=width, allow_nan=False))
    assert dtype.min is not None and dtype.max is not None  # an integer type: the catalog requires its range
    low, high = int(dtype.min), int(dtype.max)
    return st.one_of(st.sampled_from(sorted({low, high, 0, 1, max(low, -1)})), st.integers(low, high))


@st.composite
def _union_values(draw: st.DrawFn, spec: OperatorSpec, attributes: dict[str, Any]) -> dict[str, Any]:
    """Each DML_SCALAR_UNION field: a value of the type its typed_by field holds (drawn after it)."""
    out: dict[str, Any] = {}
    by_enum = {t.enum: t for t in spec.catalog.data_types.values() if t.bits % 8 == 0}  # DML_SCALAR_UNION has no 4-bit member
    for f in spec.attribute_fields:
        if f.is_scalar_union:
            dtype = by_enum.get(int(attributes.get(f.typed_by or "", -1)))
            out[f.name] = draw(union_value_strategy(dtype)) if dtype is not None else 0
    return out


@st.composite
def valid_descriptors(draw: st.DrawFn, spec: OperatorSpec, level: str, data_type: str | None = None,
                      config: GenConfig = DEFAULT_CONFIG, cell: PlanCell | tuple[dict[str, str | None], int] | None = None,
                      members: tuple[str, ...] | None = None, present: frozenset[str] = frozenset()) -> Descriptor:
    """A descriptor valid for `spec` at `level`; `data_type` fixes the primary input's type and
    `cell` (from coverage_plan) fixes every tensor's type, the dimension count and the variant
    key's member; `members` limits the members drawn (breakers that only some can break), `present`
    the cells to those with these tensors (a breaker of a rule over an optional tensor)."""
    catalog = spec.catalog
    if cell is None:
        cell = _draw_cell(draw, spec, level, data_type, members, present)
    types, dim_count, member, slot = PlanCell(*cell)
    group = shape_group(spec)
    derived = {c.tensors[0] for c in spec.shape_rules}
    if (derived or len(spec.tensor_fields) == 1) and not group:
        # index-space operators, and an operator of one tensor (a generator of values): the free
        # tensors take the cell's dimension count
        group = {f.name for f in spec.tensor_fields if f.name not in derived}
    attributes = {name: float(draw(strategy)) for name, strategy in _attribute_values(spec).items()}
    if not _attribute_rules_hold(spec, attributes):  # a rule over scalar attributes alone (a minimum a FLOAT attribute must reach)
        reject()
    attributes.update(spec.variant_attributes(member))  # the member the cell's table is for
    if not _presence_attribute_rules_hold(spec, attributes, types, level):
        reject()  # MaskType NONE beside a bound MaskTensor: drawn again before any tensor is drawn
    attributes.update(draw(_struct_values(spec)))
    attributes.update(draw(_fused_values(spec, level)))
    attributes.update(draw(_activation_array_values(spec, level, attributes)))
    shared_sizes = draw(sizes_strategy(dim_count, config))
    tensors: dict[str, TensorDesc | None] = {}
    for f in spec.tensor_fields:
        t = types[f.name]
        if t is None or f.name in derived:
            tensors[f.name] = None
            continue
        sizes = shared_sizes if f.name in group else draw(sizes_strategy(draw(ints(*dim_range(spec, level, [f.name], member))), config))
        tensors[f.name] = draw(layout_strategy(t, sizes, catalog.dtype(t).bits, f.role == "output"))
    late = _reading_derived(spec)  # arrays sized by a derived tensor (a bias per channel): after it
    attributes.update(draw(_array_values(spec, Descriptor(spec.name, tensors, attributes), skip=late)))
    for name in derivation_order(spec, {n for n in derived if types[n] is not None}):  # from the free tensors and the attributes
        t = types[name]
        assert t is not None  # the derivation order holds present tensors only
        sizes = derive_sizes(spec, Descriptor(spec.name, tensors, attributes), name)
        if any(is_free(s) for s in sizes):  # its own dimensions: drawn within what the fixed ones leave of the budget
            budget = max(1, config.max_elements // max(1, prod(s for s in sizes if not is_free(s))))
            sizes = [_free_size(draw, s, min(config.max_dim_size, budget)) if is_free(s) else s for s in sizes]
        if any(c.bound == "upper" for c in spec.shape_rules if c.tensors[0] == name):
            sizes = [draw(ints(1, s)) if s >= 1 else s for s in sizes]  # anywhere from 1 up to the bound
        side = next((c.align for c in spec.shape_rules if c.tensors[0] == name and c.align), None)
        if side is not None:  # a broadcast operand: at each dimension count its table allows
            plan = _realign_plan(spec, level, member, name)
            planned = plan.get((tuple(sorted(types.items())), dim_count, slot))
            # where the plan repeats cells (types.py _slots: more counts than cells), each cell keeps
            # its count: a first valid draw that is not the first choice would leave a count to chance
            fixed = planned is not None and any(key[2] for key in plan)
            if side == "left":  # trailing 1s left out or added: the same from the other end
                sizes = _realigned(draw, sizes[::-1], *dim_range(spec, level, [name], member), planned, fixed)[::-1]
            else:  # leading_ones: 1s added, none of the rule's sizes left out
                sizes = _realigned(draw, sizes, *dim_range(spec, level, [name], member), planned, fixed,
                                   keep_all=side == "leading_ones")
        tensors[name] = draw(layout_strategy(t, sizes, catalog.dtype(t).bits, spec.field(name).role == "output"))
    if late:
        attributes.update(draw(_array_values(spec, Descriptor(spec.name, tensors, attributes), only=late)))
    attributes.update(draw(_union_values(spec, attributes)))
    aliases: dict[str, str] = {}
    if spec.in_place_allowed and draw(BOOL):
        output, inp = draw(choice(tuple(spec.in_place_pairs)))
        source = tensors[inp]
        if source is not None and types[output] == types[inp]:
            if source.strides is not None and 0 in source.strides:
                reset_layout(source)  # an aliased input must not broadcast: the output would overlap
            tensors[output] = copy.deepcopy(source)
            aliases[output] = inp
    descriptor = Descriptor(spec.name, tensors, attributes, aliases)
    if _drawn_rules(spec) and expression_violations(spec, descriptor, level):
        reject()  # a rule the draw does not build in (a channel count of 1 or 3 that the array's length is): drawn again
    return descriptor


@lru_cache(maxsize=None)
def _drawn_rules(spec: OperatorSpec) -> bool:
    """Whether an expression rule reads a count field or is in force below a level only: the draw
    builds the tensors, then the arrays from them, so a rule on the count itself (ChannelCount is
    1 or 3) is kept by drawing again, as is a rule of older levels (Spatial FALSE forbids a
    broadcast mean below FL 4.0), which the shapes drawn for every level do not know."""
    counts = {f.name for f in spec.attribute_fields if f.is_count} | set(spec.tensor_arrays)  # a count, or an array's length
    return (bool(level_guarded(spec) & {"expression", "shape"}) or any(c.rule == "expression" and c.expression_names & counts for c in spec.constraints)
            or any(_presence_and_attribute(spec, c) for c in spec.constraints))


def _presence_and_attribute(spec: OperatorSpec, c: Any) -> bool:
    """Whether `c` ties a tensor's presence to an attribute (MaskTensor is present exactly when
    MaskType is not NONE): the type assignment decides the presence and the attributes are drawn
    apart, so such a rule is kept by drawing again."""
    if c.rule != "expression" or c.check is None:
        return False
    attributes = {f.name for f in spec.attribute_fields}
    return "present" in c.check.facts_read() and bool(c.check.names() & attributes)


def _presence_attribute_rules_hold(spec: OperatorSpec, attributes: dict[str, float], types: dict[str, str | None],
                                   level: str) -> bool:
    """Whether the attributes drawn so far and the cell's tensor presence (a type, or None for
    absent) keep presence_attribute_rules, read as expression_violations reads them. A rule over
    an attribute not drawn yet (TopK's K, drawn from the tensors' sizes) waits for the full check."""
    rules = presence_attribute_rules(spec)
    if not rules:
        return True
    from harness.spec.shape_expr import TensorFacts
    names = {**attribute_names(spec, attributes), **level_facts(spec.catalog, level)}
    tensors = {name: TensorFacts(() if t is not None else None) for name, t in types.items()}
    for c, reads in rules:
        if not reads <= attributes.keys():
            continue
        if c.guard is not None and not c.guard.evaluate(names, tensors):
            continue
        holds = c.check.evaluate(names, tensors)
        if holds is not None and not holds:
            return False
    return True


@lru_cache(maxsize=None)
def _attribute_rules(spec: OperatorSpec) -> tuple:
    """The expression rules that read scalar attributes only (no tensor, no array, no guard; enum
    members by name: QuantizationType != NONE)."""
    scalars = {f.name for f in spec.attribute_fields
               if not (f.is_array or f.is_count or f.struct is not None or f.is_fused_activation or f.is_scalar_union)}
    members = set(enum_members(list(spec.fields)))
    return tuple(c for c in spec.constraints if c.rule == "expression" and c.check is not None and c.guard is None
                 and not c.reads and c.expression_names - members and c.expression_names <= scalars | members)


def _attribute_rules_hold(spec: OperatorSpec, attributes: dict[str, float]) -> bool:
    """Whether the drawn scalar attributes keep the rules over them alone; the generator draws
    again where not (such rules are rare and their pools mostly keep them)."""
    rules = _attribute_rules(spec)
    if not rules:
        return True
    names = {**enum_members(list(spec.fields)), **{k: (int(v) if float(v).is_integer() else v) for k, v in attributes.items()}}
    results = [c.check.evaluate(names, {}) for c in rules]
    return all(r is None or bool(r) for r in results)


def derivation_order(spec: OperatorSpec, derived: set[str]) -> list[str]:
    """The derived tensors in field order, except that one whose shape rule reads another derived
    tensor comes after it (a split's input sums its output items, which follow it in the struct)."""
    pending = [f.name for f in spec.tensor_fields if f.name in derived]
    reads = {c.tensors[0]: c.reads - {c.tensors[0]} for c in spec.shape_rules}
    order: list[str] = []
    while pending:
        ready = next((n for n in pending if not reads.get(n, set()) & set(pending)), pending[0])
        order.append(ready)
        pending.remove(ready)
    return order


@lru_cache(maxsize=None)
def _reading_derived(spec: OperatorSpec) -> frozenset[str]:
    """The shape-dependent fields whose domains read a derived tensor (drawn after the derivation)."""
    derived = {c.tensors[0] for c in spec.shape_rules}
    return frozenset(f.name for f in _dependent_order(spec) if domain_reads(spec.attribute_values[f.name]) & derived)


@st.composite
def _array_values(draw: st.DrawFn, spec: OperatorSpec, partial: Descriptor, skip: frozenset[str] = frozenset(),
                  only: frozenset[str] | None = None) -> dict[str, Any]:
    """Each array field (and each scalar drawn `one_of` a shape-dependent list) from its domain,
    drawn: a subset at least `min_length` long (ascending or in any order, as the spec says), one
    choice per position, or one of the listed values (none: the shapes drawn leave it no valid
    value, e.g. a size-1 axis leaves no K below it, and the example is redrawn)."""
    def one(choices: list) -> Any:
        if not choices:
            reject()
        return draw(st.sampled_from(choices))

    def subset(domain: list, min_length: int) -> list:
        return draw(st.lists(st.sampled_from(domain), min_size=min(min_length, len(domain)), unique=True)) if domain else []
    return dependent_values(spec, partial, one, subset, skip, only)


def dependent_values(spec: OperatorSpec, partial: Descriptor, one: Callable[[list], Any],
                     subset: Callable[[list, int], list], skip: frozenset[str] = frozenset(),
                     only: frozenset[str] | None = None) -> dict[str, Any]:
    """The fields whose domains depend on the drawn shapes (arrays; `one_of` scalars), in the order
    their domains read each other, each picked by `one` (a value of a list) or `subset`; those in
    `skip` left out, and only those in `only` when given."""
    out: dict[str, Any] = {}
    for f in _dependent_order(spec):
        if f.name in skip or (only is not None and f.name not in only):
            continue
        pool = spec.attribute_values[f.name]
        names, facts = expression_scope(spec, partial, {**partial.attributes, **out})
        if "one_of" in pool:
            out[f.name] = float(one(pool["one_of"].evaluate(names, facts) or []))
        elif "subset_of" in pool:
            chosen = subset(pool["subset_of"].evaluate(names, facts) or [], pool.get("min_length", 0))
            out[f.name] = sorted(chosen) if pool.get("order", "any") == "ascending" else list(chosen)
        elif "each" in pool:
            out[f.name] = [one(pool["each"].evaluate({**names, "i": i}, facts) or [0])
                           for i in range(pool["length"].evaluate(names, facts) or 0)]
        else:  # a FLOAT array: each item from the pools, as the float32 the array holds
            pools = list(pool["ordinary"]) + list(pool.get("edge", []))
            out[f.name] = [float(np.float32(one(pools))) for _ in range(pool["length"].evaluate(names, facts) or 0)]
    return out


@lru_cache(maxsize=None)
def _dependent_order(spec: OperatorSpec) -> tuple:
    """The shape-dependent fields, each after the fields its domain reads (offsets after sizes)."""
    pending = [f for f in spec.attribute_fields if f.is_array or "one_of" in spec.attribute_values.get(f.name, {})]
    order = []
    while pending:
        ready = [f for f in pending if not (domain_reads(spec.attribute_values[f.name]) & {p.name for p in pending if p is not f})]
        if not ready:
            raise ValueError(f"{spec.name}: the domains of {', '.join(p.name for p in pending)} read each other")
        order.extend(ready)
        pending = [f for f in pending if f not in ready]
    return tuple(order)


_DOMAIN_KEYS: tuple[Literal["subset_of", "length", "each", "one_of"], ...] = ("subset_of", "length", "each", "one_of")


def domain_reads(pool: AttributePool) -> set[str]:
    """The names a field's domain expressions read."""
    return set().union(*(pool[key].names() for key in _DOMAIN_KEYS if key in pool))


@lru_cache(maxsize=None)
def _realign_plan(spec: OperatorSpec, level: str, member: str | None, name: str) -> dict[tuple, int]:
    """For each coverage-plan cell that has `name` (a broadcast operand whose shape rule aligns
    right or left), the dimension count it is first drawn at, keyed by (sorted type items, dimension count,
    slot).
    Chosen in plan order, greedily: the count that reaches the most (tensor, type, count) cells not
    yet reached, of `name` and of the tensors whose shape rule reads it (they take its count: a
    rule that all scales share AScaleTensor's DimensionCount); ties go round the range with the
    cell's index, so that every count the table lists is reached where the cells allow it."""
    lo, hi = dim_range(spec, level, [name], member)
    followers = {name} | {c.tensors[0] for c in spec.shape_rules if name in c.reads}
    reached: set[tuple] = set()
    chosen = {}
    for index, cell in enumerate(coverage_plan(spec, level, member=member)):
        types = cell.types
        if types.get(name) is None:
            continue
        present = [x for x in sorted(followers) if types.get(x) is not None]
        rotation = [lo + (index + k) % (hi - lo + 1) for k in range(hi - lo + 1)]
        count = max(rotation, key=lambda c: sum((x, types[x], c) not in reached for x in present))
        reached |= {(x, types[x], count) for x in present}
        chosen[(tuple(sorted(types.items())), cell.dim_count, cell.slot)] = count
    return chosen


def _realigned(draw: st.DrawFn, sizes: list[int], lo: int, hi: int, planned: int | None,
               fixed: bool = False, keep_all: bool = False) -> list[int]:
    """A broadcast operand's Sizes (its shape rule aligns right) at a dimension count drawn from
    its table's range `lo`..`hi`: leading 1s left out or added, so that every count the table lists
    is generated, not only the count of the tensor it broadcasts against. The first choice is the
    count the coverage plan gives the cell (`planned`: _realign_plan; None, a cell outside the plan:
    the least count), where the Sizes allow it: a bounded run of one descriptor per coverage-plan
    cell (whose first draw is the first choice) then reaches every count, below, at and above the
    other tensors'. (A cycle keyed by the derived count and the absent tensors alone skipped
    counts: all-ones Sizes of 4 or 5 dims never started at 3.)"""
    ones = next((i for i, s in enumerate(sizes) if s != 1), len(sizes))
    least = max(lo, len(sizes) if keep_all else len(sizes) - ones, 1)  # keep_all: leading 1s added only
    if keep_all and planned is not None and lo <= planned < least:
        reject()  # the plan's count needs shorter sizes (another enum member's rule): drawn again
    if least > hi:
        return sizes
    first = planned if planned is not None and least <= planned <= hi else least
    if fixed and first == planned:
        count = first
    else:
        count = draw(st.sampled_from([first, *(c for c in range(least, hi + 1) if c != first)]))
    return sizes[len(sizes) - count:] if count <= len(sizes) else [1] * (count - len(sizes)) + sizes


def _free_size(draw: st.DrawFn, entry: Any, most: int) -> int:
    """A size for a `free` position, 1 to `most`; for `free_in(values)`, one of its values in that
    range (none: the drawn shapes leave it no size, and the example is redrawn)."""
    values = getattr(entry, "values", None)
    if values is None:
        return draw(ints(1, max(1, most)))
    fitting = sorted({v for v in values if 1 <= v <= max(1, most)})
    if not fitting:
        reject()
    return draw(st.sampled_from(fitting))


def derive_sizes(spec: OperatorSpec, descriptor: Descriptor, tensor: str) -> list:
    """The Sizes the spec's `shape` rule gives `tensor` in `descriptor` (ValueError when it gives
    none); a position the rule leaves `free` is FREE, for the caller to fill."""
    for c in spec.shape_rules:
        if c.tensors[0] == tensor and c.sizes is not None:
            sizes = c.sizes.evaluate(*expression_scope(spec, descriptor))
            if isinstance(sizes, list) and sizes and all(is_free(v) or (isinstance(v, int) and v >= 0) for v in sizes):
                return sizes
            raise ValueError(f"{spec.name}: shape rule {c.id} gives {sizes!r} for {tensor}")
    raise ValueError(f"{spec.name}: no shape rule for {tensor}")


# --- data -------------------------------------------------------------------------------------------


@st.composite
def valid_cases(draw: st.DrawFn, spec: OperatorSpec, level: str, data_type: str | None = None,
                config: GenConfig = DEFAULT_CONFIG, cell: tuple[dict[str, str | None], int] | None = None) -> Case:
    descriptor = draw(valid_descriptors(spec, level, data_type, config, cell))
    seed = draw(SEED)
    tags = layout_tags(descriptor)
    return Case(descriptor, level, make_inputs(spec, descriptor, seed, config, level=level), origin=f"generated:valid:seed={seed}", tags=tags)


@st.composite
def valid_case_batches(draw: st.DrawFn, spec: OperatorSpec, level: str, data_type: str | None = None,
                       config: GenConfig = DEFAULT_CONFIG, per_descriptor: int = 4) -> list[Case]:
    """Several cases sharing one drawn descriptor, each with its own data (seeds seed, seed+1, ...).

    Drawing a descriptor costs Hypothesis far more than making data for it, so the data-heavy part
    of the search (special values, ties, saturation) is covered several times per draw."""
    descriptor = draw(valid_descriptors(spec, level, data_type, config))
    seed = draw(SEED)
    tags = layout_tags(descriptor)
    batch = make_input_batch(spec, descriptor, seed, per_descriptor, config, level=level)
    return [Case(descriptor, level, inputs, origin=f"generated:valid:seed={seed}:set={i}", tags=tags)
            for i, inputs in enumerate(batch)]
