"""Descriptor layouts: sizes, packed / padded / permuted / broadcast strides, larger-than-minimum
buffers and alignment hints, and the tags that name a layout in reports.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.layout import minimum_bytes, packed_strides
from harness.generate.draw import BOOL, SEED, choice, ints


@dataclass(frozen=True)
class GenConfig:
    """Bounds of generated cases."""

    max_elements: int = 64
    max_dim_size: int = 5
    favour_fraction: float = 0.3


DEFAULT_CONFIG = GenConfig()


# --- the generator's own view of the type constraints ---------------------------------------------


@st.composite
def sizes_strategy(draw: st.DrawFn, dim_count: int, config: GenConfig = DEFAULT_CONFIG) -> list[int]:
    sizes, budget = [], config.max_elements
    for _ in range(dim_count):
        size = draw(ints(1, max(1, min(config.max_dim_size, budget))))
        sizes.append(size)
        budget //= size
    if len(sizes) > 1:  # the large sizes must not always come first
        shift = draw(ints(0, len(sizes) - 1))
        sizes = sizes[shift:] + sizes[:shift]
    return sizes


@st.composite
def layout_strategy(draw: st.DrawFn, data_type: str, sizes: list[int], bits: int, is_output: bool) -> TensorDesc:
    """A valid layout: packed (implicit or explicit), padded, permuted, or broadcast (inputs only)."""
    kinds = ("packed", "explicit", "padded", "permuted") + (() if is_output else ("broadcast",))
    kind = draw(choice(kinds))
    n = len(sizes)
    strides: list[int] | None
    if kind == "packed":
        strides = None
    elif kind == "explicit":
        strides = packed_strides(sizes)
    elif kind == "padded":
        strides = [0] * n
        step = draw(choice((1, 1, 2)))
        for i in range(n - 1, -1, -1):
            strides[i] = step
            step = step * sizes[i] + draw(ints(0, 3))
    elif kind == "permuted":
        order = list(range(n))
        np.random.default_rng(draw(SEED)).shuffle(order)
        strides = [0] * n
        step = 1
        for axis in reversed(order):
            strides[axis] = step
            step *= sizes[axis]
    else:
        strides = packed_strides(sizes)
        for i in range(n):
            if sizes[i] > 1 and draw(BOOL):
                strides[i] = 0
    desc = TensorDesc(data_type, list(sizes), strides)
    extra = draw(choice((None, 0, 4, 16, 64)))
    if extra is not None:
        desc.total_bytes = minimum_bytes(desc, _Width(bits)) + extra  # type: ignore[arg-type]
    desc.alignment = draw(choice((0, 16, 32, 256)))
    return desc


@dataclass(frozen=True)
class _Width:
    bits: int


def layout_tags(descriptor: Descriptor) -> list[str]:
    """Tags that name the layout features of a case (for reports and filtering)."""
    tags = set()
    for desc in descriptor.tensors.values():
        if desc is None:
            tags.add("optional-absent")
            continue
        if desc.strides is not None:
            if 0 in desc.strides:
                tags.add("broadcast")
            elif desc.strides != packed_strides(desc.sizes):
                tags.add("strided")
        if desc.total_bytes is not None:
            tags.add("padded-buffer")
    if descriptor.aliases:
        tags.add("in-place")
    return sorted(tags) or ["packed"]


# --- invalid cases: one breaker per rule ------------------------------------------------------------


def reset_layout(desc: TensorDesc) -> None:
    desc.strides = None
    desc.total_bytes = None
