"""Spec lint's probes (`probe_spec`, called by harness.spec.lint): what reads well can still fail when generation
evaluates it (a division by zero, a loop over 2^62 values, a `one_of` that never has a value, a
shape rule that makes a 2^40-element output), and a run would stop on it with a traceback or hang.
Lint builds a few descriptors the way generation draws them (harness.generate.strategies'
valid_descriptors: each variant member's table at the newest level and at the introducing one,
the smallest and the largest dimension counts with small sizes, every enum member, the values
generation draws for each integer attribute) and evaluates every shape rule, constraint, `one_of`
and array domain, generation limit and data range on them, under the bounds generation evaluates
them with (harness.spec.shape_expr: MAX_STEPS, MAX_LIST, MAX_INT_BITS), all probes of one spec
together within PROBE_STEPS (twice one evaluation's). A rule that raises, exceeds a bound, gives a `one_of`
no value on every probe, derives a tensor beyond MAX_GENERATED_ELEMENTS, an array longer than a
case file holds, or a limit or range outside its tensor's data type is reported as
`file:line: key: message`. Lint imports the model stage (descriptor facts), never generation
(docs/architecture.md: a stage imports earlier stages only), so the draw is mirrored here.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from harness.model.descriptor import MAX_ARRAY_ATTRIBUTE, MAX_CASE_FILE_BYTES, Descriptor, TensorDesc
from harness.model.facts import attribute_names, expression_scope, level_facts
from harness.model.layout import MAX_ELEMENTS
from harness.spec.expr import FormulaError
from harness.spec.model import MAX_DIMENSIONS, FieldSpec, OperatorSpec, SupportTable, enum_members
from harness.spec.read_formula import limit_problem, range_problem
from harness.spec.shape_expr import BEYOND, MAX_STEPS, ShapeExpr, aligned, is_free, without_text
from harness.spec.source import KeyPath, load_yaml

# A derived tensor holds at most this many elements: what a case file can carry (a failing case is
# saved as one; 2^24 FLOAT64 values are 171 MiB of base64, within MAX_CASE_FILE_BYTES), and far
# below DirectML's own limit (MAX_ELEMENTS, 2^32 - 1). Generation draws the free tensors within 64
# elements; a rule that makes millions of them from that is a spec bug.
MAX_GENERATED_ELEMENTS = min(MAX_ELEMENTS, 1 << 24)
assert (1 << 24) * 8 * 4 // 3 < MAX_CASE_FILE_BYTES
# Generation's default draw (harness.generate.layouts.GenConfig: max_dim_size 5, max_elements 64):
# the sizes probed are such draws, and so is the budget of a `free` position.
DRAW_MAX_DIM_SIZE, DRAW_MAX_ELEMENTS = 5, 64
# The evaluation steps all probes of one spec take together (each evaluation has MAX_STEPS, as
# in generation): a spec's expressions take thousands; a second or so at worst.
PROBE_STEPS = 2 * MAX_STEPS
# Type assignments tried per table before the probe gives up looking for one the type rules allow.
MAX_TYPE_TRIES = 20_000


# --- probing: descriptors as generation draws them -----------------------------------------------

class _Finding(Exception):
    """A problem a probe found, at the key of the expression (or entry) concerned."""

    def __init__(self, path: KeyPath, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class _Reject(Exception):
    """Generation would draw this descriptor again (a rule over attributes fails, a `one_of` or
    `free_in` has no value): the probe is left, as the draw is."""


@dataclass(frozen=True)
class _Probe:
    """One descriptor to build: the table (level, variant member), every tensor's type, the shape
    group's dimension count, `pick` 0 (the first of every choice, sizes of 1) or -1 (the last of
    every choice, sizes of 2 and 3), and attribute values over the base ones."""

    level: str
    member: str | None
    types: tuple[tuple[str, str | None], ...]
    dims: int
    pick: int
    attributes: tuple[tuple[str, float], ...] = ()


@dataclass
class _Prober:
    spec: OperatorSpec
    paths: dict[int, KeyPath] = field(default_factory=dict)
    left: int = PROBE_STEPS  # the steps every probe of the spec has left, together
    one_of_seen: dict[str, int] = field(default_factory=dict)  # one_of field -> probes that evaluated it
    one_of_values: set[str] = field(default_factory=set)  # one_of fields that had a value on some probe
    probes: int = 0
    where: str = ""  # the descriptor being probed, as the messages describe it

    def ev(self, expr: ShapeExpr, names: dict[str, Any], facts: dict) -> Any:
        """The expression's value on the probe; a _Finding at its key when it raises or goes beyond
        the bounds: one evaluation's (MAX_STEPS, as generation evaluates it), or all probes' of the
        spec together (PROBE_STEPS)."""
        path = self.paths.get(id(expr), ())
        try:
            value, used = expr.evaluate_steps(names, facts)
        except FormulaError as exc:
            raise _Finding(path, f"{without_text(str(exc), expr.text)} {self.where}") from None
        self.left -= used
        if self.left < 0:
            raise _Finding(path, f"evaluating the spec's expressions on the {self.probes} descriptor(s) lint probes (each of "
                                 f"at most {DRAW_MAX_ELEMENTS} elements) takes more than {PROBE_STEPS:,} steps in all: "
                                 f"{BEYOND}; this expression took {used:,} steps at once, and generation evaluates it on "
                                 f"every descriptor it draws {self.where}")
        return value


def _short(value: Any, most: int = 120) -> str:
    """A value as a message shows it: its repr, cut at `most` characters."""
    text = repr(value)
    return text if len(text) <= most else text[:most - 4] + " ..."


def _key(path: KeyPath) -> str:
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else ("." if out else "") + str(key)
    return out


def _expression_paths(spec: OperatorSpec) -> dict[int, KeyPath]:
    """Each shape expression of the spec by identity, with the key it was read from."""
    paths: dict[int, KeyPath] = {}
    for index, c in enumerate(spec.constraints):
        for expr, key in ((c.check, "expression"), (c.sizes, "sizes"), (c.guard, "when")):
            if expr is not None:
                paths.setdefault(id(expr), ("constraints", index, key))
    for name, pool in spec.attribute_values.items():
        for key in ("one_of", "subset_of", "length", "each"):
            found: Any = pool.get(key)
            if isinstance(found, ShapeExpr):
                paths.setdefault(id(found), ("attribute_values", name, key))
    for index, limit in enumerate(spec.limits):
        for expr, key in ((limit.bits, "bits"), (limit.when, "when")):
            if expr is not None:
                paths.setdefault(id(expr), ("generation", "limits", index, key))
    for index, entry in enumerate(spec.data_ranges):
        for expr, key in ((entry.low, "min"), (entry.high, "max"), (entry.when, "when")):
            if expr is not None:
                paths.setdefault(id(expr), ("generation", "data_ranges", index, key))
        if entry.distinct is not None:
            for expr, key in ((entry.distinct.axis, "axis"), (entry.distinct.modulo, "modulo")):
                paths.setdefault(id(expr), ("generation", "data_ranges", index, "distinct", key))
    return paths


def probe_spec(spec: OperatorSpec) -> None:
    """Evaluate the spec's expressions on descriptors generation may draw (see the module's
    docstring); raise the first problem as a SpecError at its key."""
    prober = _Prober(spec, _expression_paths(spec))
    try:
        for probe in _probes(spec):
            prober.probes += 1
            try:
                _run_probe(prober, probe)
            except _Reject:
                continue
            except (ArithmeticError, TypeError, ValueError) as exc:  # what the checks above did not foresee
                raise _Finding((), f"a descriptor generation may draw cannot be built: {type(exc).__name__}: {exc} "
                                   f"{prober.where}") from None
        for name, seen in prober.one_of_seen.items():
            if name not in prober.one_of_values:
                raise _Finding(("attribute_values", name, "one_of"),
                               f"one_of gives no value on any of the {seen} descriptor(s) lint probes (generation draws "
                               f"again while it is empty, and would never end): the smallest and the largest dimension "
                               f"counts with sizes 1 to 3, the defaults and every enum member")
    except _Finding as found:
        raise load_yaml(spec.path).error(found.path, found.message) from None


def _probes(spec: OperatorSpec) -> list[_Probe]:
    """The descriptors to probe: per variant member (one series of tables without a variant key),
    its table at the newest level and at the operator's introduction, with every optional tensor
    present and with each absent, at the smallest and the largest dimension count; then, on the
    newest table, each value generation may give an enum or integer attribute, one at a time."""
    catalog = spec.catalog
    newest = catalog.newest_level.name
    out: list[_Probe] = []
    for level in dict.fromkeys((newest, spec.introduced)):
        for member in spec.members_at(level):
            table = spec.table_for(level, member)
            if table is None:
                continue
            for present in (True, False):
                types = _type_assignment(spec, table, member, level, present)
                if types is None:
                    continue
                lo, hi = _group_dims(spec, table, types)
                for pick, dims in ((0, lo), (-1, hi)):
                    if lo <= hi:
                        out.append(_Probe(level, member, tuple(types.items()), dims, pick))
    base = next((p for p in out if p.level == newest and p.pick == -1), None)
    if base is not None:
        firsts = [p for p in out if p.level == newest and p.member == base.member and p.types == base.types]
        for f in spec.attribute_fields:
            for value in _attribute_choices(spec, f):
                out += [_Probe(p.level, p.member, p.types, p.dims, p.pick, ((f.name, value),)) for p in firsts]
    return list(dict.fromkeys(out))


def _attribute_choices(spec: OperatorSpec, f: FieldSpec) -> list[float]:
    """The values of a scalar attribute worth a probe of their own: every member of an enum (but
    the variant key's, which the tables pick), and for an integer field the values generation's
    pools hold and the ends of what it draws besides (0 and 1; -1 for INT)."""
    if f.is_array or f.is_count or f.struct is not None or f.is_fused_activation or f.is_scalar_union:
        return []
    if "one_of" in spec.attribute_values.get(f.name, {}) or f.name == spec.variant_key:
        return []
    if f.enum is not None:
        return sorted(float(v) for v in f.enum.values())
    if f.c_type not in ("UINT", "INT", "BOOL"):
        return []
    pools = spec.attribute_values.get(f.name, {})
    values = [*pools.get("ordinary", []), *pools.get("edge", []), 0, 1] + ([-1] if f.c_type == "INT" else [])
    return sorted({float(v) for v in values})


def _type_assignment(spec: OperatorSpec, table: SupportTable, member: str | None, level: str,
                     present: bool) -> dict[str, str | None] | None:
    """The first type per tensor (optional tensors present first, or absent first) that the type
    rules allow and that leaves no hole in a tensor array; None when none is found."""
    names = {**attribute_names(spec, spec.variant_attributes(member)), **level_facts(spec.catalog, level)}
    tensors = [f.name for f in spec.tensor_fields]
    options = []
    for name in tensors:
        cell = table.tensors[name]
        types: list[str | None] = list(cell.types)
        if cell.optional:
            types = types + [None] if present else [None, *types]
        options.append(types)
    for tries, combo in enumerate(itertools.product(*options)):
        if tries >= MAX_TYPE_TRIES:
            return None
        types_of = dict(zip(tensors, combo))
        if _array_gap(spec, types_of):
            continue
        if not any(c.type_offenders(types_of, names) for c in spec.constraints) and _presence_holds(spec, types_of, names):
            return types_of
    return None


def _presence_holds(spec: OperatorSpec, types: dict[str, str | None], names: dict[str, Any]) -> bool:
    """Whether the spec's expression rules that read nothing but tensors' `present` (exactly one
    of three tensors, two present together) hold for this type assignment (None: absent), as
    generation keeps them (harness.generate.types.presence_only): a probe is a descriptor
    generation may draw."""
    from harness.spec.shape_expr import TensorFacts
    tensors = {n: TensorFacts(() if t is not None else None) for n, t in types.items()}
    for c in spec.constraints:
        if c.rule != "expression" or c.check is None or c.guard is not None:
            continue
        if c.check.facts_read() != {"present"} or c.check.names() - set(types):
            continue
        if not c.check.evaluate(names, tensors):
            return False
    return True


def _array_gap(spec: OperatorSpec, types: dict[str, str | None]) -> bool:
    return any(types.get(a) is None and types.get(b) is not None
               for items in spec.tensor_arrays.values() for a, b in zip(items, items[1:]))


def _shape_group(spec: OperatorSpec) -> set[str]:
    """The tensors drawn with one shared Sizes (generation's shape_group, and the free tensors of
    an index-space operator or of an operator of one tensor)."""
    group = {t for c in spec.constraints if c.rule == "same_shape" and c.when is None for t in c.tensors}
    derived = {c.tensors[0] for c in spec.shape_rules}
    if (derived or len(spec.tensor_fields) == 1) and not group:
        group = {f.name for f in spec.tensor_fields if f.name not in derived}
    return group


def _group_dims(spec: OperatorSpec, table: SupportTable, types: dict[str, str | None]) -> tuple[int, int]:
    present = [n for n, t in types.items() if t is not None]
    group = _shape_group(spec)
    chosen = [n for n in present if n in group] or present
    return max(table.tensors[n].dims[0] for n in chosen), min(table.tensors[n].dims[1] for n in chosen)


def _sizes(count: int, pick: int) -> list[int]:
    """Sizes of a drawn tensor: all 1 (pick 0), or 2, 3, 2, ... within the draw's budget."""
    sizes, budget = [], DRAW_MAX_ELEMENTS
    for i in range(count):
        size = 1 if pick == 0 else max(1, min(2 + i % 2, DRAW_MAX_DIM_SIZE, budget))
        sizes.append(size)
        budget //= size
    return sizes


@lru_cache(maxsize=512)
def _defaults(spec: OperatorSpec) -> dict[str, float]:
    """Each scalar attribute generation draws, at its default (an enum's first member when its
    default is none of them); where a rule over these attributes alone fails on the defaults
    (QuantizationType != NONE), the first single change of one field that makes every such rule
    hold (generation draws until they hold)."""
    out: dict[str, float] = {}
    for f in spec.attribute_fields:
        if f.is_array or f.is_count or f.struct is not None or f.is_fused_activation or f.is_scalar_union:
            continue
        if "one_of" in spec.attribute_values.get(f.name, {}):
            continue
        value = float(f.default) if f.default is not None else 0.0
        if f.enum is not None and value not in f.enum.values():
            value = float(min(f.enum.values()))
        out[f.name] = value
    rules = _attribute_rules(spec)
    if not rules or _attribute_rules_hold(spec, rules, out):
        return out
    for f in spec.attribute_fields:
        for value in _attribute_choices(spec, f):
            changed = {**out, f.name: value}
            if _attribute_rules_hold(spec, rules, changed):
                return changed
    return out


def _attribute_rules_hold(spec: OperatorSpec, rules: list, attributes: dict[str, float]) -> bool:
    names = {**enum_members(list(spec.fields)), **{k: int(v) if float(v).is_integer() else v for k, v in attributes.items()}}
    try:
        return all(r is None or bool(r) for r in (c.check.evaluate(names, {}) for c in rules))
    except FormulaError:
        return False  # the probe that meets it reports it, at its key


def _base_attributes(spec: OperatorSpec, probe: _Probe) -> dict[str, float]:
    """The probe's scalar attributes: the defaults (_defaults), the probe's values over them, the
    variant key's member."""
    out = dict(_defaults(spec))  # a copy: the cached one is shared
    out.update(dict(probe.attributes))
    out.update(spec.variant_attributes(probe.member))
    return out


def _describe(spec: OperatorSpec, probe: _Probe, tensors: dict[str, TensorDesc | None], attributes: dict[str, Any]) -> str:
    sizes = ", ".join(f"{n} {t.sizes}" for n, t in tensors.items() if t is not None)
    attrs = ", ".join(f"{k} {int(v) if isinstance(v, float) and v.is_integer() else v}" for k, v in attributes.items()
                      if not isinstance(v, list) or len(v) <= 8)
    text = f"(on a descriptor generation may draw: FL {probe.level}; {sizes}" + (f"; {attrs}" if attrs else "") + ")"
    return text if len(text) <= 400 else text[:396] + "...)"


def _attribute_rules(spec: OperatorSpec) -> list:
    """The expression rules over scalar attributes alone (generation draws again where one fails)."""
    scalars = {f.name for f in spec.attribute_fields
               if not (f.is_array or f.is_count or f.struct is not None or f.is_fused_activation or f.is_scalar_union)}
    members = set(enum_members(list(spec.fields)))
    return [c for c in spec.constraints if c.rule == "expression" and c.check is not None and c.guard is None
            and not c.reads and c.expression_names - members and c.expression_names <= scalars | members]


def _dependent_order(spec: OperatorSpec) -> list[FieldSpec]:
    """The fields whose domains depend on the drawn shapes, each after those its domain reads."""
    pending = [f for f in spec.attribute_fields if f.is_array or "one_of" in spec.attribute_values.get(f.name, {})]
    order: list[FieldSpec] = []
    while pending:
        ready = [f for f in pending if not (_domain_reads(spec, f) & {p.name for p in pending if p is not f})]
        if not ready:
            raise _Finding(("attribute_values",), f"the domains of {', '.join(p.name for p in pending)} read each other")
        order.extend(ready)
        pending = [f for f in pending if f not in ready]
    return order


def _domain_reads(spec: OperatorSpec, f: FieldSpec) -> set[str]:
    pool = spec.attribute_values.get(f.name, {})
    return set().union(*(e.names() for e in (pool.get(k) for k in ("subset_of", "length", "each", "one_of"))
                         if isinstance(e, ShapeExpr)))


def _dependent_values(prober: _Prober, probe: _Probe, fields: list[FieldSpec], tensors: dict[str, TensorDesc | None],
                      attributes: dict[str, Any]) -> None:
    """Each shape-dependent field's value, into `attributes`: the first (pick 0) or last of a
    `one_of` or of each position's choices, the shortest or the whole subset of a domain."""
    spec, pick = prober.spec, probe.pick
    for f in fields:
        pool = spec.attribute_values[f.name]
        names, facts = expression_scope(spec, Descriptor(spec.name, tensors, attributes))
        where = ("attribute_values", f.name)
        if "one_of" in pool:
            values = prober.ev(pool["one_of"], names, facts) or []
            if not isinstance(values, list) or not all(isinstance(v, (int, float)) and abs(v) <= 1 << 64 for v in values):
                raise _Finding(where + ("one_of",), f"one_of gives {_short(values)}, not a list of numbers within 64 bits "
                                                    f"{prober.where}")
            prober.one_of_seen[f.name] = prober.one_of_seen.get(f.name, 0) + 1
            if not values:
                raise _Reject()
            prober.one_of_values.add(f.name)
            attributes[f.name] = float(values[pick])
        elif "subset_of" in pool:
            domain = prober.ev(pool["subset_of"], names, facts) or []
            if not isinstance(domain, list):
                raise _Finding(where + ("subset_of",), f"subset_of gives {_short(domain)}, not a list {prober.where}")
            chosen = domain if pick == -1 else domain[:min(pool.get("min_length", 0), len(domain))]
            attributes[f.name] = sorted(chosen) if pool.get("order", "any") == "ascending" else list(chosen)
        else:
            length = prober.ev(pool["length"], names, facts) or 0
            if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= MAX_ARRAY_ATTRIBUTE:
                raise _Finding(where + ("length",), f"length gives {_short(length)}: an array's length is a whole number from 0 "
                                                    f"to {MAX_ARRAY_ATTRIBUTE} (the longest array a case file holds) {prober.where}")
            if "each" in pool:
                items = []
                for i in range(length):
                    choices = prober.ev(pool["each"], {**names, "i": i}, facts) or [0]
                    if not isinstance(choices, list):
                        raise _Finding(where + ("each",), f"each gives {_short(choices)} at i = {i}, not a list {prober.where}")
                    items.append(choices[pick])
                attributes[f.name] = items
            else:
                values = [*pool.get("ordinary", []), *pool.get("edge", [])] or [0.0]
                attributes[f.name] = [float(values[pick])] * length


def _derivation_order(spec: OperatorSpec, derived: set[str]) -> list[str]:
    pending = [f.name for f in spec.tensor_fields if f.name in derived]
    reads = {c.tensors[0]: c.reads - {c.tensors[0]} for c in spec.shape_rules}
    order: list[str] = []
    while pending:
        ready = next((n for n in pending if not reads.get(n, set()) & set(pending)), pending[0])
        order.append(ready)
        pending.remove(ready)
    return order


def _derive(prober: _Prober, probe: _Probe, name: str, tensors: dict[str, TensorDesc | None],
            attributes: dict[str, Any]) -> list[int]:
    """The Sizes the shape rule gives `name`, its `free` positions filled as generation fills
    them; a _Finding when the rule gives no sizes or too many elements."""
    spec = prober.spec
    rules = [(i, c) for i, c in enumerate(spec.constraints) if c.rule == "shape" and c.tensors[0] == name and c.sizes is not None]
    index, rule = rules[0]
    assert rule.sizes is not None
    path = ("constraints", index, "sizes")
    names, facts = expression_scope(spec, Descriptor(spec.name, tensors, attributes))
    sizes = prober.ev(rule.sizes, names, facts)
    if not (isinstance(sizes, list) and sizes and all(is_free(v) or (isinstance(v, int) and v >= 0) for v in sizes)):
        raise _Finding(path, f"gives {_short(sizes)} for {name}: generation needs a list of sizes, each a whole number or free "
                             f"{prober.where}")
    table = spec.table_for(probe.level, probe.member)
    lo, hi = table.tensors[name].dims if table is not None else (1, MAX_DIMENSIONS)
    if not lo <= len(sizes) <= hi:
        raise _Finding(path, f"gives {name} {len(sizes)} dimension(s); its support table allows {lo} to {hi} {prober.where}")
    fixed = [s for s in sizes if not is_free(s)]
    budget = max(1, DRAW_MAX_ELEMENTS // max(1, math.prod(fixed)))
    most = min(DRAW_MAX_DIM_SIZE, budget)
    out = []
    for s in sizes:
        if is_free(s):
            values = getattr(s, "values", None)
            fitting = list(range(1, most + 1)) if values is None else sorted({v for v in values if 1 <= v <= most})
            if not fitting:
                raise _Reject()
            out.append(fitting[probe.pick])
        else:
            out.append(s)
    elements = math.prod(out)
    if elements > MAX_GENERATED_ELEMENTS:
        count = f"{elements:,}" if elements < 10 ** 18 else f"about 2^{elements.bit_length() - 1}"
        raise _Finding(path, f"gives {name} {count} elements (Sizes {_short(out)}): "
                             f"beyond the element limit of a generated tensor ({MAX_GENERATED_ELEMENTS:,}; what a case file "
                             f"holds) {prober.where}")
    if rule.bound == "upper" and probe.pick == 0:
        out = [1 if s >= 1 else s for s in out]
    return out


def _run_probe(prober: _Prober, probe: _Probe) -> None:
    """Build the probe's descriptor in generation's order (attributes, the rules over them, free
    tensors, shape-dependent arrays, derived tensors, the arrays that read them), then evaluate
    every expression and shape rule on it, and the limits and data ranges where it is valid."""
    spec = prober.spec
    catalog = spec.catalog
    types = dict(probe.types)
    attributes: dict[str, Any] = _base_attributes(spec, probe)
    tensors: dict[str, TensorDesc | None] = {}
    group = _shape_group(spec)
    derived = {c.tensors[0] for c in spec.shape_rules}
    table = spec.table_for(probe.level, probe.member)
    assert table is not None
    shared = _sizes(probe.dims, probe.pick)
    for f in spec.tensor_fields:
        t = types[f.name]
        if t is None or f.name in derived:
            tensors[f.name] = None
            continue
        lo, hi = table.tensors[f.name].dims
        tensors[f.name] = TensorDesc(t, list(shared) if f.name in group else _sizes(lo if probe.pick == 0 else hi, probe.pick))
    prober.where = _describe(spec, probe, tensors, attributes)
    scalars = {**enum_members(list(spec.fields)), **{k: int(v) if float(v).is_integer() else v for k, v in attributes.items()}}
    for c in _attribute_rules(spec):
        holds = prober.ev(c.check, scalars, {})
        if holds is not None and not holds:
            raise _Reject()
    dependent = _dependent_order(spec)
    late = {f.name for f in dependent if _domain_reads(spec, f) & derived}
    _dependent_values(prober, probe, [f for f in dependent if f.name not in late], tensors, attributes)
    for name in _derivation_order(spec, {n for n in derived if types[n] is not None}):
        t = types[name]
        assert t is not None
        tensors[name] = TensorDesc(t, _derive(prober, probe, name, tensors, attributes))
    _dependent_values(prober, probe, [f for f in dependent if f.name in late], tensors, attributes)
    prober.where = _describe(spec, probe, tensors, attributes)
    descriptor = Descriptor(spec.name, tensors, attributes)
    names, facts = expression_scope(spec, descriptor)
    names.update(level_facts(catalog, probe.level))
    if not _rules_hold(prober, descriptor, names, facts):
        return  # generation draws such a descriptor again (or the validator reports it): its data are never made
    for index, limit in enumerate(spec.limits):
        for dtype, bits in _in_force(prober, table, limit, descriptor, names, facts, (limit.bits,)):
            problem = limit_problem(bits, dtype)
            if problem:
                raise _Finding(("generation", "limits", index, "bits"), f"{problem} {prober.where}")
    for index, entry in enumerate(spec.data_ranges):
        for dtype, low, high in _in_force(prober, table, entry, descriptor, names, facts, (entry.low, entry.high)):
            for key, value in (("min", low), ("max", high)):
                problem = range_problem(value, dtype)
                if problem:
                    raise _Finding(("generation", "data_ranges", index, key), f"{problem} {prober.where}")
            if isinstance(low, int) and isinstance(high, int) and low > high:
                raise _Finding(("generation", "data_ranges", index), f"min {low} is above max {high}: the range is empty "
                                                                   f"{prober.where}")
        if entry.distinct is not None and _in_force(prober, table, entry, descriptor, names, facts, ()):
            problem = _distinct_problem(entry.distinct, descriptor.tensors[entry.tensor], prober, names, facts)
            if problem:
                raise _Finding(("generation", "data_ranges", index, "distinct"), f"{problem} {prober.where}")


def _rules_hold(prober: _Prober, descriptor: Descriptor, names: dict[str, Any], facts: dict) -> bool:
    """Every expression and shape rule evaluated as the validator evaluates it (a rule reading a
    malformed tensor is not in force); whether they all hold."""
    malformed = {n for n, t in descriptor.tensors.items() if t is not None and 0 in t.sizes}
    holds = True
    for c in prober.spec.constraints:
        if c.rule not in ("expression", "shape") or malformed & c.reads:
            continue
        if c.guard is not None and not prober.ev(c.guard, names, facts):
            continue
        if c.rule == "expression":
            value = prober.ev(c.check, names, facts) if c.check is not None else True
            holds = holds and (value is None or bool(value))
            continue
        want = prober.ev(c.sizes, names, facts) if c.sizes is not None else None
        desc = descriptor.tensors.get(c.tensors[0])
        if desc is not None and want is not None:
            have = list(desc.sizes)
            cut = aligned(have, want, c.align) if c.align is not None and isinstance(want, list) else (have, want)
            holds = holds and cut is not None and isinstance(cut[1], list) and len(cut[1]) == len(cut[0]) and all(
                is_free(w) or (isinstance(w, int) and (1 <= a <= w if c.bound == "upper" else a == w))
                for a, w in zip(*cut))
    return holds


def _distinct_problem(distinct: Any, desc: Any, prober: _Prober, names: dict[str, Any], facts: dict) -> str | None:
    """What is wrong with a range's `distinct` rule on one descriptor: its axis must be one of the
    tensor's dims, its modulo a positive integer (within lines or blocks) or one per position of that
    axis (within tensor); an expression without a value is not in force."""
    axis, modulo = prober.ev(distinct.axis, names, facts), prober.ev(distinct.modulo, names, facts)
    if axis is None or modulo is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < len(desc.sizes):
        return f"distinct.axis is {axis!r}, not a dimension of the tensor's {len(desc.sizes)}"
    if distinct.within in ("lines", "blocks"):
        ok = isinstance(modulo, int) and not isinstance(modulo, bool) and modulo >= 1
        return None if ok else f"distinct.modulo is {modulo!r}, not a positive integer"
    ok = isinstance(modulo, list) and len(modulo) == desc.sizes[axis] and all(
        isinstance(m, int) and not isinstance(m, bool) and m >= 1 for m in modulo)
    return None if ok else f"distinct.modulo is {modulo!r}, not {desc.sizes[axis]} positive integers (one per tuple coordinate)"


def _in_force(prober: _Prober, table: SupportTable, entry: Any, descriptor: Descriptor, names: dict[str, Any], facts: dict,
              exprs: tuple[ShapeExpr, ...]) -> list[tuple]:
    """Where a limit or range is in force (its tensor present, its `when` holding), its
    expressions' values, with each data type it applies to that the table gives the tensor: every
    such type, not the probe's alone (the values seldom depend on it, and a range that fits
    INT64 may not fit INT32)."""
    desc = descriptor.tensors.get(entry.tensor)
    if desc is None:
        return []
    types = [t for t in table.tensors[entry.tensor].types if entry.applies_to is None or t in entry.applies_to]
    if not types or (entry.when is not None and not prober.ev(entry.when, names, facts)):
        return []
    values = tuple(prober.ev(e, names, facts) for e in exprs)
    return [(prober.spec.catalog.dtype(t), *values) for t in types]
