"""Buffer layout arithmetic of DML_BUFFER_TENSOR_DESC: strides, minimum sizes, strided reads and writes.

The formulas are DirectML's (DMLCalcBufferTensorSize): strides are in elements, the last element's
index is dot(Sizes - 1, Strides), and the minimum size is rounded up to 4 bytes.

4-bit types (UINT4, INT4) hold two elements per byte, element 2k in the low nibble and 2k + 1 in
the high one (DML_TENSOR_DATA_TYPE's page: [1,2,3,4,5] is the bytes [0x21, 0x43, 0x05]); strides
count elements, so a stride of 1 steps one nibble. Their logical values are int8 / uint8 arrays
(INT4 sign-extended): `read_tensor` and `write_tensor` unpack and pack the nibbles, and every caller
that holds a DataType reads and writes through them rather than through a NumPy dtype.

Every strided view is bounds-checked before it is made (`strided_view`): the largest byte offset a
descriptor touches must lie inside the buffer and no stride may be negative, or ValueError is
raised. NumPy's as_strided trusts its caller, and a case file with a short buffer or a huge stride
otherwise read (or wrote) memory the harness never owned, crashing the process or passing on garbage.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from harness.spec.catalog import DataType

if TYPE_CHECKING:  # annotations only: nothing of them is needed at run time
    from harness.model.descriptor import Case, TensorDesc
    from harness.spec.model import OperatorSpec

MAX_ELEMENTS = 2**32 - 1


def packed_strides(sizes: list[int]) -> list[int]:
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = strides[i + 1] * sizes[i + 1]
    return strides


def effective_strides(desc: TensorDesc) -> list[int]:
    return list(desc.strides) if desc.strides is not None else packed_strides(desc.sizes)


def element_count(desc: TensorDesc) -> int:
    count = 1
    for size in desc.sizes:
        count *= size
    return count


def minimum_bytes(desc: TensorDesc, dtype: DataType) -> int:
    """DMLCalcBufferTensorSize: bytes up to one past the last element (a 4-bit type's last
    element's byte included), rounded up to 4."""
    if any(s == 0 for s in desc.sizes):
        return 0
    if desc.strides is None:
        count = element_count(desc)
    else:
        count = sum((s - 1) * st for s, st in zip(desc.sizes, desc.strides)) + 1
    return (elements_bytes(count, dtype) + 3) & ~3


def elements_bytes(count: int, dtype: DataType) -> int:
    """The bytes `count` consecutive elements of `dtype` occupy (a started byte counts whole)."""
    return (count * dtype.bits + 7) // 8


def total_bytes(desc: TensorDesc, dtype: DataType) -> int:
    return desc.total_bytes if desc.total_bytes is not None else minimum_bytes(desc, dtype)


def span_elements(sizes: list[int], strides: list[int] | None) -> int:
    """Elements from the first touched to one past the last: dot(Sizes - 1, Strides) + 1 (the
    product of Sizes when packed), 0 when a size is 0. Raises ValueError for what no buffer can
    hold: a negative size or stride, or Strides of another length than Sizes.

    A few integer operations per dimension: it runs on every strided read and write."""
    if strides is None:
        count = 1
        for size in sizes:
            if size < 0:
                raise ValueError(f"Sizes {list(sizes)} has a negative entry")
            count *= size
        return count
    if len(strides) != len(sizes):
        raise ValueError(f"Strides {list(strides)} has {len(strides)} entries, Sizes {list(sizes)} has {len(sizes)}")
    last, empty = 0, False
    for size, stride in zip(sizes, strides):
        if size < 0 or stride < 0:
            raise ValueError(f"negative size or stride (Sizes {list(sizes)}, Strides {list(strides)})")
        if size == 0:
            empty = True
        last += (size - 1) * stride
    return 0 if empty else last + 1


def strided_view(buffer: np.ndarray, desc: TensorDesc, itemsize: int) -> np.ndarray:
    """A view of the logical elements of a flat element buffer (no copy).

    Bounds-checked: raises ValueError, before any view exists, when the descriptor reaches past
    the end of `buffer` (or has negative strides), so a short buffer can never be read out of bounds."""
    if buffer.ndim != 1 or not buffer.flags.c_contiguous:
        raise ValueError("strided_view needs a flat, contiguous element buffer")
    span = span_elements(desc.sizes, desc.strides)
    if span * itemsize > buffer.nbytes:
        raise ValueError(f"the layout (Sizes {list(desc.sizes)}, Strides {effective_strides(desc)}) reaches byte "
                         f"{span * itemsize} of a buffer of {buffer.nbytes} usable bytes ({itemsize}-byte elements)")
    strides = [s * itemsize for s in effective_strides(desc)]
    return np.lib.stride_tricks.as_strided(buffer, shape=tuple(desc.sizes), strides=tuple(strides), writeable=buffer.flags.writeable)


def read_logical(data: bytes, desc: TensorDesc, np_dtype: np.dtype) -> np.ndarray:
    """The logical tensor (shape = Sizes) read through the strides of a raw buffer.

    A read-only view where possible (no copy); callers that need to write must copy. Raises
    ValueError when the layout reaches past the end of `data` (see strided_view).
    """
    np_dtype = np.dtype(np_dtype)
    usable = len(data) - len(data) % np_dtype.itemsize
    flat = np.frombuffer(memoryview(data)[:usable], dtype=np_dtype)
    return strided_view(flat, desc, np_dtype.itemsize)


def unpack_nibbles(data: bytes | np.ndarray, signed: bool) -> np.ndarray:
    """The 4-bit elements of `data`, two per byte, low nibble first: uint8 values 0..15, or int8
    values -8..7 (sign-extended) when `signed`."""
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.astype(np.uint8, copy=False)
    nibbles = np.empty(raw.shape[:-1] + (raw.shape[-1] * 2,), dtype=np.uint8)
    nibbles[..., 0::2] = raw & 0x0F
    nibbles[..., 1::2] = raw >> 4
    if not signed:
        return nibbles
    return ((nibbles ^ 0x08).astype(np.int8) - 8).astype(np.int8)


def pack_nibbles(values: np.ndarray) -> np.ndarray:
    """The bytes holding 4-bit elements (an even count along the last axis), low nibble first:
    the inverse of unpack_nibbles (values taken modulo 16, so -1 is 0xF)."""
    bits = np.asarray(values).astype(np.uint8) & 0x0F  # int8 -> uint8 wraps: -8 is 0xF8, low nibble 8
    return (bits[..., 0::2] | (bits[..., 1::2] << 4)).astype(np.uint8)


def read_tensor(data: bytes, desc: TensorDesc, dtype: DataType) -> np.ndarray:
    """The logical tensor of a DataType: read_logical for byte-sized types; for a 4-bit type the
    nibbles unpacked (a new array) and read through the strides. Raises ValueError when the
    layout reaches past the end of `data`."""
    if dtype.bits >= 8:
        return read_logical(data, desc, dtype.numpy)
    return strided_view(unpack_nibbles(data, dtype.kind == "signed"), desc, 1)


def write_tensor(buffer: bytearray, desc: TensorDesc, dtype: DataType, values: np.ndarray) -> None:
    """write_logical for a DataType: a 4-bit type's values written into their nibbles (the other
    nibble of each byte kept); ValueError (nothing written) when the layout reaches past the end."""
    if dtype.bits >= 8:
        write_logical(buffer, desc, np.asarray(values, dtype=dtype.numpy))
        return
    nibbles = unpack_nibbles(bytes(buffer), False)
    strided_view(nibbles, desc, 1)[...] = np.asarray(values).astype(np.int64).reshape(desc.sizes) & 0x0F
    buffer[:] = pack_nibbles(nibbles).tobytes()


def is_packed(desc: TensorDesc) -> bool:
    return desc.strides is None or list(desc.strides) == packed_strides(desc.sizes) or element_count(desc) == 1


def write_logical(buffer: bytearray, desc: TensorDesc, values: np.ndarray) -> None:
    """Write the logical tensor `values` into `buffer` through the strides of `desc`; ValueError
    (nothing written) when the layout reaches past the end of `buffer` (see strided_view)."""
    values = np.asarray(values)
    usable = len(buffer) - len(buffer) % values.dtype.itemsize
    flat = np.frombuffer(memoryview(buffer)[:usable], dtype=values.dtype)
    view = strided_view(flat, desc, values.dtype.itemsize)
    view[...] = values.reshape(desc.sizes)


def pack_buffer(values: np.ndarray, desc: TensorDesc, dtype: DataType, fill: int = 0) -> bytes:
    """A whole buffer of TotalTensorSizeInBytes holding `values` at their strided places; padding = fill byte."""
    buffer = bytearray([fill & 0xFF]) * total_bytes(desc, dtype)
    write_tensor(buffer, desc, dtype, values)
    return bytes(buffer)


def output_buffer(values: np.ndarray, desc: TensorDesc, dtype: DataType, aliased_input: bytes | None = None) -> bytes:
    """The whole output buffer (TotalTensorSizeInBytes) holding `values` through the output strides;
    an in-place output is written over a copy of the aliased input's buffer."""
    size = total_bytes(desc, dtype)
    if aliased_input is None and is_packed(desc) and size == values.nbytes and dtype.bits >= 8:
        return values.tobytes()  # the common case: one copy
    buffer = bytearray(aliased_input) if aliased_input is not None else bytearray(size)
    if dtype.bits >= 8:
        write_logical(buffer, desc, values)  # values of the output's type, or its raw bits: written as they are
    else:
        write_tensor(buffer, desc, dtype, values)
    return bytes(buffer)


def output_overlaps(desc: TensorDesc, limit: int = 1 << 16) -> bool:
    """True when two distinct logical elements share a memory location.

    Packed layouts never overlap. Otherwise a sufficient condition is tried first (strides sorted
    ascending each clear the span of the smaller ones: no overlap); layouts that fail it are
    decided exactly by enumerating offsets up to `limit` elements, and above that are treated as
    overlapping (interleaved layouts that large are reported, never silently accepted).
    """
    if desc.strides is None or list(desc.strides) == packed_strides(desc.sizes):
        return False
    dims = [(size, stride) for size, stride in zip(desc.sizes, desc.strides) if size > 1]
    if not dims:
        return False
    if any(stride == 0 for _, stride in dims):
        return True
    span = 0
    for size, stride in sorted(dims, key=lambda d: d[1]):
        if stride <= span:
            break
        span += (size - 1) * stride
    else:
        return False
    if element_count(desc) > limit:
        return True
    offsets = np.zeros(1, dtype=np.int64)
    for size, stride in dims:
        offsets = (offsets[:, None] + np.arange(size, dtype=np.int64)[None, :] * stride).ravel()
    return len(np.unique(offsets)) != len(offsets)


def output_buffers(spec: "OperatorSpec", case: "Case", values: "np.ndarray | dict[str, np.ndarray]") -> dict[str, bytes]:
    """Every output field's whole buffer holding `values` (see output_buffer), or each output's own
    values when `values` maps output names to arrays (an operator with several outputs): what a
    backend that computes the formula in NumPy returns."""
    buffers: dict[str, bytes] = {}
    for f in spec.output_fields:
        desc = case.descriptor.tensors[f.name]
        if desc is None:
            continue
        mine = values[f.name] if isinstance(values, dict) else values
        alias = case.descriptor.aliases.get(f.name)
        buffers[f.name] = output_buffer(mine, desc, spec.catalog.dtype(desc.data_type), case.inputs[alias] if alias else None)
    return buffers
