"""Type assignments and the coverage plan: which data types each tensor takes at a level, as
the support table and every constraint (conditional ones included) allow, and the cells to cover.

Where the support tables depend on an enum attribute (the spec's `variant_key`), everything here
is per member of that enum: generation picks the member first, then the types its group's table
and the constraints (whose `when` may read the member) allow. `member` None is the one series of
tables of a spec without a variant key.
"""
from __future__ import annotations

import itertools
from math import prod
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from harness.model.facts import attribute_names, level_facts, level_guarded
from harness.spec.model import OperatorSpec


class PlanCell(NamedTuple):
    """One cell of the coverage plan: every tensor's type (None: an absent optional tensor), the
    dimension count, the variant key's member it is drawn for (None without a variant key), and
    which of the assignment's repeated cells it is (`slot`: _slots)."""

    types: dict[str, str | None]
    dim_count: int
    member: str | None = None
    slot: int = 0


def _names(spec: OperatorSpec, member: str | None, level: str | None = None) -> dict[str, Any] | None:
    """What a type rule's guard reads for `member` at `level`: the variant key's member, and the
    feature level where a guard reads it (POW: the exponent's type is tied below FL 3.0); None
    where no guard reads either. No level: the newest."""
    names = attribute_names(spec, spec.variant_attributes(member)) if spec.variant_key is not None else None
    if level_guarded(spec) & {"same_data_type", "data_type_in"}:
        names = {**(names or {}), **level_facts(spec.catalog, level)}
    return names


def names_for(spec: OperatorSpec, member: str | None, level: str | None = None) -> dict[str, Any] | None:
    """The attributes by name that select `member`, and the level (what a type rule's guard reads)."""
    return _names(spec, member, level)


def member_of(spec: OperatorSpec, attributes: dict[str, Any] | None) -> str | None:
    """The variant key's member these attributes hold (None without a variant key)."""
    return spec.variant_member(attributes or {}) if spec.variant_key is not None else None


def broken_type_constraints(spec: OperatorSpec, types: dict[str, str | None], member: str | None = None,
                            level: str | None = None) -> set[str]:
    """Ids of the data-type constraints that a type assignment breaks at `level` (None = absent tensor)."""
    names = _names(spec, member, level)
    return ({c.id for c in spec.constraints if c.type_offenders(types, names)} | _presence_broken(spec, types, level)
            | _presence_unsatisfiable(spec, types, level))


def presence_only(spec: OperatorSpec, c: Any) -> bool:
    """Whether `c` is an expression rule that reads only tensors' `present` (and, in its `when`,
    the feature level): a type assignment (None = absent) decides it, so its breaker is a type
    assignment's too."""
    if c.rule != "expression" or c.check is None:
        return False
    tensors = {f.name for f in spec.tensor_fields}
    levels = set(level_facts(spec.catalog, None))
    if c.check.facts_read() != {"present"} or c.check.names() - tensors:
        return False
    return c.guard is None or not (c.guard.names() - levels)


@lru_cache(maxsize=None)
def _presence_rules(spec: OperatorSpec) -> tuple[Any, ...]:
    """The spec's presence-only expression rules (presence_only), found once per spec."""
    return tuple(c for c in spec.constraints if presence_only(spec, c))


def _presence_broken(spec: OperatorSpec, types: dict[str, str | None], level: str | None) -> set[str]:
    """Ids of the expression rules that read nothing but which tensors are present (and the feature
    level): "this tensor is required if that one is present". A type assignment decides them (None
    = absent), so generation honours them with the types, as it does the type rules."""
    from harness.spec.shape_expr import TensorFacts
    rules = _presence_rules(spec)
    if not rules:
        return set()
    level_names = level_facts(spec.catalog, level)
    tensors = {n: TensorFacts(() if t is not None else None) for n, t in types.items()}
    broken = set()
    for c in rules:
        assert c.check is not None
        if c.guard is not None and not c.guard.evaluate(level_names, tensors):
            continue
        if not c.check.evaluate(level_names, tensors):
            broken.add(c.id)
    return broken


MAX_ENUM_COMBINATIONS = 4096  # member combinations a presence-and-enum rule is tried with (beyond: not decided here)


@lru_cache(maxsize=None)
def presence_attribute_rules(spec: OperatorSpec) -> tuple:
    """The expression rules that read nothing but tensors' presence, scalar attributes and the
    feature level, in their check and their `when`: MaskTensor is present exactly when MaskType is
    not NONE; QueryHeadCount % KeyValueHeadCount == 0 when KeyValueHeadCount >= 1. The
    cell's types and the attributes drawn first decide them, so generation checks them before
    it draws a tensor. The check after the draw (expression_violations) would reject the same
    descriptors, but only after drawing all their tensors: an attention operator's cells drew ~40
    descriptors per one kept."""
    scalars = {f.name for f in spec.attribute_fields
               if not (f.is_array or f.is_count or f.struct is not None or f.is_fused_activation or f.is_scalar_union)}
    tensors = {f.name for f in spec.tensor_fields}
    from harness.spec.model import enum_members
    readable = scalars | tensors | set(enum_members(list(spec.fields)))
    levels = set(level_facts(spec.catalog, None))
    out = []
    for c in spec.constraints:
        if c.rule != "expression" or c.check is None:
            continue
        parts = [c.check] + ([c.guard] if c.guard is not None else [])
        if all(part.names() <= readable | levels and part.facts_read() <= {"present"} for part in parts):
            out.append((c, frozenset().union(*(part.names() & scalars for part in parts))))
    return tuple(out)


@lru_cache(maxsize=None)
def _presence_enum_rules(spec: OperatorSpec) -> tuple[tuple[Any, tuple[tuple[str, tuple[int, ...]], ...]], ...]:
    """The presence_attribute_rules that read tensors' presence and enum attributes only, each with
    the members of the enum fields it reads: 'InputTensor must be supplied when
    OutputROIGradientTensor is supplied, or when ReductionFunction == MAX'. Not presence_only (an
    attribute decides them too), so generation keeps them by drawing; but a type assignment under
    which no member satisfies one can never be valid, and is left out (_presence_unsatisfiable)."""
    enums = {f.name: tuple(sorted(set(f.enum.values()))) for f in spec.attribute_fields if f.enum and not f.is_array}
    out = []
    for c, reads in presence_attribute_rules(spec):
        parts = [c.check] + ([c.guard] if c.guard is not None else [])
        if not reads or not reads <= enums.keys() or not any(part.facts_read() for part in parts):
            continue  # another scalar, or an attribute rule (the attributes' draw keeps it)
        if prod(len(enums[n]) for n in reads) <= MAX_ENUM_COMBINATIONS:
            out.append((c, tuple((n, enums[n]) for n in sorted(reads))))
    return tuple(out)


def _presence_unsatisfiable(spec: OperatorSpec, types: dict[str, str | None], level: str | None) -> set[str]:
    """Ids of the presence-and-enum rules (_presence_enum_rules) that no member of their enum fields
    satisfies with these tensors present (None = absent): an input left null beside the optional output
    that requires it, whatever the reduction. Asked for every type assignment the coverage plans
    and the invalid search weigh; the answer depends on the presence pattern only, so it is kept per pattern."""
    if not _presence_enum_rules(spec):
        return set()
    return set(_unsatisfiable_for(spec, tuple(sorted((n, t is not None) for n, t in types.items())), level))


@lru_cache(maxsize=4096)
def _unsatisfiable_for(spec: OperatorSpec, presence: tuple[tuple[str, bool], ...], level: str | None) -> frozenset[str]:
    """_presence_unsatisfiable for one presence pattern ((tensor, bound) pairs)."""
    from harness.spec.model import enum_members
    from harness.spec.shape_expr import TensorFacts
    base = {**enum_members(list(spec.fields)), **level_facts(spec.catalog, level)}
    tensors = {n: TensorFacts(() if bound else None) for n, bound in presence}
    broken = set()
    for c, enums in _presence_enum_rules(spec):
        def holds(values: tuple[int, ...]) -> bool:
            names = {**base, **dict(zip([n for n, _ in enums], values))}
            if c.guard is not None and not c.guard.evaluate(names, tensors):
                return True
            return bool(c.check.evaluate(names, tensors))
        if not any(holds(values) for values in itertools.product(*(members for _, members in enums))):
            broken.add(c.id)
    return frozenset(broken)


def _table(spec: OperatorSpec, level: str, member: str | None):
    table = spec.table_for(level, member)
    assert table is not None, f"{spec.name} has no table at FL {level} for {member}"
    return table


def type_groups(spec: OperatorSpec, without: str | None = None) -> list[list[str]]:
    """The tensor fields in groups whose present members always share one data type: those tied
    by an unconditional `same_data_type` rule (transitively), each other tensor alone. A type
    variable per group, as TOSA's support rows write them: generation enumerates one type per
    group, not one per tensor, so tied tensors cost nothing (a tensor array of N items tied to
    its output is 11 choices, not 11^(N+1)). `without`: a constraint id left out (the assignments
    that break it alone hold every other tie)."""
    names = [f.name for f in spec.tensor_fields]
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n
    for c in spec.constraints:
        if c.rule == "same_data_type" and c.when is None and c.guard is None and c.id != without:
            for other in c.tensors[1:]:
                parent[root(other)] = root(c.tensors[0])
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())


def _group_choices(table, group: list[str], nullable: frozenset[str] = frozenset()) -> list[tuple[tuple[str, str | None], ...]]:
    """Every assignment of one group: one type for its present members (each member's cell must
    list it), optional members present or absent, required ones present. `nullable`: plain
    optional outputs that may be absent too (those a presence rule being broken reads)."""
    absent = lambda n: table.tensors[n].omittable or (n in nullable and table.tensors[n].optional)
    out = []
    for t in dict.fromkeys(t for n in group for t in table.tensors[n].types):
        per_member = []
        for n in group:
            cell = table.tensors[n]
            options = ([t] if t in cell.types else []) + ([None] if absent(n) else [])
            per_member.append(options)
        out += [tuple(zip(group, combo)) for combo in itertools.product(*per_member)]
    if all(absent(n) for n in group):  # the whole group absent
        out.append(tuple((n, None) for n in group))
    return list(dict.fromkeys(out))


@lru_cache(maxsize=None)
def _type_space(spec: OperatorSpec, level: str, member: str | None,
                without: str | None = None) -> tuple[tuple[tuple[str, str | None], ...], ...]:
    """Every per-tensor type choice the table allows where tied tensors agree (type_groups, but
    for the tie of constraint `without`), in field order; the constraints are checked by the caller."""
    table = _table(spec, level, member)
    names = [f.name for f in spec.tensor_fields]
    nullable = nullable_outputs(spec, without)
    per_group = [_group_choices(table, g, nullable) for g in type_groups(spec, without)]
    out = []
    for combo in itertools.product(*per_group):
        types = dict(pair for part in combo for pair in part)
        if not array_gap(spec, types):
            out.append(tuple((n, types[n]) for n in names))
    # in the order of the per-tensor product (each tensor's types as the table lists them, absent
    # last), so that plans and what a fixed seed draws do not depend on the grouping
    order = {n: {t: i for i, t in enumerate(list(table.tensors[n].types) + [None])} for n in names}
    return tuple(sorted(out, key=lambda c: tuple(order[n][t] for n, t in c)))


def nullable_outputs(spec: OperatorSpec, constraint_id: str | None) -> frozenset[str]:
    """The plain optional outputs (bound in every valid case) that breaking `constraint_id` may
    leave null: those a presence rule reads ("at least one of the two outputs"), which no
    assignment with them bound could break."""
    rule = next((c for c in _presence_rules(spec) if c.id == constraint_id), None)
    return frozenset() if rule is None else frozenset(rule.reads)


def array_gap(spec: OperatorSpec, types: dict[str, Any]) -> str | None:
    """The first item of a tensor array that is present after an absent one, or None: an array
    has no holes (InputCount items, then nothing), so no descriptor can say that."""
    for items in spec.tensor_arrays.values():
        for before, item in zip(items, items[1:]):
            if types.get(before) is None and types.get(item) is not None:
                return item
    return None


def valid_type_assignments(spec: OperatorSpec, level: str, member: str | None = None) -> list[dict[str, str | None]]:
    """Every per-tensor type choice (absent optional tensors included) the level's table (of
    `member`'s variant group) and the constraints allow."""
    return [dict(c) for c in _type_space(spec, level, member) if not broken_type_constraints(spec, dict(c), member, level)]


LARGEST_TYPE_SPACE = 20000  # per-tensor type choices beyond which a tie is broken by retyping one tensor


def constraint_breaking_assignments(spec: OperatorSpec, level: str, constraint_id: str,
                                    member: str | None = None) -> list[dict[str, str | None]]:
    """Type choices inside the table that break exactly one constraint, `constraint_id`.

    An unconditional `same_data_type` rule over many optional tensors unties a product too large
    to walk (13 tensors of two types, each also absent: 3^13 choices); there the choices are the
    valid assignments with one present tensor of the rule given another type its cell lists,
    which is every way to break the rule alone by one tensor (_retyped)."""
    rule = next((c for c in spec.constraints if c.id == constraint_id), None)
    if rule is not None and rule.rule == "same_data_type" and rule.when is None and rule.guard is None:
        table = _table(spec, level, member)
        space = prod(len(table.tensors[n].types) + (1 if table.tensors[n].optional else 0) for n in rule.tensors)
        if space > LARGEST_TYPE_SPACE:
            return _retyped(spec, level, constraint_id, rule.tensors, member)
    return [dict(c) for c in _type_space(spec, level, member, constraint_id)
            if broken_type_constraints(spec, dict(c), member, level) == {constraint_id}]


@lru_cache(maxsize=None)
def _retyped_cached(spec: OperatorSpec, level: str, constraint_id: str, tensors: tuple[str, ...],
                    member: str | None) -> tuple[tuple[tuple[str, str | None], ...], ...]:
    table = _table(spec, level, member)
    out: dict[tuple[tuple[str, str | None], ...], None] = {}
    for valid in valid_type_assignments(spec, level, member):
        for name in tensors:
            if valid.get(name) is None:
                continue
            for other in table.tensors[name].types:
                if other == valid[name]:
                    continue
                types = {**valid, name: other}
                if broken_type_constraints(spec, types, member, level) == {constraint_id}:
                    out[tuple(types.items())] = None
    return tuple(out)


def _retyped(spec: OperatorSpec, level: str, constraint_id: str, tensors: list[str] | tuple[str, ...],
             member: str | None) -> list[dict[str, str | None]]:
    """The valid type assignments with one present tensor of `tensors` retyped so that exactly
    `constraint_id` breaks."""
    return [dict(c) for c in _retyped_cached(spec, level, constraint_id, tuple(tensors), member)]


def primary_input(spec: OperatorSpec) -> str:
    """The tensor whose data type names a case (the formula's first input; its output when it reads
    no input tensor: a generator of values)."""
    return next(iter(spec.formula.inputs.values()), spec.formula.output)


def primary_type(spec: OperatorSpec, types: Mapping[str, str | None]) -> str | None:
    """The data type that names a case of these per-tensor `types`: the primary input's, or the
    output's where the primary input is an absent optional tensor."""
    return types.get(primary_input(spec)) or types.get(spec.formula.output)


def shape_group(spec: OperatorSpec) -> set[str]:
    """Tensors that must share DimensionCount and Sizes (unconditional same_shape constraints)."""
    group: set[str] = set()
    for c in spec.constraints:
        if c.rule == "same_shape" and c.when is None:
            group |= set(c.tensors)
    return group


def dim_range(spec: OperatorSpec, level: str, tensors: list[str], member: str | None = None) -> tuple[int, int]:
    table = _table(spec, level, member)
    lo = max(table.tensors[t].dims[0] for t in tensors)
    hi = min(table.tensors[t].dims[1] for t in tensors)
    return lo, hi


# --- valid descriptors ----------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _coverage_plan(spec: OperatorSpec, level: str, data_type: str | None, member: str | None) -> tuple:
    return tuple(_build_plan(spec, level, data_type, member))


def coverage_plan(spec: OperatorSpec, level: str, data_type: str | None = None, member: str | None = None,
                  ) -> list[PlanCell]:
    """Cells (type assignment, dimension count, member) that together reach every cell of the
    table at `level`; for a spec with a variant key, of every member's table (or `member`'s)."""
    if spec.variant_key is not None and member is None:
        return [cell for m in spec.members_at(level) for cell in _coverage_plan(spec, level, data_type, m)]
    return list(_coverage_plan(spec, level, data_type, member))


def _build_plan(spec: OperatorSpec, level: str, data_type: str | None, member: str | None) -> list[PlanCell]:
    plan: list[PlanCell] = []
    group = shape_group(spec)
    derived = {c.tensors[0] for c in spec.shape_rules}
    if derived and not group:  # as valid_descriptors: the free tensors take the cell's dimension count
        group = {f.name for f in spec.tensor_fields if f.name not in derived}
    assignments = valid_type_assignments(spec, level, member)
    ranges: dict[tuple[str, ...], tuple[int, int]] = {}
    for types in assignments:
        present = [n for n, t in types.items() if t is not None]
        ranges[tuple(present)] = dim_range(spec, level, [n for n in present if n in group] or present, member)
    slots = _slots(spec, level, member, assignments, ranges)
    for types in assignments:
        if data_type is not None and primary_type(spec, types) != data_type:
            continue
        lo, hi = ranges[tuple(n for n, t in types.items() if t is not None)]
        plan.extend(PlanCell(types, n, member, slot) for slot in range(slots) for n in range(lo, hi + 1))
    return plan


def _slots(spec: OperatorSpec, level: str, member: str | None, assignments: list[dict[str, str | None]],
           ranges: dict[tuple[str, ...], tuple[int, int]]) -> int:
    """How many times each type assignment's cells are planned: once, unless a broadcast operand
    (a shape rule with `align`) lists more dimension counts for one of its types than the plan has
    cells holding that type. Region tensors of 2 to 4 dimensions beside a 4-D input had one cell
    per type, and a bounded run reached one count of three; each cell's count is then chosen by
    strategies._realign_plan, so that repeated cells reach the others."""
    realigned = {c.tensors[0] for c in spec.shape_rules if c.align}
    cells: dict[tuple[str, str], int] = {}
    for types in assignments:
        lo, hi = ranges[tuple(n for n, t in types.items() if t is not None)]
        for name in realigned:
            if types.get(name) is not None:
                key = (name, types[name] or "")
                cells[key] = cells.get(key, 0) + hi - lo + 1
    needed = 1
    for (name, _), count in cells.items():
        lo, hi = dim_range(spec, level, [name], member)
        needed = max(needed, -(-(hi - lo + 1) // count))
    return needed


def reachable_cells(spec: OperatorSpec) -> set[tuple]:
    """The table cells some valid descriptor can have: a cell whose (tensor, data type) no valid
    type assignment of its table holds is excluded by a type rule (an array's row lists the types
    of all its items, while the scale item must be a float and the zero-point item an integer).
    Such cells are reached by the invalid cases of that rule, not by valid ones."""
    cells, every = set(), table_cells(spec)
    for table in spec.support:
        for member in (table.variant or (None,))[:1]:
            pairs = {(n, t) for types in valid_type_assignments(spec, table.level, member) for n, t in types.items() if t}
            cells |= {c for c in every if c[1] == table.level and c[5] == table.variant and (c[2], c[3]) in pairs}
    return cells


def table_cells(spec: OperatorSpec) -> set[tuple]:
    """Every (operator, table level, tensor, data type, dimension count, variant) cell of every table."""
    cells = set()
    for table in spec.support:
        for tensor, cell in table.tensors.items():
            for t in cell.types:
                for n in cell.dim_counts():
                    cells.add((spec.name, table.level, tensor, t, n, table.variant))
    return cells
