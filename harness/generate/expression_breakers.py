"""Breaking `expression` and `shape` constraints: a search over small, named mutations.

A type constraint has one way to break (a type outside its list); an expression constraint such
as `all(a < InputTensor.DimensionCount for a in Axes)` or a shape rule has many, and which ones
break it alone depends on the other rules. So the breaker does not know the rule: it tries
mutations of the descriptor that a driver could meet (an array entry at or past the rank, a
repeated or extra entry, an empty array, a scalar at 0 or the type's end, a size off by one, a
dimension dropped or added), each with the derived tensors re-derived from the shape rules or
left as they were, and keeps the first one after which the validator reports exactly the target
rule (TOSA's ERROR_IF discipline: each invalid test violates one named rule). The order is drawn,
so runs see different mutations; `reachable` answers with the same search on a fixed descriptor.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any, Callable, Iterator

from hypothesis import strategies as st

from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.validator import validate
from harness.spec.model import OperatorSpec
from harness.generate.layouts import reset_layout
from harness.generate.strategies import dependent_values, derivation_order, derive_sizes, domain_reads, first_activation_values
from harness.spec.fused import item_field
from harness.spec.shape_expr import is_free
from harness.generate.types import coverage_plan, member_of

UINT32_MAX = 2**32 - 1
Mutation = tuple[str, Callable[[Descriptor], object]]  # what a mutation's function returns is not used


def _kept_free_size(old: int | None, entry: object) -> int:
    """The size a `free` position keeps (1 where the rank changed: there is none to keep); a
    `free_in(values)` one keeps it where the values hold it, else takes their first (the spec lists
    its safest value first: the full size of a tensor that may broadcast, not its 1)."""
    values: tuple[int, ...] | None = getattr(entry, "values", None)  # a `free_in` entry's (ints), None for `free`
    if not values:
        return 1 if old is None else old
    return old if old in values else values[0]


def rederive(spec: OperatorSpec, d: Descriptor, keep: frozenset[str] | set[str] = frozenset(), fresh: bool = False) -> bool:
    """Give each present derived tensor (not in `keep`) the Sizes its shape rule says; False when a
    rule gives none (the mutation made the expression undefined). `fresh`: a free position keeps
    no old size (1; a `free_in` one its first value). In derivation order: a rule that reads
    another derived tensor (a mask's Sizes read from the outputs') after that tensor's."""
    order = {n: i for i, n in enumerate(derivation_order(spec, {c.tensors[0] for c in spec.shape_rules}))}
    for c in sorted(spec.shape_rules, key=lambda c: order.get(c.tensors[0], 0)):
        name = c.tensors[0]
        t = d.tensors.get(name)
        if t is None or name in keep:
            continue
        try:
            want = derive_sizes(spec, d, name)
        except ValueError:
            return False
        # a `free` position keeps the size the tensor has there (1 where its rank changed); a
        # `free_in(values)` one keeps it where the values hold it, else takes their first
        old: list[int | None] = list(t.sizes) if len(t.sizes) == len(want) and not fresh else [None] * len(want)
        t.sizes = [_kept_free_size(o, w) if is_free(w) else w for o, w in zip(old, want)]
        t.dimension_count = None
        reset_layout(t)
    return True


def _activation_array_mutations(spec: OperatorSpec, d: Descriptor) -> Iterator[Mutation]:
    """An array of fused activations one item longer (its first item repeated, with its fields) or
    one shorter: what breaks a rule on its count."""
    for f in spec.attribute_fields:
        values = list(d.attributes.get(f.name, [])) if f.is_activation_array else []
        if not values:
            continue
        def repeat_first(x: Descriptor, n: str = f.name) -> None:
            x.attributes[n].append(x.attributes[n][0])
            first, added = item_field(n, 0) + ".", item_field(n, len(x.attributes[n]) - 1) + "."
            x.attributes.update({added + k[len(first):]: v for k, v in list(x.attributes.items()) if k.startswith(first)})
        def drop_last(x: Descriptor, n: str = f.name) -> None:
            x.attributes[n].pop()
            last = item_field(n, len(x.attributes[n])) + "."
            for k in [k for k in x.attributes if k.startswith(last)]:
                del x.attributes[k]
        yield f"{f.name} repeats its first activation", repeat_first
        yield f"{f.name} drops its last activation", drop_last


def _array_mutations(spec: OperatorSpec, d: Descriptor) -> Iterator[Mutation]:
    yield from _activation_array_mutations(spec, d)
    ranks = [t.dim_count for t in d.tensors.values() if t is not None]
    rank = max(ranks) if ranks else 4
    for f in spec.attribute_fields:
        if not f.is_array:
            continue
        values = list(d.attributes.get(f.name, []))
        top = UINT32_MAX if f.element == "UINT" else 2**31 - 1
        group = next((c.count_of for c in spec.attribute_fields if c.is_count and c.count_of is not None and f.name in c.count_of),
                     (f.name,))
        for v in (0, rank, rank + 1, 8, top):
            for i in range(len(values)):
                def set_item(x: Descriptor, n: str = f.name, i: int = i, v: int = v) -> None:
                    x.attributes[n].__setitem__(i, v)
                yield f"{f.name}[{i}] = {v}", set_item
            if len(group) == 1:
                def append(x: Descriptor, n: str = f.name, v: int = v) -> None:
                    x.attributes[n].append(v)
                yield f"{f.name} += [{v}]", append
        if values and len(group) == 1:  # an array with a count of its own: one more or fewer item
            def repeat_first(x: Descriptor, n: str = f.name) -> None:
                x.attributes[n].append(x.attributes[n][0])
            def empty(x: Descriptor, n: str = f.name) -> None:
                x.attributes.__setitem__(n, [])
            yield f"{f.name} repeats {values[0]}", repeat_first
            yield f"{f.name} = []", empty
        elif values and f.name == group[0]:  # arrays sharing a count change length together
            def drop_last(x: Descriptor, g: tuple[str, ...] = group) -> list[Any]:
                return [x.attributes[n].pop() for n in g]
            def repeat_last(x: Descriptor, g: tuple[str, ...] = group) -> list[None]:
                return [x.attributes[n].append(x.attributes[n][-1]) for n in g]
            yield f"{', '.join(group)} drop their last item", drop_last
            yield f"{', '.join(group)} repeat their last item", repeat_last
            if f.element == "INT":
                def set_first(x: Descriptor, n: str = f.name) -> None:
                    x.attributes[n].__setitem__(0, -1)
                yield f"{f.name}[0] = -1", set_first


def _scalar_mutations(spec: OperatorSpec, d: Descriptor) -> Iterator[Mutation]:
    ranks = [t.dim_count for t in d.tensors.values() if t is not None]
    rank = max(ranks) if ranks else 4
    for f in spec.attribute_fields:
        if f.c_type in ("UINT", "INT") and not f.is_count and f.enum is None:
            current = int(d.attributes.get(f.name, 0))
            for v in (0, 1, current + 1, rank, rank + 1, 2**31 - 1) + ((UINT32_MAX,) if f.c_type == "UINT" else (-1, -(2**31))):
                def set_int(x: Descriptor, n: str = f.name, v: int = v) -> None:
                    x.attributes.__setitem__(n, float(v))
                yield f"{f.name} = {v}", set_int
        elif f.c_type == "FLOAT" and f.struct is None:  # a float rule (a bound, a minimum steepness)
            for fv in (0.0, -1.0, 0.5, 0.9999999403953552, 1.0, float("nan"), float("-inf"), float("inf")):
                def set_float(x: Descriptor, n: str = f.name, v: float = fv) -> None:
                    x.attributes.__setitem__(n, v)
                yield f"{f.name} = {fv}", set_float
        elif f.enum is not None:  # another member (a value outside them is attribute.enum_value's)
            current_value = d.attributes.get(f.name, f.default)
            for member, ev in f.enum.items():
                if ev != current_value:
                    def set_member(x: Descriptor, n: str = f.name, v: int = ev) -> None:
                        x.attributes.__setitem__(n, float(v))
                    yield f"{f.name} = {member}", set_member


def _size_mutations(spec: OperatorSpec, d: Descriptor) -> Iterator[Mutation]:
    def edit(name: str, change: Callable[[TensorDesc], object]) -> Callable[[Descriptor], None]:
        def apply(x: Descriptor) -> None:
            t = x.tensors[name]
            assert t is not None
            change(t)
            t.dimension_count = None
            reset_layout(t)
        return apply
    for name, t in d.tensors.items():
        if t is None:
            continue
        for i in range(len(t.sizes)):
            def grow(t: TensorDesc, i: int = i) -> None:
                t.sizes.__setitem__(i, t.sizes[i] + 1)
            yield f"{name}.Sizes[{i}] += 1", edit(name, grow)
            if t.sizes[i] > 1:
                def to_one(t: TensorDesc, i: int = i) -> None:
                    t.sizes.__setitem__(i, 1)
                yield f"{name}.Sizes[{i}] = 1", edit(name, to_one)
        if len(t.sizes) > 1:
            yield f"{name} drops its last dimension", edit(name, lambda t: t.sizes.pop())
        yield f"{name} gains a leading 1", edit(name, lambda t: t.sizes.insert(0, 1))


def _shape_rule_mutations(spec: OperatorSpec, d: Descriptor) -> Iterator[Mutation]:
    """A derived tensor one past what its shape rule gives (an exact size, or an upper bound) in one dimension."""
    for c in spec.shape_rules:
        name = c.tensors[0]
        if d.tensors.get(name) is None:
            continue
        if c.align == "leading_ones":  # the rule allows leading 1s only: a leading 2 breaks it, whatever its free sizes

            def lead(x: Descriptor, name: str = name) -> None:
                t = x.tensors[name]
                assert t is not None
                t.sizes.insert(0, 2)
                t.dimension_count = None
                reset_layout(t)
            yield f"{name} gains a leading 2 ({c.id} allows leading 1s only)", lead
        try:
            want = derive_sizes(spec, d, name)
        except ValueError:
            continue
        for i, v in enumerate(want):
            if is_free(v):  # any size is valid there: nothing to step past
                yield from _free_in_steps(name, c.id, want, i, v, d)
                continue

            def apply(x: Descriptor, name: str = name, want: list[int] = want, i: int = i, v: int = v) -> None:
                t = x.tensors[name]
                assert t is not None
                if len(t.sizes) == len(want):
                    t.sizes[i] = v + 1
                    t.dimension_count = None
                    reset_layout(t)
            yield f"{name}.Sizes[{i}] = {v + 1} (one past {c.id})", apply


def _free_in_steps(name: str, rule_id: str, want: list, i: int, entry: object, d: Descriptor) -> Iterator[Mutation]:
    """A `free_in(values)` position one step off its size (to 1 or more): the values keep generated
    descriptors inside the spec's other rules (a count that is a multiple of a group count), and
    stepping off them is how such a rule is broken (a plain `free` position has no such rule)."""
    t = d.tensors.get(name)
    if getattr(entry, "values", None) is None or t is None or len(t.sizes) != len(want):
        return
    for size in (t.sizes[i] + 1, t.sizes[i] - 1):
        if size < 1:
            continue

        def apply(x: Descriptor, name: str = name, i: int = i, size: int = size) -> None:
            u = x.tensors[name]
            assert u is not None
            u.sizes[i] = size
            u.dimension_count = None
            reset_layout(u)
        yield f"{name}.Sizes[{i}] = {size} (a step off {rule_id}'s free_in values)", apply


def mutations(spec: OperatorSpec, d: Descriptor) -> list[Mutation]:
    return [*_array_mutations(spec, d), *_scalar_mutations(spec, d), *_size_mutations(spec, d), *_shape_rule_mutations(spec, d)]


def _presence_mutations(spec: OperatorSpec, level: str, d: Descriptor) -> list[Mutation]:
    """Each bound optional tensor left null. No other mutation binds or drops a tensor, so a rule
    that ties a tensor's presence to another's and to an attribute (an input that 'must be supplied
    when' an optional output is, or when the reduction is MAX) breaks only this way. The last resort of the search: a rule that
    another mutation breaks keeps the draws it had."""
    table = spec.table_for(level, member_of(spec, d.attributes))
    if table is None:
        return []
    found: list[Mutation] = []
    for name, cell in table.tensors.items():
        if cell.optional and d.tensors.get(name) is not None:
            def drop(x: Descriptor, n: str = name) -> None:
                x.tensors[n] = None
            found.append((f"{name} = null", drop))
    return found


def break_alone(spec: OperatorSpec, level: str, d: Descriptor, rule: str, start: int = 0) -> tuple[Descriptor, str] | None:
    """The first mutation of `d` (from index `start`, wrapping) after which exactly `rule` is
    broken at `level`, with its description; None when none is."""
    candidates = mutations(spec, d)
    touched = lambda what: {n for n in d.tensors if what.startswith(n + ".") or what.startswith(n + " ")}
    sized = _sized_arrays(spec)
    # each mutation re-derived or not; then, only if none breaks the rule alone, those that change
    # the sizes an array's length reads (a bias per channel) with the arrays drawn again for the
    # new sizes (ChannelCount 2 for 2 channels)
    tries = [(candidates[(start + k) % len(candidates)], derive, False) for k in range(len(candidates)) for derive in (True, False)]
    tries += [(candidates[(start + k) % len(candidates)], True, True) for k in range(len(candidates))
              if sized & touched(candidates[(start + k) % len(candidates)][0])]
    # the last resort, after every other mutation: a bound optional tensor left null
    tries += [(mutation, derive, False) for mutation in _presence_mutations(spec, level, d) for derive in (True, False)]
    for (what, apply), derive, fresh in tries:
        x = d.clone()
        x.aliases = {}
        apply(x)
        if derive and not rederive(spec, x, keep=touched(what)):
            continue
        if fresh:
            x.attributes.update(first_array_values(spec, x))
        if validate(spec, x, level).rule_ids == {rule}:
            return x, what + (" (derived sizes re-derived)" if derive else "") + (" (arrays drawn again)" if fresh else "")
    return None


@lru_cache(maxsize=None)
def _sized_arrays(spec: OperatorSpec) -> frozenset[str]:
    """The tensors whose sizes an array's length or items read (a breaker that changes them may
    draw those arrays again)."""
    tensors = {f.name for f in spec.tensor_fields}
    return frozenset(n for f in spec.attribute_fields if f.is_array for n in tensors & domain_reads(spec.attribute_values.get(f.name, {})))


def expression_breaker(rule: str) -> Callable[[st.DrawFn, OperatorSpec, str, Descriptor], "tuple[Descriptor, str] | None"]:
    """A breaker (harness.generate.breakers' signature) for an expression or shape constraint."""
    def breaker(draw: st.DrawFn, spec: OperatorSpec, level: str, d: Descriptor) -> tuple[Descriptor, str] | None:
        start = draw(st.integers(0, 10_000))
        found = break_alone(spec, level, d, rule, start)
        if found is None:
            return None
        broken, what = found
        broken.__dict__["mutation"] = what  # said in the case's origin
        return broken, level
    return breaker


def first_array_values(spec: OperatorSpec, d: Descriptor) -> dict[str, Any]:
    """Each shape-dependent field from the first choices of its domain (a subset: its first items,
    at least one; per position and `one_of`: the first choice; 0 where there is none)."""
    return dependent_values(spec, d, lambda choices: choices[0] if choices else 0,
                            lambda domain, min_length: domain[:max(min_length, 1)])


@lru_cache(maxsize=None)
def reachable(spec: OperatorSpec, level: str, rule: str, member: str | None = None) -> bool:
    """Whether the mutation search breaks `rule` alone on a fixed valid descriptor at `level` (of
    the variant key's `member`, where the tables depend on one)."""
    # one cell per pattern of present tensors and dimension count, newest first: a rule over an
    # optional tensor (a matrix product's optional addend) is breakable only where that tensor is present
    patterns: dict[tuple, tuple] = {}
    for types, dims, *_ in reversed(coverage_plan(spec, level, member=member)):
        patterns.setdefault((tuple(t is None for t in types.values()), dims), (types, dims))
    # those with every tensor the rule reads present first: the answer is the same, found sooner
    # (a rule over optional zero-point tensors is breakable only where they are present)
    reads = next((c.reads for c in spec.constraints if c.rule_id == rule and c.rule in ("expression", "shape")), frozenset())
    ordered = sorted(patterns.values(), key=lambda p: any(p[0].get(n) is None for n in reads))
    derived = {c.tensors[0] for c in spec.shape_rules}
    # the default attributes, else each member of an enum field in turn (a default of 0 may be
    # a member no valid descriptor has: QuantizationType NONE)
    choices: list[dict[str, int]] = [{}] + [{f.name: v} for f in spec.attribute_fields if f.enum and f.name != spec.variant_key
                                          for v in f.enum.values()]
    # a scalar whose 0 no valid descriptor holds (a scale factor of at least 1) and that has no
    # default: its first ordinary value, with each of the choices above
    firsts = {f.name: int(spec.attribute_values[f.name]["ordinary"][0]) for f in spec.attribute_fields
              if f.default is None and not f.enum and f.c_type in ("UINT", "INT") and not f.is_count
              and spec.attribute_values.get(f.name, {}).get("ordinary")}
    if firsts:
        choices += [{**firsts, **choice} for choice in choices]
    # sizes 2, 3, 2, ...; then the same behind leading 1s, for a rule that only such a descriptor
    # keeps (an effective rank of at most 2: every size before the last two is 1)
    for (types, dims), lead in [(p, lead) for p in ordered for lead in (False, True)]:
        if lead and dims <= 2:  # no size to lead with
            continue
        tensors: dict[str, TensorDesc | None] = {}
        for f in spec.tensor_fields:
            t = types[f.name]
            sizes = [1 if lead and i < dims - 2 else 2 + (i % 2) for i in range(dims)]
            tensors[f.name] = None if t is None else TensorDesc(t, sizes)
        for choice in choices:
            d = Descriptor(spec.name, {n: None if t is None else replace(t, sizes=list(t.sizes)) for n, t in tensors.items()},
                           {**spec.default_attributes(), **choice, **spec.variant_attributes(member)})
            d.attributes.update(first_array_values(spec, d))
            d.attributes.update(first_activation_values(spec, level, d.attributes))
            if derived and not rederive(spec, d):
                continue
            if validate(spec, d, level).accepted:
                if break_alone(spec, level, d, rule) is not None:
                    return True
                break
    return False
