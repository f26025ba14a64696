"""From a float64 evaluation to the output type's bits, the same on every machine.

The reference evaluates formulas in float64 with NumPy and rounds once to the output type. Two
things about that float64 value depend on the CPU NumPy runs on (its SIMD dispatch: AVX-512,
AVX2, the baseline), and this module removes both, so that a case gives the same reference bits
everywhere:

- A computed NaN's sign and payload: float64 `arccos(2)` is -NaN on one SIMD path and +NaN on
  another. D3D lets a device return any NaN from arithmetic (and the judge ignores NaN payloads),
  so the reference writes the one canonical quiet NaN (`canonical_nans`) for every computed
  result. Data movement (a spec comparing bit for bit: `kind: bitwise`) keeps payloads as they are.
- The last bits of a transcendental function (exp, sinh, cbrt, tan, ...): NumPy's vectorised
  float64 implementations are within a few float64 ULPs, not correctly rounded, and differ
  between paths. Rounding such a value to float32/float16 is still correct unless it lies next to
  a rounding boundary of the output type; the elements within `TRANSCENDENTAL_WINDOW` float64
  ULPs of one (`midpoint_candidates`; every value in the output's subnormal range) are computed
  again exactly (mpmath to 120 digits, or Fractions) and rounded once (`round_fraction`). Every
  path then gives the correctly rounded result, which does not depend on the path.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Mapping

import numpy as np

from harness.spec.expr import Formula, NotExact, evaluate_exact

# A float64 result of a transcendental formula is trusted to within this many float64 ULPs (NumPy's
# SIMD functions are within 4; the operations around them add half an ULP each). Results closer to
# a rounding boundary of the output type than this are decided exactly. A formula whose float64
# error could exceed the window (exp of a huge product, a cancellation other than exp(a) - 1) is
# not shipped; if one were, a result float64 misrounds would still be judged against the legal set
# of the precision model, whose bounds are far wider than one ULP of the output.
TRANSCENDENTAL_WINDOW = 64

_CANONICAL_NAN_BITS = {np.dtype(np.float16): (np.uint16, 0x7E00),
                       np.dtype(np.float32): (np.uint32, 0x7FC00000),
                       np.dtype(np.float64): (np.uint64, 0x7FF8000000000000)}


def canonical_nans(values: np.ndarray) -> np.ndarray:
    """`values` with every NaN replaced by the type's canonical quiet NaN (+, payload 0: 0x7FC00000
    for FLOAT32, 0x7E00 for FLOAT16), in place where possible; non-float arrays unchanged."""
    values = np.asarray(values)
    kind = _CANONICAL_NAN_BITS.get(values.dtype)
    if kind is None:
        return values
    nan = np.isnan(values)
    if not nan.any():
        return values
    out = values if values.flags.writeable else values.copy()
    bits_type, pattern = kind
    out[nan] = np.array(pattern, dtype=bits_type).view(values.dtype)
    return out


def midpoint_candidates(result: np.ndarray, out: np.dtype, window: int = 0) -> np.ndarray:
    """Elements of a float64 result that may sit on a rounding midpoint of the float output type
    (within `window` float64 ULPs of one, for results float64 holds only approximately)."""
    if out == np.float64:
        return np.zeros(result.shape, dtype=bool)
    mantissa_bits = {np.dtype(np.float32): 23, np.dtype(np.float16): 10}[np.dtype(out)]
    drop = 52 - mantissa_bits
    bits = np.ascontiguousarray(result, dtype=np.float64).view(np.uint64)
    low = bits & np.uint64((1 << drop) - 1)
    if window:
        # |low - half| <= window: shifted so that the window starts at zero
        # (unsigned: a value below the window wraps around to the top)
        candidates = (low - np.uint64((1 << (drop - 1)) - window)) <= np.uint64(2 * window)
    else:
        candidates = low == np.uint64(1 << (drop - 1))
    # In the output's subnormal range the rounding position is higher: there, every non-zero
    # value is a candidate (the exponent field of the float64 is below the output's normal range).
    # |result| as bits, minus one, wraps zero around to the top: one unsigned compare then finds
    # the non-zero values below the output's smallest normal.
    threshold = np.float64(np.finfo(out).tiny).view(np.uint64)
    magnitude_minus_one = (bits & np.uint64(0x7FFFFFFFFFFFFFFF)) - np.uint64(1)
    candidates |= magnitude_minus_one < threshold - np.uint64(1)
    return candidates


def round_fraction(q: Fraction, out: np.dtype) -> np.generic | np.ndarray:
    """Round an exact value once to the float type `out` (nearest, ties to even)."""
    with np.errstate(over="ignore"):  # beyond the type: inf, whose finite neighbour is tried too
        guess = np.asarray(float(q)).astype(out)
    with np.errstate(over="ignore"):
        candidates = [guess, np.nextafter(guess, out.type(np.inf)), np.nextafter(guess, out.type(-np.inf))]
    finite = [c for c in candidates if np.isfinite(c)]

    def key(c: np.generic) -> tuple[Fraction, int]:
        even = int(np.asarray(c).view(f"uint{out.itemsize * 8}")) & 1
        return (abs(Fraction(float(c)) - q), even)

    if np.isinf(guess):  # q at or beyond the rounding boundary above the largest finite value is inf
        largest = np.finfo(out).max
        below = float(np.nextafter(largest, out.type(0)))  # the gap above the largest equals the gap below it
        if abs(q) >= Fraction(float(largest)) + (Fraction(float(largest)) - Fraction(below)) / 2:
            return guess
    return min(finite, key=key) if finite else guess


def round_near_midpoints(raw: np.ndarray, result: np.ndarray, window: int,
                         exact_at: Callable[[tuple[int, ...]], Fraction | None]) -> None:
    """Correct `result` (the float64 `raw` rounded to the output type) in place where `raw` lies
    within `window` float64 ULPs of a rounding midpoint: `exact_at(index)` gives the exact value
    there (None: none can be had, the float64 rounding stays)."""
    if raw.dtype != np.float64 or result.dtype == np.float64:
        return
    fix = midpoint_candidates(raw, result.dtype, window) & np.isfinite(raw)
    if not fix.any():
        return
    for index in zip(*np.nonzero(fix)):
        exact = exact_at(tuple(int(i) for i in index))
        if exact is not None:
            result[index] = round_fraction(Fraction(exact), result.dtype)


def round_formula_near_midpoints(expression: Formula, variables: Mapping[str, Any], raw: np.ndarray,
                                 result: np.ndarray, window: int) -> None:
    """`round_near_midpoints` for a formula's float64 result `raw`: the exact value of an element
    is the formula evaluated with Fractions over its variables there (none where a variable is
    not finite or the formula has no exact form: that element keeps its float64 rounding)."""
    shape = result.shape
    broadcast = {n: np.broadcast_to(np.asarray(v), shape) for n, v in variables.items()}

    def exact_at(index: tuple[int, ...]) -> Fraction | None:
        env = {}
        try:
            for n, values in broadcast.items():
                v = values[index]
                if not np.isfinite(v):
                    return None
                env[n] = Fraction(int(v)) if np.asarray(v).dtype.kind in "iu" else Fraction(float(v))
            return Fraction(evaluate_exact(expression, env))
        except NotExact:
            return None

    round_near_midpoints(raw, result, window, exact_at)


def float_to_integer(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float values written to an integer type: toward zero; NaN gives 0 and values beyond the
    type saturate at its ends, as D3D's ftoi/ftou do (the specs mark those regions unspecified
    where the docs leave them open; this keeps the reference defined there, never C's undefined
    conversion). The type's ends are compared in float64, where 2^63 - 1 and 2^64 - 1 round up
    to 2^63 and 2^64: every value at or beyond them is out of range."""
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        wide = np.asarray(values).astype(np.float64)
        nan = np.isnan(wide)
        high = wide >= float(info.max)
        low = wide <= float(info.min)
        out = np.where(nan | high | low, 0.0, wide).astype(dtype)
    out[high] = info.max
    out[low] = info.min
    return out
