"""Hypothesis strategies for valid and invalid cases, derived from the operator specs only.

Valid cases: data types that satisfy the level's table and every constraint, dimension counts and
sizes in range, packed / padded / permuted / broadcast layouts, larger-than-minimum buffers,
alignment hints, optional tensors present or absent, in-place aliasing where allowed, attributes at
defaults, ordinary and edge values; input data that favours special values and the spec's favoured
values, and never a value the spec marks as undefined behaviour.

Invalid cases (TOSA's ERROR_IF design): for each validator rule id a breaker starts from a valid
descriptor and breaks exactly that rule. The breakers carry their own knowledge of the rules
(they do not ask the validator), so checking their output against the validator is a real
cross-check of both.
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
from hypothesis import strategies as st

from harness.model.descriptor import Case, Descriptor, TensorDesc
from harness.spec.expr import EvalContext
from harness.model.layout import element_count, minimum_bytes, packed_strides, total_bytes
from harness.spec.operator import OperatorSpec
from harness.model.validator import GENERIC_RULES
from harness.generate.values import random_values

INVALID_CASE_MAX_BUFFER = 1 << 20  # invalid cases carry input data only below this many bytes


@dataclass(frozen=True)
class GenConfig:
    """Bounds of generated cases."""

    max_elements: int = 64
    max_dim_size: int = 5
    favour_fraction: float = 0.3


DEFAULT_CONFIG = GenConfig()


# --- the generator's own view of the type constraints ---------------------------------------------

def broken_type_constraints(spec: OperatorSpec, types: dict[str, str | None]) -> set[str]:
    """Ids of the data-type constraints that a type assignment breaks (None = absent tensor)."""
    broken = set()
    for c in spec.constraints:
        if c.rule == "same_shape":
            continue
        if c.when is not None:
            actual = types.get(c.when.tensor)
            if actual is None:
                continue
            if c.when.types is not None and actual not in c.when.types:
                continue
            if c.when.types_not is not None and actual in c.when.types_not:
                continue
        present = [types[t] for t in c.tensors if types.get(t) is not None]
        if c.rule == "same_data_type" and len(set(present)) > 1:
            broken.add(c.id)
        if c.rule == "data_type_in" and any(t not in c.types for t in present):
            broken.add(c.id)
    return broken


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

@st.composite
def sizes_strategy(draw: st.DrawFn, dim_count: int, config: GenConfig = DEFAULT_CONFIG) -> list[int]:
    sizes, budget = [], config.max_elements
    for _ in range(dim_count):
        size = draw(_ints(1, max(1, min(config.max_dim_size, budget))))
        sizes.append(size)
        budget //= size
    if len(sizes) > 1:  # the large sizes must not always come first
        shift = draw(_ints(0, len(sizes) - 1))
        sizes = sizes[shift:] + sizes[:shift]
    return sizes


@st.composite
def layout_strategy(draw: st.DrawFn, data_type: str, sizes: list[int], size_bytes: int, is_output: bool) -> TensorDesc:
    """A valid layout: packed (implicit or explicit), padded, permuted, or broadcast (inputs only)."""
    kinds = ("packed", "explicit", "padded", "permuted") + (() if is_output else ("broadcast",))
    kind = draw(_choice(kinds))
    n = len(sizes)
    strides: list[int] | None
    if kind == "packed":
        strides = None
    elif kind == "explicit":
        strides = packed_strides(sizes)
    elif kind == "padded":
        strides = [0] * n
        step = draw(_choice((1, 1, 2)))
        for i in range(n - 1, -1, -1):
            strides[i] = step
            step = step * sizes[i] + draw(_ints(0, 3))
    elif kind == "permuted":
        order = list(range(n))
        np.random.default_rng(draw(_SEED)).shuffle(order)
        strides = [0] * n
        step = 1
        for axis in reversed(order):
            strides[axis] = step
            step *= sizes[axis]
    else:
        strides = packed_strides(sizes)
        for i in range(n):
            if sizes[i] > 1 and draw(_BOOL):
                strides[i] = 0
    desc = TensorDesc(data_type, list(sizes), strides)
    extra = draw(_choice((None, 0, 4, 16, 64)))
    if extra is not None:
        desc.total_bytes = minimum_bytes(desc, _SizeOnly(size_bytes)) + extra  # type: ignore[arg-type]
    desc.alignment = draw(_choice((0, 16, 32, 256)))
    return desc


@dataclass(frozen=True)
class _SizeOnly:
    size_bytes: int


@lru_cache(maxsize=None)
def _attribute_values(spec: OperatorSpec) -> dict[str, st.SearchStrategy[float]]:
    out = {}
    for f in spec.attribute_fields:
        pools = spec.attribute_values.get(f.name, {})
        choices = [f.default] if f.default is not None else []
        ordinary = st.sampled_from(list(pools.get("ordinary", [])) or [0.0])
        edge = st.sampled_from(list(pools.get("edge", [])) or [0.0])
        floats = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-8.0, max_value=8.0)
        drawn = st.one_of(st.sampled_from(choices or [0.0]), ordinary, edge, floats)
        # a FLOAT field holds a float32: record the value the desc struct holds, not the pool's
        # double, so a case file names what ran and one descriptor has one case id
        out[f.name] = drawn.map(lambda v: float(np.float32(v))) if f.c_type == "FLOAT" else drawn
    return out


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


_INDEX = st.integers(0, 2**16 - 1)
_SEED = st.integers(0, 2**32 - 1)
_BOOL = st.booleans()


@lru_cache(maxsize=None)
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Strategies are cached: building one per draw costs more than the draw."""
    return st.integers(lo, hi)


@lru_cache(maxsize=None)
def _choice(items: tuple) -> st.SearchStrategy:
    return st.sampled_from(items)


def _uniform(draw: st.DrawFn, items) -> object:
    """An even choice (Hypothesis's own choices favour the first items and small integers)."""
    return items[draw(_INDEX) % len(items)]


@st.composite
def valid_descriptors(draw: st.DrawFn, spec: OperatorSpec, level: str, data_type: str | None = None,
                      config: GenConfig = DEFAULT_CONFIG,
                      cell: tuple[dict[str, str | None], int] | None = None) -> Descriptor:
    """A descriptor valid for `spec` at `level`; `data_type` fixes the primary input's type and
    `cell` (from coverage_plan) fixes every tensor's type and the dimension count."""
    catalog = spec.catalog
    assert catalog is not None
    if cell is None:
        plan = coverage_plan(spec, level, data_type)
        if not plan:
            raise ValueError(f"{spec.name} has no valid type assignment at FL {level} with {data_type}")
        cell = _uniform(draw, plan)  # type: ignore[assignment]
    types, dim_count = cell  # type: ignore[misc]
    group = shape_group(spec)
    shared_sizes = draw(sizes_strategy(dim_count, config))
    tensors: dict[str, TensorDesc | None] = {}
    for f in spec.tensor_fields:
        t = types[f.name]
        if t is None:
            tensors[f.name] = None
            continue
        sizes = shared_sizes if f.name in group else draw(sizes_strategy(draw(_ints(*dim_range(spec, level, [f.name]))), config))
        tensors[f.name] = draw(layout_strategy(t, sizes, catalog.dtype(t).size_bytes, f.role == "output"))
    aliases: dict[str, str] = {}
    if spec.in_place_allowed and draw(_BOOL):
        output, inp = draw(_choice(tuple(spec.in_place_pairs)))
        source = tensors[inp]
        if source is not None and types[output] == types[inp]:
            if source.strides is not None and 0 in source.strides:
                _reset_layout(source)  # an aliased input must not broadcast: the output would overlap
            tensors[output] = copy.deepcopy(source)
            aliases[output] = inp
    attributes = {name: float(draw(strategy)) for name, strategy in _attribute_values(spec).items()}
    return Descriptor(spec.name, tensors, attributes, aliases)


# --- data -------------------------------------------------------------------------------------------

def make_inputs(spec: OperatorSpec, descriptor: Descriptor, seed: int, config: GenConfig = DEFAULT_CONFIG,
                avoid_undefined: bool = True) -> dict[str, bytes]:
    """Whole input buffers for one case (see make_input_batch)."""
    return make_input_batch(spec, descriptor, seed, 1, config, avoid_undefined)[0]


def make_input_batch(spec: OperatorSpec, descriptor: Descriptor, seed: int, count: int,
                     config: GenConfig = DEFAULT_CONFIG, avoid_undefined: bool = True) -> list[dict[str, bytes]]:
    """`count` sets of whole input buffers for one descriptor: every physical element (padding
    included) drawn from the value pools, then the spec's favoured values written over a fraction
    of the logical elements, then values the spec marks as undefined behaviour replaced.

    All sets are made at once: every tensor gets a leading batch axis, and since every step is
    elementwise, a batch costs about as much as one set."""
    catalog = spec.catalog
    assert catalog is not None
    rng = np.random.default_rng(seed)
    raw: dict[str, np.ndarray] = {}        # tensor -> (count, TotalTensorSizeInBytes) bytes
    views: dict[str, np.ndarray] = {}      # tensor -> (count, *Sizes) writeable logical view
    for f in spec.input_fields:
        desc = descriptor.tensors.get(f.name)
        if desc is None:
            continue
        dtype = catalog.dtype(desc.data_type)
        nbytes = total_bytes(desc, dtype)
        n = nbytes // dtype.size_bytes
        block = np.zeros((count, nbytes), dtype=np.uint8)
        elements = block[:, : n * dtype.size_bytes].view(dtype.numpy)
        elements[...] = random_values(dtype, count * n, rng).reshape(count, n)
        strides = (elements.strides[0],) + tuple(st_ * dtype.size_bytes for st_ in (desc.strides or packed_strides(desc.sizes)))
        raw[f.name] = block
        views[f.name] = np.lib.stride_tricks.as_strided(elements, shape=(count, *desc.sizes), strides=strides)
    tensor_of = spec.formula.inputs

    def context() -> EvalContext:
        variables: dict[str, np.ndarray] = {}
        for var, tensor in tensor_of.items():
            if tensor in views:
                with np.errstate(invalid="ignore"):
                    variables[var] = views[tensor].astype(np.float64)
            else:
                variables[var] = np.asarray(spec.formula.absent_inputs[var], dtype=np.float64)
        ctx = EvalContext(variables=variables, tensor_types={n: t.data_type for n, t in descriptor.tensors.items() if t},
                          type_ranges=catalog.type_ranges())
        for name, const in spec.formula.constants.items():
            ctx.variables[name] = np.asarray(const.evaluate(ctx))
        for name in spec.formula.attributes:
            ctx.variables[name] = np.float64(np.float32(descriptor.attributes.get(name, spec.field(name).default or 0.0)))
        return ctx

    if spec.favour and spec.formula.operands == "value":
        # One context for all favoured expressions (they read the other inputs, which they do not
        # change); each logical element of a favoured tensor gets at most one of them.
        ctx = context()
        for tensor in sorted({f.tensor for f in spec.favour}):
            if tensor not in views or tensor in descriptor.aliases.values():
                continue
            dtype = catalog.dtype(descriptor.tensors[tensor].data_type)  # type: ignore[union-attr]
            shape = views[tensor].shape
            rules = [f for f in spec.favour if f.tensor == tensor]
            with np.errstate(invalid="ignore"):
                merged = views[tensor].astype(np.float64)
            choice = np.where(rng.random(shape) < config.favour_fraction * 2, rng.integers(0, len(rules), shape), -1)
            for index, favour in enumerate(rules):
                pick = choice == index
                if not pick.any():
                    continue
                ctx.variables["k"] = rng.integers(favour.k_range[0], favour.k_range[1], size=shape, endpoint=True).astype(np.float64)
                wanted = np.broadcast_to(np.asarray(favour.expression.evaluate(ctx), dtype=np.float64), shape)
                merged = np.where(pick, wanted, merged)
            with np.errstate(invalid="ignore", over="ignore"):
                if not dtype.is_float:
                    merged = np.where(np.isfinite(merged), np.clip(np.rint(merged), dtype.min, dtype.max), 0)
                views[tensor][...] = merged.astype(dtype.numpy)

    if avoid_undefined:
        for rule in spec.unspecified:
            if not rule.undefined_behaviour:
                continue
            for var in sorted(rule.when.names):
                tensor = tensor_of.get(var)
                if tensor not in views:
                    continue
                mask = np.broadcast_to(np.asarray(rule.when.evaluate(context()), dtype=bool), views[tensor].shape)
                if mask.any():
                    current = views[tensor].copy()
                    current[mask] = 1  # a neutral value: the case stays defined
                    views[tensor][...] = current
    return [{name: block[i].tobytes() for name, block in raw.items()} for i in range(count)]


@st.composite
def valid_cases(draw: st.DrawFn, spec: OperatorSpec, level: str, data_type: str | None = None,
                config: GenConfig = DEFAULT_CONFIG, cell: tuple[dict[str, str | None], int] | None = None) -> Case:
    descriptor = draw(valid_descriptors(spec, level, data_type, config, cell))
    seed = draw(_SEED)
    tags = layout_tags(descriptor)
    return Case(descriptor, level, make_inputs(spec, descriptor, seed, config), origin=f"generated:valid:seed={seed}", tags=tags)


@st.composite
def valid_case_batches(draw: st.DrawFn, spec: OperatorSpec, level: str, data_type: str | None = None,
                       config: GenConfig = DEFAULT_CONFIG, per_descriptor: int = 4) -> list[Case]:
    """Several cases sharing one drawn descriptor, each with its own data (seeds seed, seed+1, ...).

    Drawing a descriptor costs Hypothesis far more than making data for it, so the data-heavy part
    of the search (special values, ties, saturation) is covered several times per draw."""
    descriptor = draw(valid_descriptors(spec, level, data_type, config))
    seed = draw(_SEED)
    tags = layout_tags(descriptor)
    batch = make_input_batch(spec, descriptor, seed, per_descriptor, config)
    return [Case(descriptor, level, inputs, origin=f"generated:valid:seed={seed}:set={i}", tags=tags)
            for i, inputs in enumerate(batch)]


def layout_tags(descriptor: Descriptor) -> list[str]:
    """Tags that name the layout features of a case (for reports and filtering)."""
    tags = set()
    for desc in descriptor.tensors.values():
        if desc is None:
            tags.add("optional-absent")
            continue
        if desc.strides is not None:
            if 0 in desc.strides:
                tags.add("broadcast")
            elif desc.strides != packed_strides(desc.sizes):
                tags.add("strided")
        if desc.total_bytes is not None:
            tags.add("padded-buffer")
    if descriptor.aliases:
        tags.add("in-place")
    return sorted(tags) or ["packed"]


# --- invalid cases: one breaker per rule ------------------------------------------------------------

Breaker = Callable[[st.DrawFn, OperatorSpec, str, Descriptor], "tuple[Descriptor, str] | None"]


def _reset_layout(desc: TensorDesc) -> None:
    desc.strides = None
    desc.total_bytes = None


def _drop_aliases(d: Descriptor, tensor: str) -> None:
    d.aliases = {o: i for o, i in d.aliases.items() if tensor not in (o, i)}


def _set_group_sizes(spec: OperatorSpec, d: Descriptor, sizes: list[int], dimension_count: int | None = None) -> None:
    for name in shape_group(spec) or {f.name for f in spec.tensor_fields}:
        t = d.tensors.get(name)
        if t is not None:
            t.sizes = list(sizes)
            t.dimension_count = dimension_count
            _reset_layout(t)


def _present(d: Descriptor) -> list[str]:
    return [n for n, t in d.tensors.items() if t is not None]


def _break_unavailable(draw, spec, level, d):
    """The device (at `level`) predates the operator; the descriptor is valid at the introduction."""
    if spec.available_at(level):
        return None
    return d, level


def _break_unknown_field(draw, spec, level, d):
    source = d.tensors[draw(st.sampled_from(_present(d)))]
    d.tensors["UnknownTensor"] = copy.deepcopy(source)
    return d, level


def _break_missing(draw, spec, level, d):
    table = spec.table_at(level)
    required = [n for n in _present(d) if not table.tensors[n].optional]
    name = draw(st.sampled_from(required))
    d.tensors[name] = None
    _drop_aliases(d, name)
    return d, level


def _break_data_type(draw, spec, level, d):
    catalog = spec.catalog
    table = spec.table_at(level)
    names = [n for n in _present(d)]
    current = {n: (t.data_type if t else None) for n, t in d.tensors.items()}
    candidates = []
    for name in names:
        for t in catalog.data_types:
            if t in table.tensors[name].types:
                continue
            trial = dict(current)
            trial[name] = t
            # tensors tied by an unconditional same-type constraint follow, so that only the table rule breaks
            for c in spec.constraints:
                if c.rule == "same_data_type" and c.when is None and name in c.tensors:
                    for other in c.tensors:
                        if trial.get(other) is not None:
                            trial[other] = t
            if broken_type_constraints(spec, trial):
                continue
            if all(trial[o] in table.tensors[o].types for o in names if trial[o] is not None and trial[o] != current[o]) :
                continue
            candidates.append(trial)
    if not candidates:
        return None
    trial = draw(st.sampled_from(candidates))
    for n, t in trial.items():
        if t is not None and d.tensors[n] is not None:
            d.tensors[n].data_type = t
            d.tensors[n].alignment = 0
            _reset_layout(d.tensors[n])
    return d, level


def _break_dimension_count(draw, spec, level, d):
    lo, hi = dim_range(spec, level, [n for n in _present(d)])
    outside = [n for n in range(1, 10) if not lo <= n <= hi]
    if not outside:
        return None
    n = draw(st.sampled_from(outside))
    _set_group_sizes(spec, d, [1] * (n - 1) + [2])
    return d, level


def _break_sizes_length(draw, spec, level, d):
    group_tensor = d.tensors[_present(d)[0]]
    count = group_tensor.dim_count
    _set_group_sizes(spec, d, list(group_tensor.sizes) + [1], dimension_count=count)
    return d, level


def _break_strides_length(draw, spec, level, d):
    name = draw(st.sampled_from(_present(d)))
    t = d.tensors[name]
    n = t.dim_count
    t.strides = packed_strides(t.sizes) + [1] if draw(st.booleans()) or n == 1 else packed_strides(t.sizes)[1:]
    _drop_aliases(d, name)
    return d, level


def _break_zero_size(draw, spec, level, d):
    sizes = list(d.tensors[_present(d)[0]].sizes)
    sizes[draw(st.integers(0, len(sizes) - 1))] = 0
    _set_group_sizes(spec, d, sizes, dimension_count=None)
    return d, level


def _break_too_many(draw, spec, level, d):
    lo, hi = dim_range(spec, level, _present(d))
    n = max(lo, 2)
    if n > hi:
        return None  # one UINT32 size cannot exceed 2^32-1 elements
    _set_group_sizes(spec, d, [1] * (n - 2) + [65536, 65536])
    return d, level


def _break_total_size(draw, spec, level, d):
    name = draw(st.sampled_from(_present(d)))
    partners = {name} | {o for o, i in d.aliases.items() if i == name} | {i for o, i in d.aliases.items() if o == name}
    t = d.tensors[name]
    need = minimum_bytes(t, spec.catalog.dtype(t.data_type))
    too_small = need - draw(st.sampled_from([1, 4]))
    for p in partners:  # aliased tensors keep identical layouts
        d.tensors[p].total_bytes = too_small
    return d, level


def _break_alignment(draw, spec, level, d):
    name = draw(st.sampled_from(_present(d)))
    d.tensors[name].alignment = draw(st.sampled_from([1, 4, 8, 12, 24]))
    return d, level


def _break_flags(draw, spec, level, d):
    name = draw(st.sampled_from(_present(d)))
    d.tensors[name].flags = draw(st.sampled_from([0x2, 0x4, 0x80000000]))
    return d, level


def _break_output_overlap(draw, spec, level, d):
    out = spec.formula.output
    t = d.tensors[out]
    if all(s == 1 for s in t.sizes):
        sizes = list(t.sizes)
        sizes[-1] = 2
        _set_group_sizes(spec, d, sizes)
    t = d.tensors[out]
    strides = packed_strides(t.sizes)
    axis = draw(st.sampled_from([i for i, s in enumerate(t.sizes) if s > 1]))
    strides[axis] = 0
    t.strides = strides
    t.total_bytes = None
    _drop_aliases(d, out)
    return d, level


def _break_in_place_not_allowed(draw, spec, level, d):
    allowed = set(spec.in_place_pairs) if spec.in_place_allowed else set()
    pairs = [(o.name, i.name) for o in spec.output_fields for i in spec.input_fields
             if (o.name, i.name) not in allowed and d.tensors.get(i.name) is not None]
    if not pairs:
        return None
    output, inp = draw(st.sampled_from(pairs))
    d.aliases = {output: inp}
    return d, level


def _break_in_place_layout(draw, spec, level, d):
    if not spec.in_place_allowed:
        return None
    output, inp = draw(st.sampled_from(list(spec.in_place_pairs)))
    a, b = d.tensors.get(output), d.tensors.get(inp)
    if a is None or b is None or a.data_type != b.data_type:
        return None
    if b.strides and 0 in b.strides:
        _reset_layout(b)
    a.sizes = list(b.sizes)
    a.dimension_count = b.dimension_count
    a.strides = [s * 2 for s in packed_strides(b.sizes)]
    if a.strides == (b.strides or packed_strides(b.sizes)):
        a.strides = [s * 3 for s in packed_strides(b.sizes)]
    a.total_bytes = None
    d.aliases = {output: inp}
    return d, level


def _constraint_breaker(constraint_id: str) -> Breaker:
    def breaker(draw, spec, level, d):
        c = next(c for c in spec.constraints if c.id == constraint_id)
        if c.rule == "same_shape":
            names = [n for n in c.tensors if d.tensors.get(n) is not None]
            name = draw(st.sampled_from(names))
            t = d.tensors[name]
            t.sizes = list(t.sizes[:-1]) + [t.sizes[-1] + 1]
            _reset_layout(t)
            _drop_aliases(d, name)
            return d, level
        options = constraint_breaking_assignments(spec, level, constraint_id)
        if not options:
            return None
        types = draw(st.sampled_from(options))
        for n, t in types.items():
            if t is None:
                d.tensors[n] = None
                _drop_aliases(d, n)
            else:
                if d.tensors.get(n) is None:
                    ref = next(x for x in d.tensors.values() if x is not None)
                    d.tensors[n] = TensorDesc(t, list(ref.sizes), dimension_count=ref.dimension_count)
                d.tensors[n].data_type = t
                d.tensors[n].alignment = 0
                _reset_layout(d.tensors[n])
                _drop_aliases(d, n)
        return d, level
    return breaker


BREAKERS: dict[str, Breaker] = {
    "operator.unavailable": _break_unavailable,
    "descriptor.unknown_field": _break_unknown_field,
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
    """Whether a breaker can break `rule` alone at `level` (structural facts only, no drawing)."""
    assert spec.catalog is not None
    table = spec.table_at(level)
    if rule == "operator.unavailable":
        return not spec.available_at(level)
    if table is None:
        return False
    if rule == "tensor.missing":
        return any(not cell.optional for cell in table.tensors.values())
    if rule == "tensor.dimension_count":
        lo, hi = dim_range(spec, level, list(table.tensors))
        return lo > 1 or hi < 9
    if rule == "tensor.too_many_elements":
        return dim_range(spec, level, list(table.tensors))[1] >= 2
    if rule == "in_place.not_allowed":
        allowed = set(spec.in_place_pairs)
        return any((o.name, i.name) not in allowed for o in spec.output_fields for i in spec.input_fields)
    if rule == "in_place.layout_mismatch":
        return spec.in_place_allowed
    if rule == "tensor.data_type":
        return any(set(spec.catalog.data_types) - set(cell.types) for cell in table.tensors.values())
    if rule.startswith("constraint."):
        c = next(c for c in spec.constraints if c.rule_id == rule)
        return c.rule == "same_shape" or bool(constraint_breaking_assignments(spec, level, c.id))
    return True


@st.composite
def invalid_cases(draw: st.DrawFn, spec: OperatorSpec, level: str, rule: str,
                  config: GenConfig = DEFAULT_CONFIG) -> Case:
    """A case that breaks exactly `rule` at `level` (the device level); carries the rule id."""
    base_level = spec.introduced if rule == "operator.unavailable" else level
    descriptor = copy.deepcopy(draw(valid_descriptors(spec, base_level, config=config)))
    result = breaker_for(rule)(draw, spec, level, descriptor)
    if result is None:
        raise ValueError(f"rule {rule} cannot be broken alone for {spec.name} at FL {level}")
    broken, case_level = result
    seed = draw(st.integers(0, 2**32 - 1))
    inputs = _invalid_inputs(spec, broken, seed, config)
    return Case(broken, case_level, inputs, expect_valid=False, broken_rule=rule,
                origin=f"generated:invalid:{rule}:seed={seed}", tags=layout_tags(broken))


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
        if not dtype.has_numpy:  # sub-byte types: raw random bytes
            buffers[f.name] = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
            continue
        count = max(size // dtype.size_bytes, 0)
        buffers[f.name] = random_values(dtype, count, rng).tobytes().ljust(size, b"\0")
    return buffers


def table_cells(spec: OperatorSpec) -> set[tuple[str, str, str, str, int]]:
    """Every (operator, table level, tensor, data type, dimension count) cell of every table."""
    cells = set()
    for table in spec.support:
        for tensor, cell in table.tensors.items():
            for t in cell.types:
                for n in cell.dim_counts():
                    cells.add((spec.name, table.level, tensor, t, n))
    return cells
