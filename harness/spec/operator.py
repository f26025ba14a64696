"""The operator spec model: one YAML file per operator, loaded, schema-checked and meaning-checked.

Everything the harness knows about an operator comes from here (support tables, constraints,
formula, unspecified regions, comparison rules, examples). `load_specs` stops on the first
problem of a file with a `file:line: key.path: message` error; `lint_specs` collects them all.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import replace, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from harness.spec.catalog import Catalog, DataType, load_catalog
from harness.spec.expr import ELEMENT_NAMES, FLOAT, INTEGER, Formula, FormulaError, KindFacts, Kinds, check_kinds, parse_formula
from harness.spec.families import FamilySpec, element_variables, formula_variables, read_family
from harness.spec.schema import OPERATOR_SCHEMA
from harness.spec.shape_expr import ShapeExpr, parse_shape_expr
from harness.spec.source import SourcedYaml, SpecError, load_yaml

def _default_specs_dir() -> Path:
    """The specs shipped with dmlconform: the checkout's specs/ (a source tree or an editable
    install), else the copy installed as the `dmlconform_specs` package data."""
    checkout = Path(__file__).resolve().parents[2] / "specs"
    if (checkout / "_data_types.yaml").is_file():
        return checkout
    from importlib.util import find_spec
    found = find_spec("dmlconform_specs")
    locations = list(found.submodule_search_locations or []) if found is not None else []
    return Path(locations[0]) if locations else checkout


DEFAULT_SPECS_DIR = _default_specs_dir()
MAX_DIMENSIONS = 8


@dataclass(frozen=True)
class FieldSpec:
    """One member of the operator's desc struct, in struct order."""

    name: str
    role: str  # input | output | attribute
    c_type: str
    default: float | None = None
    enum: dict[str, int] | None = None  # an enum attribute's members (c_type names a catalog enum)
    struct: tuple[tuple[str, str], ...] | None = None  # a struct pointer's members (c_type `const STRUCT*`)
    element: str | None = None  # an array's element C type (c_type `const UINT*` with `count`)
    count: str | None = None  # an array: the field that holds its length
    count_of: tuple[str, ...] | None = None  # a count field: the arrays whose length it is (never set by a descriptor)
    activations: tuple[str, ...] | None = None  # a fused activation (`const DML_OPERATOR_DESC*`): the specs it may name
    typed_by: str | None = None  # a DML_SCALAR_UNION: the DML_TENSOR_DATA_TYPE field that says which member it holds
    # one item of a tensor array (`const DML_TENSOR_DESC*` with `count` and `max_items`): the array's
    # name and the item's position. The spec names the array once; the model holds one tensor field
    # per item, `{array}_{slot}`, item 0 required and the others optional, present as a prefix.
    array_of: str | None = None
    slot: int | None = None
    # one member of a struct held by value (c_type `DML_SIZE_2D`, not a pointer): the struct field's
    # name. The spec names the field once; the model holds one scalar attribute per member,
    # `{field}_{member}`, which expressions and `attribute_values` name; the desc struct holds them
    # consecutively (every catalog struct member is 4 bytes, so that is the C layout).
    member_of: str | None = None

    @property
    def is_tensor_array_item(self) -> bool:
        return self.array_of is not None

    @property
    def is_scalar_union(self) -> bool:
        return self.typed_by is not None

    @property
    def is_fused_activation(self) -> bool:
        return self.activations is not None

    @property
    def is_array(self) -> bool:
        return self.element is not None

    @property
    def is_count(self) -> bool:
        return self.count_of is not None


@dataclass(frozen=True)
class TensorSupport:
    """One row of a support table."""

    kind: str  # input | optional_input | output | optional_output (items 1.. of an output tensor array)
    dims: tuple[int, int]
    types: tuple[str, ...]

    @property
    def optional(self) -> bool:
        return self.kind in ("optional_input", "optional_output")

    def dim_counts(self) -> list[int]:
        return list(range(self.dims[0], self.dims[1] + 1))


@dataclass(frozen=True)
class SupportTable:
    """A "DML_FEATURE_LEVEL_X and above" table; `variant` names the members of the enum attribute
    (the spec's `variant_key`) for which it holds, None when the tables do not depend on one."""

    level: str
    tensors: dict[str, TensorSupport]
    variant: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Condition:
    """`when` clause of a constraint: the constraint applies only if a tensor's type matches."""

    tensor: str
    types: tuple[str, ...] | None
    types_not: tuple[str, ...] | None

    def holds(self, tensor_types: dict[str, str | None]) -> bool:
        actual = tensor_types.get(self.tensor)
        if actual is None:
            return False
        if self.types is not None:
            return actual in self.types
        return actual not in (self.types_not or ())


@dataclass(frozen=True)
class Constraint:
    """A tensor constraint; its validator rule id is `constraint.<id>`."""

    id: str
    rule: str  # same_data_type | same_shape | data_type_in | expression | shape
    tensors: tuple[str, ...]
    types: tuple[str, ...]
    when: Condition | None
    text: str
    check: ShapeExpr | None = None   # rule expression: what must hold
    sizes: ShapeExpr | None = None   # rule shape: the Sizes `tensors[0]` must have (generation derives them)
    guard: ShapeExpr | None = None   # an expression `when`: the rule is in force only where it holds
    bound: str | None = None         # rule shape with bound 'upper': each size from 1 up to `sizes`
    _tensor_names: tuple[str, ...] = ()  # every tensor field of the operator (what `reads` looks for)
    _arrays: tuple[tuple[str, tuple[str, ...]], ...] = ()  # each tensor array and its items (a loop reads them all)

    @property
    def rule_id(self) -> str:
        return f"constraint.{self.id}"

    @cached_property
    def reads(self) -> frozenset[str]:
        """The tensor fields an expression or shape rule reads (its target included)."""
        texts = " ".join(e.text for e in (self.check, self.sizes, self.guard) if e is not None)
        looped = {item for array, items in self._arrays if array in self.expression_names for item in items}
        return frozenset(self.tensors) | {name for name in self._tensor_names if f"{name}." in texts} | looped

    @cached_property
    def expression_names(self) -> frozenset[str]:
        """Every name its expressions read (attributes, tensor fields), for the validator's
        question whether a rule reads a malformed value (asked per rule per descriptor: cached)."""
        return frozenset().union(*(e.names() for e in (self.check, self.sizes, self.guard) if e is not None))

    @property
    def is_type_rule(self) -> bool:
        return self.rule in ("same_data_type", "data_type_in")

    def applies(self, tensor_types: dict[str, str | None], names: dict[str, Any] | None = None) -> bool:
        """Whether the constraint is in force for these data types (its `when`, if any, holds).
        A type rule guarded by an expression over the variant key (`when: "Mode not in [A, B]"`)
        needs the attributes by name (harness.model.facts.attribute_names)."""
        if self.when is not None and not self.when.holds(tensor_types):
            return False
        if self.guard is not None and self.is_type_rule:
            if names is None:
                raise ValueError(f"constraint {self.id} depends on {self.guard.text!r}: pass the attributes")
            return bool(self.guard.evaluate(names, {}))
        return True

    def type_offenders(self, tensor_types: dict[str, str | None], names: dict[str, Any] | None = None) -> list[str]:
        """The present tensors whose data types break this constraint (empty: it holds, or it is
        about shapes). The one definition of the type constraints, for the validator and for
        generation's type assignments; `None` is an absent tensor."""
        if not self.is_type_rule or not self.applies(tensor_types, names):
            return []
        present = [t for t in self.tensors if tensor_types.get(t) is not None]
        if self.rule == "same_data_type":
            return present if len({tensor_types[t] for t in present}) > 1 else []
        if self.rule == "data_type_in":
            return [t for t in present if tensor_types[t] not in self.types]
        return []


@dataclass(frozen=True)
class Unspecified:
    """A region of inputs where the docs leave the result open."""

    id: str
    when: Formula
    why: str
    applies_to: tuple[str, ...] | None
    handled_by: str | None
    undefined_behaviour: bool
    outputs: tuple[str, ...] | None = None  # the outputs it concerns (None: every output)

    def concerns(self, output: str, out_type: str) -> bool:
        """Whether the rule is judged on `output` of type `out_type` (handled_by aside)."""
        return (self.applies_to is None or out_type in self.applies_to) and (self.outputs is None or output in self.outputs)


@dataclass(frozen=True)
class Comparison:
    """How one output data type is compared with the reference."""

    kind: str  # exact | bitwise | ulp
    max_ulp: int = 0
    atol: Formula | None = None
    ties: Formula | None = None
    nan_payload: str = "ignore"


@dataclass(frozen=True)
class OperatorFormula:
    """The formula and the names it is evaluated with."""

    docs: str
    expression: Formula
    operands: str  # value | raw_bits
    inputs: dict[str, str]  # variable -> tensor field
    attributes: tuple[str, ...]
    constants: dict[str, Formula]
    absent_inputs: dict[str, float]
    rounding: str | None
    output: str
    family: FamilySpec | None = None  # index-space semantics: the family plug-in and its parameters
    # per-element items of array attributes: variable -> (array field, coordinate name); a bias per
    # channel is `b: (Bias, coord2)`, the formula reading b as one value per output element
    items: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the other outputs of an elementwise formula (an Adam step's moments): output field ->
    # expression over the same names, each evaluated, rounded and judged as `expression` is
    other_outputs: dict[str, Formula] = field(default_factory=dict)
    # inputs whose sizes each divide the output's, an element standing for a block of output
    # elements (harness.model.blocks): spread to the output's shape before the formula reads them
    blocked: tuple[str, ...] = ()

    @property
    def outputs(self) -> dict[str, Formula]:
        """Every output the formula gives, the primary `output` first."""
        return {self.output: self.expression, **self.other_outputs}

    def of(self, output: str) -> "OperatorFormula":
        """This formula as the formula of one of its outputs (the primary one: itself)."""
        if output == self.output or output not in self.other_outputs:
            return self
        return replace(self, expression=self.other_outputs[output], output=output, other_outputs={})


@dataclass(frozen=True)
class Example:
    """A worked example from the docs or observed behaviour: fixed inputs and expected outputs."""

    name: str
    source: str
    types: dict[str, str]
    sizes: tuple[int, ...] | None
    attributes: dict[str, Any]
    inputs: dict[str, list[float]]
    expected: dict[str, list[float]]
    tensor_sizes: dict[str, tuple[int, ...]] | None = None  # per tensor, where shapes differ


@dataclass(frozen=True)
class Favour:
    """A value the generator favours for an input tensor, computed from the other inputs."""

    tensor: str
    expression: Formula
    k_range: tuple[int, int]
    why: str


@dataclass(frozen=True)
class Limit:
    """A bound on generated input values (`generation.limits`): where the data the page leaves
    open would make most cases unspecified (an integer sum that overflows), generation keeps the
    values of `tensor` within 2^bits in magnitude (floats: binary exponents within +-bits)."""

    tensor: str
    bits: ShapeExpr
    why: str
    when: ShapeExpr | None = None
    applies_to: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DataRange:
    """A range that valid input data of `tensor` keeps to (`generation.data_ranges`): where the
    page makes values outside a range select unspecified outputs without being a rejection
    (an index beyond the axis it selects along), random data would leave almost nothing checked.
    `low` and `high` (inclusive) are shape expressions evaluated per case, which may read the
    case's feature level (FEATURE_LEVEL_NAME and the FL_X_Y constants); `outside` is the share of
    data sets that get a few values just outside it (high + 1, low - 1), so that a run still checks
    what the page says of them."""

    tensor: str
    low: ShapeExpr
    high: ShapeExpr
    why: str
    when: ShapeExpr | None = None
    applies_to: tuple[str, ...] | None = None
    outside: float = 0.0


FEATURE_LEVEL_NAME = "FeatureLevel"


def level_constant(level_name: str) -> str:
    """The name data-range expressions give a feature level: "3.0" -> FL_3_0."""
    return "FL_" + level_name.replace(".", "_")


def level_names(catalog: Catalog) -> set[str]:
    """The names a data-range expression may read beside the descriptor's: the case's feature level
    and each level of the catalog, as their DML_FEATURE_LEVEL values (compare with >=, <)."""
    return {FEATURE_LEVEL_NAME} | {level_constant(level.name) for level in catalog.levels}


@dataclass(eq=False)  # identity equality and hashing: specs are cache keys
class OperatorSpec:
    """Everything about one operator, read from its spec file."""

    def __repr__(self) -> str:  # short: Hypothesis prints strategy arguments
        return f"OperatorSpec({self.name})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's pretty printer: not every field (70 kB)
        printer.text(repr(self))

    def for_output(self, output: str) -> "OperatorSpec":
        """The spec as seen by one output of a several-output elementwise formula (its expression
        as `formula.expression`): what the reference and the precision model evaluate for it."""
        if output not in self.formula.other_outputs:
            return self
        views = self.__dict__.setdefault("_output_views", {})
        if output not in views:
            views[output] = replace(self, formula=self.formula.of(output))
        return views[output]

    name: str
    operator_type: int
    desc_struct: str
    summary: str
    introduced: str
    in_place_allowed: bool
    in_place_pairs: tuple[tuple[str, str], ...]  # (output, input)
    fields: tuple[FieldSpec, ...]
    support: tuple[SupportTable, ...]  # newest first
    constraints: tuple[Constraint, ...]
    formula: OperatorFormula
    special_cases: tuple[dict, ...]
    unspecified: tuple[Unspecified, ...]
    comparison: dict[str, Comparison]
    attribute_values: dict[str, dict[str, list[float]]]
    examples: tuple[Example, ...]
    sources: tuple[dict, ...]
    path: Path
    favour: tuple[Favour, ...] = ()
    catalog: Catalog = field(repr=False, kw_only=True)  # the data types and levels it is read against
    variant_key: str | None = field(default=None, kw_only=True)  # the enum attribute that picks the support tables
    limits: tuple[Limit, ...] = field(default=(), kw_only=True)
    data_ranges: tuple[DataRange, ...] = field(default=(), kw_only=True)
    # differences from the API pages the spec keeps on purpose (`spec check-docs` reports them as
    # recorded): {key, pages (languages or file names; "*" any), resolution}
    docs_drift: tuple[dict, ...] = field(default=(), kw_only=True)
    # each fused-activation field's allowed activation specs by operator type (load_specs fills it:
    # they live in other files)
    activations: dict[str, dict[int, "OperatorSpec"]] = field(default_factory=dict, repr=False, kw_only=True)

    @property
    def tensor_fields(self) -> list[FieldSpec]:
        return [f for f in self.fields if f.role != "attribute"]

    @property
    def input_fields(self) -> list[FieldSpec]:
        return [f for f in self.fields if f.role == "input"]

    @property
    def output_fields(self) -> list[FieldSpec]:
        return [f for f in self.fields if f.role == "output"]

    @property
    def attribute_fields(self) -> list[FieldSpec]:
        return [f for f in self.fields if f.role == "attribute"]

    @property
    def struct_field_names(self) -> list[str]:
        """The desc struct's members in order, as the page and DirectML.h name them (a tensor array
        and a struct held by value once, not per item or member)."""
        out: list[str] = []
        for f in self.fields:
            name = f.array_of or f.member_of or f.name
            if not out or out[-1] != name:
                out.append(name)
        return out

    @cached_property
    def tensor_arrays(self) -> dict[str, list[str]]:
        """Each tensor array's name and its items' tensor fields, in order."""
        return tensor_arrays(self.fields)

    def field(self, name: str) -> FieldSpec:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    # --- support tables, and enum-keyed variants of them -------------------------------------
    @property
    def variant_groups(self) -> list[tuple[str, ...] | None]:
        """The variant groups in spec order: the enum members that share a series of tables
        ([None]: one series for every descriptor, the spec has no `variant_key`)."""
        groups: list[tuple[str, ...] | None] = []
        for table in self.support:
            if table.variant not in groups:
                groups.append(table.variant)
        return groups

    @property
    def variant_members(self) -> dict[str, int]:
        """The members of the variant key's enum, name -> value ({} without a variant key)."""
        if self.variant_key is None:
            return {}
        return dict(self.field(self.variant_key).enum or {})

    def variant_member(self, attributes: dict[str, Any]) -> str | None:
        """The member of the variant key that `attributes` hold (the field's default, else 0, when
        unset); None where the value is no member (attribute.enum_value reports it) or the spec
        has no variant key."""
        if self.variant_key is None:
            return None
        key = self.field(self.variant_key)
        value = attributes.get(self.variant_key, key.default if key.default is not None else 0)
        return next((name for name, v in self.variant_members.items() if v == value), None)

    def variant_attributes(self, member: str | None) -> dict[str, float]:
        """The attributes that select `member`'s tables ({} for None)."""
        if member is None or self.variant_key is None:
            return {}
        return {self.variant_key: float(self.variant_members[member])}

    def group_of(self, member: str | None) -> tuple[str, ...] | None:
        """The variant group holding `member` (None without a variant key)."""
        if member is None:
            return None
        return next(g for g in self.variant_groups if g is not None and member in g)

    def _newest(self, level: str, group: tuple[str, ...] | None) -> SupportTable | None:
        order = self.catalog.level_order(level)
        for table in self.support:
            if table.variant == group and self.catalog.level_order(table.level) <= order:
                return table
        return None

    def table_at(self, level: str, attributes: dict[str, Any] | None = None) -> SupportTable | None:
        """The table in force at `level` for a descriptor with these attributes: the newest one of
        its variant group whose level is not newer; None before introduction, or when the variant
        key holds no member of its enum. Without a `variant_key` the attributes do not matter; with
        one they must be given (`tables_at` lists every group's table)."""
        if self.variant_key is None:
            return self._newest(level, None)
        if attributes is None:
            raise ValueError(f"{self.name}'s support tables depend on {self.variant_key}: pass the descriptor's attributes "
                             f"(or use tables_at)")
        member = self.variant_member(attributes)
        return None if member is None else self._newest(level, self.group_of(member))

    def table_for(self, level: str, member: str | None) -> SupportTable | None:
        """The table in force at `level` for the variant key's `member` (None: the one series of
        a spec without a variant key)."""
        if self.variant_key is None:
            return self._newest(level, None)
        if member is None:
            raise ValueError(f"{self.name}'s support tables depend on {self.variant_key}: name a member")
        return self._newest(level, self.group_of(member))

    def tables_at(self, level: str) -> list[SupportTable]:
        """Every variant group's table in force at `level`, in spec order (groups with none left out)."""
        return [t for t in (self._newest(level, g) for g in self.variant_groups) if t is not None]

    @cached_property
    def table_change_levels(self) -> tuple[str, ...]:
        """The first and newest levels, each level where the tables in force change, and the level
        just before each change (where a level-gated rule breaks): between two of these the
        validator judges every descriptor alike, so testing the others only repeats them (the
        `--feature-level ladder` of a run; the generator tests' levels)."""
        names, changes = self._table_changes
        keep = {names[0], names[-1]} | {names[i - 1] for i in changes} | {names[i] for i in changes}
        return tuple(level for level in names if level in keep)

    @cached_property
    def table_start_levels(self) -> tuple[str, ...]:
        """The first and newest levels and each level where the tables in force change: where a
        valid descriptor can differ from one of the level before (the level just before a change
        has the older table, so its valid cases repeat those of the level that table starts at;
        only its invalid ones, a level-gated rule broken, are new)."""
        names, changes = self._table_changes
        keep = {names[0], names[-1]} | {names[i] for i in changes}
        return tuple(level for level in names if level in keep)

    @cached_property
    def _table_changes(self) -> tuple[list[str], list[int]]:
        """The catalog's level names and the indices of those whose tables in force differ from
        the level before's."""
        names = [lvl.name for lvl in self.catalog.levels]
        tables = [tuple(id(t) for t in self.tables_at(level)) for level in names]
        return names, [i for i in range(1, len(names)) if tables[i] != tables[i - 1]]

    def has_table_at(self, level: str) -> bool:
        """Whether the operator is available at `level`: some variant group has a table there."""
        return bool(self.tables_at(level))

    def members_at(self, level: str) -> list[str | None]:
        """The variant key's members whose group has a table at `level`, in enum order ([None]
        without a variant key when the operator is available, else [])."""
        if self.variant_key is None:
            return [None] if self.has_table_at(level) else []
        return [m for m in self.variant_members if self._newest(level, self.group_of(m)) is not None]

    def available_at(self, level: str) -> bool:
        return self.catalog.level_order(level) >= self.catalog.level_order(self.introduced)

    def comparison_for(self, data_type: str) -> Comparison:
        return self.comparison.get(data_type, self.comparison["default"])

    def default_attributes(self) -> dict[str, float]:
        """Each scalar attribute's value when a descriptor does not set it (a struct pointer: null;
        an array and its count field: no default, a descriptor always sets the array)."""
        return {f.name: float(f.default) if f.default is not None else 0.0 for f in self.attribute_fields
                if f.struct is None and not f.is_array and not f.is_count and not f.is_fused_activation and not f.is_scalar_union}

    @property
    def shape_rules(self) -> list[Constraint]:
        """The `shape` constraints: the Sizes of derived tensors, in spec order."""
        return [c for c in self.constraints if c.rule == "shape"]


@dataclass
class SpecSet:
    """The catalog plus every operator spec of a specs directory."""

    catalog: Catalog
    operators: dict[str, OperatorSpec]
    directory: Path

    def operator(self, name: str) -> OperatorSpec:
        try:
            return self.operators[name]
        except KeyError:
            raise KeyError(f"unknown operator {name!r}; known: {', '.join(sorted(self.operators))}") from None


def schema_error_path(error: jsonschema.ValidationError) -> tuple:
    """Where the error is: for an unexpected key, the key itself rather than its parent."""
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra:
            return path + (extra[0],)
    return path


def schema_message(error: jsonschema.ValidationError) -> str:
    """jsonschema's message, with what was expected where its own text does not say it."""
    if error.validator in ("minItems", "maxItems"):
        count = len(error.instance) if isinstance(error.instance, list) else "?"
        bound = "at least" if error.validator == "minItems" else "at most"
        return f"{error.instance!r} has {count} item(s); expected {bound} {error.validator_value}"
    if error.validator == "pattern":
        return f"{error.instance!r} does not have the expected form (regular expression {error.validator_value})"
    return error.message


def _formula(src: SourcedYaml, path: tuple, text: str) -> Formula:
    try:
        return parse_formula(text)
    except FormulaError as exc:
        raise src.error(path, f"bad formula: {exc}") from None


def _check_names(src: SourcedYaml, path: tuple, formula: Formula, names: set[str], tensors: set[str]) -> None:
    unknown = sorted(formula.names - names)
    if unknown:
        raise src.error(path, f"formula uses undefined name(s) {', '.join(unknown)}; defined: {', '.join(sorted(names))}")
    bad_tensors = sorted(formula.tensor_names - tensors)
    if bad_tensors:
        raise src.error(path, f"type function names unknown tensor field(s) {', '.join(bad_tensors)}")


def _tensor_type_kinds(support: list[SupportTable], catalog: Catalog) -> dict[str, dict[str, str]]:
    """Every data type each tensor field may have, in any table, with its kind (integer or float)."""
    kinds: dict[str, dict[str, str]] = {}
    for table in support:
        for tname, cell in table.tensors.items():
            for type_name in cell.types:
                kinds.setdefault(tname, {})[type_name] = FLOAT if catalog.data_types[type_name].is_float else INTEGER
    return kinds


def _kind_facts(fraw: dict, support: list[SupportTable], tensor_kinds: dict[str, dict[str, str]],
                constant_kinds: dict[str, Kinds], generator: bool = False) -> KindFacts:
    """The kinds of value each formula name holds where the formula is evaluated.

    The reference and the diff bind raw bits (operands: raw_bits) or values in the tensor's own
    kind, and an absent optional input as its (float) absent value; the generator (favoured
    values, undefined-behaviour regions) reads every input as float64.
    """
    optional = {tname for table in support for tname, cell in table.tensors.items() if cell.optional}
    variables: dict[str, Kinds] = {}
    why: dict[str, str] = {}
    for var, tname in fraw["inputs"].items():
        allowed = tensor_kinds.get(tname, {})
        if generator:
            variables[var], why[var] = frozenset({FLOAT}), f"the generator reads {var} as float64"
        elif fraw["operands"] == "raw_bits":
            variables[var], why[var] = frozenset({INTEGER}), f"{var} is the raw bits of {tname}"
        else:
            kinds = set(allowed.values()) | ({FLOAT} if tname in optional else set())
            variables[var] = frozenset(kinds)
            why[var] = f"{var} reads {tname}: {', '.join(allowed)}" + (", or a float when absent" if tname in optional else "")
    for name in fraw.get("attributes", ()):
        variables[name], why[name] = frozenset({FLOAT}), f"{name} is a float attribute"
    variables.update(constant_kinds)
    if generator:
        variables["k"], why["k"] = frozenset({FLOAT}), "the generator draws k as float64"
    return KindFacts(variables=variables, tensors=tensor_kinds, why=why)


def _check_kinds(src: SourcedYaml, path: tuple, formula: Formula, *facts: KindFacts) -> Kinds:
    """Each function of the formula against the kinds of its argument, in every context given."""
    kinds: Kinds = frozenset()
    try:
        for context in facts:
            kinds = check_kinds(formula, context)
    except FormulaError as exc:
        raise src.error(path, f"bad formula: {exc}") from None
    return kinds


# Examples pass through float64 on their way into a case (harness.generate.cases.example_case): integers
# beyond 2^53 would silently change.
_EXACT_FLOAT64_INT = 2 ** 53


def _example_value_problem(value: Any, dtype: DataType) -> str | None:
    """Why `value` is not a value of `dtype`, or None. NaN and +-inf are values of float types."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if dtype.is_float:
        if math.isfinite(value):
            with np.errstate(over="ignore"):  # ints are within 64 bits (harness.spec.source), so float() cannot overflow
                if not np.isfinite(np.asarray(float(value)).astype(dtype.numpy)):
                    return f"{value!r} is outside the range of {dtype.name} (largest finite {float(np.finfo(dtype.numpy).max)!r})"
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return f"{value!r} is not an integer, but {dtype.name} holds integers only"
    assert dtype.min is not None and dtype.max is not None
    if not dtype.min <= value <= dtype.max:
        return f"{value!r} is outside the range of {dtype.name} ({dtype.min} .. {dtype.max})"
    if abs(value) > _EXACT_FLOAT64_INT:
        return f"{value!r} cannot be used in an example: examples pass through float64, exact only up to 2^53"
    return None


def _check_example(src: SourcedYaml, path: tuple, raw: dict, catalog: Catalog) -> None:
    """Values within their data types, and sizes that hold exactly the values given."""
    for section in ("inputs", "expected"):
        for tname, values in raw[section].items():
            dtype = catalog.data_types[raw["types"][tname]]
            for index, value in enumerate(values):
                problem = _example_value_problem(value, dtype)
                if problem:
                    raise src.error(path + (section, tname, index), problem)
    count = max((len(v) for section in ("inputs", "expected") for v in raw[section].values()), default=0)
    if "tensor_sizes" in raw:
        return
    if count == 0:
        raise src.error(path + ("inputs",), "an example needs at least one value per tensor")
    if "sizes" in raw:
        sizes = raw["sizes"]
        if not 1 <= len(sizes) <= MAX_DIMENSIONS:
            raise src.error(path + ("sizes",), f"sizes has {len(sizes)} dimension(s); expected 1 to {MAX_DIMENSIONS}")
        if math.prod(sizes) != count:
            raise src.error(path + ("sizes",), f"sizes {sizes} hold {math.prod(sizes)} element(s), "
                                               f"but each tensor lists {count} value(s)")


def _check_types(src: SourcedYaml, path: tuple, types: Any, catalog: Catalog) -> None:
    for index, name in enumerate(types):
        if name not in catalog.data_types:
            raise src.error(path + (index,), f"unknown data type {name!r}; expected one of {', '.join(catalog.data_types)}")


def _check_level(src: SourcedYaml, path: tuple, name: str, catalog: Catalog) -> None:
    if not catalog.has_level(name):
        raise src.error(path, f"unknown feature level {name!r}; expected one of {', '.join(l.name for l in catalog.levels)}")


def _check_keys_are_text(src: SourcedYaml, data: Any) -> None:
    """Every mapping key is text. YAML also allows `1.5:` or `~:` as keys; names are compared and
    sorted with each other, so a number among them would be a TypeError far from its line.
    The walk is iterative; harness.spec.source bounds the data's size and depth."""
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise src.error(path + (key,), f"mapping keys must be text, found {key!r} ({type(key).__name__})")
                stack.append((path + (key,), value))
        elif isinstance(node, list):
            stack.extend((path + (index,), item) for index, item in enumerate(node))


@dataclass(frozen=True)
class _Roles:
    """The field names of each role, as the section readers check references against them."""
    tensors: set[str]
    inputs: set[str]
    outputs: set[str]
    attributes: set[str]


@dataclass(frozen=True)
class _FormulaScope:
    """What later sections' formulas may use: the formula's names and the kinds they hold."""
    names: set[str]
    evaluated: KindFacts
    generated: KindFacts
    family: str | None = None  # the family plug-in, whose element variables `unspecified` rules may read


def _read_document(src: SourcedYaml) -> dict:
    """Read the top level: a mapping with text keys that passes the operator schema."""
    data = src.data
    if not isinstance(data, dict):
        found = "an empty file" if data is None else "a list" if isinstance(data, list) else f"a single value ({data!r:.40})"
        raise src.error((), f"an operator spec must be a mapping at the top level, found {found}")
    _check_keys_are_text(src, data)
    validator = jsonschema.Draft202012Validator(OPERATOR_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        first = max(errors, key=lambda e: len(e.absolute_path)) if errors[0].validator == "oneOf" else errors[0]
        raise src.error(schema_error_path(first), schema_message(first))
    return data


SCALAR_ATTRIBUTE_TYPES = ("FLOAT", "UINT", "INT", "BOOL")  # BOOL: Windows' 4-byte int, TRUE 1 and FALSE 0
OPERATOR_DESC_POINTER = "const DML_OPERATOR_DESC*"
SCALAR_UNION = "DML_SCALAR_UNION"


TENSOR_DESC_POINTER = "const DML_TENSOR_DESC*"


def array_item_name(array: str, slot: int) -> str:
    """The tensor field of item `slot` of tensor array `array`: a name shape expressions can read."""
    return f"{array}_{slot}"


def member_field_name(field: str, member: str) -> str:
    """The attribute holding member `member` of struct-by-value field `field` (DML_SIZE_2D's
    `PooledSize` -> `PooledSize_Width`): a name expressions can read."""
    return f"{field}_{member}"


def _names(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _read_fields(src: SourcedYaml, data: dict, catalog: Catalog) -> tuple[list[FieldSpec], _Roles]:
    """Read identity (name, introduction) and fields: unique names, defaults on attributes only, an output."""
    if data["operator"] != src.path.stem:
        raise src.error(("operator",), f"operator {data['operator']!r} must match the file name {src.path.stem!r}")
    _check_level(src, ("introduced",), data["introduced"], catalog)

    fields: list[FieldSpec] = []
    raw_index: list[int] = []  # each model field's entry in the file (a tensor array's items share one)
    seen_fields: set[str] = set()
    for index, raw in enumerate(data["fields"]):
        if raw["name"] in seen_fields:
            raise src.error(("fields", index, "name"), f"duplicate field {raw['name']}")
        seen_fields.add(raw["name"])
        if raw["role"] != "attribute" and "default" in raw:
            raise src.error(("fields", index, "default"), "only attributes take a default")
        enum = struct = element = None
        if raw["role"] != "attribute" and ("count_of" in raw or "activations" in raw):
            raise src.error(("fields", index), "only attributes are count fields or fused activations")
        if raw["role"] != "attribute" and ("count" in raw) != ("max_items" in raw):
            raise src.error(("fields", index), "a tensor array names its `count` field and its `max_items` (the most items generated)")
        if "max_items" in raw and raw["role"] == "attribute":
            raise src.error(("fields", index, "max_items"), "only a tensor array (an input or output field with `count`) takes max_items")
        if raw["role"] != "attribute" and "count" in raw:  # a tensor array: one tensor field per item
            if raw["c_type"] != TENSOR_DESC_POINTER:
                raise src.error(("fields", index, "c_type"), f"a tensor array's c_type is {TENSOR_DESC_POINTER!r}, found {raw['c_type']!r}")
            for slot in range(raw["max_items"]):
                fields.append(FieldSpec(array_item_name(raw["name"], slot), raw["role"], raw["c_type"], count=raw["count"],
                                        array_of=raw["name"], slot=slot))
                raw_index.append(index)
            continue
        if raw["role"] == "attribute" and raw["c_type"] in catalog.structs:  # a struct by value: one attribute per member
            if "default" in raw or set(raw) - {"name", "role", "c_type"}:
                raise src.error(("fields", index), f"a struct held by value ({raw['c_type']}) takes only name, role and c_type: "
                                                   f"its members are attributes `{raw['name']}_MEMBER` (pools in attribute_values)")
            for member, member_type in catalog.structs[raw["c_type"]]:
                fields.append(FieldSpec(member_field_name(raw["name"], member), "attribute", member_type, member_of=raw["name"]))
                raw_index.append(index)
            continue
        if "typed_by" in raw and raw["c_type"] != SCALAR_UNION:
            raise src.error(("fields", index, "typed_by"), f"only a {SCALAR_UNION} field is typed by another field")
        if "activations" in raw and raw["c_type"] != OPERATOR_DESC_POINTER:
            raise src.error(("fields", index, "activations"), f"only a {OPERATOR_DESC_POINTER!r} field names fused activations")
        if raw["role"] == "attribute":
            c_type = raw["c_type"]
            pointee = c_type[len("const "):-1].strip() if c_type.startswith("const ") and c_type.endswith("*") else None
            if "count" in raw:  # an array: `const UINT*` (or INT, FLOAT) whose length another field holds
                if pointee not in SCALAR_ATTRIBUTE_TYPES:
                    raise src.error(("fields", index, "c_type"), f"an array field's c_type is a pointer to one of "
                                                                 f"{', '.join(SCALAR_ATTRIBUTE_TYPES)}, found {c_type!r}")
                if "default" in raw:
                    raise src.error(("fields", index, "default"), "an array takes no default")
                element = pointee
            elif c_type == SCALAR_UNION:  # 8 bytes read as the type another field names
                if "typed_by" not in raw or "default" in raw:
                    raise src.error(("fields", index), f"a {SCALAR_UNION} field names its `typed_by` field (a DML_TENSOR_DATA_TYPE) and takes no default")
            elif c_type == OPERATOR_DESC_POINTER:  # a fused activation: which specs it may name, checked by load_specs
                if "activations" not in raw or "default" in raw:
                    raise src.error(("fields", index), f"a {OPERATOR_DESC_POINTER!r} field lists its `activations` (operator specs) and takes no default")
            elif "count_of" in raw:
                if c_type != "UINT" or "default" in raw:
                    raise src.error(("fields", index), "a count field is a UINT without a default (it is the array's length)")
            elif pointee in catalog.structs:
                struct = catalog.structs[pointee]
                if "default" in raw:
                    raise src.error(("fields", index, "default"), "a struct pointer takes no default (absent is a null pointer)")
            elif c_type in catalog.enums:
                enum = dict(catalog.enums[c_type])
                if "default" in raw and raw["default"] not in enum.values():
                    raise src.error(("fields", index, "default"), f"{raw['default']!r} is not a value of {c_type} ({enum})")
            elif c_type not in SCALAR_ATTRIBUTE_TYPES:
                raise src.error(("fields", index, "c_type"), f"an attribute's c_type is one of {', '.join(SCALAR_ATTRIBUTE_TYPES)}, "
                                                             f"an enum of specs/_enums.yaml ({', '.join(sorted(catalog.enums))}) or a "
                                                             f"struct of specs/_structs.yaml, by value or pointer ({', '.join(f'{n}, const {n}*' for n in sorted(catalog.structs))}); "
                                                             f"found {c_type!r}")
        fields.append(FieldSpec(raw["name"], raw["role"], raw["c_type"], raw.get("default"), enum, struct, element,
                                raw.get("count"), _names(raw["count_of"]) if "count_of" in raw else None,
                                tuple(raw["activations"]) if "activations" in raw else None, raw.get("typed_by")))
        raw_index.append(index)
    roles = _Roles(tensors={f.name for f in fields if f.role != "attribute"},
                   inputs={f.name for f in fields if f.role == "input"},
                   outputs={f.name for f in fields if f.role == "output"},
                   attributes={f.name for f in fields if f.role == "attribute"})
    if not roles.outputs:
        raise src.error(("fields",), "an operator needs at least one output tensor field")
    by_name = {f.name: (i, f) for i, f in enumerate(fields)}
    by_name.update({f.array_of: (i, f) for i, f in enumerate(fields) if f.array_of is not None and f.slot == 0})
    for model_index, f in enumerate(fields):  # arrays and count fields name each other
        index = raw_index[model_index]
        array_name = f.array_of or f.name
        if f.count is not None and (f.count not in by_name or array_name not in (by_name[f.count][1].count_of or ())):
            raise src.error(("fields", index, "count"), f"{f.count!r} must be a field whose count_of names {array_name}")
        for array in f.count_of or ():
            if array not in by_name or by_name[array][1].count != f.name:
                raise src.error(("fields", index, "count_of"), f"{array!r} must be an array field with count: {f.name}")
        if f.typed_by is not None and (f.typed_by not in by_name or by_name[f.typed_by][1].c_type != "DML_TENSOR_DATA_TYPE"):
            raise src.error(("fields", index, "typed_by"), f"{f.typed_by!r} must be an attribute field of c_type DML_TENSOR_DATA_TYPE")
    return fields, roles


def _read_variant_key(src: SourcedYaml, data: dict, fields: list[FieldSpec]) -> FieldSpec | None:
    """The enum attribute whose value picks the support tables (`variant_key`), or None."""
    if "variant_key" not in data:
        for index, raw in enumerate(data["support"]):
            if "variant" in raw:
                raise src.error(("support", index, "variant"), "a support table names a variant only when the spec has a variant_key")
        return None
    key = next((f for f in fields if f.name == data["variant_key"]), None)
    if key is None or key.role != "attribute" or key.enum is None:
        enums = [f.name for f in fields if f.enum is not None]
        raise src.error(("variant_key",), f"variant_key must name an enum attribute field ({', '.join(enums) or 'none'}), "
                                          f"found {data['variant_key']!r}")
    return key


def _read_variants(src: SourcedYaml, data: dict, key: FieldSpec | None) -> list[tuple[str, ...] | None]:
    """Each table's variant group. Every member of the key's enum belongs to exactly one group;
    a group's tables are listed together (lint checks the levels within each group)."""
    if key is None:
        return [None] * len(data["support"])
    members = list(key.enum or {})
    groups: list[tuple[str, ...] | None] = []
    owner: dict[str, tuple[str, ...]] = {}
    closed: set[frozenset[str]] = set()
    for index, raw in enumerate(data["support"]):
        path = ("support", index, "variant")
        if "variant" not in raw:
            raise src.error(("support", index), f"with variant_key {key.name}, every table names its variant: the members of "
                                                f"{key.c_type} it holds for")
        variant = tuple(raw["variant"])
        for i, member in enumerate(variant):
            if member not in members:
                raise src.error(path + (i,), f"{member!r} is not a member of {key.c_type} ({', '.join(members)})")
            if member in owner and set(owner[member]) != set(variant):
                raise src.error(path + (i,), f"{member} is in two variant groups: [{', '.join(owner[member])}] and "
                                             f"[{', '.join(variant)}]")
        group = frozenset(variant)
        if groups and groups[-1] is not None and frozenset(groups[-1]) != group:
            closed.add(frozenset(groups[-1]))
        if group in closed:
            raise src.error(path, f"the tables of variant [{', '.join(variant)}] must be listed together")
        canonical = owner.get(variant[0], variant)
        owner.update({m: canonical for m in variant})
        groups.append(canonical)
    missing = [m for m in members if m not in owner]
    if missing:
        raise src.error(("support",), f"{', '.join(missing)} of {key.c_type} {'has' if len(missing) == 1 else 'have'} no support table "
                                      f"(every member of the variant key belongs to one group)")
    return groups


def _read_support(src: SourcedYaml, data: dict, catalog: Catalog, fields: list[FieldSpec],
                  roles: _Roles) -> list[SupportTable]:
    """Read the support tables: level order (within each variant group), full tensor coverage,
    dims, types and kinds per cell."""
    tensor_names = roles.tensors
    arrays = tensor_arrays(fields)
    support: list[SupportTable] = []
    groups = _read_variants(src, data, _read_variant_key(src, data, fields))
    previous_order: dict[tuple[str, ...] | None, int] = {}
    for index, raw in enumerate(data["support"]):
        path = ("support", index)
        group = groups[index]
        _check_level(src, path + ("level",), raw["level"], catalog)
        order = catalog.level_order(raw["level"])
        if group in previous_order and order >= previous_order[group]:
            within = "" if group is None else f" (within the variant [{', '.join(group)}])"
            raise src.error(path + ("level",), f"support tables must be listed newest level first, each level once{within}")
        previous_order[group] = order
        if order < catalog.level_order(data["introduced"]):
            raise src.error(path + ("level",), f"table at FL {raw['level']} is older than the operator's introduction (FL {data['introduced']})")
        covered = {item for name in raw["tensors"] for item in arrays.get(name, [name])}
        missing = sorted(tensor_names - covered)
        if missing:
            raise src.error(path + ("tensors",), f"table does not cover tensor field(s) {', '.join(missing)}")
        tensors: dict[str, TensorSupport] = {}
        for tname, cell, cpath in _table_rows(raw["tensors"], arrays, path):
            if tname not in tensor_names:
                raise src.error(cpath, f"{tname!r} is not a tensor field; fields: {', '.join(sorted(tensor_names))}")
            lo, hi = cell["dims"]
            if not (1 <= lo <= hi <= MAX_DIMENSIONS):
                raise src.error(cpath + ("dims",), f"dimension range [{lo}, {hi}] must satisfy 1 <= min <= max <= {MAX_DIMENSIONS}")
            _check_types(src, cpath + ("types",), cell["types"], catalog)
            for tindex, tname2 in enumerate(cell["types"]):
                if catalog.level_order(catalog.data_types[tname2].since) > order:
                    raise src.error(cpath + ("types", tindex), f"{tname2} exists only from FL {catalog.data_types[tname2].since}")
            role = next(f.role for f in fields if f.name == tname)
            if (cell["kind"] in ("output", "optional_output")) != (role == "output"):
                raise src.error(cpath + ("kind",), f"kind {cell['kind']!r} does not fit field role {role!r}")
            tensors[tname] = TensorSupport(cell["kind"], (lo, hi), tuple(cell["types"]))
        support.append(SupportTable(raw["level"], tensors, group))
    for group in dict.fromkeys(groups):  # each group's oldest table is at the introduction
        oldest = max((i for i, g in enumerate(groups) if g == group), key=lambda i: i)
        if support[oldest].level != data["introduced"]:
            which = "" if group is None else f" of the variant [{', '.join(group)}]"
            raise src.error(("support", oldest, "level"),
                            f"the oldest table{which} (FL {support[oldest].level}) must be at the operator's introduction "
                            f"(FL {data['introduced']})")
    return support


def tensor_arrays(fields: list[FieldSpec] | tuple[FieldSpec, ...]) -> dict[str, list[str]]:
    """Each tensor array's name and its items' tensor fields, in order."""
    arrays: dict[str, list[str]] = {}
    for f in fields:
        if f.array_of is not None:
            arrays.setdefault(f.array_of, []).append(f.name)
    return arrays


def _table_rows(rows: dict, arrays: dict[str, list[str]], path: tuple) -> list[tuple[str, dict, tuple]]:
    """A table's rows per tensor field: a tensor array's row (the page prints one, "Array of
    inputs" or "Array of outputs") holds for each of its items; item 0 is as the row says, the
    others are optional (an array holds Count >= 1 items)."""
    out = []
    for name, cell in rows.items():
        cpath = path + ("tensors", name)
        optional = dict(cell, kind="optional_output" if cell.get("kind") == "output" else "optional_input")
        for slot, item in enumerate(arrays.get(name, [name])):  # a plain tensor is its own item 0
            out.append((item, cell if slot == 0 else optional, cpath))
    return out


def _read_in_place(src: SourcedYaml, data: dict, roles: _Roles) -> tuple[tuple[str, str], ...]:
    """Read in_place: pairs listed exactly when allowed, each naming an output and an input field."""
    in_place = data["in_place"]
    pairs = tuple((p["output"], p["input"]) for p in in_place["pairs"])
    if in_place["allowed"] != bool(pairs):
        raise src.error(("in_place", "pairs"), "list aliasable (output, input) pairs exactly when allowed is true")
    for index, (out, inp) in enumerate(pairs):
        if out not in roles.outputs or inp not in roles.inputs:
            raise src.error(("in_place", "pairs", index), f"pair ({out}, {inp}) must name an output and an input field")
    return pairs


def shape_names(fields: list[FieldSpec] | tuple[FieldSpec, ...]) -> set[str]:
    """The names a shape or constraint expression may read: every attribute field (scalars, arrays,
    count fields), every enum member, and every tensor array (the list of its present items, to
    loop over: `all(t.DimensionCount == 4 for t in InputTensors)`). A tensor array's count field
    is not one: its value is the number of items present (`len(InputTensors)`, or `T_k.present`)."""
    arrays = tensor_arrays(fields)
    return ({f.name for f in fields if f.role == "attribute" and f.struct is None and not set(f.count_of or ()) & set(arrays)}
            | set(enum_members(list(fields))) | set(arrays))  # a tensor array: the list of its present items


def _shape_expr(src: SourcedYaml, path: tuple, text: str, fields: list[FieldSpec], roles: _Roles,
                extra: set[str] | None = None) -> ShapeExpr:
    try:
        return parse_shape_expr(text, shape_names(fields) | (extra or set()), roles.tensors)
    except FormulaError as exc:
        raise src.error(path, str(exc)) from None


def _read_expression_constraint(src: SourcedYaml, path: tuple, raw: dict, fields: list[FieldSpec], roles: _Roles,
                                catalog: Catalog) -> Constraint:
    """Rule `expression` (a truth the descriptor must satisfy) or `shape` (the Sizes of one tensor).
    Its `when` may also read the case's feature level (FeatureLevel, FL_X_Y): a rule the page puts
    in force below a level ("Until DML_FEATURE_LEVEL_4_0 ...")."""
    guard = None
    if "when" in raw:
        if not isinstance(raw["when"], str):
            raise src.error(path + ("when",), f"rule {raw['rule']} takes an expression as 'when'")
        guard = _shape_expr(src, path + ("when",), raw["when"], fields, roles, level_names(catalog))
    if raw["rule"] == "expression":
        if "expression" not in raw or "sizes" in raw:
            raise src.error(path, "rule expression needs 'expression' (and no 'sizes')")
        check = _shape_expr(src, path + ("expression",), raw["expression"], fields, roles)
        named = tuple(sorted(t for t in roles.tensors if f"{t}." in raw["expression"]))
        return Constraint(raw["id"], "expression", named, (), None, raw["text"], check=check, guard=guard,
                          _tensor_names=tuple(sorted(roles.tensors)), _arrays=_array_items(fields))
    if "sizes" not in raw or "tensor" not in raw or "expression" in raw:
        raise src.error(path, "rule shape needs 'tensor' and 'sizes' (and no 'expression')")
    if raw["tensor"] not in roles.tensors:
        raise src.error(path + ("tensor",), f"{raw['tensor']!r} is not a tensor field")
    sizes = _shape_expr(src, path + ("sizes",), raw["sizes"], fields, roles)
    if f"{raw['tensor']}." in raw["sizes"]:
        raise src.error(path + ("sizes",), f"the Sizes of {raw['tensor']} cannot depend on {raw['tensor']} itself")
    looped = {item for array, items in _array_items(fields) if array in sizes.names() for item in items}
    if raw["tensor"] in looped:
        raise src.error(path + ("sizes",), f"the Sizes of {raw['tensor']} cannot depend on its own tensor array")
    return Constraint(raw["id"], "shape", (raw["tensor"],), (), None, raw["text"], sizes=sizes, guard=guard, bound=raw.get("bound"),
                      _tensor_names=tuple(sorted(roles.tensors)), _arrays=_array_items(fields))


def _array_items(fields: list[FieldSpec]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((array, tuple(items)) for array, items in tensor_arrays(fields).items())


def _read_constraints(src: SourcedYaml, data: dict, catalog: Catalog, roles: _Roles,
                      fields: list[FieldSpec] | None = None) -> list[Constraint]:
    """Read the constraints: unique ids, the keys each rule needs, known tensors and types, conditions."""
    tensor_names = roles.tensors
    constraints: list[Constraint] = []
    seen_ids: set[str] = set()
    for index, raw in enumerate(data["constraints"]):
        path = ("constraints", index)
        if raw["id"] in seen_ids:
            raise src.error(path + ("id",), f"duplicate constraint id {raw['id']}")
        seen_ids.add(raw["id"])
        if raw["rule"] in ("expression", "shape"):
            constraints.append(_read_expression_constraint(src, path, raw, fields or [], roles, catalog))
            continue
        if raw["rule"] == "data_type_in":
            if "tensor" not in raw or "types" not in raw:
                raise src.error(path, "rule data_type_in needs 'tensor' and 'types'")
            names = [raw["tensor"]]
            _check_types(src, path + ("types",), raw["types"], catalog)
        else:
            if "tensors" not in raw:
                raise src.error(path, f"rule {raw['rule']} needs 'tensors' (two or more)")
            arrays = tensor_arrays(fields or [])  # a tensor array stands for all its items
            names = [item for n in raw["tensors"] for item in arrays.get(n, [n])]
        for n in names:
            if n not in tensor_names:
                raise src.error(path, f"{n!r} is not a tensor field")
        when = guard = None
        if "when" in raw and isinstance(raw["when"], str):
            guard = _variant_guard(src, path + ("when",), raw, data, fields or [], catalog)
        elif "when" in raw:
            w = raw["when"]
            if w["tensor"] not in tensor_names:
                raise src.error(path + ("when", "tensor"), f"{w['tensor']!r} is not a tensor field")
            _check_types(src, path + ("when", "types" if "types" in w else "types_not"), w.get("types", w.get("types_not")), catalog)
            when = Condition(w["tensor"], tuple(w["types"]) if "types" in w else None,
                             tuple(w["types_not"]) if "types_not" in w else None)
        constraints.append(Constraint(raw["id"], raw["rule"], tuple(names), tuple(raw.get("types", ())), when, raw["text"],
                                      guard=guard))
    return constraints


def _variant_guard(src: SourcedYaml, path: tuple, raw: dict, data: dict, fields: list[FieldSpec], catalog: Catalog) -> ShapeExpr:
    """An expression `when` on a type rule: it may read the variant key and its enum's members, and
    the feature level (FeatureLevel, FL_X_Y: "Until DML_FEATURE_LEVEL_3_0, ExponentTensor must match
    the type of InputTensor"), because generation fixes the key's member and the level before it
    picks the data types."""
    key = data.get("variant_key")
    field_ = next((f for f in fields if f.name == key), None)
    allowed = level_names(catalog) | ({field_.name} | set(field_.enum) if field_ is not None and field_.enum is not None else set())
    try:
        return parse_shape_expr(raw["when"], allowed, set())
    except FormulaError as exc:
        reads = (f"the variant key {field_.name} and its members, and " if field_ is not None and field_.enum is not None
                 else "") + "the feature level (FeatureLevel, FL_X_Y)"
        raise src.error(path, f"{exc} (the 'when' of a type rule reads only {reads})") from None


def _read_formula(src: SourcedYaml, data: dict, catalog: Catalog, support: list[SupportTable],
                  roles: _Roles, fields: list[FieldSpec] | None = None) -> tuple[OperatorFormula, _FormulaScope]:
    """Read the formula: expression, inputs, output, attributes, constants (names and kinds), absent inputs."""
    tensor_names = roles.tensors
    fraw = data["formula"]
    expression = _formula(src, ("formula", "expression"), fraw["expression"])
    for var, tname in fraw["inputs"].items():
        if tname not in roles.inputs:
            raise src.error(("formula", "inputs", var), f"{tname!r} is not an input tensor field")
    if fraw["output"] not in roles.outputs:
        raise src.error(("formula", "output"), f"{fraw['output']!r} is not an output tensor field")
    attrs = tuple(fraw.get("attributes", ()))
    for index, a in enumerate(attrs):
        if a not in roles.attributes:
            raise src.error(("formula", "attributes", index), f"{a!r} is not an attribute field")
    constants = {name: _formula(src, ("formula", "constants", name), text) for name, text in fraw.get("constants", {}).items()}
    tensor_kinds = _tensor_type_kinds(support, catalog)
    constant_kinds: dict[str, Kinds] = {}
    family = None
    if "family" in fraw:
        try:
            family = read_family(fraw["family"], fields or [], shape_names(fields or []), roles.tensors)
        except FormulaError as exc:
            raise src.error(("formula", "family"), str(exc)) from None
    computed = formula_variables(family.name if family else None)  # values the family computes (matmul's ab)
    for name in computed:
        constant_kinds[name] = frozenset({FLOAT})
    members = enum_members(fields or [])  # an enum attribute's members: named integers
    for member in members:
        constant_kinds[member] = frozenset({INTEGER})
    struct_names = struct_variables([f for f in fields or [] if f.name in fraw.get("attributes", ())])
    for name, is_member in struct_names.items():  # has_F (0 or 1) and F_M (the member's value)
        constant_kinds[name] = frozenset({FLOAT}) if is_member else frozenset({INTEGER})
    for name, c in constants.items():
        _check_names(src, ("formula", "constants", name), c, set(), tensor_names)
        constant_kinds[name] = _check_kinds(src, ("formula", "constants", name), c,
                                            _kind_facts(fraw, support, tensor_kinds, constant_kinds))
    items: dict[str, tuple[str, str]] = {}
    for var, raw in fraw.get("items", {}).items():
        owner = next((f for f in fields or [] if f.name == raw["array"]), None)
        if owner is None or not owner.is_array or raw["array"] not in attrs:
            raise src.error(("formula", "items", var, "array"), f"{raw['array']!r} is not an array attribute of formula.attributes")
        if raw["index"] not in ELEMENT_NAMES:
            raise src.error(("formula", "items", var, "index"), f"{raw['index']!r} is not an element coordinate "
                                                               f"({', '.join(sorted(ELEMENT_NAMES))})")
        items[var] = (raw["array"], raw["index"])
        constant_kinds[var] = frozenset({FLOAT}) if owner.element == "FLOAT" else frozenset({INTEGER})
    names = set(fraw["inputs"]) | set(attrs) | set(constants) | set(members) | set(struct_names) | set(computed) | set(items)
    if family is None:  # an element's coordinates (coord0..coord7, linear_index): exact integers
        names |= ELEMENT_NAMES
        constant_kinds.update({name: frozenset({INTEGER}) for name in ELEMENT_NAMES})
    _check_names(src, ("formula", "expression"), expression, names, tensor_names)
    evaluated = _kind_facts(fraw, support, tensor_kinds, constant_kinds)
    generated = _kind_facts(fraw, support, tensor_kinds, constant_kinds, generator=True)
    _check_kinds(src, ("formula", "expression"), expression, evaluated)
    absent = {}
    for var, raw in fraw.get("absent_inputs", {}).items():
        if var not in fraw["inputs"]:
            raise src.error(("formula", "absent_inputs", var), f"{var!r} is not a formula input")
        # a whole number stays a Python int: next to UINT64 or INT64 values it keeps their type (exact)
        absent[var] = raw["value"] if isinstance(raw["value"], int) else float(raw["value"])
    other_outputs = {}
    for out_name, text in fraw.get("other_outputs", {}).items():
        where = ("formula", "other_outputs", out_name)
        if out_name not in roles.outputs or out_name == fraw["output"]:
            raise src.error(where, f"{out_name!r} is not an output tensor field other than formula.output")
        if family is not None:
            raise src.error(where, "a family computes its outputs itself: other_outputs is for elementwise formulas")
        other = _formula(src, where, text)
        _check_names(src, where, other, names, tensor_names)
        _check_kinds(src, where, other, evaluated)
        other_outputs[out_name] = other
    blocked = tuple(fraw.get("blocked", {}).get("inputs", ()))
    for index, var in enumerate(blocked):
        if var not in fraw["inputs"]:
            raise src.error(("formula", "blocked", "inputs", index), f"{var!r} is not a formula input")
    if blocked and family is not None:
        raise src.error(("formula", "blocked"), "a family reads its inputs itself: blocked is for elementwise formulas")
    formula = OperatorFormula(fraw["docs"], expression, fraw["operands"], dict(fraw["inputs"]), attrs, constants,
                              absent, fraw.get("rounding", {}).get("mode"), fraw["output"], family, items, other_outputs,
                              blocked)
    return formula, _FormulaScope(names, evaluated, generated, family.name if family else None)


def struct_variables(fields: list[FieldSpec]) -> dict[str, bool]:
    """The formula names of struct-pointer fields: has_<Field> (False) and <Field>_<Member> (True)."""
    out: dict[str, bool] = {}
    for f in fields:
        if f.struct is not None:
            out[f"has_{f.name}"] = False
            out.update({f"{f.name}_{member}": True for member, _ in f.struct})
    return out


def enum_members(fields: list[FieldSpec]) -> dict[str, int]:
    """The members of every enum attribute, by name (what formulas may compare an enum field with)."""
    out: dict[str, int] = {}
    for f in fields:
        out.update(f.enum or {})
    return out


def _check_absent_inputs(src: SourcedYaml, support: list[SupportTable], formula: OperatorFormula) -> None:
    """Check that every optional tensor the formula reads has a stated meaning when absent."""
    for table_index, table in enumerate(support):
        for tname, cell in table.tensors.items():
            if cell.optional:
                for var, t in formula.inputs.items():
                    if t == tname and var not in formula.absent_inputs:
                        raise src.error(("support", table_index, "tensors", tname, "kind"),
                                        f"{tname} is optional but formula.absent_inputs does not say what {var!r} is when it is absent")


def _read_unspecified(src: SourcedYaml, data: dict, catalog: Catalog, scope: _FormulaScope,
                      roles: _Roles) -> list[Unspecified]:
    """Read the unspecified regions: their conditions' names and kinds, and the types they apply to."""
    unspecified = []
    ids: set[str] = set()
    for index, raw in enumerate(data.get("unspecified", [])):
        if raw["id"] in ids:
            raise src.error(("unspecified", index, "id"), f"duplicate unspecified id {raw['id']}")
        ids.add(raw["id"])
        f = _formula(src, ("unspecified", index, "when"), raw["when"])
        ub = bool(raw.get("undefined_behaviour", False))  # the generator also evaluates these, to avoid them
        group_facts = {} if ub else element_variables(scope.family)  # the family's facts about an element's group
        _check_names(src, ("unspecified", index, "when"), f, scope.names | set(group_facts), roles.tensors)
        evaluated = replace(scope.evaluated, variables={**scope.evaluated.variables, **{v: frozenset({INTEGER}) for v in group_facts}},
                            why={**scope.evaluated.why, **group_facts})
        contexts = (evaluated, scope.generated) if ub else (evaluated,)
        if "applies_to" in raw:
            _check_types(src, ("unspecified", index, "applies_to"), raw["applies_to"], catalog)
            # the rule is evaluated only where the output has one of these types: check it for those alone
            contexts = tuple(_only_output_types(c, data["formula"]["output"], raw["applies_to"]) for c in contexts)
        _check_kinds(src, ("unspecified", index, "when"), f, *contexts)
        outputs = None
        if "outputs" in raw:
            outputs = tuple(raw["outputs"])
            for k, name in enumerate(outputs):
                if name not in roles.outputs:
                    raise src.error(("unspecified", index, "outputs", k), f"{name!r} is not an output tensor field")
        unspecified.append(Unspecified(raw["id"], f, raw["why"], tuple(raw["applies_to"]) if "applies_to" in raw else None,
                                       raw.get("handled_by"), bool(raw.get("undefined_behaviour", False)), outputs))
    return unspecified


def _only_output_types(facts: KindFacts, output: str, types: list[str]) -> KindFacts:
    """`facts` with the output tensor's data types narrowed to `types` (an `applies_to` list)."""
    tensors = dict(facts.tensors)
    if output in tensors:
        tensors[output] = {t: kind for t, kind in tensors[output].items() if t in types}
    return replace(facts, tensors=tensors)


def _read_comparisons(src: SourcedYaml, data: dict, catalog: Catalog, scope: _FormulaScope,
                      roles: _Roles) -> dict[str, Comparison]:
    """Read the comparison rules: keys, atol and ties formulas, and max_ulp for ulp comparisons."""
    comparison: dict[str, Comparison] = {}
    for key, raw in data["comparison"].items():
        path = ("comparison", key)
        if key != "default" and key not in catalog.data_types:
            raise src.error(path, f"comparison keys are 'default' or data type names, found {key!r}")
        atol = ties = None
        if "atol" in raw:
            atol = _formula(src, path + ("atol",), raw["atol"])
            _check_names(src, path + ("atol",), atol, scope.names, roles.tensors)
            _check_kinds(src, path + ("atol",), atol, scope.evaluated)
        if "ties" in raw:
            ties = _formula(src, path + ("ties",), raw["ties"])
            _check_names(src, path + ("ties",), ties, scope.names, roles.tensors)
            _check_kinds(src, path + ("ties",), ties, scope.evaluated)
        if raw["kind"] == "ulp" and "max_ulp" not in raw:
            raise src.error(path, "kind ulp needs max_ulp")
        comparison[key] = Comparison(raw["kind"], raw.get("max_ulp", 0), atol, ties,
                                     raw.get("nan_payload", "ignore"))
    return comparison


def _read_attribute_values(src: SourcedYaml, data: dict, roles: _Roles, fields: list[FieldSpec] | None = None) -> dict:
    """Read attribute_values: each key names an attribute field; an array's entry (`subset_of`) is
    parsed as a shape expression, a scalar's (`ordinary`, `edge`) is a pool of numbers."""
    attribute_values = dict(data.get("attribute_values", {}))
    by_name = {f.name: f for f in fields or []}
    for name, raw in attribute_values.items():
        if name.split(".")[0] not in roles.attributes:  # "Field" or "Field.Member" of a struct pointer
            raise src.error(("attribute_values", name), f"{name!r} is not an attribute field")
        owner = by_name.get(name.split(".")[0])
        if owner is not None and ("." in name) != (owner.struct is not None):
            raise src.error(("attribute_values", name), f"{owner.name} is {'a struct pointer: name its members as ' + owner.name + '.MEMBER' if owner.struct else 'not a struct pointer'}")
        if owner is not None and owner.struct is not None and name.split(".", 1)[1] not in {m for m, _ in owner.struct}:
            raise src.error(("attribute_values", name), f"{owner.c_type} has no member {name.split('.', 1)[1]!r} (members: {', '.join(m for m, _ in owner.struct)})")
        if owner is not None and owner.c_type in ("UINT", "INT", "BOOL") and not owner.is_array:
            low, high = (0, 2**32 - 1) if owner.c_type == "UINT" else (-(2**31), 2**31 - 1)
            for key in ("ordinary", "edge"):
                for i, v in enumerate(raw.get(key, [])):
                    if not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())) or not low <= v <= high:
                        raise src.error(("attribute_values", name, key, i), f"{v!r} is not a {owner.c_type} value ({low}..{high})")
        if "one_of" in raw:  # a UINT/INT/enum scalar whose valid values depend on the shapes (an axis, a count, a type)
            if owner is None or (owner.c_type not in ("UINT", "INT", "BOOL") and owner.enum is None) or owner.is_count:
                raise src.error(("attribute_values", name, "one_of"), "one_of is for UINT, INT, BOOL and enum scalar fields")
            attribute_values[name] = dict(raw, one_of=_shape_expr(src, ("attribute_values", name, "one_of"), raw["one_of"],
                                                                  list(fields or []), roles))
            continue
        is_array = name in by_name and by_name[name].is_array
        if is_array != ("subset_of" in raw or "each" in raw or "length" in raw):
            raise src.error(("attribute_values", name), "an array field's values are given by 'subset_of' or 'length' and 'each', "
                                                        "a scalar's by 'ordinary'/'edge'")
        if is_array and "subset_of" in raw:
            attribute_values[name] = dict(raw, subset_of=_shape_expr(src, ("attribute_values", name, "subset_of"),
                                                                    raw["subset_of"], list(fields or []), roles))
        elif is_array and "each" not in raw:  # a FLOAT array: items from the ordinary and edge pools
            if by_name[name].element != "FLOAT":
                raise src.error(("attribute_values", name), f"{name} is a {by_name[name].c_type} array: its items are given by 'each'")
            attribute_values[name] = dict(raw, length=_shape_expr(src, ("attribute_values", name, "length"), raw["length"],
                                                                  list(fields or []), roles))
        elif is_array:  # one item per position i: `each` gives the choices at i
            each = _shape_expr(src, ("attribute_values", name, "each"), raw["each"], list(fields or []), roles, extra={"i"})
            attribute_values[name] = dict(raw, length=_shape_expr(src, ("attribute_values", name, "length"), raw["length"],
                                                                  list(fields or []), roles), each=each)
    for f in fields or []:
        if f.is_array and f.name not in attribute_values:
            raise src.error(("attribute_values",), f"array field {f.name} needs attribute_values.{f.name}.subset_of (what generation draws from)")
    return attribute_values


def _read_examples(src: SourcedYaml, data: dict, catalog: Catalog, roles: _Roles,
                   optional: frozenset[str] = frozenset()) -> list[Example]:
    """Read the examples: types for every tensor (an optional input left out is absent, as the
    page's nullptr), equal lengths, known fields, values within their types."""
    every_tensor = roles.tensors
    examples = []
    names: set[str] = set()
    for index, raw in enumerate(data.get("examples", [])):
        path = ("examples", index)
        if raw["name"] in names:
            raise src.error(path + ("name",), f"duplicate example name {raw['name']} (a test runs per name)")
        names.add(raw["name"])
        tensor_names = set(raw["types"]) & every_tensor
        if not set(every_tensor) - optional <= set(raw["types"]) <= set(every_tensor):
            raise src.error(path + ("types",), f"types must name every tensor field: {', '.join(sorted(every_tensor))}"
                            + (f" (an optional input may be left out: absent): {', '.join(sorted(optional))}" if optional else ""))
        for tname, tt in raw["types"].items():
            if tt not in catalog.data_types:
                raise src.error(path + ("types", tname), f"unknown data type {tt!r}")
        tensor_sizes = raw.get("tensor_sizes")
        if tensor_sizes is not None:  # shapes differ per tensor: each list holds its tensor's elements
            if "sizes" in raw or set(tensor_sizes) != tensor_names:
                raise src.error(path + ("tensor_sizes",), f"tensor_sizes (instead of sizes) names every tensor field: {', '.join(sorted(tensor_names))}")
            for section in ("inputs", "expected"):
                for tname, values in raw[section].items():
                    if len(values) != math.prod(tensor_sizes.get(tname, [0])):
                        raise src.error(path + (section, tname), f"{len(values)} value(s) for sizes {tensor_sizes.get(tname)}")
        else:
            lengths = {len(v) for v in list(raw["inputs"].values()) + list(raw["expected"].values())}
            if len(lengths) != 1:
                raise src.error(path, "all input and expected lists must have the same length")
        for tname in raw["inputs"]:
            if tname not in roles.inputs:
                raise src.error(path + ("inputs", tname), f"{tname!r} is not an input field")
        for tname in raw["expected"]:
            if tname not in roles.outputs:
                raise src.error(path + ("expected", tname), f"{tname!r} is not an output field")
        for aname in raw.get("attributes", {}):  # "Field", or "Field.Member" of a struct pointer or fused activation
            if aname.split(".")[0] not in roles.attributes:
                raise src.error(path + ("attributes", aname), f"{aname!r} is not an attribute field")
        _check_example(src, path, raw, catalog)
        examples.append(Example(raw["name"], raw["source"], dict(raw["types"]),
                                tuple(raw["sizes"]) if "sizes" in raw else None, dict(raw.get("attributes", {})),
                                {k: list(v) for k, v in raw["inputs"].items()},
                                {k: list(v) for k, v in raw["expected"].items()},
                                {k: tuple(v) for k, v in tensor_sizes.items()} if tensor_sizes is not None else None))
    return examples


def _read_generation(src: SourcedYaml, data: dict, scope: _FormulaScope, roles: _Roles) -> list[Favour]:
    """Read generation.favour: input tensors, and expressions (with k) that the generator can evaluate."""
    favour = []
    for index, raw in enumerate(data.get("generation", {}).get("favour", [])):
        path = ("generation", "favour", index)
        if raw["tensor"] not in roles.inputs:
            raise src.error(path + ("tensor",), f"{raw['tensor']!r} is not an input tensor field")
        f = _formula(src, path + ("expression",), raw["expression"])
        _check_names(src, path + ("expression",), f, scope.names | {"k"}, roles.tensors)
        _check_kinds(src, path + ("expression",), f, scope.generated)
        k_range = tuple(raw.get("k", [0, 0]))
        favour.append(Favour(raw["tensor"], f, (k_range[0], k_range[1]), raw["why"]))
    return favour


def _read_limits(src: SourcedYaml, data: dict, catalog: Catalog, fields: list[FieldSpec], roles: _Roles) -> list[Limit]:
    """Read generation.limits: an input tensor, the types and descriptors it applies to, and the
    bound as a shape expression (its binary exponent)."""
    limits = []
    for index, raw in enumerate(data.get("generation", {}).get("limits", [])):
        path = ("generation", "limits", index)
        if raw["tensor"] not in roles.inputs:
            raise src.error(path + ("tensor",), f"{raw['tensor']!r} is not an input tensor field")
        if "applies_to" in raw:
            _check_types(src, path + ("applies_to",), raw["applies_to"], catalog)
        when = _shape_expr(src, path + ("when",), raw["when"], fields, roles) if "when" in raw else None
        bits = _shape_expr(src, path + ("bits",), raw["bits"], fields, roles)
        limits.append(Limit(raw["tensor"], bits, raw["why"], when,
                            tuple(raw["applies_to"]) if "applies_to" in raw else None))
    return limits


def _read_data_ranges(src: SourcedYaml, data: dict, catalog: Catalog, fields: list[FieldSpec],
                      roles: _Roles) -> list[DataRange]:
    """Read generation.data_ranges: an input tensor, the types and descriptors it applies to, and
    its inclusive range as two shape expressions, which may also read the case's feature level."""
    ranges = []
    extra = level_names(catalog)
    for index, raw in enumerate(data.get("generation", {}).get("data_ranges", [])):
        path = ("generation", "data_ranges", index)
        if raw["tensor"] not in roles.inputs:
            raise src.error(path + ("tensor",), f"{raw['tensor']!r} is not an input tensor field")
        if "applies_to" in raw:
            _check_types(src, path + ("applies_to",), raw["applies_to"], catalog)
        when = _shape_expr(src, path + ("when",), raw["when"], fields, roles, extra) if "when" in raw else None
        low = _shape_expr(src, path + ("min",), raw["min"], fields, roles, extra)
        high = _shape_expr(src, path + ("max",), raw["max"], fields, roles, extra)
        ranges.append(DataRange(raw["tensor"], low, high, raw["why"], when,
                                tuple(raw["applies_to"]) if "applies_to" in raw else None, float(raw.get("outside", 0.0))))
    return ranges


TODO_MARK = "TODO"


def todo_paths(data: Any, path: tuple = ()) -> list[tuple]:
    """Key paths whose value is a string starting with TODO: what `spec import` leaves for a person."""
    if isinstance(data, str):
        return [path] if data.startswith(TODO_MARK) else []
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in todo_paths(v, path + (k,))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in todo_paths(v, path + (i,))]
    return []


def _check_no_todo(src: SourcedYaml) -> None:
    """A skeleton from `spec import` is not a spec until every TODO is filled: the first one is
    the error (file, line, key), the others are counted with their lines."""
    left = todo_paths(src.data)
    if left:
        others = ", ".join(f"{'.'.join(map(str, p))} (line {src.line_of(p)})" for p in left[1:6])
        more = f"; {len(left) - 1} more: {others}{', ...' if len(left) > 6 else ''}" if len(left) > 1 else ""
        raise src.error(left[0], f"left to fill: {src.data_at(left[0])}{more}")


def build_operator(src: SourcedYaml, catalog: Catalog) -> OperatorSpec:
    """Schema-check and meaning-check one operator file, and build its model."""
    _check_no_todo(src)
    data = _read_document(src)
    fields, roles = _read_fields(src, data, catalog)
    support = _read_support(src, data, catalog, fields, roles)
    pairs = _read_in_place(src, data, roles)
    constraints = _read_constraints(src, data, catalog, roles, fields)
    formula, scope = _read_formula(src, data, catalog, support, roles, fields)
    _check_absent_inputs(src, support, formula)
    unspecified = _read_unspecified(src, data, catalog, scope, roles)
    comparison = _read_comparisons(src, data, catalog, scope, roles)
    attribute_values = _read_attribute_values(src, data, roles, fields)
    optional = frozenset(t for table in support for t, cell in table.tensors.items() if cell.optional)
    examples = _read_examples(src, data, catalog, roles, optional)
    favour = _read_generation(src, data, scope, roles)
    limits = _read_limits(src, data, catalog, fields, roles)
    data_ranges = _read_data_ranges(src, data, catalog, fields, roles)

    return OperatorSpec(
        favour=tuple(favour),
        name=data["operator"], operator_type=data["operator_type"], desc_struct=data["desc_struct"],
        summary=data["summary"], introduced=data["introduced"], in_place_allowed=data["in_place"]["allowed"],
        in_place_pairs=pairs, fields=tuple(fields), support=tuple(support), constraints=tuple(constraints),
        formula=formula, special_cases=tuple(data.get("special_cases", [])), unspecified=tuple(unspecified),
        comparison=comparison, attribute_values=attribute_values, examples=tuple(examples),
        sources=tuple(data["sources"]), path=src.path, catalog=catalog,
        variant_key=data.get("variant_key"), limits=tuple(limits),
        data_ranges=tuple(data_ranges), docs_drift=tuple(data.get("docs_drift", ())))


def operator_files(specs_dir: Path) -> list[Path]:
    """Operator spec files: every *.yaml not starting with '_' (those are shared data)."""
    return sorted(p for p in Path(specs_dir).glob("*.yaml") if not p.name.startswith("_"))


_BUILT: dict[tuple, OperatorSpec] = {}
_BUILT_MAX = 2048


def build_file(path: Path, catalog: Catalog) -> OperatorSpec:
    """build_operator of one file, memoised on the file's name and bytes and the catalog object
    (load_catalog returns one object per distinct catalog content): linting or loading a copy of
    a directory in which one file changed rebuilds that file only. Each call returns a new
    OperatorSpec (its own path, an empty `activations` for load_specs to fill), sharing the parsed
    fields, tables and expressions, which nothing changes after loading."""
    path = Path(path)
    try:
        key = (path.name, hashlib.blake2b(path.read_bytes(), digest_size=16).digest(), id(catalog))
    except OSError:
        key = None
    hit = _BUILT.get(key) if key is not None else None
    if hit is None or hit.catalog is not catalog:
        hit = build_operator(load_yaml(path), catalog)
        if key is not None:
            if len(_BUILT) >= _BUILT_MAX:
                _BUILT.clear()
            _BUILT[key] = hit
    return replace(hit, path=path, activations={})


def load_specs(specs_dir: Path | str = DEFAULT_SPECS_DIR) -> SpecSet:
    """Load every spec of a directory; raise the first SpecError."""
    specs_dir = Path(specs_dir)
    catalog = load_catalog(specs_dir)
    operators: dict[str, OperatorSpec] = {}
    types_seen: dict[int, Path] = {}
    for path in operator_files(specs_dir):
        spec = build_file(path, catalog)
        if spec.operator_type in types_seen:
            raise SpecError(path, None, ("operator_type",), f"operator_type {spec.operator_type} is also used by {types_seen[spec.operator_type].name}")
        types_seen[spec.operator_type] = path
        operators[spec.name] = spec
    resolve_activations(operators)
    return SpecSet(catalog=catalog, operators=operators, directory=specs_dir)


def fusable_problem(activation: OperatorSpec) -> str | None:
    """Why `activation` cannot be a fused activation, or None: DirectML fuses an activation by its
    operator desc with null tensors, so it must be one element-wise expression of one input into
    one output whose other fields are FLOAT scalars (what the runner and the composition marshal)."""
    if activation.formula.family is not None or len(activation.formula.inputs) != 1:
        return "it is not an element-wise formula of one input"
    if len(activation.input_fields) != 1 or len(activation.output_fields) != 1:
        return "it does not have exactly one input and one output tensor"
    odd = [f.name for f in activation.attribute_fields if f.c_type != "FLOAT"]
    if odd:
        return f"its attributes {', '.join(odd)} are not FLOAT scalars"
    return None


def resolve_activations(operators: dict[str, OperatorSpec], only: str | None = None,
                        broken: frozenset[str] = frozenset()) -> None:
    """Fill each spec's `activations` from the specs its fused-activation fields name; a name that
    is not a spec of the directory, or not fusable, is an error at that field's `activations`.
    Names in `broken` (specs that failed to load, reported at their own file) are left out, so one
    malformed activation spec gives one error, not one more per operator that may fuse it."""
    for spec in operators.values():
        if only is not None and spec.name != only:
            continue
        for index, f in enumerate(spec.fields):
            if not f.is_fused_activation:
                continue
            allowed: dict[int, OperatorSpec] = {}
            for position, name in enumerate(f.activations or ()):
                other = operators.get(name)
                if other is None and name in broken:
                    continue
                problem = (f"{name!r} is not an operator spec of this directory" if other is None
                           else fusable_problem(other))
                if problem:
                    src = load_yaml(spec.path)
                    raise src.error(("fields", index, "activations", position), f"{name} cannot be fused: {problem}")
                assert other is not None
                allowed[other.operator_type] = other
            spec.activations[f.name] = allowed


def lint_specs(paths: list[Path], specs_dir: Path) -> list[SpecError]:
    """Check each file independently and return every error found (one per file at most)."""
    errors: list[SpecError] = []
    try:
        catalog = load_catalog(specs_dir)
    except SpecError as exc:
        return [exc]
    built: dict[str, OperatorSpec] = {}
    for path in paths:
        try:
            spec = build_file(path, catalog)
            built[spec.name] = spec
        except SpecError as exc:
            errors.append(exc)
    others: dict[str, OperatorSpec] = {}  # what fused activations may name: the directory's specs
    broken: set[str] = set()
    for path in operator_files(specs_dir):
        try:
            other = build_file(path, catalog)
            others[other.name] = other
        except SpecError:
            broken.add(path.stem)  # reported when that file is linted
    for name, spec in built.items():
        try:
            resolve_activations({**others, name: spec}, only=name, broken=frozenset(broken))
        except SpecError as exc:
            errors.append(exc)
    return errors
