"""The operator spec model: what the harness knows about one operator once its file is loaded.

The dataclasses (OperatorSpec and its parts: fields, support tables, constraints, the formula,
unspecified regions, comparison rules, examples, generation hints; SpecSet for a directory), the
constants the fields are read against, and the small pure helpers that the readers and the later
stages use on a loaded spec (tensor arrays, the names expressions may read, enum members,
feature-level names). Nothing here reads a file: reading and checking spec files is
harness.spec.load (with harness.spec.read_fields and harness.spec.read_formula), collecting
every problem of a directory is harness.spec.lint.
"""
from __future__ import annotations

from dataclasses import replace, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypedDict

from harness.spec.catalog import Catalog
from harness.spec.expr import Formula
from harness.spec.families import FamilySpec
from harness.spec.shape_expr import ShapeExpr

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
    # an array of fused activations (`_Field_size_(Count) const DML_OPERATOR_DESC*`, `activations` and
    # `count`): the shape expression giving how many items a descriptor holds (what generation draws)
    items: str | None = None
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
    def is_activation_array(self) -> bool:
        """An array of fused activations (`activations` with a `count` field): consecutive
        DML_OPERATOR_DESCs, each an allowed activation."""
        return self.activations is not None and self.count is not None

    @property
    def is_array(self) -> bool:
        return self.element is not None

    @property
    def is_count(self) -> bool:
        return self.count_of is not None


@dataclass(frozen=True)
class TensorSupport:
    """One row of a support table."""

    kind: str  # input | optional_input | output | optional_output (a plain field, or items 1.. of an output tensor array)
    dims: tuple[int, int]
    types: tuple[str, ...]
    # a plain field the page calls 'Optional output': a device must accept it null, but generation
    # binds it always (the references compute every output field, so a case without one is not judged)
    bound_always: bool = False

    @property
    def optional(self) -> bool:
        """Whether a descriptor may leave the tensor null (the validator's tensor.missing rule)."""
        return self.kind in ("optional_input", "optional_output")

    @property
    def omittable(self) -> bool:
        """Whether generation leaves the tensor out in some cases: an optional input or a later item
        of a tensor array, not a plain optional output (bound_always)."""
        return self.optional and not self.bound_always

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
    align: str | None = None         # rule shape with align 'right' (or 'left'): compared right- (left-) aligned, leading (trailing) 1s left out or added
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
    distinct: "Distinct | None" = None


@dataclass(frozen=True)
class Distinct:
    """Values of a ranged tensor that must not repeat (`generation.data_ranges[].distinct`): where
    two equal indices make the page's result undetermined (two scatter writes to one element),
    random data would repeat them often. `within: lines`: along each line of the tensor along
    `axis`, no two values are equal modulo `modulo` (an integer: i and i - size name one element);
    `within: tensor`: the lines along `axis` (index tuples) are pairwise different, coordinate k
    taken modulo `modulo[k]` (a list as long as the axis); `within: blocks`: within each block of the
    tensor's dims from `axis` to its last (axis 0: the whole tensor, as flat indices into a whole
    tensor need), no two values are equal modulo `modulo` (an integer)."""

    within: str  # lines | tensor | blocks
    axis: ShapeExpr
    modulo: ShapeExpr


FEATURE_LEVEL_NAME = "FeatureLevel"


def level_constant(level_name: str) -> str:
    """The name data-range expressions give a feature level: "3.0" -> FL_3_0."""
    return "FL_" + level_name.replace(".", "_")


def level_names(catalog: Catalog) -> set[str]:
    """The names a data-range expression may read beside the descriptor's: the case's feature level
    and each level of the catalog, as their DML_FEATURE_LEVEL values (compare with >=, <)."""
    return {FEATURE_LEVEL_NAME} | {level_constant(level.name) for level in catalog.levels}


class AttributePool(TypedDict, total=False):
    """One entry of a spec's `attribute_values` (harness.spec.schema says which keys go together):
    a scalar's pools of numbers, or the shape expressions an array's (or a `one_of` scalar's)
    domain is drawn from."""

    ordinary: list[float]
    edge: list[float]
    subset_of: ShapeExpr
    min_length: int
    order: str
    length: ShapeExpr
    each: ShapeExpr
    one_of: ShapeExpr
    why: str


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
    attribute_values: dict[str, AttributePool]
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


def tensor_arrays(fields: list[FieldSpec] | tuple[FieldSpec, ...]) -> dict[str, list[str]]:
    """Each tensor array's name and its items' tensor fields, in order."""
    arrays: dict[str, list[str]] = {}
    for f in fields:
        if f.array_of is not None:
            arrays.setdefault(f.array_of, []).append(f.name)
    return arrays


def shape_names(fields: list[FieldSpec] | tuple[FieldSpec, ...]) -> set[str]:
    """The names a shape or constraint expression may read: every attribute field (scalars, arrays,
    count fields), every enum member, and every tensor array (the list of its present items, to
    loop over: `all(t.DimensionCount == 4 for t in InputTensors)`). A tensor array's count field
    is not one: its value is the number of items present (`len(InputTensors)`, or `T_k.present`)."""
    arrays = tensor_arrays(fields)
    return ({f.name for f in fields if f.role == "attribute" and f.struct is None and not set(f.count_of or ()) & set(arrays)}
            | set(enum_members(list(fields))) | set(arrays))  # a tensor array: the list of its present items


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
