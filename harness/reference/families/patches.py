"""Patches: the window family's combines that move windows into columns and back (im2col, col2im).

The windows are the convolution's and the pooling's (harness.reference.families.windowing:
strided, dilated, over the zero-padded spatial dimensions); the window grid has, per spatial
dimension d, blocks[d] = (size[d] + start[d] + end[d] - dilation[d] * (window[d] - 1) - 1) // stride[d] + 1
positions, and L = prod(blocks) windows in all, row-major.

- im2col: {N, C, spatial...} -> {N, C * K, L} (K = prod(window_size)): output [n, c * K + k, l] is
  the input element of channel c that kernel position k of window l reads, or a zero where it reads
  the padding. Data movement: the elements are copied bit for bit (D3D: moving data alters
  nothing), the padding is +0, so there is no legal alternative and specs compare bitwise.
- col2im: the adjoint, {N, C * K, L} -> {N, C, spatial...}: each output position sums every column
  element whose (window, kernel position) reads it, i.e. the transposed window of the same
  geometry over the block grid (windowing's `transposed`, whose gaps and padding read nothing). The
  sum of a variable number of terms is an arithmetic pooling's `sum`: this module only builds the
  window slots (which column element each (output position, kernel position) reads) and hands
  them to harness.reference.families.pooling, whose exact value, bound variables (N the terms
  summed), fp32 input flush and legal device then apply unchanged; the spec states the bound.
"""
from __future__ import annotations

from math import prod

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families import data_movement, pooling
from harness.reference.families.result import FamilyResult
from harness.reference.families.windowing import Window, window_positions
from harness.spec.model import OperatorSpec


def _geometry(spec: OperatorSpec, descriptor: Descriptor, rank: int) -> tuple[tuple[int, ...], Window, tuple[int, ...]]:
    """(window sizes, window, end padding) of the descriptor's `rank` spatial dimensions."""
    family = spec.formula.family
    assert family is not None
    names, _ = expression_scope(spec, descriptor)
    p = family.params

    def ints(key: str, default: int) -> tuple[int, ...]:
        return tuple(int(v) for v in names[p[key]]) if p.get(key) else (default,) * rank

    return ints("window_size", 1), Window(ints("strides", 1), ints("dilations", 1), ints("start", 0)), ints("end", 0)


def blocks(spatial: tuple[int, ...], kernel: tuple[int, ...], window: Window, end: tuple[int, ...]) -> tuple[int, ...]:
    """The number of window positions per spatial dimension (the window grid)."""
    return tuple((s + window.start[d] + end[d] - window.dilations[d] * (kernel[d] - 1) - 1) // max(1, window.strides[d]) + 1
                 for d, s in enumerate(spatial))


def _input(spec: OperatorSpec, inputs: dict[str, np.ndarray]) -> tuple[str, np.ndarray]:
    family = spec.formula.family
    assert family is not None
    var = next(v for v, t in spec.formula.inputs.items() if t == family.params["input"])
    return var, np.asarray(inputs[var])


def im2col(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    """Every window's elements as one column: {N, C, spatial...} -> {N, C * K, L}, +0 on the padding."""
    var, x = _input(spec, inputs)
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    kernel, window, end = _geometry(spec, descriptor, x.ndim - 2)
    grid = blocks(tuple(x.shape[2:]), kernel, window, end)
    positions, valid = window_positions(window, tuple(x.shape[2:]), grid, kernel)  # {L, K}
    n, c = x.shape[:2]
    values = x.reshape(n, c, -1)[..., positions]  # {N, C, L, K}
    zero = np.zeros((), dtype=x.dtype)  # +0 of the type: the implicit zero padding
    columns = np.where(valid, values, zero).transpose(0, 1, 3, 2).reshape(n, c * prod(kernel), -1)
    out_type = spec.catalog.dtype(out_desc.data_type)
    result = np.ascontiguousarray(columns.reshape(tuple(out_desc.sizes))).astype(out_type.numpy, copy=False)
    family_result = FamilyResult({out_name: result})
    # the formula's variable per output element, the value moved there, as the formula binds its
    # inputs: the bit patterns under `operands: raw_bits` (what an expectation's `when` reads, as for
    # an element-wise copy), else the values
    moved = result.view(out_type.bits_numpy) if spec.formula.operands == "raw_bits" else result
    family_result.summaries[var] = moved
    family_result.unspecified[out_name] = data_movement._unspecified(spec, descriptor, var, moved)
    return family_result


def col2im_windows(spec: OperatorSpec, descriptor: Descriptor, x: np.ndarray) -> pooling._Windows:
    """The column elements each output position {n, c, spatial...} sums, as pooling's window slots
    {N, C, P, K}: slot k of position q holds column c * K + k of the block whose kernel position k
    lands on q (the transposed window over the block grid), where there is one."""
    out_desc = descriptor.tensors[spec.formula.output]
    assert out_desc is not None
    out_shape = tuple(out_desc.sizes)
    n, c = out_shape[0], out_shape[1]
    kernel, window, end = _geometry(spec, descriptor, len(out_shape) - 2)
    grid = blocks(out_shape[2:], kernel, window, end)
    transposed = Window(window.strides, window.dilations, window.start, transposed=True)
    positions, valid = window_positions(transposed, grid, out_shape[2:], kernel)  # {P, K}: the block read
    kk, count = prod(kernel), prod(grid)
    columns = x.reshape(n, c, kk, count)
    slot = np.arange(kk)[None, :]
    values = columns[:, :, slot, positions]  # {N, C, P, K}
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * kk
    flat = ((base[:, :, None, None] + slot[None, None]) * count + positions[None, None])
    return pooling._Windows(values, valid, flat, out_shape, kernel)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    if family.params["combine"] == "im2col":
        return im2col(spec, descriptor, inputs)
    return pooling.compute(spec, descriptor, inputs, col2im_windows)


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """im2col: the copy itself; col2im: pooling's legal device over the same slots (the sum at the
    edge of the spec's bound)."""
    family = spec.formula.family
    assert family is not None
    if family.params["combine"] == "im2col":
        return im2col(spec, descriptor, inputs).outputs
    return pooling.legal_device(spec, descriptor, inputs, rng, col2im_windows)
