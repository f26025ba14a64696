"""Window index arithmetic, apart from what a window computes: for every output position and
every kernel position, which input position (if any) it reads.

Kept apart from the window family's plug-in so that any operator that slides a window over the
spatial dims of a tensor (a weighted sum here; a pooling's max or average later) reads its
windows the same way, with the same strides, dilations, paddings and transposition.

Per spatial dimension (1-D arithmetic, combined over the dims as row-major products):

- forward: output position o, kernel position k read input position p = o * stride - start + k * dilation;
  a p outside [0, in) is padding (no term: the plug-in decides what padding contributes);
- transposed (the adjoint of forward: each input element p scattered to o = p * stride - start + k * dilation):
  output o reads p = (o + start - k * dilation) / stride where that is a whole number in [0, in), and
  nothing elsewhere, so positions past the scatter's reach (an output padding) read nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np


@dataclass(frozen=True)
class Window:
    """The window geometry of one descriptor, per spatial dimension."""

    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start: tuple[int, ...]
    transposed: bool = False


def _axis(in_size: int, out_size: int, kernel: int, stride: int, dilation: int, start: int,
          transposed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(input position, valid) per (output position, kernel position) of one spatial dimension."""
    o = np.arange(out_size)[:, None]
    k = np.arange(kernel)[None, :]
    if not transposed:
        p = o * stride - start + k * dilation
        valid = (p >= 0) & (p < in_size)
    else:
        scaled = o + start - k * dilation
        p = np.floor_divide(scaled, stride)
        valid = (scaled % stride == 0) & (p >= 0) & (p < in_size)
    return np.where(valid, p, 0), valid


def window_positions(window: Window, in_sizes: tuple[int, ...], out_sizes: tuple[int, ...],
                     kernel: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(flat input spatial index, valid) of shape {prod(out_sizes), prod(kernel)}: row-major over
    the output's spatial positions and over the kernel's. An invalid entry's index is 0."""
    flat = np.zeros((1, 1), dtype=np.int64)
    valid = np.ones((1, 1), dtype=bool)
    for d, (n_in, n_out, n_k) in enumerate(zip(in_sizes, out_sizes, kernel)):
        p, v = _axis(n_in, n_out, n_k, window.strides[d], window.dilations[d], window.start[d], window.transposed)
        # combine row-major: the new dim is the fastest-varying one, on both axes
        flat = (flat[:, None, :, None] * n_in + p[None, :, None, :]).reshape(flat.shape[0] * n_out, flat.shape[1] * n_k)
        valid = (valid[:, None, :, None] & v[None, :, None, :]).reshape(valid.shape[0] * n_out, valid.shape[1] * n_k)
    assert flat.shape == (prod(out_sizes), prod(kernel))
    return flat, valid


def output_padded(out_sizes: tuple[int, ...], output_padding: tuple[int, ...]) -> np.ndarray:
    """Per output spatial position (shape `out_sizes`), whether it is one of the last
    `output_padding[d]` positions of some dimension d: the positions an output padding adds."""
    padded = np.zeros(out_sizes, dtype=bool)
    for d, (n_out, pad) in enumerate(zip(out_sizes, output_padding)):
        shape = [1] * len(out_sizes)
        shape[d] = n_out
        padded = padded | (np.arange(n_out) >= n_out - pad).reshape(shape)
    return padded


def past_reach(window: Window, end: tuple[int, ...], in_sizes: tuple[int, ...], out_sizes: tuple[int, ...],
               kernel: tuple[int, ...]) -> np.ndarray:
    """Per output spatial position (shape `out_sizes`), whether it lies past what the window
    reaches in some dimension: forward, past floor((in + start + end - ((k - 1) * dilation + 1)) /
    stride) + 1 outputs; transposed, past the scattered result, (in - 1) * stride + (k - 1) *
    dilation + 1 - start outputs. Such positions exist only where an output padding adds them."""
    past = np.zeros(out_sizes, dtype=bool)
    for d, (n_in, n_out, n_k) in enumerate(zip(in_sizes, out_sizes, kernel)):
        span = (n_k - 1) * window.dilations[d] + 1
        if window.transposed:
            reach = (n_in - 1) * window.strides[d] + span - window.start[d]
        else:
            reach = (n_in + window.start[d] + end[d] - span) // max(1, window.strides[d]) + 1
        shape = [1] * len(out_sizes)
        shape[d] = n_out
        past = past | (np.arange(n_out) >= reach).reshape(shape)
    return past
