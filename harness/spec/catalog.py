"""DirectML data types and feature levels, read from the shared files in specs/.

Every other module asks this catalog instead of hard-coding type widths, ranges or level order.
"""
from __future__ import annotations

import hashlib

from dataclasses import dataclass
from pathlib import Path

import jsonschema
import numpy as np

from harness.spec.arithmetic import ARITHMETIC_FILE, ArithmeticModel, load_arithmetic
from harness.spec.schema import DATA_TYPES_SCHEMA, ENUMS_SCHEMA, FEATURE_LEVELS_SCHEMA, STRUCTS_SCHEMA
from harness.spec.source import SourcedYaml, SpecError, load_yaml

DATA_TYPES_FILE = "_data_types.yaml"
FEATURE_LEVELS_FILE = "_feature_levels.yaml"
ENUMS_FILE = "_enums.yaml"
STRUCTS_FILE = "_structs.yaml"


@dataclass(frozen=True)
class DataType:
    """One DML_TENSOR_DATA_TYPE."""

    name: str
    enum: int
    bits: int
    numpy_name: str
    kind: str  # float | signed | unsigned
    min: int | None
    max: int | None
    since: str

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype of one element's value (int8 / uint8 for the 4-bit types, whose buffers
        pack two elements per byte: read and write them through harness.model.layout)."""
        return np.dtype(self.numpy_name)

    @property
    def size_bytes(self) -> int:
        """Element size in bytes (sub-byte types count as one byte for layout purposes)."""
        return max(1, self.bits // 8)

    @property
    def bits_numpy(self) -> np.dtype:
        """The unsigned integer dtype holding the raw encoding of one element."""
        return np.dtype(f"uint{max(8, self.bits)}")

    @property
    def is_float(self) -> bool:
        return self.kind == "float"


@dataclass(frozen=True)
class FeatureLevel:
    """One DML_FEATURE_LEVEL; `order` is its position, oldest first."""

    name: str
    enum: int
    directml: str
    order: int


@dataclass
class Catalog:
    """All data types and feature levels."""

    data_types: dict[str, DataType]
    levels: list[FeatureLevel]
    arithmetic: ArithmeticModel
    enums: dict[str, dict[str, int]]  # DirectML enum -> member -> value (specs/_enums.yaml)
    structs: dict[str, tuple[tuple[str, str], ...]]  # DirectML struct -> (member, C type) in order (specs/_structs.yaml)

    def level(self, name: str) -> FeatureLevel:
        for level in self.levels:
            if level.name == name:
                return level
        raise KeyError(name)

    def has_level(self, name: str) -> bool:
        return any(level.name == name for level in self.levels)

    def level_order(self, name: str) -> int:
        return self.level(name).order

    def level_by_enum(self, enum: int) -> FeatureLevel:
        for level in self.levels:
            if level.enum == enum:
                return level
        raise KeyError(hex(enum))

    @property
    def newest_level(self) -> FeatureLevel:
        return self.levels[-1]

    def dtype(self, name: str) -> DataType:
        return self.data_types[name]

    def type_ranges(self) -> dict[str, tuple[int, int]]:
        return {n: (t.min, t.max) for n, t in self.data_types.items() if t.min is not None and t.max is not None}


def _schema_check(src: SourcedYaml, schema: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(src.data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        first = errors[0]
        raise src.error(tuple(first.absolute_path), first.message)


_CATALOGS: dict[bytes, Catalog] = {}


def load_catalog(specs_dir: Path) -> Catalog:
    """Read `_data_types.yaml`, `_feature_levels.yaml`, `_arithmetic.yaml`, `_enums.yaml` and
    `_structs.yaml`; raise SpecError on any problem. One Catalog object per distinct content of
    those files (specs built against it are memoised by that object: load.build_file)."""
    digest = hashlib.blake2b(digest_size=16)
    for name in (DATA_TYPES_FILE, FEATURE_LEVELS_FILE, ARITHMETIC_FILE, ENUMS_FILE, STRUCTS_FILE):
        try:
            digest.update(name.encode() + b"\0" + (Path(specs_dir) / name).read_bytes() + b"\0")
        except OSError:
            return _read_catalog(Path(specs_dir))  # load_yaml reports the missing file
    key = digest.digest()
    if key not in _CATALOGS:
        _CATALOGS[key] = _read_catalog(Path(specs_dir))
    return _CATALOGS[key]


def _read_catalog(specs_dir: Path) -> Catalog:
    types_src = load_yaml(specs_dir / DATA_TYPES_FILE)
    _schema_check(types_src, DATA_TYPES_SCHEMA)
    levels_src = load_yaml(specs_dir / FEATURE_LEVELS_FILE)
    _schema_check(levels_src, FEATURE_LEVELS_SCHEMA)

    levels: list[FeatureLevel] = []
    for index, raw in enumerate(levels_src.data["feature_levels"]):
        if levels and raw["enum"] <= levels[-1].enum:
            raise levels_src.error(("feature_levels", index, "enum"),
                                   f"levels must be listed oldest first with increasing enum values; "
                                   f"{raw['name']} comes after {levels[-1].name}")
        levels.append(FeatureLevel(raw["name"], raw["enum"], raw["directml"], index))
    level_names = {level.name for level in levels}

    data_types: dict[str, DataType] = {}
    for index, raw in enumerate(types_src.data["data_types"]):
        if raw["name"] in data_types:
            raise types_src.error(("data_types", index, "name"), f"duplicate data type {raw['name']}")
        if raw["since"] not in level_names:
            raise types_src.error(("data_types", index, "since"),
                                  f"unknown feature level {raw['since']!r}; expected one of {sorted(level_names)}")
        if raw["class"] != "float" and ("min" not in raw or "max" not in raw):
            raise types_src.error(("data_types", index), "integer types need min and max")
        if raw["numpy"] is not None:
            try:
                np.dtype(raw["numpy"])
            except TypeError:
                raise types_src.error(("data_types", index, "numpy"), f"unknown NumPy dtype {raw['numpy']!r}") from None
        if raw["numpy"] is None and (raw["bits"] != 4 or raw["class"] == "float"):
            raise types_src.error(("data_types", index, "numpy"), "only a 4-bit integer type may leave its NumPy dtype null")
        # null: a 4-bit type of a catalog written before 4-bit values were held in a byte
        numpy_name = raw["numpy"] or ("int8" if raw["class"] == "signed" else "uint8")
        data_types[raw["name"]] = DataType(raw["name"], raw["enum"], raw["bits"], numpy_name, raw["class"],
                                           raw.get("min"), raw.get("max"), raw["since"])
    enums_src = load_yaml(specs_dir / ENUMS_FILE)
    _schema_check(enums_src, ENUMS_SCHEMA)
    enums: dict[str, dict[str, int]] = {}
    for name, members in enums_src.data["enums"].items():
        if len(set(members.values())) != len(members):
            raise enums_src.error(("enums", name), "two members share a value")
        enums[name] = dict(members)
    # DML_TENSOR_DATA_TYPE is the data types' own enum (a field typed by it, e.g. a scalar union's
    # type, compares with T.DataType in expressions); _data_types.yaml holds its values
    enums.setdefault("DML_TENSOR_DATA_TYPE", {"UNKNOWN": 0, **{t.name: t.enum for t in data_types.values()}})
    structs_src = load_yaml(specs_dir / STRUCTS_FILE)
    _schema_check(structs_src, STRUCTS_SCHEMA)
    structs = {name: tuple((m["name"], m["c_type"]) for m in members) for name, members in structs_src.data["structs"].items()}
    return Catalog(data_types=data_types, levels=levels, arithmetic=load_arithmetic(specs_dir, _schema_check),
                   enums=enums, structs=structs)


__all__ = ["Catalog", "DataType", "FeatureLevel", "SpecError", "load_catalog"]
