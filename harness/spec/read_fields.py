"""Reading the descriptor side of an operator file: fields, support tables, constraints.

The section readers build_operator (harness.spec.load) calls for the fields (tensor arrays,
structs by value, enums, arrays and their count fields, fused activations), the support tables
and their enum-keyed variants, the in-place pairs, the constraints and attribute_values; each
meaning-checks its section and raises a SpecError at the first problem, at the offending key.
Also the checks harness.spec.read_formula shares: the field names per role (_Roles), known data
types and feature levels, shape expressions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.spec.catalog import Catalog
from harness.spec.expr import FormulaError
from harness.spec.model import (MAX_DIMENSIONS, OPERATOR_DESC_POINTER, SCALAR_ATTRIBUTE_TYPES, SCALAR_UNION, TENSOR_DESC_POINTER,
                                Condition, Constraint, FieldSpec, SupportTable, TensorSupport, array_item_name, level_names,
                                member_field_name, shape_names, tensor_arrays)
from harness.spec.shape_expr import ShapeExpr, parse_shape_expr
from harness.spec.source import SourcedYaml

def _check_types(src: SourcedYaml, path: tuple, types: Any, catalog: Catalog) -> None:
    for index, name in enumerate(types):
        if name not in catalog.data_types:
            raise src.error(path + (index,), f"unknown data type {name!r}; expected one of {', '.join(catalog.data_types)}")


def _check_level(src: SourcedYaml, path: tuple, name: str, catalog: Catalog) -> None:
    if not catalog.has_level(name):
        raise src.error(path, f"unknown feature level {name!r}; expected one of {', '.join(l.name for l in catalog.levels)}")


@dataclass(frozen=True)
class _Roles:
    """The field names of each role, as the section readers check references against them."""
    tensors: set[str]
    inputs: set[str]
    outputs: set[str]
    attributes: set[str]


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
            if "items" in raw and not ("activations" in raw and "count" in raw):
                raise src.error(("fields", index, "items"), "only an array of fused activations (`activations` and `count`) takes items")
            if "count" in raw and c_type == OPERATOR_DESC_POINTER:  # an array of fused activations
                if "activations" not in raw or "items" not in raw or "default" in raw:
                    raise src.error(("fields", index), f"an array of {OPERATOR_DESC_POINTER!r} lists its `activations`, says how many "
                                                       f"`items` a descriptor holds (a shape expression) and takes no default")
            elif "count" in raw:  # an array: `const UINT*` (or INT, FLOAT) whose length another field holds
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
                                tuple(raw["activations"]) if "activations" in raw else None, raw.get("typed_by"),
                                items=raw.get("items")))
        raw_index.append(index)
    for model_index, f in enumerate(fields):  # an activation array's item count reads attributes only (drawn before the tensors)
        if f.items is not None:
            try:
                parse_shape_expr(f.items, shape_names(fields), set())
            except FormulaError as err:
                raise src.error(("fields", raw_index[model_index], "items"), f"items: {err}") from None
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
        rows_as_written = {name for name in raw["tensors"] if name not in arrays}  # plain fields (not tensor arrays)
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
            plain_optional_output = cell["kind"] == "optional_output" and tname in rows_as_written
            tensors[tname] = TensorSupport(cell["kind"], (lo, hi), tuple(cell["types"]), bound_always=plain_optional_output)
        support.append(SupportTable(raw["level"], tensors, group))
    for group in dict.fromkeys(groups):  # each group's oldest table is at the introduction
        oldest = max((i for i, g in enumerate(groups) if g == group), key=lambda i: i)
        if support[oldest].level != data["introduced"]:
            which = "" if group is None else f" of the variant [{', '.join(group)}]"
            raise src.error(("support", oldest, "level"),
                            f"the oldest table{which} (FL {support[oldest].level}) must be at the operator's introduction "
                            f"(FL {data['introduced']})")
    return support


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
    if raw["tensor"] in sizes.names():  # by name: a longer field name that ends in it is another tensor
        raise src.error(path + ("sizes",), f"the Sizes of {raw['tensor']} cannot depend on {raw['tensor']} itself")
    looped = {item for array, items in _array_items(fields) if array in sizes.names() for item in items}
    if raw["tensor"] in looped:
        raise src.error(path + ("sizes",), f"the Sizes of {raw['tensor']} cannot depend on its own tensor array")
    return Constraint(raw["id"], "shape", (raw["tensor"],), (), None, raw["text"], sizes=sizes, guard=guard, bound=raw.get("bound"),
                      align=raw.get("align"),
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
