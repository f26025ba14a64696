"""Special values per data type: the ones implementations get wrong.

Built from the catalog (bit width, class, range), so a new data type gets its pool for free.
Floats: +-0, NaN with several payloads (quiet and signalling, both signs), +-inf, the smallest and
largest denormals, the smallest normal, the largest finite, 1, -1, 0.5 and neighbours of 1.
Integers: min, min+1, -1, 0, 1, max-1, max.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from harness.spec.catalog import DataType

_FLOAT_LAYOUT = {16: (10, 5), 32: (23, 8), 64: (52, 11)}  # mantissa bits, exponent bits


@lru_cache(maxsize=None)
def float_special_bits(bits: int) -> tuple[int, ...]:
    """Bit patterns of the special float values of a width."""
    mant, exp = _FLOAT_LAYOUT[bits]
    sign = 1 << (bits - 1)
    exp_all = ((1 << exp) - 1) << mant
    one = ((1 << (exp - 1)) - 1) << mant
    patterns = [
        0, sign,                                      # +0, -0
        exp_all, sign | exp_all,                      # +inf, -inf
        exp_all | (1 << (mant - 1)),                  # quiet NaN
        sign | exp_all | (1 << (mant - 1)),           # negative quiet NaN
        exp_all | 1,                                  # signalling NaN, payload 1
        exp_all | ((1 << mant) - 1),                  # NaN, all payload bits
        exp_all | (1 << (mant - 1)) | 0x5,            # quiet NaN with a payload
        1, sign | 1,                                  # smallest denormals
        (1 << mant) - 1, sign | ((1 << mant) - 1),    # largest denormals
        1 << mant, sign | (1 << mant),                # smallest normals
        exp_all - 1, sign | (exp_all - 1),            # largest finite
        one, sign | one,                              # 1, -1
        one - (1 << mant), one + 1, one - 1,          # 0.5, just above and below 1
    ]
    return tuple(patterns)


def special_values(dtype: DataType) -> np.ndarray:
    """The special values of a data type, as an array of that type."""
    if dtype.is_float:
        return np.array(float_special_bits(dtype.bits), dtype=dtype.bits_numpy).view(dtype.numpy)
    assert dtype.min is not None and dtype.max is not None
    vals = sorted({dtype.min, dtype.min + 1, 0, 1, dtype.max - 1, dtype.max} | ({-1} if dtype.min < 0 else set()))
    return np.array(vals, dtype=dtype.numpy)


def random_values(dtype: DataType, n: int, rng: np.random.Generator, special_fraction: float = 0.3) -> np.ndarray:
    """n values: a mix of special values, random bit patterns and ordinary magnitudes."""
    if n == 0:
        return np.zeros(0, dtype=dtype.numpy)
    if dtype.is_float:
        ordinary = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 9, n))).astype(dtype.numpy)
        raw = rng.integers(0, 1 << dtype.bits, n, dtype=np.uint64, endpoint=False).astype(dtype.bits_numpy).view(dtype.numpy)
        values = np.where(rng.random(n) < 0.5, ordinary, raw)
    else:
        assert dtype.min is not None and dtype.max is not None
        small = rng.integers(-4, 5, n)
        wide = rng.integers(dtype.min, dtype.max, n, endpoint=True, dtype=np.int64 if dtype.bits < 64 or dtype.kind == "signed" else np.uint64)
        values = np.where(rng.random(n) < 0.3, np.clip(small, dtype.min, dtype.max), wide).astype(dtype.numpy)
    specials = special_values(dtype)
    pick = rng.random(n) < special_fraction
    values = values.copy()
    values[pick] = specials[rng.integers(0, len(specials), int(pick.sum()))]
    return values


def all_values(dtype: DataType) -> np.ndarray:
    """Every representable value (bit pattern) of an 8- or 16-bit type, each exactly once, in bit order."""
    if dtype.bits not in (8, 16):
        raise ValueError(f"{dtype.name}: exhaustive sweeps cover 8- and 16-bit types only")
    return np.arange(1 << dtype.bits, dtype=dtype.bits_numpy).view(dtype.numpy)
