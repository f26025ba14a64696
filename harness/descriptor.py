"""The model of a DirectML operator descriptor and of a case (descriptor + input buffers).

A TensorDesc mirrors DML_BUFFER_TENSOR_DESC field for field, including the ways a real one can be
wrong (a DimensionCount that disagrees with Sizes, TotalTensorSizeInBytes below the minimum), so
that invalid descriptors can be expressed, saved and replayed. Case files are YAML; buffers are
stored whole (padding included) in base64, next to a readable preview of the logical values.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import xxhash
import yaml

CASE_FORMAT_VERSION = 1


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
    def from_dict(cls, raw: dict[str, Any]) -> "TensorDesc":
        sizes = [int(s) for s in raw["Sizes"]]
        count = int(raw.get("DimensionCount", len(sizes)))
        return cls(data_type=str(raw["DataType"]), sizes=sizes,
                   strides=[int(s) for s in raw["Strides"]] if raw.get("Strides") is not None else None,
                   total_bytes=int(raw["TotalTensorSizeInBytes"]) if raw.get("TotalTensorSizeInBytes") is not None else None,
                   alignment=int(raw.get("GuaranteedBaseOffsetAlignment", 0)), flags=int(raw.get("Flags", 0)),
                   dimension_count=None if count == len(sizes) else count)


@dataclass
class Descriptor:
    """An operator descriptor: its tensors (None = absent optional tensor), attributes, aliasing."""

    operator: str
    tensors: dict[str, TensorDesc | None]
    attributes: dict[str, float] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # output field -> input field sharing its memory

    def tensor(self, name: str) -> TensorDesc | None:
        return self.tensors.get(name)

    def with_tensor(self, name: str, desc: TensorDesc | None) -> "Descriptor":
        tensors = dict(self.tensors)
        tensors[name] = desc
        return replace(self, tensors=tensors)

    def to_dict(self) -> dict[str, Any]:
        return {"operator": self.operator,
                "tensors": {n: (t.to_dict() if t is not None else None) for n, t in self.tensors.items()},
                "attributes": dict(self.attributes), "aliases": dict(self.aliases)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Descriptor":
        return cls(operator=raw["operator"],
                   tensors={n: (TensorDesc.from_dict(t) if t is not None else None) for n, t in raw["tensors"].items()},
                   attributes={k: float(v) for k, v in (raw.get("attributes") or {}).items()},
                   aliases=dict(raw.get("aliases") or {}))

    def key(self) -> str:
        """A stable text key of the descriptor (for caches and case ids). JSON, not YAML: the key
        is made for every case, and the YAML emitter took about 1 ms of a small case's 2."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


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
        expect = str(raw.get("expect", "valid"))
        broken = expect.split(":", 1)[1].strip() if expect.startswith("invalid") else None
        return cls(descriptor=Descriptor.from_dict(raw["descriptor"]), feature_level=str(raw["feature_level"]),
                   inputs={n: base64.b64decode(v["base64"]) for n, v in (raw.get("inputs") or {}).items()},
                   expect_valid=broken is None, broken_rule=broken, origin=str(raw.get("origin", "file")),
                   tags=list(raw.get("tags") or []))

    def save(self, path: Path, previews: dict[str, list] | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(yaml.safe_dump(self.to_dict(previews), sort_keys=False, width=120))
        tmp.replace(path)  # atomic: an interrupted run never leaves half a case file
        return path

    @classmethod
    def load(cls, path: Path) -> "Case":
        return cls.from_dict(yaml.safe_load(Path(path).read_text()))
