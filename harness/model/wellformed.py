"""Well-formedness of a case: is it something a C program could hand to DirectML at all?

The validator (harness/validator.py) decides whether a descriptor is *valid*: a device must
accept it, or must reject it with E_INVALIDARG. That question only makes sense for a descriptor
that can be written down as a DML_BUFFER_TENSOR_DESC in the first place. A case file can hold
much that cannot: a negative stride or one of 2^32 (Strides is `const UINT*`), Flags beyond 32
bits, a data type DirectML does not have, an attribute no FLOAT holds, an input buffer shorter
than its descriptor says. Such values used to be truncated by the native runner (so DirectML's
answer to a different descriptor was then blamed on DirectML) or read out of bounds by the NumPy
paths. `check_case` refuses them, with the key of the offending field, before any backend sees
the case.

Deliberately *not* well-formedness errors, because a device must reject them and the invalid
cases test exactly that: Sizes or Strides of another length than DimensionCount, a size of 0,
more than 2^32-1 elements, TotalTensorSizeInBytes below the minimum, unknown flag bits within
UINT32, bad alignments, unknown tensor fields, in-place pairs the operator does not allow.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

# CaseFormatError, short and is_integer are defined below descriptor.py (which raises them too)
# and re-exported here, with check_case
from harness.model.caseformat import CaseFormatError, is_integer, short
from harness.model.layout import total_bytes
from harness.spec.fused import MAX_ACTIVATION_ITEMS, item_field

if TYPE_CHECKING:
    from harness.spec.catalog import Catalog
    from harness.model.descriptor import Case, TensorDesc
    from harness.spec.model import FieldSpec, OperatorSpec

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FLOAT32_OVERFLOW = 2.0**128 - 2.0**103  # the smallest magnitude that rounds to a float32 infinity
# DML_TENSOR_DIMENSION_COUNT_MAX1 is 8; the runner's C arrays hold 16 entries, which leaves room
# for invalid descriptors one or more dimensions past the limit (tensor.dimension_count).
MAX_C_DIMENSIONS = 16


def check_unsigned(key: str, value: Any, maximum: int, c_type: str) -> None:
    """`value` fits the C unsigned type whose largest value is `maximum`."""
    if not is_integer(value):
        raise CaseFormatError(key, f"expected an integer ({c_type}), found {type(value).__name__} {short(value)}")
    if not 0 <= value <= maximum:
        raise CaseFormatError(key, f"{short(value)} is outside the range of {c_type} (0..{maximum})")


def _uints(values: Any) -> bool:
    """A list of at most MAX_C_DIMENSIONS plain ints, each a UINT32."""
    return type(values) is list and len(values) <= MAX_C_DIMENSIONS and all(type(v) is int and 0 <= v <= UINT32_MAX for v in values)


def _plainly_fine(desc: TensorDesc, catalog: Catalog) -> bool:
    """The common case in one expression (plain ints in range, a known type): check_case runs on
    every case, and the precise checks below build a key string per field."""
    count, total = desc.dimension_count, desc.total_bytes
    return (desc.data_type in catalog.data_types and type(desc.flags) is int and 0 <= desc.flags <= UINT32_MAX
            and type(desc.alignment) is int and 0 <= desc.alignment <= UINT32_MAX
            and (total is None or (type(total) is int and 0 <= total <= UINT64_MAX))
            and (count is None or (type(count) is int and 0 <= count <= MAX_C_DIMENSIONS))
            and _uints(desc.sizes) and (desc.strides is None or _uints(desc.strides)))


def check_tensor(key: str, desc: TensorDesc, catalog: Catalog) -> None:
    """Every field of one DML_BUFFER_TENSOR_DESC is representable in its C type."""
    if _plainly_fine(desc, catalog):
        return
    if not isinstance(desc.data_type, str) or desc.data_type not in catalog.data_types:
        raise CaseFormatError(f"{key}.DataType", f"unknown data type {short(desc.data_type)}; "
                                                 f"known: {', '.join(catalog.data_types)}")
    check_unsigned(f"{key}.Flags", desc.flags, UINT32_MAX, "DML_TENSOR_FLAGS, a UINT32")
    if not isinstance(desc.sizes, (list, tuple)):
        raise CaseFormatError(f"{key}.Sizes", f"expected a list of UINT32, found {type(desc.sizes).__name__}")
    check_unsigned(f"{key}.DimensionCount", desc.dim_count, UINT32_MAX, "UINT")
    if desc.dim_count > MAX_C_DIMENSIONS:
        raise CaseFormatError(f"{key}.DimensionCount", f"{desc.dim_count} dimensions: more than {MAX_C_DIMENSIONS}, which no "
                                                       "DirectML tensor has (DML_TENSOR_DIMENSION_COUNT_MAX1 is 8)")
    for name, values in (("Sizes", desc.sizes), ("Strides", desc.strides)):
        if values is None and name == "Strides":
            continue
        if not isinstance(values, (list, tuple)):
            raise CaseFormatError(f"{key}.{name}", f"expected a list of UINT32, found {type(values).__name__}")
        if len(values) > MAX_C_DIMENSIONS:
            raise CaseFormatError(f"{key}.{name}", f"{len(values)} entries: more than {MAX_C_DIMENSIONS}, which no DirectML tensor has")
        for index, value in enumerate(values):
            check_unsigned(f"{key}.{name}[{index}]", value, UINT32_MAX, "UINT32")
    if desc.total_bytes is not None:
        check_unsigned(f"{key}.TotalTensorSizeInBytes", desc.total_bytes, UINT64_MAX, "UINT64")
    check_unsigned(f"{key}.GuaranteedBaseOffsetAlignment", desc.alignment, UINT32_MAX, "UINT")


def check_attribute(key: str, value: Any, c_type: str) -> None:
    """An attribute value the C struct member holds: FLOAT rounds to a float32 without overflowing
    (inf and NaN are floats too, and specs use them as edge values); integer types are in range."""
    if not (is_integer(value) or isinstance(value, (float, np.floating))):
        raise CaseFormatError(key, f"expected a number ({c_type}), found {type(value).__name__} {short(value)}")
    if c_type == "FLOAT":
        if _overflows_float32(value):
            raise CaseFormatError(key, f"{short(value)} overflows FLOAT (float32's largest is {float(np.finfo(np.float32).max)!r})")
        return
    low, high = (INT32_MIN, INT32_MAX) if c_type in ("INT", "INT32", "BOOL") else (0, UINT32_MAX)
    whole = is_integer(value) or (math.isfinite(value) and float(value).is_integer())
    if not whole or not low <= int(value) <= high:
        raise CaseFormatError(key, f"{short(value)} is not an integer in {low}..{high} ({c_type})")


def check_union(key: str, value: Any, type_enum: Any, catalog: Catalog) -> None:
    """A DML_SCALAR_UNION value: exactly representable in the data type its typed_by field names
    (any number of at most 64 bits when that field names no known type: the union is 8 bytes)."""
    if not (is_integer(value) or isinstance(value, (float, np.floating))):
        raise CaseFormatError(key, f"expected a number (DML_SCALAR_UNION), found {type(value).__name__} {short(value)}")
    dtype = next((t for t in catalog.data_types.values() if type_enum is not None and t.enum == type_enum), None)
    if dtype is None or dtype.bits % 8:  # unknown, or a 4-bit type (DML_SCALAR_UNION has no 4-bit member)
        return
    if dtype.is_float:
        with np.errstate(all="ignore"):
            held = np.array(value, dtype=np.float64).astype(dtype.numpy)
        if not (math.isnan(float(value)) or float(held) == float(value)):
            raise CaseFormatError(key, f"{short(value)} is not a {dtype.name} value (the union holds {float(held)!r})")
        return
    assert dtype.min is not None and dtype.max is not None  # an integer type: the catalog requires min and max
    whole = is_integer(value) or (math.isfinite(value) and float(value).is_integer())
    if not whole or not dtype.min <= int(value) <= dtype.max:
        raise CaseFormatError(key, f"{short(value)} is not an integer in {dtype.min}..{dtype.max} ({dtype.name})")


def _overflows_float32(value: Any) -> bool:
    """A finite number that rounds to infinity as a float32 (inf and NaN themselves are floats):
    from half an ulp above float32's largest on (round to nearest, ties to even: 2^128 - 2^103)."""
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64
        return True
    return math.isfinite(number) and abs(number) >= FLOAT32_OVERFLOW


def check_buffer(spec: OperatorSpec, case: Case, name: str, desc: TensorDesc) -> None:
    """A present input's buffer is exactly TotalTensorSizeInBytes (declared, or the implied
    minimum) long, so every reader finds the bytes the descriptor promises.

    A declared total below the minimum is allowed (with a buffer of that length): it is the
    invalid case `tensor.total_size_too_small`, which a device must reject before reading. A
    missing buffer is allowed only in a case expected invalid that no level could accept."""
    key = f"inputs.{name}"
    buffer = case.inputs.get(name)
    dtype = spec.catalog.dtype(desc.data_type)
    if buffer is None:
        if case.expect_valid:
            raise CaseFormatError(key, "missing: a case expected valid needs a buffer for every present input")
        if not _invalid_at_every_level(spec, case):
            raise CaseFormatError(key, "missing, but the descriptor breaks only level-dependent rules: "
                                       "a device of another level must accept it and would read the buffer")
        return
    if not isinstance(buffer, (bytes, bytearray, memoryview)):
        raise CaseFormatError(key, f"expected bytes, found {type(buffer).__name__}")
    # Equal to the total is also at least the minimum the layout reaches (minimum_bytes), except
    # where the declared total is itself below it: tensor.total_size_too_small, see above.
    want = total_bytes(desc, dtype)
    if len(buffer) != want:
        what = ("TotalTensorSizeInBytes" if desc.total_bytes is not None
                else "the implied TotalTensorSizeInBytes (DMLCalcBufferTensorSize of Sizes and Strides)")
        raise CaseFormatError(key, f"the buffer holds {len(buffer)} bytes, but {what} is {want}")


def _invalid_at_every_level(spec: OperatorSpec, case: Case) -> bool:
    """The descriptor breaks a rule that does not depend on the feature level (so no device,
    whatever its level, may accept it and read its inputs)."""
    from harness.model.validator import LEVEL_RULES, case_verdict  # the rare path: cases without input data
    return bool(case_verdict(spec, case).rule_ids - LEVEL_RULES)


def check_aliases(spec: OperatorSpec, case: Case) -> None:
    """In-place aliases name an output field and an input field of the operator, both present:
    the runner binds the output on that input's resource, the reference writes into its buffer."""
    outputs = {f.name for f in spec.output_fields}
    inputs = {f.name for f in spec.input_fields}
    tensors = case.descriptor.tensors
    for output, source in case.descriptor.aliases.items():
        key = f"descriptor.aliases.{output}"
        if output not in outputs:
            raise CaseFormatError(key, f"{short(output)} is not an output tensor of {spec.name} (outputs: {', '.join(sorted(outputs))})")
        if source not in inputs:
            raise CaseFormatError(key, f"{short(source)} is not an input tensor of {spec.name} (inputs: {', '.join(sorted(inputs))})")
        if tensors.get(output) is None or tensors.get(source) is None:
            raise CaseFormatError(key, f"aliases {output} to {source}, but {output if tensors.get(output) is None else source} is absent")
    bound: dict[str, str] = {}
    for output, source in sorted(case.descriptor.aliases.items()):
        if source in bound:
            # two outputs written into one buffer: which result it holds afterwards is undefined,
            # so no verdict on a backend could be drawn from such a case (pairwise each may be allowed)
            raise CaseFormatError(f"descriptor.aliases.{output}",
                                  f"{output} and {bound[source]} both alias {source}: two outputs would write one buffer; "
                                  "an input is bound to at most one output")
        bound[source] = output


def _check_activation_array(spec: OperatorSpec, f: FieldSpec, attributes: dict, c_types: dict[str, str],
                            arrays: dict[str, str | None]) -> None:
    """An array of fused activations: a list of allowed activations' operator types (its count field
    is the list's length), item k's fields as members `<Field>_<k>.<Member>`, all of them."""
    items = attributes.get(f.name)
    allowed = spec.activations.get(f.name, {})
    names = ", ".join(f"{t} ({a.name})" for t, a in sorted(allowed.items())) or "none"
    if not isinstance(items, list) or len(items) > MAX_ACTIVATION_ITEMS:
        raise CaseFormatError(f"descriptor.attributes.{f.name}", f"an array of fused activations (with {f.count}) must be a list of at most "
                                                                 f"{MAX_ACTIVATION_ITEMS} operator types of allowed activations ({names})")
    arrays[f.name] = "UINT"
    c_types[f.name] = "UINT"
    for slot, value in enumerate(items):
        whole = is_integer(value) or (isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer())
        if not whole or int(value) not in allowed:
            raise CaseFormatError(f"descriptor.attributes.{f.name}[{slot}]", f"{short(value)} is not the operator type of an allowed "
                                                                             f"fused activation ({names})")
        activation, prefix = allowed[int(value)], item_field(f.name, slot)
        c_types.update({f"{prefix}.{a.name}": a.c_type for a in activation.attribute_fields})
        missing = [f"{prefix}.{a.name}" for a in activation.attribute_fields if f"{prefix}.{a.name}" not in attributes]
        if missing:
            raise CaseFormatError(f"descriptor.attributes.{f.name}[{slot}]", f"{activation.name} needs every field: missing {', '.join(missing)}")


def check_case(case: Case, spec: OperatorSpec) -> None:
    """Raise CaseFormatError unless every field of `case` is representable in DirectML's C structs
    and every input buffer is as long as its descriptor says; the cheap checks run first and a
    well-formed case costs a few microseconds per tensor."""
    catalog = spec.catalog
    if case.descriptor.operator != spec.name:
        raise CaseFormatError("descriptor.operator", f"{short(case.descriptor.operator)} is not {spec.name}")
    if not isinstance(case.feature_level, str) or not catalog.has_level(case.feature_level):
        raise CaseFormatError("feature_level", f"unknown feature level {short(case.feature_level)}; "
                                               f"known: {', '.join(level.name for level in catalog.levels)}")
    for name, desc in case.descriptor.tensors.items():
        if desc is not None:
            check_tensor(f"descriptor.tensors.{name}", desc, catalog)
    for array, items in spec.tensor_arrays.items():  # InputCount items, then nothing: no holes
        for before, item in zip(items, items[1:]):
            if case.descriptor.tensors.get(before) is None and case.descriptor.tensors.get(item) is not None:
                raise CaseFormatError(f"descriptor.tensors.{item}", f"{item} follows the absent {before}: the items of the "
                                                                    f"tensor array {array} are consecutive ({spec.field(item).count} of them)")
    c_types = {f.name: f.c_type for f in spec.attribute_fields if f.struct is None and not f.is_count}
    arrays = {f.name: f.element for f in spec.attribute_fields if f.is_array}
    for f in spec.attribute_fields:  # an array is always set (its count field is its length, never set itself)
        if f.is_array and not isinstance(case.descriptor.attributes.get(f.name), list):
            raise CaseFormatError(f"descriptor.attributes.{f.name}", f"{f.c_type} array (with {f.count}) must be a list of {(f.element or 'UINT').lower()} values")
        if f.is_count and len({len(case.descriptor.attributes.get(a, [])) if isinstance(case.descriptor.attributes.get(a), list) else -1
                               for a in f.count_of or ()}) > 1:
            raise CaseFormatError(f"descriptor.attributes.{(f.count_of or ('',))[0]}", f"{', '.join(f.count_of or ())} share the count {f.name}: "
                                                                                       f"they must have the same length")
    for f in spec.attribute_fields:  # a struct pointer's members are attributes Field.Member, all or none
        if f.struct is not None:
            c_types.update({f"{f.name}.{member}": c_type for member, c_type in f.struct})
            given = [m for m, _ in f.struct if f"{f.name}.{m}" in case.descriptor.attributes]
            if given and len(given) != len(f.struct):
                missing = [f"{f.name}.{m}" for m, _ in f.struct if m not in given]
                raise CaseFormatError(f"descriptor.attributes.{f.name}", f"{f.c_type} needs every member or none (a null pointer); "
                                                                         f"missing {', '.join(missing)}")
    for f in spec.attribute_fields:  # a fused activation: an allowed activation's operator type, then its fields as members
        if not f.is_fused_activation:
            continue
        if f.is_activation_array:
            _check_activation_array(spec, f, case.descriptor.attributes, c_types, arrays)
            continue
        c_types[f.name] = "UINT"
        value = case.descriptor.attributes.get(f.name)
        allowed = spec.activations.get(f.name, {})
        if value is not None:
            whole = is_integer(value) or (isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer())
            if not whole or int(value) not in allowed:
                names = ", ".join(f"{t} ({a.name})" for t, a in sorted(allowed.items()))
                raise CaseFormatError(f"descriptor.attributes.{f.name}", f"{short(value)} is not the operator type of an allowed "
                                                                         f"fused activation ({names or 'none'})")
            activation = allowed[int(value)]
            c_types.update({f"{f.name}.{a.name}": a.c_type for a in activation.attribute_fields})
            missing = [f"{f.name}.{a.name}" for a in activation.attribute_fields if f"{f.name}.{a.name}" not in case.descriptor.attributes]
            if missing:
                raise CaseFormatError(f"descriptor.attributes.{f.name}", f"{activation.name} needs every field: missing {', '.join(missing)}")
    unions = {f.name: f.typed_by for f in spec.attribute_fields if f.is_scalar_union}
    for name, value in case.descriptor.attributes.items():
        if name in unions:  # DML_SCALAR_UNION: a value of the type its typed_by field names
            check_union(f"descriptor.attributes.{name}", value, case.descriptor.attributes.get(unions[name] or ""), catalog)
            continue
        if name not in c_types:
            raise CaseFormatError(f"descriptor.attributes.{name}", f"{spec.desc_struct} has no attribute {short(name)} "
                                                                   f"(attributes: {', '.join(c_types) or 'none'})")
        if name in arrays:
            for index, item in enumerate(value):
                check_attribute(f"descriptor.attributes.{name}[{index}]", item, arrays[name] or "UINT")
            continue
        check_attribute(f"descriptor.attributes.{name}", value, c_types[name])
    check_aliases(spec, case)
    present_inputs = {f.name for f in spec.input_fields if case.descriptor.tensors.get(f.name) is not None}
    for name in case.inputs:
        if name not in present_inputs:
            raise CaseFormatError(f"inputs.{name}", f"a buffer for {short(name)}, which is not a present input tensor of {spec.name}")
    for name in sorted(present_inputs):
        desc = case.descriptor.tensors[name]
        assert desc is not None
        check_buffer(spec, case, name, desc)
