"""Small cached Hypothesis draws shared by the generators (uniform choices, integer ranges, seeds)."""
from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")

from functools import lru_cache

from hypothesis import strategies as st

INDEX = st.integers(0, 2**16 - 1)
SEED = st.integers(0, 2**32 - 1)
BOOL = st.booleans()


@lru_cache(maxsize=None)
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Strategies are cached: building one per draw costs more than the draw."""
    return st.integers(lo, hi)


@lru_cache(maxsize=None)
def choice(items: tuple) -> st.SearchStrategy:
    return st.sampled_from(items)


def uniform(draw: st.DrawFn, items: Sequence[T]) -> T:
    """An even choice (Hypothesis's own choices favour the first items and small integers)."""
    return items[draw(INDEX) % len(items)]
