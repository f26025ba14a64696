"""Reading the value side of an operator file: formula, unspecified regions, comparisons, examples.

The section readers build_operator (harness.spec.load) calls once the fields and support tables
are read: the formula (its names, and the kinds of value each holds where it is evaluated),
absent inputs, unspecified regions, comparison rules, worked examples, and the generation hints
(favoured values, limits, data ranges). Each meaning-checks its section and raises a SpecError at
the first problem, at the offending key.
"""
from __future__ import annotations

import math
from dataclasses import replace, dataclass
from typing import Any

import numpy as np

from harness.spec.catalog import Catalog, DataType
from harness.spec.expr import ELEMENT_NAMES, FLOAT, INTEGER, Formula, FormulaError, KindFacts, Kinds, check_kinds, parse_formula
from harness.spec.families import element_variables, formula_variables, read_family
from harness.spec.model import (MAX_DIMENSIONS, Comparison, DataRange, Distinct, Example, Favour, FieldSpec, Limit,
                                OperatorFormula,
                                SupportTable, Unspecified, enum_members, level_names, shape_names, struct_variables)
from harness.spec.read_fields import _Roles, _check_types, _shape_expr
from harness.spec.shape_expr import ShapeExpr, without_text
from harness.spec.source import SourcedYaml

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


@dataclass(frozen=True)
class _FormulaScope:
    """What later sections' formulas may use: the formula's names and the kinds they hold."""
    names: set[str]
    evaluated: KindFacts
    generated: KindFacts
    family: str | None = None  # the family plug-in, whose element variables `unspecified` rules may read


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
        contexts: tuple[KindFacts, ...] = (evaluated, scope.generated) if ub else (evaluated,)
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
            base = aname.split(".")[0]  # an activation array's item k: "Field_k.Member"
            item_of = base.rpartition("_")[0] if "." in aname and base.rpartition("_")[2].isdigit() else None
            if base not in roles.attributes and item_of not in roles.attributes:
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


def limit_problem(bits: Any, dtype: DataType) -> str | None:
    """Why `bits` (a generation limit's value) is no limit for `dtype`, or None (also for no value:
    the expression reads what a descriptor does not have, and the limit is not applied). A limit
    keeps integers within 2^bits in magnitude, floats' binary exponents within +-bits: 0 to the
    type's width, 0 to its largest binary exponent (128 for FLOAT32)."""
    if bits is None:
        return None
    if isinstance(bits, bool) or not isinstance(bits, int):
        return f"bits gives {bits!r}, not a whole number"
    top = int(np.finfo(dtype.numpy).maxexp) if dtype.is_float else dtype.bits
    if not 0 <= bits <= top:
        what = "binary exponents within +-bits" if dtype.is_float else "|x| within 2^bits"
        return f"bits {bits} is outside 0 .. {top} for {dtype.name} (a limit keeps {what})"
    return None


def range_problem(value: Any, dtype: DataType) -> str | None:
    """Why `value` (a data range's end) is no value of `dtype`, or None (also for no value: the
    expression reads what a descriptor does not have, and the range is not applied)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"gives {value!r}, not a whole number"
    if dtype.is_float:
        top = int(np.finfo(dtype.numpy).max)
        return f"{value} is outside the range of {dtype.name} (largest finite {top:.6g})" if abs(value) > top else None
    assert dtype.min is not None and dtype.max is not None
    if not dtype.min <= value <= dtype.max:
        return f"{value} is outside the range of {dtype.name} ({dtype.min} .. {dtype.max})"
    return None


def _tensor_types(support: list[SupportTable] | None, tensor: str, applies_to: list[str] | None) -> list[str]:
    """The data types a limit or range of `tensor` is applied to: its `applies_to`, else every type
    a support table gives the tensor."""
    if applies_to is not None:
        return list(applies_to)
    return list(dict.fromkeys(t for table in support or [] for name, cell in table.tensors.items() if name == tensor
                              for t in cell.types))


def _constant(src: SourcedYaml, path: tuple, expr: ShapeExpr) -> Any:
    """The value of an expression that reads nothing (a literal, arithmetic on literals): checked
    when the file is read, not first when a descriptor meets it; None for one that reads names."""
    if expr.names():
        return None
    try:
        return expr.evaluate({}, {})
    except FormulaError as exc:
        raise src.error(path, without_text(str(exc), expr.text)) from None


def _read_limits(src: SourcedYaml, data: dict, catalog: Catalog, fields: list[FieldSpec], roles: _Roles,
                 support: list[SupportTable] | None = None) -> list[Limit]:
    """Read generation.limits: an input tensor, the types and descriptors it applies to, and the
    bound as a shape expression (its binary exponent); a constant bound must fit every type it
    applies to (`spec lint` probes the others, harness.spec.lint)."""
    limits = []
    for index, raw in enumerate(data.get("generation", {}).get("limits", [])):
        path = ("generation", "limits", index)
        if raw["tensor"] not in roles.inputs:
            raise src.error(path + ("tensor",), f"{raw['tensor']!r} is not an input tensor field")
        if "applies_to" in raw:
            _check_types(src, path + ("applies_to",), raw["applies_to"], catalog)
        when = _shape_expr(src, path + ("when",), raw["when"], fields, roles) if "when" in raw else None
        bits = _shape_expr(src, path + ("bits",), raw["bits"], fields, roles)
        value = _constant(src, path + ("bits",), bits)
        for type_name in _tensor_types(support, raw["tensor"], raw.get("applies_to")) if value is not None else []:
            problem = limit_problem(value, catalog.data_types[type_name])
            if problem:
                raise src.error(path + ("bits",), problem)
        limits.append(Limit(raw["tensor"], bits, raw["why"], when,
                            tuple(raw["applies_to"]) if "applies_to" in raw else None))
    return limits


def _read_data_ranges(src: SourcedYaml, data: dict, catalog: Catalog, fields: list[FieldSpec],
                      roles: _Roles, support: list[SupportTable] | None = None) -> list[DataRange]:
    """Read generation.data_ranges: an input tensor, the types and descriptors it applies to, and
    its inclusive range as two shape expressions, which may also read the case's feature level.
    Constant ends must be values of every type the range applies to, min not above max (`spec
    lint` probes the others, harness.spec.lint)."""
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
        ends = {"min": _constant(src, path + ("min",), low), "max": _constant(src, path + ("max",), high)}
        for type_name in _tensor_types(support, raw["tensor"], raw.get("applies_to")):
            for key, value in ends.items():
                problem = range_problem(value, catalog.data_types[type_name])
                if problem:
                    raise src.error(path + (key,), problem)
        if isinstance(ends["min"], int) and isinstance(ends["max"], int) and ends["min"] > ends["max"]:
            raise src.error(path, f"min {ends['min']} is above max {ends['max']}: the range is empty")
        distinct = None
        if "distinct" in raw:
            d = raw["distinct"]
            distinct = Distinct(d["within"], _shape_expr(src, path + ("distinct", "axis"), d["axis"], fields, roles, extra),
                                _shape_expr(src, path + ("distinct", "modulo"), d["modulo"], fields, roles, extra))
        ranges.append(DataRange(raw["tensor"], low, high, raw["why"], when,
                                tuple(raw["applies_to"]) if "applies_to" in raw else None, float(raw.get("outside", 0.0)),
                                distinct))
    return ranges
