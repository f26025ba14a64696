"""Type assignments and the coverage plan: which data types each tensor takes at a level, as
the support table and every constraint (conditional ones included) allow, and the cells to cover.
"""
from __future__ import annotations

import itertools
from functools import lru_cache


from harness.spec.operator import OperatorSpec



def broken_type_constraints(spec: OperatorSpec, types: dict[str, str | None]) -> set[str]:
    """Ids of the data-type constraints that a type assignment breaks (None = absent tensor)."""
    return {c.id for c in spec.constraints if c.type_offenders(types)}


@lru_cache(maxsize=None)
def _type_space(spec: OperatorSpec, level: str) -> tuple[tuple[tuple[str, str | None], ...], ...]:
    table = spec.table_at(level)
    assert table is not None
    names = [f.name for f in spec.tensor_fields]
    choices = [list(table.tensors[n].types) + ([None] if table.tensors[n].optional else []) for n in names]
    return tuple(tuple(zip(names, combo)) for combo in itertools.product(*choices))


def valid_type_assignments(spec: OperatorSpec, level: str) -> list[dict[str, str | None]]:
    """Every per-tensor type choice (absent optional tensors included) the level's table and constraints allow."""
    return [dict(c) for c in _type_space(spec, level) if not broken_type_constraints(spec, dict(c))]


def constraint_breaking_assignments(spec: OperatorSpec, level: str, constraint_id: str) -> list[dict[str, str | None]]:
    """Type choices inside the table that break exactly one constraint, `constraint_id`."""
    return [dict(c) for c in _type_space(spec, level) if broken_type_constraints(spec, dict(c)) == {constraint_id}]


def primary_input(spec: OperatorSpec) -> str:
    """The tensor whose data type names a case (the formula's first input)."""
    return next(iter(spec.formula.inputs.values()))


def shape_group(spec: OperatorSpec) -> set[str]:
    """Tensors that must share DimensionCount and Sizes (unconditional same_shape constraints)."""
    group: set[str] = set()
    for c in spec.constraints:
        if c.rule == "same_shape" and c.when is None:
            group |= set(c.tensors)
    return group


def dim_range(spec: OperatorSpec, level: str, tensors: list[str]) -> tuple[int, int]:
    table = spec.table_at(level)
    assert table is not None
    lo = max(table.tensors[t].dims[0] for t in tensors)
    hi = min(table.tensors[t].dims[1] for t in tensors)
    return lo, hi


# --- valid descriptors ----------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _coverage_plan(spec: OperatorSpec, level: str, data_type: str | None) -> tuple:
    return tuple(_build_plan(spec, level, data_type))


def coverage_plan(spec: OperatorSpec, level: str, data_type: str | None = None) -> list[tuple[dict[str, str | None], int]]:
    """(type assignment, dimension count) pairs that together reach every cell of the table at `level`."""
    return list(_coverage_plan(spec, level, data_type))


def _build_plan(spec: OperatorSpec, level: str, data_type: str | None) -> list[tuple[dict[str, str | None], int]]:
    plan = []
    group = shape_group(spec)
    for types in valid_type_assignments(spec, level):
        if data_type is not None and types[primary_input(spec)] != data_type:
            continue
        present = [n for n, t in types.items() if t is not None]
        lo, hi = dim_range(spec, level, [n for n in present if n in group] or present)
        plan.extend((types, n) for n in range(lo, hi + 1))
    return plan


def table_cells(spec: OperatorSpec) -> set[tuple[str, str, str, str, int]]:
    """Every (operator, table level, tensor, data type, dimension count) cell of every table."""
    cells = set()
    for table in spec.support:
        for tensor, cell in table.tensors.items():
            for t in cell.types:
                for n in cell.dim_counts():
                    cells.add((spec.name, table.level, tensor, t, n))
    return cells
