"""Exhaustive sweeps: every value of every 8- and 16-bit type through every unary operator, and
every pair of 8-bit values through every binary one.

A unary operator is one whose formula reads a single input tensor. Each sweep is one case: a
1-D tensor (or the smallest shape the newest table allows) holding every bit pattern once, with
attributes at their defaults. The fp32 sweep (all 2^32 patterns) is chunked and opt-in. A binary
operator (two input tensors, both read) is swept on each 8-bit type both inputs may take
together: the first input holds each value 256 times in a row, the second all 256 values each
time, so the 65,536 elements are every pair once.

The output takes every type the table and the constraints allow next to the swept input type:
the input's own type where the constraints tie the output to it, every allowed output type where
they do not (a conversion: one sweep per pair, id `OP-FL6.4-FLOAT16-to-INT8`).

Where the support tables depend on an enum attribute (a `variant_key`), each variant group is
swept on its own table, with the key set to one member of the group (its default where the
group holds the default, else the group's first member): id `OP-FL6.4-FLOAT16-MEMBER`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.generate.expression_breakers import first_array_values
from harness.model.descriptor import Case
from harness.spec.model import OperatorSpec, SpecSet
from harness.generate.types import valid_type_assignments
from harness.generate.values import all_values

FP32_CHUNK = 1 << 24


@dataclass(frozen=True)
class Sweep:
    operator: str
    data_type: str
    level: str
    chunk: int = 0  # for chunked fp32 sweeps
    output_type: str | None = None  # None: the input's type
    member: str | None = None  # the variant key's member (its group's table), None without a variant key

    @property
    def id(self) -> str:
        suffix = f"-chunk{self.chunk}" if self.data_type == "FLOAT32" else ""
        to = f"-to-{self.output_type}" if self.output_type not in (None, self.data_type) else ""
        variant = f"-{self.member}" if self.member is not None else ""
        return f"{self.operator}-FL{self.level}-{self.data_type}{to}{variant}{suffix}"


def is_unary(spec: OperatorSpec) -> bool:
    """An element-wise operator of one input: every value of a small type in one tensor is a case.
    (Family operators are not swept: their arrays and derived shapes would need a descriptor of
    their own per family; random cases there carry the special values.)"""
    return len(spec.formula.inputs) == 1 and len(spec.input_fields) == 1 and spec.formula.family is None


def is_binary(spec: OperatorSpec) -> bool:
    """An element-wise operator of two input tensors, both read by its formula."""
    return len(spec.formula.inputs) == 2 and len(spec.input_fields) == 2 and spec.formula.family is None


def group_members(spec: OperatorSpec, level: str) -> list[str | None]:
    """One member per variant group with a table at `level` (the key's default where the group
    holds it, else its first member); [None] without a variant key."""
    if spec.variant_key is None:
        return [None] if spec.has_table_at(level) else []
    default = spec.variant_member({})
    out: list[str | None] = []
    for table in spec.tables_at(level):
        assert table.variant is not None
        out.append(default if default in table.variant else table.variant[0])
    return out


def _shape_for(spec: OperatorSpec, level: str, count: int, member: str | None = None) -> list[int]:
    table = spec.table_for(level, member)
    assert table is not None
    lo = max(cell.dims[0] for cell in table.tensors.values())
    return [1] * (lo - 1) + [count]


def sweeps(specs: SpecSet, operators: list[str] | None = None, level: str | None = None,
           include_fp32: bool = False, fp32_chunks: list[int] | None = None) -> list[Sweep]:
    """Every (unary operator, 8/16-bit input type, output type) the level's table and the
    constraints allow (the output type: see the module docstring)."""
    level = level or specs.catalog.newest_level.name
    out = []
    for spec in specs.operators.values():
        if operators and spec.name not in operators:
            continue
        if not (is_unary(spec) or is_binary(spec)):
            continue
        for member in group_members(spec, level):
            out.extend(_sweeps_of(specs, spec, level, member, include_fp32, fp32_chunks))
    return out


def _sweeps_of(specs: SpecSet, spec: OperatorSpec, level: str, member: str | None, include_fp32: bool,
               fp32_chunks: list[int] | None) -> list[Sweep]:
    """The sweeps of one table (one variant group's, with the key at `member`)."""
    enum = lambda n: specs.catalog.dtype(n).enum  # noqa: E731
    sources, target = [f.name for f in spec.input_fields], spec.formula.output
    pairs: dict[str, set[str]] = {}
    for types in valid_type_assignments(spec, level, member):
        first = types[sources[0]]
        if first is not None and (output := types[target]) is not None and all(types[s] == first for s in sources):
            pairs.setdefault(first, set()).add(output)
    out: list[Sweep] = []
    widths = (8, 16) if len(sources) == 1 else (8,)  # a binary 16-bit sweep would be 2^32 pairs
    for name in sorted(pairs, key=enum):
        dtype = specs.catalog.dtype(name)
        outputs = sorted(pairs[name], key=lambda t: (t != name, enum(t)))  # the input's own type first
        if len(sources) == 2 and name == "FLOAT32":
            continue  # pairs of fp32 values are not swept
        if dtype.bits in widths:
            out.extend(Sweep(spec.name, name, level, output_type=None if t == name else t, member=member) for t in outputs)
        elif name == "FLOAT32" and include_fp32:
            for t in outputs:
                for chunk in fp32_chunks if fp32_chunks is not None else range((1 << 32) // FP32_CHUNK):
                    out.append(Sweep(spec.name, name, level, chunk, None if t == name else t, member))
    return out


def sweep_values(specs: SpecSet, sweep: Sweep) -> np.ndarray:
    dtype = specs.catalog.dtype(sweep.data_type)
    if sweep.data_type == "FLOAT32":
        start = sweep.chunk * FP32_CHUNK
        return np.arange(start, start + FP32_CHUNK, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return all_values(dtype)


def sweep_case(specs: SpecSet, sweep: Sweep) -> Case:
    spec = specs.operator(sweep.operator)
    values = sweep_values(specs, sweep)
    if is_binary(spec):  # every pair: the first input's values in runs, the second's repeated
        arrays = [np.repeat(values, len(values)), np.tile(values, len(values))]
    else:
        arrays = [values]
    sizes = _shape_for(spec, sweep.level, len(arrays[0]), sweep.member)
    types = {f.name: sweep.data_type for f in spec.tensor_fields}
    if sweep.output_type is not None:
        types[spec.formula.output] = sweep.output_type
    inputs = {f.name: a.reshape(sizes) for f, a in zip(spec.input_fields, arrays)}
    attributes = dict(spec.variant_attributes(sweep.member) or {})
    for f in spec.attribute_fields:  # a DML_SCALAR_UNION holds the swept type (its default value)
        if f.is_scalar_union and f.typed_by is not None:
            attributes[f.typed_by] = float(specs.catalog.dtype(sweep.data_type).enum)
    case = case_from_arrays(spec, sweep.level, types, inputs, sizes=sizes,
                            attributes=attributes or None, origin=f"sweep:{sweep.id}")
    if any(f.is_array for f in spec.attribute_fields):  # an array: its first choices (a FLOAT one: its first ordinary value)
        case.descriptor.attributes.update(first_array_values(spec, case.descriptor))
    case.tags = ["exhaustive"]
    return case
