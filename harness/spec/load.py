"""Loading operator spec files: one file schema-checked, meaning-checked and built, or a directory.

`build_operator` checks one file section by section (the readers are in harness.spec.read_fields
and harness.spec.read_formula) and builds its OperatorSpec (harness.spec.model); `build_file`
memoises it per file content. `load_specs` stops on the first problem of a file with a
`file:line: key.path: message` error (harness.spec.lint collects them all), and links each
fused-activation field to the specs it names (`resolve_activations`, which lint shares).
"""
from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema

from harness.spec.catalog import Catalog, load_catalog
from harness.spec.model import OperatorSpec, SpecSet
from harness.spec.read_fields import _read_attribute_values, _read_constraints, _read_fields, _read_in_place, _read_support
from harness.spec.read_formula import (_check_absent_inputs, _read_comparisons, _read_data_ranges, _read_examples, _read_formula,
                                       _read_generation, _read_limits, _read_unspecified)
from harness.spec.schema import OPERATOR_SCHEMA
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


def schema_error_path(error: jsonschema.ValidationError) -> tuple:
    """Where the error is: for an unexpected key, the key itself rather than its parent."""
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        assert isinstance(error.schema, Mapping)  # the subschema that holds additionalProperties
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
    limits = _read_limits(src, data, catalog, fields, roles, support)
    data_ranges = _read_data_ranges(src, data, catalog, fields, roles, support)

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
    _record_digests(specs_dir, operators)
    return SpecSet(catalog=catalog, operators=operators, directory=specs_dir)


_DIGESTS: "weakref.WeakKeyDictionary[OperatorSpec, str]" = weakref.WeakKeyDictionary()


def spec_digest(spec: OperatorSpec) -> str | None:
    """A digest of what `spec` was built from, as load_specs read it: its own file, the shared
    `_*.yaml` files (the catalog) and the files of the activations it may fuse. None for a spec
    built or changed in memory (a copy is another object). What may be memoised across runs about
    one spec keys on this, so a directory with one more or one changed operator still reuses what
    was found about the others."""
    return _DIGESTS.get(spec)


def _file_digest(path: Path) -> bytes:
    return hashlib.blake2b(path.name.encode() + b"\0" + path.read_bytes(), digest_size=16).digest()


def _record_digests(specs_dir: Path, operators: dict[str, OperatorSpec]) -> None:
    try:
        shared = b"".join(_file_digest(p) for p in sorted(specs_dir.glob("_*.yaml")))
        own = {name: _file_digest(spec.path) for name, spec in operators.items()}
    except OSError:
        return  # a file that went away since it was read: nothing is memoised about this directory
    for name, spec in operators.items():
        fused = sorted({other.name for allowed in spec.activations.values() for other in allowed.values()})
        digest = hashlib.blake2b(shared + own[name] + b"".join(own[other] for other in fused), digest_size=12)
        _DIGESTS[spec] = digest.hexdigest()


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
