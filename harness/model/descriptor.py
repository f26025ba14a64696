"""The model of a DirectML operator descriptor and of a case (descriptor + input buffers).

A TensorDesc mirrors DML_BUFFER_TENSOR_DESC field for field, including the ways a real one can be
wrong (a DimensionCount that disagrees with Sizes, TotalTensorSizeInBytes below the minimum), so
that invalid descriptors can be expressed, saved and replayed. Case files are YAML; buffers are
stored whole (padding included) in base64, next to a readable preview of the logical values.

Reading is strict, because case files come from anywhere (a report, a bug tracker, a hand edit):
`Case.load` and the `from_dict` constructors turn every malformed input (bad YAML, a wrong type,
a missing key, bad base64, an unknown format version) into a CaseFormatError naming the file and
the key, never a KeyError or TypeError traceback. Ranges and the buffers' lengths against their
descriptors are checked separately, against the spec (harness.model.wellformed.check_case).
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import xxhash
import yaml

from harness.model.caseformat import CaseFormatError, is_integer, short

CASE_FORMAT_VERSION = 1
MAX_CASE_FILE_BYTES = 256 << 20  # the largest case file read: an input of 2^24 FLOAT64 elements is 171 MiB of base64
TENSOR_KEYS = ("DataType", "Flags", "DimensionCount", "Sizes", "Strides", "TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment")
DESCRIPTOR_KEYS = ("operator", "tensors", "attributes", "aliases")
CASE_KEYS = ("format", "case_id", "operator", "feature_level", "expect", "origin", "tags", "descriptor", "inputs", "values_preview")


def _kind(value: Any) -> str:
    """How YAML spelled a value, for messages: `a list`, `a string`, `null`."""
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _join(prefix: str, name: Any) -> str:
    return f"{prefix}.{name}" if prefix else str(name)


def _mapping(value: Any, key: str, keys: tuple[str, ...] | None = None) -> dict:
    """A mapping with string keys (and only `keys`, when given: a misspelt field must not be ignored)."""
    if not isinstance(value, dict):
        raise CaseFormatError(key, f"expected a mapping, found {_kind(value)}")
    for name in value:
        if not isinstance(name, str):
            raise CaseFormatError(key, f"keys must be strings, found {_kind(name)} {short(name)}")
        if keys is not None and name not in keys:
            raise CaseFormatError(_join(key, name), f"unknown key (known: {', '.join(keys)})")
    return value


def _required(raw: dict, name: str, key: str) -> Any:
    if name not in raw:
        raise CaseFormatError(_join(key, name), "missing")
    return raw[name]


def _optional(raw: dict, name: str, empty: Any) -> Any:
    """raw[name], with `empty` for a missing or null entry (YAML writes an empty mapping as `{}` or nothing)."""
    value = raw.get(name)
    return empty if value is None else value


def _integer(value: Any, key: str) -> int:
    if not is_integer(value):
        raise CaseFormatError(key, f"expected an integer, found {_kind(value)} {short(value)}")
    return int(value)


def _integers(value: Any, key: str) -> list[int]:
    if not isinstance(value, list):
        raise CaseFormatError(key, f"expected a list of integers, found {_kind(value)}")
    return [_integer(v, f"{key}[{i}]") for i, v in enumerate(value)]


def _number(value: Any, key: str) -> float | int:
    """A scalar attribute as a float, or as an int where the float would not hold it exactly (an
    INT64/UINT64 DML_SCALAR_UNION value beyond 2^53 must replay bit-exact)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CaseFormatError(key, f"expected a number, found {_kind(value)} {short(value)}")
    try:
        return canonical_number(value)
    except OverflowError:  # an integer beyond float64
        raise CaseFormatError(key, f"{short(value)} is beyond any floating-point value") from None


def canonical_number(value: int | float) -> int | float:
    """The one form a scalar attribute takes in keys and case ids: a float, unless it is an
    integer that a float would round (then the int), so a generated -2147483648 and the same value
    read back from a case file name the same case."""
    if isinstance(value, float):
        return value
    as_float = float(value)
    return as_float if int(as_float) == value else int(value)


def _attribute(value: Any, key: str) -> float | int | list[int | float]:
    """A scalar attribute (a number) or an array attribute (a list of numbers, at most 64: integers
    stay ints, a FLOAT array's items are floats; the spec check says which the field takes)."""
    if isinstance(value, list):
        if len(value) > MAX_ARRAY_ATTRIBUTE:
            raise CaseFormatError(key, f"{len(value)} entries; an array attribute holds at most {MAX_ARRAY_ATTRIBUTE}")
        return [_integer(v, f"{key}[{i}]") if is_integer(v) else _number(v, f"{key}[{i}]") for i, v in enumerate(value)]
    return _number(value, key)


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise CaseFormatError(key, f"expected a string, found {_kind(value)} {short(value)}")
    return value


MAX_ARRAY_ATTRIBUTE = 64  # no DirectML array field is longer (8 dimensions, 2 per pad side); bounds a case file


@dataclass
class TensorDesc:
    """One DML_BUFFER_TENSOR_DESC. `total_bytes=None` means the minimum implied size."""

    data_type: str
    sizes: list[int]
    strides: list[int] | None = None
    total_bytes: int | None = None
    alignment: int = 0
    flags: int = 0
    dimension_count: int | None = None  # None: len(sizes)

    @property
    def dim_count(self) -> int:
        return len(self.sizes) if self.dimension_count is None else self.dimension_count

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"DataType": self.data_type, "Flags": self.flags, "DimensionCount": self.dim_count,
                               "Sizes": list(self.sizes)}
        if self.strides is not None:
            out["Strides"] = list(self.strides)
        if self.total_bytes is not None:
            out["TotalTensorSizeInBytes"] = self.total_bytes
        out["GuaranteedBaseOffsetAlignment"] = self.alignment
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any], key: str = "") -> "TensorDesc":
        """Strict: integers must be integers (2.5 is not truncated, "2" is not parsed); `key` prefixes error keys."""
        raw = _mapping(raw, key, TENSOR_KEYS)
        sizes = _integers(_required(raw, "Sizes", key), _join(key, "Sizes"))
        count = _integer(raw.get("DimensionCount", len(sizes)), _join(key, "DimensionCount"))
        strides, total = raw.get("Strides"), raw.get("TotalTensorSizeInBytes")
        return cls(data_type=_text(_required(raw, "DataType", key), _join(key, "DataType")), sizes=sizes,
                   strides=_integers(strides, _join(key, "Strides")) if strides is not None else None,
                   total_bytes=_integer(total, _join(key, "TotalTensorSizeInBytes")) if total is not None else None,
                   alignment=_integer(raw.get("GuaranteedBaseOffsetAlignment", 0), _join(key, "GuaranteedBaseOffsetAlignment")),
                   flags=_integer(raw.get("Flags", 0), _join(key, "Flags")),
                   dimension_count=None if count == len(sizes) else count)


@dataclass
class Descriptor:
    """An operator descriptor: its tensors (None = absent optional tensor), attributes, aliasing."""

    operator: str
    tensors: dict[str, TensorDesc | None]
    attributes: dict[str, Any] = field(default_factory=dict)  # numbers; lists of ints for array fields
    aliases: dict[str, str] = field(default_factory=dict)  # output field -> input field sharing its memory

    def clone(self) -> "Descriptor":
        """A copy whose tensors, Sizes, Strides and array attributes can be changed without touching
        this one: what copy.deepcopy gives for a descriptor, at a tenth of its cost (the invalid-case
        search copies a descriptor for every mutation it tries)."""
        tensors = {n: None if t is None else replace(t, sizes=list(t.sizes), strides=None if t.strides is None else list(t.strides))
                   for n, t in self.tensors.items()}
        attributes = {k: list(v) if isinstance(v, list) else v for k, v in self.attributes.items()}
        return Descriptor(self.operator, tensors, attributes, dict(self.aliases))

    def with_tensor(self, name: str, desc: TensorDesc | None) -> "Descriptor":
        tensors = dict(self.tensors)
        tensors[name] = desc
        return replace(self, tensors=tensors)

    def to_dict(self) -> dict[str, Any]:
        return {"operator": self.operator,
                "tensors": {n: (t.to_dict() if t is not None else None) for n, t in self.tensors.items()},
                "attributes": dict(self.attributes), "aliases": dict(self.aliases)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any], key: str = "") -> "Descriptor":
        """Strict (see TensorDesc.from_dict); `key` prefixes error keys (`descriptor` in a case file)."""
        raw = _mapping(raw, key, DESCRIPTOR_KEYS)
        tensors_key, attributes_key, aliases_key = (_join(key, k) for k in ("tensors", "attributes", "aliases"))
        tensors = _mapping(_required(raw, "tensors", key), tensors_key)
        attributes = _mapping(_optional(raw, "attributes", {}), attributes_key)
        aliases = _mapping(_optional(raw, "aliases", {}), aliases_key)
        return cls(operator=_text(_required(raw, "operator", key), _join(key, "operator")),
                   tensors={n: (TensorDesc.from_dict(t, _join(tensors_key, n)) if t is not None else None) for n, t in tensors.items()},
                   attributes={k: _attribute(v, _join(attributes_key, k)) for k, v in attributes.items()},
                   aliases={k: _text(v, _join(aliases_key, k)) for k, v in aliases.items()})

    def key(self) -> str:
        """A stable text key of the descriptor (for caches and case ids). JSON, not YAML: the key
        is made for every case, and the YAML emitter took about 1 ms of a small case's 2."""
        raw = self.to_dict()
        raw["attributes"] = {k: (canonical_number(v) if isinstance(v, int) and not isinstance(v, bool) else v)
                             for k, v in raw["attributes"].items()}
        return json.dumps(raw, sort_keys=True, separators=(",", ":"))


@dataclass
class Case:
    """The unit of replay: a descriptor at a feature level, its input buffers, and what it should do.

    expect_valid: True for cases built valid; False for cases built to break `broken_rule`.
    """

    descriptor: Descriptor
    feature_level: str
    inputs: dict[str, bytes] = field(default_factory=dict)
    expect_valid: bool = True
    broken_rule: str | None = None
    origin: str = "manual"
    tags: list[str] = field(default_factory=list)

    @property
    def operator(self) -> str:
        return self.descriptor.operator

    def __repr__(self) -> str:  # short: Hypothesis prints falsifying examples
        expect = "valid" if self.expect_valid else f"invalid:{self.broken_rule}"
        return f"Case({self.operator} FL{self.feature_level} {expect} {self.case_id})"

    @property
    def case_id(self) -> str:
        """A digest of the descriptor, the inputs and the level: names case files and records.

        XXH3-128, not SHA-256: an identity, not a security measure, and 30 times faster (0.07 ms
        against 2.3 ms for 4 MiB of inputs, which was most of a 2^20-element case's overhead).
        Remembered, because several places ask; replacing the descriptor, the inputs dict or the
        level computes it again.
        """
        identity = (id(self.descriptor), id(self.inputs), self.feature_level)
        remembered = self.__dict__.get("_case_id")
        if remembered is not None and remembered[0] == identity:
            return remembered[1]
        digest = xxhash.xxh3_128(self.descriptor.key().encode())
        for name in sorted(self.inputs):
            digest.update(name.encode())
            digest.update(self.inputs[name])
        digest.update(self.feature_level.encode())
        value = digest.hexdigest()[:16]
        self.__dict__["_case_id"] = (identity, value)
        return value

    def to_dict(self, previews: dict[str, list] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": CASE_FORMAT_VERSION,
            "case_id": self.case_id,
            "operator": self.operator,
            "feature_level": self.feature_level,
            "expect": "valid" if self.expect_valid else f"invalid: {self.broken_rule}",
            "origin": self.origin,
            "tags": list(self.tags),
            "descriptor": self.descriptor.to_dict(),
            "inputs": {n: {"base64": base64.b64encode(b).decode("ascii"), "bytes": len(b)} for n, b in self.inputs.items()},
        }
        if previews:
            out["values_preview"] = previews
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Case":
        """A case from a case file's mapping; CaseFormatError (with the key) for anything malformed."""
        raw = _mapping(raw, "", CASE_KEYS)
        version = raw.get("format", CASE_FORMAT_VERSION)
        if not is_integer(version) or version != CASE_FORMAT_VERSION:
            raise CaseFormatError("format", f"unknown case file format {short(version)} (this harness reads format {CASE_FORMAT_VERSION})")
        descriptor = Descriptor.from_dict(_required(raw, "descriptor", ""), "descriptor")
        if "operator" in raw and _text(raw["operator"], "operator") != descriptor.operator:
            raise CaseFormatError("operator", f"{short(raw['operator'])} differs from descriptor.operator {short(descriptor.operator)}")
        valid, broken = _parse_expect(raw.get("expect", "valid"))
        tags = _optional(raw, "tags", [])
        if not isinstance(tags, list):
            raise CaseFormatError("tags", f"expected a list of strings, found {_kind(tags)}")
        return cls(descriptor=descriptor, feature_level=_text(_required(raw, "feature_level", ""), "feature_level"),
                   inputs=_decode_inputs(_optional(raw, "inputs", {})), expect_valid=valid, broken_rule=broken,
                   origin=_text(raw.get("origin", "file"), "origin"), tags=[_text(t, f"tags[{i}]") for i, t in enumerate(tags)])

    def save(self, path: Path, previews: dict[str, list] | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(case_yaml(self.to_dict(previews)))
        tmp.replace(path)  # atomic: an interrupted run never leaves half a case file
        return path

    @classmethod
    def load(cls, path: Path) -> "Case":
        """Read a case file; CaseFormatError naming the file (and the key, or the YAML line) for any
        malformed one. The file's ranges and buffers are checked against its spec by check_case."""
        path = Path(path)
        try:
            return cls.from_dict(_read_case_yaml(path))
        except CaseFormatError as exc:
            raise exc.in_file(path) from None


def _parse_expect(value: Any) -> tuple[bool, str | None]:
    """`valid`, or `invalid: RULE` (the rule the case was built to break; `invalid` alone: unknown)."""
    expect = _text(value, "expect").strip()
    if expect == "valid":
        return True, None
    head, _, rule = expect.partition(":")
    if head.strip() != "invalid":
        raise CaseFormatError("expect", f"expected 'valid' or 'invalid: RULE', found {short(expect)}")
    return False, rule.strip() or None


def _decode_inputs(raw: Any) -> dict[str, bytes]:
    """Input buffers from `{name: {base64: ..., bytes: N}}`; strict base64 (no characters skipped),
    and `bytes`, when present, must be the decoded length (a truncated paste is caught here)."""
    out = {}
    for name, entry in _mapping(raw, "inputs").items():
        key = f"inputs.{name}"
        entry = _mapping(entry, key, ("base64", "bytes"))
        text = _text(_required(entry, "base64", key), f"{key}.base64")
        try:
            data = base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise CaseFormatError(f"{key}.base64", f"invalid base64: {exc}") from None
        if "bytes" in entry and _integer(entry["bytes"], f"{key}.bytes") != len(data):
            raise CaseFormatError(f"{key}.bytes", f"says {short(entry['bytes'])}, but the base64 holds {len(data)} bytes")
        out[name] = data
    return out


MAX_CASE_NODES = 100_000  # YAML nodes of a case file: one the harness writes has a few hundred (its size is in its scalars)
MAX_CASE_DEPTH = 64  # nested collections of a case file: one the harness writes nests about six deep


def _check_case_events(data: bytes) -> None:
    """A case file's YAML events, counted before anything is built: at most MAX_CASE_NODES nodes
    nested at most MAX_CASE_DEPTH deep,
    an alias counting as the size of what it names (the harness's own case files use anchors for
    repeated lists; a "billion laughs" of them is refused, not expanded). Through libyaml where
    PyYAML has it, so that a 12 MB file of tiny nodes is refused in well under a second instead of
    being composed node by node in Python."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _count_case_events(yaml.parse(data, Loader=loader))
    except yaml.YAMLError:
        return  # invalid YAML: the reader reports it (PyYAML's own words, with line and column)


def _count_case_events(events: Iterator[yaml.Event]) -> None:
    """Count the events against MAX_CASE_NODES (_check_case_events)."""
    count = 0
    sizes: dict[str, int] = {}                 # anchor -> nodes it stands for
    open_nodes: list[tuple[str | None, int]] = []  # collections being read: (anchor, count at their start)
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            count += sizes.get(event.anchor or "", 1)
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            open_nodes.append((event.anchor, count))
            count += 1
            if len(open_nodes) > MAX_CASE_DEPTH:  # refused here alike with or without libyaml (whose
                # loader builds deep nests that PyYAML's own overflows Python's stack on)
                line = event.start_mark.line + 1 if event.start_mark is not None else 0
                raise CaseFormatError(f"line {line}", f"invalid YAML: nested too deeply (more than {MAX_CASE_DEPTH} "
                                                      "levels; a case file nests a few)")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, start = open_nodes.pop()
            if anchor:
                sizes[anchor] = count - start
        elif isinstance(event, yaml.ScalarEvent):
            count += 1
            if event.anchor:
                sizes[event.anchor] = 1
        if count > MAX_CASE_NODES:
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            raise CaseFormatError(f"line {line}", f"more than {MAX_CASE_NODES:,} YAML nodes (an alias counting as what "
                                                  "it names); a case file holds a few hundred")


def _read_case_yaml(path: Path) -> dict:
    """The file's top-level mapping: bounded in size (a case file is never a stream), then
    case_mapping."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CASE_FILE_BYTES + 1)
    except OSError as exc:
        raise CaseFormatError("", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CASE_FILE_BYTES:
        raise CaseFormatError("", f"larger than {MAX_CASE_FILE_BYTES} bytes, the most a case file may be")
    return case_mapping(data)


# libyaml where PyYAML has it: a case file is mostly base64 and arrays of numbers, which PyYAML's
# pure-Python emitter and scanner took ~80 ms per case to write and read back (the harness's tests
# round-trip thousands); both are safe (no Python tags) and build the same values
_CASE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_CASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def case_yaml(mapping: dict[str, Any]) -> str:
    """A case file's text from Case.to_dict's mapping (what Case.save writes)."""
    return yaml.dump(mapping, Dumper=_CASE_DUMPER, sort_keys=False, width=120)


def case_mapping(data: bytes) -> dict:
    """A case file's top-level mapping from its bytes: its YAML nodes counted first
    (_check_case_events), parsed safely (no Python tags), YAML errors with their line and column.
    A text libyaml refuses is read again by PyYAML's own parser, so that the error a user sees is
    worded alike on every machine, with or without libyaml."""
    try:
        _check_case_events(data)
        try:
            raw = yaml.load(data, Loader=_CASE_LOADER)
        except yaml.YAMLError:
            raw = yaml.safe_load(data)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise CaseFormatError(where, f"invalid YAML: {' '.join(str(exc.problem or exc.context).split())}") from None
    except yaml.reader.ReaderError as exc:  # not text: bad UTF-8, control characters
        raise CaseFormatError(f"byte {exc.position}", f"invalid YAML: {str(exc).splitlines()[0]}") from None
    except yaml.YAMLError as exc:
        raise CaseFormatError("", f"invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise CaseFormatError("", "invalid YAML: nested too deeply") from None
    if raw is None:
        raise CaseFormatError("", "empty: expected a mapping of case fields (format, operator, descriptor, inputs, ...)")
    if not isinstance(raw, dict):
        raise CaseFormatError("", f"expected a mapping of case fields at the top level, found {_kind(raw)}")
    return raw
