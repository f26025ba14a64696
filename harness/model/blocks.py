"""Blocked operands: a tensor whose every size divides the output's, each of its elements standing
for a block of consecutive output elements (blockwise quantization's scales and zero points: an
INT4 weight of {N, K} with one scale per 32 elements of a row has scales of {N, K / 32}).

A size of 1 is the broadcast case, so a blocked operand also broadcasts. A spec names its blocked
formula inputs (`formula.blocked`); the reference, the generator's favoured values and the
worst-legal backend spread them to the output's shape with `spread_blocks` before any elementwise
arithmetic, so everything downstream sees one value per output element.
"""
from __future__ import annotations

import numpy as np


def spread_blocks(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`values` repeated along each trailing axis to `shape`: element i of an axis of size s covers
    elements i * (S / s) .. (i + 1) * (S / s) - 1 of the output's size S there. Leading axes of
    `shape` that `values` lacks (a batch axis) are broadcast. Raises ValueError where a size does
    not divide the output's (the descriptor breaks the spec's sizes rule: nothing to compute)."""
    values = np.asarray(values)
    if values.ndim == 0 or values.shape == tuple(shape):
        return values
    if values.ndim > len(shape):
        raise ValueError(f"a blocked operand of shape {values.shape} has more dimensions than {tuple(shape)}")
    offset = len(shape) - values.ndim
    for axis in range(values.ndim):
        have, want = values.shape[axis], shape[offset + axis]
        if have == want:
            continue
        if have == 0 or want % have:
            raise ValueError(f"size {have} does not divide {want} (axis {axis} of {values.shape} against {tuple(shape)})")
        values = np.repeat(values, want // have, axis=axis)
    return np.broadcast_to(values, shape)
