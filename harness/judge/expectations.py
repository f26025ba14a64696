"""Per-backend expectation files: known, explained divergences, each with a probe case that shows
whether it still reproduces (a probe that no longer diverges makes the expectation stale).

Expectation files are read like specs, before any case runs, and no file can crash or hang the
harness: each is loaded by the bounded, safe YAML loader of the specs (harness.spec.source:
size, node and depth limits, line numbers), checked against a JSON Schema of its shape
(harness.judge.expectation_schema), then for meaning against the spec set: the operator exists,
data types, rules and attributes are the operator's, `when` is a formula (harness.spec.expr's
whitelisted parser, its length and depth bounds) over the names the operator's formula binds
(what Expected.context holds when a mismatch is explained), `descriptor_when` a shape expression
over its fields whose loops are bounded (expectation_schema.loop_problem), ids are unique, and a
probe builds a well-formed case (its tensors, types, values, lengths and attributes). Every
problem is one `file:line: key.path: message` SpecError; the reader collects them all, and
`load_expectations` raises them together as one ExpectationError (a SpecError: what the
callers already report as one line). `check_expectation_files` returns them instead.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:
    import jsonschema
    from harness.model.descriptor import Case, Descriptor
    from harness.spec.expr import EvalContext
    from harness.spec.model import OperatorSpec
    from harness.reference.evaluate import Expected
    from harness.spec.model import SpecSet
    from harness.spec.source import SourcedYaml

import dataclasses
import difflib
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.judge.diff import DiffResult
from harness.judge.expectation_schema import (EXPECTATION_SCHEMA, MAX_PROBE_ELEMENTS, MISMATCH_ONLY, STATUS_ONLY,
                                              loop_problem)
from harness.judge.status import Status
from harness.spec.fused import MAX_ACTIVATION_ITEMS, item_field
from harness.spec.expr import Formula, FormulaError, is_f32_denormal, parse_formula
from harness.spec.shape_expr import ShapeExpr, parse_shape_expr
from harness.spec.source import MAX_FILE_BYTES, KeyPath, SpecError, load_yaml

EXPECTED_DIVERGENCE = Status.EXPECTED_DIVERGENCE


@dataclass
class Expectation:
    id: str
    operator: str
    data_types: tuple[str, ...]
    when: Formula
    why: str
    input_types: tuple[str, ...] | None = None  # primary input types it applies to (None: all)
    status: str = "mismatch"                    # the classification it explains
    rule: str | None = None                     # for invalid cases: the rule the case breaks
    reason_contains: str | None = None          # for status expectations: text the backend's reason holds
    attributes_present: tuple[str, ...] = ()    # for status expectations: attributes the descriptor sets
    tensor_types: tuple[str, ...] = ()          # for status expectations: some tensor has one of these types
    probe: dict | None = None                   # a fixed case that shows the divergence (staleness is judged on it)
    descriptor_when: ShapeExpr | None = None    # for mismatches: the descriptors it applies to (a shape expression)
    devices: tuple[str, ...] = ()               # where it was seen: text of the backend's version (its adapter); () every device
    hangs: bool = False                         # its cases hang the device: not sent to it; the probe checks the hang


@dataclass
class ExpectationSet:
    backend: str
    items: list[Expectation] = field(default_factory=list)

    def on_device(self, description: str) -> "ExpectationSet":
        """The expectations that hold on the device `description` names (a backend's version():
        DirectML's names its adapter, 'llvmpipe' or 'NVIDIA H200'): those without `devices`, and
        those one of whose `devices` it contains (case-insensitive). A divergence seen only on
        lavapipe explains nothing on a GPU and is not probed there: were it to show, it would be news."""
        text = description.lower()
        return ExpectationSet(self.backend, [i for i in self.items
                                             if not i.devices or any(d.lower() in text for d in i.devices)])

    def for_backend(self, version: Callable[[], str]) -> "ExpectationSet":
        """on_device(version()), asking `version` (which may start a device) only where some
        expectation names devices."""
        return self.on_device(version()) if any(item.devices for item in self.items) else self

    def known_hang(self, operator: str, rule: str | None, data_type: str | None = None, attributes: dict | None = None,
                   tensor_types: tuple[str, ...] | None = None,
                   descriptor_holds: Callable[[ShapeExpr], bool] | None = None) -> Expectation | None:
        """The `hangs` expectation whose cases this one belongs to, if any: such a case is not sent
        to the device (a hang costs a timeout and a GPU channel's teardown, over and over); the
        expectation's probe runs in every run and shows whether the hang still happens."""
        for item in self.items:
            if not item.hangs:
                continue
            reason = item.reason_contains or ""
            if self._matches_status(item, operator, "crashed", rule, reason, data_type, attributes, tensor_types, descriptor_holds):
                return item
        return None

    def explain_status(self, operator: str, status: str, rule: str | None, reason: str,
                       data_type: str | None = None, attributes: dict | None = None,
                       tensor_types: tuple[str, ...] | None = None,
                       descriptor_holds: Callable[[ShapeExpr], bool] | None = None) -> Expectation | None:
        """The expectation that explains a whole-case outcome (a crash, a wrong rejection), if one
        does; one that names data_types explains cases of those (primary input) types only, one
        that names tensor_types cases where some tensor (input or output) has one of them, one
        with a descriptor_when the cases whose descriptor it holds for (`descriptor_holds`
        evaluates it; without one such an entry explains nothing)."""
        for item in self.items:
            if self._matches_status(item, operator, status, rule, reason, data_type, attributes, tensor_types, descriptor_holds):
                return item
        return None

    @staticmethod
    def _matches_status(item: Expectation, operator: str, status: str, rule: str | None, reason: str,
                        data_type: str | None, attributes: dict | None, tensor_types: tuple[str, ...] | None,
                        descriptor_holds: Callable[[ShapeExpr], bool] | None) -> bool:
        if item.status == "mismatch" or item.operator != operator:
            return False
        if item.descriptor_when is not None and (descriptor_holds is None or not descriptor_holds(item.descriptor_when)):
            return False
        if item.data_types and data_type is not None and data_type not in item.data_types:
            return False
        if item.tensor_types and not set(item.tensor_types) & set(tensor_types or ()):
            return False
        if item.attributes_present and not all(a in (attributes or {}) for a in item.attributes_present):
            return False
        if item.rule is not None and item.rule != rule:
            return False
        return item.status == status and (item.reason_contains is None or item.reason_contains in reason)

    def explain(self, operator: str, data_type: str | None, diff: DiffResult, input_type: str | None = None) -> Expectation | None:
        """The expectation that explains every mismatching element of `diff`, if one does; else,
        when several together do (one element hit by one known divergence, another by a second:
        a random case of POW drew a denormal base beside a huge even exponent), their union, named
        `id1+id2` (each still explains only the elements its `when` holds for)."""
        if diff.bad_mask is None or diff.expected is None or not diff.bad_mask.any():
            return None
        candidates = []  # (item, its mask on the values as given), none of which covers alone
        ctx = diff.expected.context  # the formula's names: inputs, attributes, enum members, constants
        for item in self.items:
            if item.status != "mismatch" or item.operator != operator or data_type not in item.data_types:
                continue
            if item.input_types is not None and input_type not in item.input_types:
                continue
            if item.descriptor_when is not None and not _holds(item.descriptor_when, diff.expected):
                continue
            given = _when_mask(item, ctx, diff.bad_mask.shape)
            if given is None:
                continue  # its `when` cannot be read on this case: it explains nothing here
            if not (diff.bad_mask & ~given).any():
                return item  # explained on the values as given: the reading every device shares
            candidates.append((item, given))
        # then also on the values a flushing device reads (an expectation that explains a case on its
        # own values, as its probe's, was preferred above)
        flushed = _flushed(ctx, diff.expected.spec, data_type) if candidates else None
        covering = []
        for item, given in candidates:
            on_flushed = None if flushed is None else _when_mask(item, flushed, diff.bad_mask.shape)
            mask = given if on_flushed is None else given | on_flushed
            if not (diff.bad_mask & ~mask).any():
                return item
            if (diff.bad_mask & mask).any():
                covering.append((item, mask))
        if not covering:
            return None
        union = np.logical_or.reduce([mask for _, mask in covering])
        if (diff.bad_mask & ~union).any():
            return None
        items = [item for item, _ in covering]
        return Expectation(id="+".join(i.id for i in items), operator=operator, data_types=items[0].data_types,
                           when=items[0].when, why=" | ".join(i.why for i in items))


def _when_mask(item: Expectation, ctx: "EvalContext", shape: tuple[int, ...]) -> np.ndarray | None:
    """Where `item.when` holds, over the mismatch's elements; None where it cannot be evaluated on
    this case (a name a family operator binds for some cases only, a shape that does not broadcast):
    an expectation that cannot be read on a case does not explain it, and never stops the run."""
    try:
        return np.broadcast_to(np.asarray(item.when.evaluate(ctx), dtype=bool), shape)
    except (FormulaError, ValueError, TypeError, KeyError, IndexError, ArithmeticError):
        return None


# A device may flush an fp32 denormal input or attribute to a zero of its sign where the precision
# model's compute type flushes (specs/_arithmetic.yaml: FLOAT32; a FLOAT16 case may be computed in
# FLOAT32, its attributes are FLOAT32; FLOAT64 is IEEE): a known divergence then shows at the zero,
# not at the denormal the case holds (a GPU flushes x = -1.2e-38 and DirectML's tanh(-0) = +0
# follows). So an expectation's `when` is also read on the flushed values.
def _flushed(ctx: "EvalContext", spec: "OperatorSpec", data_type: str | None) -> "EvalContext | None":
    """`ctx` with every fp32 denormal (expr.is_f32_denormal, the one definition) a zero of its sign;
    None where no compute type of `data_type` flushes or no value is a denormal."""
    model = spec.catalog.arithmetic
    if not any(model.types[c].flush_denormals for c in model.compute_in.get(data_type or "", ())):
        return None
    variables, changed = dict(ctx.variables), False
    for name, value in ctx.variables.items():
        denormal = is_f32_denormal(value)
        if denormal.any():
            array = np.asarray(value)
            variables[name] = np.where(denormal, np.copysign(0.0, array), array).astype(array.dtype)
            changed = True
    return dataclasses.replace(ctx, variables=variables) if changed else None


def _parse_descriptor_when(text: str, spec: "OperatorSpec | None" = None) -> ShapeExpr:
    """A shape expression over the operator's fields (harness.spec.shape_expr's whitelisted parser,
    with the formula language's length and depth bounds), whose loops are bounded
    (expectation_schema.loop_problem). With `spec`, only the names its descriptors hold
    (attributes, enum members, tensor arrays; Sizes, DimensionCount, DataType and present of its
    tensor fields); without one any name (a name the operator lacks makes it not apply)."""
    import ast
    from harness.spec.expr import _parse_bounded
    tree = _parse_bounded(text)
    lengths: dict[str, int] = {}
    if spec is None:
        tensors = {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - tensors
    else:
        from harness.spec.model import shape_names
        tensors = {f.name for f in spec.tensor_fields}
        names = shape_names(spec.fields)
        lengths = {array: len(items) for array, items in spec.tensor_arrays.items()}
    expr = parse_shape_expr(text, names, tensors)
    problem = loop_problem(expr.tree.body, lengths)
    if problem:
        raise FormulaError(problem)
    return expr


def _holds(expr: ShapeExpr, expected: "Expected") -> bool:
    return descriptor_holds(expr, expected.spec, expected.case.descriptor)


def descriptor_holds(expr: ShapeExpr, spec: "OperatorSpec", descriptor: "Descriptor") -> bool:
    """Whether an expectation's descriptor_when holds for `descriptor` of operator `spec`."""
    from harness.model.facts import expression_scope
    try:
        return bool(expr.evaluate(*expression_scope(spec, descriptor)))
    except (FormulaError, ArithmeticError, TypeError, ValueError, MemoryError, RecursionError):
        return False  # an expression that does not fit this descriptor (or is beyond its bounds) does not explain it


def expectation_files(backend: str, directory: Path) -> list[Path]:
    """`directory`/BACKEND.yaml and every `directory`/BACKEND/*.yaml (one file per operator family,
    so that the divergences of a family stay together), in that order."""
    files = [Path(directory) / f"{backend}.yaml"]
    split = Path(directory) / backend
    if split.is_dir():
        files += sorted(split.glob("*.yaml"))
    return [f for f in files if f.exists() or f.is_symlink()]


def expectation_files_by_backend(directory: Path) -> dict[str, list[Path]]:
    """Every backend (and DLL instance, `directml@1.10.1`) that has expectation files in
    `directory`, with its files (expectation_files): what a pre-flight check reads."""
    directory = Path(directory)
    names = {p.stem for p in directory.glob("*.yaml")} | {p.name for p in directory.glob("*/") if p.is_dir()}
    found = {name: expectation_files(name, directory) for name in sorted(names)}
    return {name: files for name, files in found.items() if files}


class ExpectationError(SpecError):
    """Problems in expectation files. It is the first of them (`file:line: key.path: message`,
    saying how many more there are: one line, as callers print a SpecError); `errors` holds all."""

    def __init__(self, errors: list[SpecError]):
        first = errors[0]
        more = f" (and {len(errors) - 1} more problem(s) in the expectation files)" if len(errors) > 1 else ""
        super().__init__(first.file, first.line, first.key_path, first.message + more)
        self.errors = list(errors)

    def __reduce__(self) -> tuple:  # picklable (pytest-xdist may send it between processes)
        return (_expectation_error, ([(e.file, e.line, e.key_path, e.message) for e in self.errors],))


def _expectation_error(parts: list[tuple[str, int | None, KeyPath, str]]) -> ExpectationError:
    return ExpectationError([SpecError(*part) for part in parts])


def load_expectations(backend: str, directory: Path | None, specs: "SpecSet | None" = None) -> ExpectationSet:
    """The expectations of `backend` in `directory`/BACKEND.yaml and `directory`/BACKEND/*.yaml;
    none when there is no such file (a backend ships its own directory:
    `harness.run.registry.expectations_for` finds it). Each file is checked (see the module's
    docstring) against `specs` (None: the specs dmlconform ships); any problem raises an
    ExpectationError with every problem found. An id used twice is one: a report names
    expectations by id."""
    files = expectation_files(backend, Path(directory)) if directory is not None else []
    if not files:
        return ExpectationSet(backend)
    spec_set = _spec_set(specs)
    key = _contents_key(backend, files, spec_set)
    if key is not None and key in _LOADED:
        return ExpectationSet(backend, list(_LOADED[key][1]))
    items, errors = _read_files(files, spec_set, backend)
    if errors:
        raise ExpectationError(errors)
    if key is not None:
        while len(_LOADED) >= MAX_LOADED:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = (spec_set, list(items))  # the spec set kept alive: its id is in the key
    return ExpectationSet(backend, items)


# Expectation sets already read, by the bytes of their files: a backend instance, a replay and
# a probe each ask for their backend's (the harness's tests ask thousands of times), and reading
# and checking a backend's files against its specs took ~0.1 s each time. Keyed by content, not
# by modification time, so a file rewritten within the file system's clock tick is read again.
MAX_LOADED = 8
_LOADED: dict[tuple, tuple["SpecSet", list[Expectation]]] = {}


def _contents_key(backend: str, files: list[Path], specs: "SpecSet") -> tuple | None:
    """The cache key of `files` read for `backend` against `specs`: their names and contents; None
    (not cached) when one is not a regular file within the loader's size bound, which _read_files
    then reports without reading it (a pipe read here could block)."""
    import hashlib
    parts: list[tuple[str, str]] = []
    for path in files:
        try:
            info = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None
        try:
            parts.append((str(path), hashlib.sha256(Path(path).read_bytes()).hexdigest()))
        except OSError:
            return None
    return (backend, id(specs), tuple(parts))


def check_expectation_files(paths: Iterable[str | Path], specs: "SpecSet") -> list[SpecError]:
    """Every problem of the expectation files `paths` (their reading, shape and meaning against
    `specs`; ids unique among them all), each a `file:line: key.path: message` SpecError; []
    when they are fine. Never raises for a file's content, and reads no file beyond the loader's
    bounds: a pre-flight check calls it before any case runs. Pass one backend's files
    (expectation_files; an instance's with its backend's) or, as the shipped ones allow, a whole
    directory's."""
    return _read_files([Path(p) for p in paths], specs, None)[1]


def check_expectations_dir(directory: Path, specs: "SpecSet") -> list[SpecError]:
    """check_expectation_files over every backend's files in `directory` (a backend with its DLL
    instances: their ids must differ too, as an instance's expectations add to its backend's)."""
    groups: dict[str, list[Path]] = {}
    for name, files in expectation_files_by_backend(Path(directory)).items():
        groups.setdefault(name.partition("@")[0], []).extend(files)
    errors: list[SpecError] = []
    for files in groups.values():
        errors += _read_files(files, specs, None)[1]
    return errors


_DEFAULT_SPECS: "SpecSet | None" = None


def _spec_set(specs: "SpecSet | None") -> "SpecSet":
    """`specs`, or the specs dmlconform ships (loaded once)."""
    global _DEFAULT_SPECS
    if specs is not None:
        return specs
    if _DEFAULT_SPECS is None:
        from harness.spec.load import load_specs
        _DEFAULT_SPECS = load_specs()
    return _DEFAULT_SPECS


def _backend_names(path: Path, backend: str | None) -> set[str]:
    """The names a file's `backend` key may give: `backend` when the caller knows whose files it
    reads, else the file's own name (BACKEND.yaml) or its directory's (BACKEND/*.yaml)."""
    return {backend} if backend is not None else {path.stem, path.parent.name}


def _read_files(paths: list[Path], specs: "SpecSet", backend: str | None) -> tuple[list[Expectation], list[SpecError]]:
    """The expectations of `paths` and every problem found in them (ids unique among them all)."""
    items: list[Expectation] = []
    errors: list[SpecError] = []
    seen: dict[str, str] = {}  # id -> where it was first used
    for path in paths:
        for item, src, index in _read_file(path, specs, _backend_names(path, backend), errors):
            where = f"{src.path}:{src.line_of(('expectations', index, 'id'))}"
            if item.id in seen:
                errors.append(src.error(("expectations", index, "id"), f"expectation id {item.id!r} is also used at {seen[item.id]}: "
                                                                       "a report names expectations by id"))
                continue
            seen[item.id] = where
            items.append(item)
    return items, errors


MAX_ERRORS_PER_FILE = 20  # problems reported of one file; one more line says when there are more


def _not_a_file(path: Path) -> str | None:
    """Why `path` cannot be an expectation file (a directory, a device, a pipe: reading those could
    block or never end), or None for a regular file (through symbolic links)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot read file: {exc.strerror}"
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
            else "a pipe" if stat.S_ISFIFO(mode) else "not a regular file"
        return f"not a regular file ({kind}); an expectation file is a YAML file of at most {MAX_FILE_BYTES:,} bytes"
    return None


def _found(data: Any) -> str:
    if isinstance(data, list):
        return "a list"
    text = repr(data)
    return f"a single value ({text[:40]}{'...' if len(text) > 40 else ''})"


def _short(message: str, limit: int = 300) -> str:
    """One line of at most `limit` characters (jsonschema repeats the offending value, which a
    hostile file makes long)."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _read_file(path: Path, specs: "SpecSet", backends: set[str],
               errors: list[SpecError]) -> list[tuple[Expectation, "SourcedYaml", int]]:
    """The expectations of one file, each with its source and index; its problems go to `errors`.
    `backends`: the names its `backend` key may give."""
    problem = _not_a_file(path)
    if problem:
        errors.append(SpecError(path, None, (), problem))
        return []
    try:
        src = load_yaml(path)
        data = src.data
        if data is None:
            return []  # an empty file: no expectations
        if not isinstance(data, dict):
            raise src.error((), "an expectation file must be a mapping at the top level (backend: NAME, "
                                f"expectations: [...]), found {_found(data)}")
        from harness.spec.load import _check_keys_are_text
        _check_keys_are_text(src, data)
    except SpecError as exc:
        errors.append(exc)
        return []
    found: list[SpecError] = []
    bad = _schema_errors(src, data, found)
    if None in bad:
        errors += found
        return []  # the file's own shape is wrong: its entries are not read
    if "backend" in data and data["backend"] not in backends:
        found.append(src.error(("backend",), f"{data['backend']!r} is not the backend of {path.parent.name}/{path.name} "
                                             "(BACKEND.yaml or BACKEND/*.yaml holds the expectations of BACKEND)"))
    out = []
    for index, raw in enumerate(data.get("expectations", [])):
        if len(found) > MAX_ERRORS_PER_FILE:
            break
        if index in bad:
            continue
        try:
            out.append((_read_entry(src, index, raw, specs), src, index))
        except SpecError as exc:
            found.append(exc)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, RecursionError, MemoryError) as exc:
            found.append(src.error(("expectations", index), _short(f"cannot be checked: {type(exc).__name__}: {exc}")))
    found.sort(key=lambda e: e.line or 0)
    if len(found) > MAX_ERRORS_PER_FILE:
        found = found[:MAX_ERRORS_PER_FILE] + [SpecError(path, None, (), f"more problems than the {MAX_ERRORS_PER_FILE} shown; "
                                                                         "the file was not read further")]
    errors += found
    return out


def _schema_errors(src: "SourcedYaml", data: dict, errors: list[SpecError]) -> set[int | None]:
    """Check `data` against EXPECTATION_SCHEMA: one error per expectation entry (its first, the
    most specific of a oneOf), and one for the rest of the file. Returns the entries with errors
    (None: the file's own keys)."""
    import jsonschema
    from harness.spec.load import schema_error_path, schema_message
    by_entry: dict[int | None, list[jsonschema.ValidationError]] = {}
    for error in jsonschema.Draft202012Validator(EXPECTATION_SCHEMA).iter_errors(data):
        path = tuple(error.absolute_path)
        entry = path[1] if len(path) >= 2 and path[0] == "expectations" and isinstance(path[1], int) else None
        if entry not in by_entry and len(by_entry) > MAX_ERRORS_PER_FILE:
            break  # enough to fix first (a file of 60,000 wrong entries is read in milliseconds)
        by_entry.setdefault(entry, []).append(error)
    for entry in sorted(by_entry, key=lambda e: -1 if e is None else e):
        found = sorted(by_entry[entry], key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
        first = max(found, key=lambda e: len(e.absolute_path)) if found[0].validator == "oneOf" else found[0]
        errors.append(src.error(schema_error_path(first), _short(schema_message(first))))
    return set(by_entry)


def _read_entry(src: "SourcedYaml", index: int, raw: dict, specs: "SpecSet") -> Expectation:
    """One schema-checked entry, checked for meaning against its operator's spec (the first
    problem is raised, at its key)."""
    where: KeyPath = ("expectations", index)
    status = raw.get("status", "mismatch")
    for key in STATUS_ONLY if status == "mismatch" else MISMATCH_ONLY:
        if key in raw:
            reads = ("status expectations only (status: crashed, rejected-valid or accepted-invalid); a mismatch is "
                     "explained by its when" if status == "mismatch" else
                     f"mismatches only; a {status} expectation is matched by its status, rule, reason_contains, "
                     "data_types, attributes_present, tensor_types and descriptor_when")
            raise src.error(where + (key,), f"{key} applies to {reads}")
    spec = specs.operators.get(raw["operator"])
    if spec is None:
        close = difflib.get_close_matches(raw["operator"], list(specs.operators), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise src.error(where + ("operator",), f"unknown operator {raw['operator']!r}: no spec of that name in {specs.directory}{hint}")
    catalog = specs.catalog
    for key in ("data_types", "input_types", "tensor_types"):
        for position, name in enumerate(raw.get(key, ())):
            if name not in catalog.data_types:
                raise src.error(where + (key, position), f"unknown data type {name!r}; known: {', '.join(catalog.data_types)}")
    when = _read_when(src, where + ("when",), raw.get("when"), spec, specs)
    descriptor_when = None
    if "descriptor_when" in raw:
        try:
            descriptor_when = _parse_descriptor_when(raw["descriptor_when"], spec)
        except FormulaError as exc:
            raise src.error(where + ("descriptor_when",), _short(f"bad shape expression: {exc}", 600)) from None
    if "rule" in raw:
        _check_rule(src, where + ("rule",), raw["rule"], spec)
    for position, name in enumerate(raw.get("attributes_present", ())):
        problem = _attribute_name_problem(spec, name)
        if problem:
            raise src.error(where + ("attributes_present", position), problem)
    probe = raw.get("probe")
    item = Expectation(raw["id"], raw["operator"], tuple(raw.get("data_types", ())), when, raw["why"],
                       tuple(raw["input_types"]) if "input_types" in raw else None, status,
                       raw.get("rule"), raw.get("reason_contains"),
                       attributes_present=tuple(raw.get("attributes_present", ())),
                       tensor_types=tuple(raw.get("tensor_types", ())), probe=probe,
                       descriptor_when=descriptor_when, devices=tuple(raw.get("devices", ())),
                       hangs=bool(raw.get("hangs", False)))
    if probe is not None:
        _check_probe(src, where + ("probe",), item, spec, specs)
    return item


def when_names(spec: "OperatorSpec") -> frozenset[str]:
    """The names an expectation's `when` may read for operator `spec`: what the reference binds in
    Expected.context when it explains a mismatch (harness.spec.context.formula_context): the
    formula's inputs, its scalar attributes (a struct pointer as has_F and F_M), every enum member,
    its constants and items, and the element coordinates its formulas read. An index-space family
    binds its own values instead (harness.reference.families: the exact result, sum_abs, the
    bound, a reduction's pick, its formula and element variables), some for some cases only: a
    `when` reading one on a case that lacks it explains nothing there."""
    from harness.spec.context import element_names_read
    from harness.spec.families import bound_variables, element_variables, formula_variables
    from harness.spec.model import enum_members
    formula = spec.formula
    names = set(formula.inputs) | set(formula.constants) | set(enum_members(list(spec.fields))) | set(formula.items)
    for name in formula.attributes:
        f = spec.field(name)
        if f.struct is not None:
            names |= {f"has_{name}"} | {f"{name}_{member}" for member, _ in f.struct}
        elif not f.is_array:
            names.add(name)
    family = formula.family.name if formula.family is not None else None
    if family is None:
        names |= element_names_read(spec)
    else:
        names |= set(formula_variables(family)) | set(element_variables(family)) | set(bound_variables(family))
        names |= {"bound", "group_max", "group_min"}
    return frozenset(names)


def _read_when(src: "SourcedYaml", where: KeyPath, text: Any, spec: "OperatorSpec", specs: "SpecSet") -> Formula:
    """`when`: a formula (the whitelisted parser and its bounds) over when_names(spec), its type
    functions over the operator's tensors and known data types. A status expectation has none."""
    if text is None:
        return parse_formula("0")
    try:
        formula = parse_formula(text)
    except FormulaError as exc:
        raise src.error(where, _short(f"bad formula: {exc}", 600)) from None
    known = when_names(spec)
    unknown = sorted(formula.names - known)
    if unknown:
        raise src.error(where, _short(f"names {', '.join(map(repr, unknown))}, which {spec.name} does not bind when a "
                                      f"mismatch is explained; its names: {', '.join(sorted(known))}", 600))
    tensors = {f.name for f in spec.tensor_fields}
    bad = sorted(formula.tensor_names - tensors)
    if bad:
        raise src.error(where, f"type function names {', '.join(map(repr, bad))}, not a tensor of {spec.name} "
                               f"({', '.join(sorted(tensors))})")
    import ast
    for node in ast.walk(formula.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "is_type":
            type_name = getattr(node.args[1], "value", None)
            if type_name not in specs.catalog.data_types:
                raise src.error(where, f"is_type() names {type_name!r}, not a data type; known: {', '.join(specs.catalog.data_types)}")
    return formula


def _rule_ids(spec: "OperatorSpec") -> set[str]:
    from harness.model.validator import GENERIC_RULES
    return set(GENERIC_RULES) | {c.rule_id for c in spec.constraints}


def _check_rule(src: "SourcedYaml", where: KeyPath, rule: str, spec: "OperatorSpec") -> None:
    known = _rule_ids(spec)
    if rule not in known:
        close = difflib.get_close_matches(rule, sorted(known), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; its rules: {', '.join(sorted(known))}"
        raise src.error(where, _short(f"{rule!r} is not a rule of {spec.name} (the validator's or one of its constraints){hint}", 600))


def _attribute_name_problem(spec: "OperatorSpec", name: str) -> str | None:
    """Why `name` is not an attribute a descriptor of `spec` sets (a field; a struct pointer's or
    fused activation's member as Field.Member), or None."""
    base, dot, member = name.partition(".")
    fields = {f.name: f for f in spec.attribute_fields}
    # an activation array's item k: its members are `<Field>_<k>.<Member>`
    fields.update({item_field(g.name, k): g for g in spec.attribute_fields if g.is_activation_array for k in range(MAX_ACTIVATION_ITEMS)})
    f = fields.get(base)
    if f is None:
        settable = sorted(n for n, g in fields.items() if not g.is_count)
        return f"{spec.name} has no attribute {base!r}; its attributes: {', '.join(settable) or 'none'}"
    if f.is_count:
        return f"{base} is the length of {', '.join(f.count_of or ())}: a descriptor sets the array, never its count"
    if dot:
        if f.struct is not None and member not in {m for m, _ in f.struct}:
            return f"{f.c_type} {base} has no member {member!r}; its members: {', '.join(m for m, _ in f.struct)}"
        if f.struct is None and not f.is_fused_activation:
            return f"{base} is a {f.c_type}, not a struct: it has no members"
    elif f.struct is not None:
        return f"{base} is a struct pointer ({f.c_type}): a descriptor sets its members, {', '.join(f'{base}.{m}' for m, _ in f.struct)}"
    return None


def _value_problem(value: Any, dtype: Any) -> str | None:
    """Why `value` is not a value of data type `dtype` as a probe's input (probe_case passes it
    through float64), or None."""
    if dtype.is_float:
        if math.isfinite(value):
            with np.errstate(over="ignore"):
                if not np.isfinite(np.asarray(float(value)).astype(dtype.numpy)):
                    return f"{value!r} is outside the range of {dtype.name} (it would be an infinity)"
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return f"{value!r} is not an integer, but {dtype.name} holds integers only"
    if not dtype.min <= value <= dtype.max:
        return f"{value!r} is outside the range of {dtype.name} ({dtype.min} .. {dtype.max})"
    if float(value) != value:
        return f"{value!r} is not exact in float64, which probe inputs pass through: give it in input_bits"
    return None


def _check_probe(src: "SourcedYaml", where: KeyPath, item: Expectation, spec: "OperatorSpec", specs: "SpecSet") -> None:
    """The probe builds a well-formed case of `spec`: its tensors are the operator's, typed with
    known data types (supported ones, unless it names the rule it breaks), its inputs' values are
    values of their types, as many as the sizes hold, its attributes the operator's; then the case
    itself passes harness.model.wellformed.check_case."""
    probe = item.probe or {}
    catalog = specs.catalog
    tensors = {f.name: f for f in spec.tensor_fields}
    listing = ", ".join(tensors)
    types: dict[str, str] = probe["types"]
    for name, type_name in types.items():
        if name not in tensors:
            raise src.error(where + ("types", name), f"{spec.name} has no tensor {name!r}; its tensors: {listing}")
        if type_name not in catalog.data_types:
            raise src.error(where + ("types", name), f"unknown data type {type_name!r}; known: {', '.join(catalog.data_types)}")
    inputs: dict[str, list] = probe.get("inputs", {})
    bits: dict[str, list] = probe.get("input_bits", {})
    for section, given in (("inputs", inputs), ("input_bits", bits)):
        for name in given:
            if name not in tensors:
                raise src.error(where + (section, name), f"{spec.name} has no tensor {name!r}; its tensors: {listing}")
            if tensors[name].role != "input":
                raise src.error(where + (section, name), f"{name} is an output of {spec.name}: a probe gives input values only")
            if name not in types:
                raise src.error(where + (section, name), f"{name} is not in the probe's types: name its data type there")
    for name in bits:
        if name in inputs:
            raise src.error(where + ("input_bits", name), f"{name} is given in inputs too: give its values in one of them")
    for name, values in inputs.items():
        dtype = catalog.dtype(types[name])
        for position, value in enumerate(values):
            problem = _value_problem(value, dtype)
            if problem:
                raise src.error(where + ("inputs", name, position), problem)
    for name, patterns in bits.items():
        dtype = catalog.dtype(types[name])
        for position, pattern in enumerate(patterns):
            if pattern >= 1 << dtype.bits:
                raise src.error(where + ("input_bits", name, position), f"{pattern:#x} is not a {dtype.bits}-bit pattern of {dtype.name}")
    _check_probe_sizes(src, where, probe, types, inputs, bits)
    rule = probe.get("rule")
    if rule is not None:
        _check_rule(src, where + ("rule",), rule, spec)
    else:  # a valid case: each type one its tensor may have
        for name, type_name in types.items():
            allowed = {t for table in spec.support for tensor, cell in table.tensors.items() if tensor == name for t in cell.types}
            if allowed and type_name not in allowed:
                raise src.error(where + ("types", name), f"{type_name} is not a type of {name} in any support table of {spec.name} "
                                                         f"({', '.join(sorted(allowed))}); a probe of an invalid case names "
                                                         "the rule it breaks (probe.rule)")
    for name, value in probe.get("attributes", {}).items():
        problem = _attribute_name_problem(spec, name)
        if problem is None:
            f = spec.field(name.partition(".")[0]) if "." not in name else None
            listed = f is not None and (f.is_array or f.is_activation_array)
            if listed and not isinstance(value, list):
                problem = f"{name} is an array ({f.c_type}): expected a list of numbers"  # type: ignore[union-attr]
            elif not listed and isinstance(value, list):
                problem = f"{name} is a {f.c_type if f is not None else 'member'}: expected a number, not a list"
        if problem:
            raise src.error(where + ("attributes", name), problem)
    _check_probe_case(src, where, item, spec, specs)


def _check_probe_sizes(src: "SourcedYaml", where: KeyPath, probe: dict, types: dict[str, str],
                       inputs: dict[str, list], bits: dict[str, list]) -> None:
    """Each input has as many values as its tensor holds: with tensor_sizes, every typed tensor has
    its Sizes and each input their product; without, every tensor has the first input's length
    (an input of one value is repeated)."""
    given = [("inputs", name, values) for name, values in inputs.items()] + [("input_bits", name, values) for name, values in bits.items()]
    sizes: dict[str, list[int]] | None = probe.get("tensor_sizes")
    if sizes is not None:
        for name in sizes:
            if name not in types:
                raise src.error(where + ("tensor_sizes", name), f"{name} is not in the probe's types")
        for name in types:
            if name not in sizes:
                raise src.error(where + ("tensor_sizes",), f"no Sizes for {name}: with tensor_sizes, every tensor of the "
                                                           "probe's types has its own")
        for name, dims in sizes.items():
            if math.prod(dims) > MAX_PROBE_ELEMENTS:
                raise src.error(where + ("tensor_sizes", name), f"{dims} hold {math.prod(dims):,} elements; a probe tensor "
                                                                f"holds at most {MAX_PROBE_ELEMENTS:,}")
        for section, name, values in given:
            if len(values) != math.prod(sizes[name]):
                raise src.error(where + (section, name), f"{len(values)} value(s), but tensor_sizes.{name} {sizes[name]} "
                                                         f"hold {math.prod(sizes[name])}")
        return
    if not given:
        return
    _, first, first_values = given[0]
    if not first_values:
        raise src.error(where + (given[0][0], first), "no values: the first input's length is every tensor's size")
    for section, name, values in given[1:]:
        if len(values) not in (len(first_values), 1):
            raise src.error(where + (section, name), f"{len(values)} value(s), but {first} has {len(first_values)}: without "
                                                     f"tensor_sizes every tensor has the first input's length (or one value, "
                                                     "repeated); give tensor_sizes for tensors of their own sizes")


def _check_probe_case(src: "SourcedYaml", where: KeyPath, item: Expectation, spec: "OperatorSpec", specs: "SpecSet") -> None:
    """Build the probe's case (at the newest level) and check it is well-formed; its problems at
    the probe's key they come from."""
    from harness.model.wellformed import CaseFormatError, check_case
    try:
        case = probe_case(item, specs, specs.catalog.newest_level.name)
        assert case is not None  # the item has a probe
        check_case(case, spec)
    except CaseFormatError as exc:
        raise src.error(_probe_key(where, exc.key, item.probe or {}), _short(f"the probe is not a well-formed case: {exc.message}", 600)) from None
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError, AssertionError, MemoryError) as exc:
        raise src.error(where, _short(f"the probe cannot be made a case: {type(exc).__name__}: {exc}", 600)) from None


def _probe_key(where: KeyPath, key: str, probe: dict) -> KeyPath:
    """The key of the probe that a check_case key (`descriptor.attributes.X`, `inputs.X`,
    `descriptor.tensors.X.Sizes`) comes from."""
    parts = key.split(".")
    if parts[:2] == ["descriptor", "attributes"] and len(parts) > 2:
        name = ".".join(parts[2:]).split("[")[0]
        return where + (("attributes", name) if name in probe.get("attributes", {}) else ("attributes",))
    if parts[0] == "inputs" and len(parts) > 1:
        return where + ("input_bits" if parts[1] in probe.get("input_bits", {}) else "inputs", parts[1])
    if parts[:2] == ["descriptor", "tensors"] and len(parts) > 2:
        return where + ("tensor_sizes" if "tensor_sizes" in probe else "types", parts[2])
    return where


STALE = Status.STALE


def probe_case(item: Expectation, specs: SpecSet, level: str) -> Case | None:
    """The expectation's probe as a case (None when it has no probe). `inputs` are decimal values
    (logical elements: a tensor with `tensor_strides` is laid out strided, its gaps zero);
    `input_bits` gives a tensor's elements as raw bit patterns of its type instead, for values a
    decimal cannot name (a signaling NaN, a NaN's payload); a tensor may be in one or the other."""
    if not item.probe:
        return None
    import numpy as np
    from harness.generate.cases import case_from_arrays
    spec = specs.operator(item.operator)
    from harness.model.descriptor import TensorDesc
    types = dict(item.probe["types"])
    layouts = None
    values = {k: np.asarray(v, dtype=np.float64) for k, v in item.probe.get("inputs", {}).items()}
    for name, bits in item.probe.get("input_bits", {}).items():
        dtype = specs.catalog.dtype(types[name])  # the bits viewed as the type: no conversion touches them
        if any(not 0 <= int(b) < 1 << dtype.bits for b in bits):
            raise ValueError(f"probe of {item.id}: input_bits of {name} must be {dtype.bits}-bit patterns of {dtype.name}")
        if dtype.bits < 8:  # a nibble: INT4's 0x8..0xF are -8..-1
            raw = np.asarray([int(b) for b in bits], dtype=np.int64)
            values[name] = np.where((raw >= 8) & (dtype.kind == "signed"), raw - 16, raw).astype(dtype.numpy)
        else:
            values[name] = np.asarray([int(b) for b in bits], dtype=dtype.bits_numpy).view(dtype.numpy)
    if "tensor_sizes" in item.probe:  # index-space operators: each tensor its own Sizes (and Strides where given)
        strides = item.probe.get("tensor_strides", {})
        layouts = {n: TensorDesc(t, list(item.probe["tensor_sizes"][n]),
                                 list(strides[n]) if n in strides else None) for n, t in types.items()}
        values = {k: v.reshape(item.probe["tensor_sizes"][k]) for k, v in values.items()}
    case = case_from_arrays(spec, level, types, values, origin=f"probe:{item.id}", layouts=layouts,
                            attributes=dict(item.probe.get("attributes", {})) or None)
    if item.probe.get("rule"):
        case.expect_valid, case.broken_rule = False, item.probe["rule"]
    return case


__all__ = ["EXPECTED_DIVERGENCE", "Expectation", "ExpectationError", "ExpectationSet", "SpecError", "check_expectation_files",
           "check_expectations_dir", "expectation_files", "expectation_files_by_backend", "load_expectations", "when_names"]
