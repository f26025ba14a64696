"""The formula language's math and bit functions beyond `exp` and `sqrt`, one table entry each.

A transcendental function needs three things, which this module keeps together so that adding
one is one entry: its float64 value (what the reference rounds to the output type), its value to
many digits (mpmath, for the rare elements whose float64 result lies near a rounding midpoint of
the output type, where rounding twice could differ from rounding once), and its range over an
interval of arguments (the precision model evaluates formulas over value sets: a flushed or
faithfully rounded operand is an interval). What D3D hardware may return around the exact value
is the precision model's per-function rule (`specs/_arithmetic.yaml`, `functions`), not this.

The bit functions work on integer values in their own NumPy type (int64 for signed tensors,
uint64 for UINT64; under `operands: raw_bits` the unsigned bit patterns).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

import numpy as np

EXACT_DIGITS = 120  # significant decimal digits of the exact path (as exp's decimal path in expr.py)


def _float(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 (NumPy has none): math.erf per element, within 1 ULP of float64."""
    import math
    x = _float(x)
    flat = x.reshape(-1)
    out = np.fromiter((math.erf(v) if v == v else v for v in flat.tolist()), dtype=np.float64, count=flat.size)
    return out.reshape(x.shape)


def erfc(x: Any) -> np.ndarray:
    """erfc = 1 - erf in float64 (NumPy has none): math.erfc per element, accurate relative to its
    result where 1 - erf(x) cancels (x large)."""
    import math
    x = _float(x)
    flat = x.reshape(-1)
    out = np.fromiter((math.erfc(v) if v == v else v for v in flat.tolist()), dtype=np.float64, count=flat.size)
    return out.reshape(x.shape)


def _quiet(f: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def call(*args: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            return f(*[_float(a) for a in args])
    return call


# --- ranges over intervals (the precision model) --------------------------------------------------

def _monotone(f: Callable[..., np.ndarray]) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A monotone function (either direction): its ends, ordered (fmin/fmax: an end outside the
    domain, NaN, gives way to the other)."""
    def rng(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = f(lo), f(hi)
        return np.fmin(a, b), np.fmax(a, b)
    return rng


def _periodic(f: Callable[..., np.ndarray], peak: float) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """sin/cos over [lo, hi]: the ends, widened to +-1 where a maximum (peak + 2k pi) or a minimum
    (peak + pi + 2k pi) lies inside."""
    def rng(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = f(lo), f(hi)
        low, high = np.fmin(a, b), np.fmax(a, b)
        with np.errstate(all="ignore"):
            has_max = np.floor((hi - peak) / (2 * np.pi)) >= np.ceil((lo - peak) / (2 * np.pi))
            has_min = np.floor((hi - peak - np.pi) / (2 * np.pi)) >= np.ceil((lo - peak - np.pi) / (2 * np.pi))
            point = lo == hi
        return np.where(has_min & ~point, -1.0, low), np.where(has_max & ~point, 1.0, high)
    return rng


def _tan_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """tan increases between its poles (pi/2 + k pi); an interval holding a pole holds every value."""
    a, b = np.tan(lo), np.tan(hi)
    with np.errstate(all="ignore"):
        pole = (np.floor((hi - np.pi / 2) / np.pi) >= np.ceil((lo - np.pi / 2) / np.pi)) & (lo != hi)
    return np.where(pole, -np.inf, a), np.where(pole, np.inf, b)


def _cosh_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.cosh(lo), np.cosh(hi)
    straddles = (lo < 0) & (hi > 0)
    return np.where(straddles, 1.0, np.minimum(a, b)), np.maximum(a, b)


def _corners(f: Callable[..., np.ndarray]) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """A two-argument function whose extremes over a box lie at its corners (pow for a positive
    base: exp(y ln x), bilinear in (y, ln x) under a monotone exp)."""
    def rng(alo: np.ndarray, ahi: np.ndarray, blo: np.ndarray, bhi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import warnings
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all corners NaN: NaN, as wanted
            values = np.stack([f(a, b) for a in (alo, ahi) for b in (blo, bhi)])
            return np.nanmin(values, axis=0), np.nanmax(values, axis=0)
    return rng


def _atan2_range(ylo: np.ndarray, yhi: np.ndarray, xlo: np.ndarray, xhi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """atan2 is monotone in each argument away from its branch cut (y = 0, x < 0): corners, and
    [-pi, pi] where the box crosses the cut."""
    lo, hi = _corners(np.arctan2)(ylo, yhi, xlo, xhi)
    cut = (ylo <= 0) & (yhi >= 0) & (xlo < 0) & ((ylo != yhi) | (xlo != xhi))
    return np.where(cut, -np.pi, lo), np.where(cut, np.pi, hi)


# pow over a box: its corners. Exact for a positive base (exp(y ln x) is bilinear in (y, ln x)
# under a monotone exp), a point, or one integer exponent (monotone in the base on each side of
# 0); a negative base under a range of exponents holds NaN at the fractional ones, which the
# precision model adds from the corners.
_pow_range = _corners(np.power)


# --- exact values (mpmath) ----------------------------------------------------------------------

def _mp() -> Any:
    import mpmath
    mpmath.mp.dps = EXACT_DIGITS
    return mpmath


EXACT_EXPONENT_LIMIT = 4096  # binary exponents beyond +-2^4096: outside the exact path's range


def _to_fraction(value: Any) -> Fraction:
    """An mpmath value as an exact fraction; one far beyond float64's range (2^+-4096) is refused
    (ArithmeticError, so NotExact: the element keeps its float64 rounding): pow(0.999, 4e9) as a
    fraction has a 5.7-million-bit denominator, and the arithmetic after it never ends (an Adam
    Beta ** T with a random UINT32 step)."""
    mp = _mp()
    if not mp.isfinite(value):
        raise ArithmeticError("not finite")
    # mpmath's `man_exp` is the magnitude's (mpf(-0.5).man_exp == (1, -1)): the sign is the raw
    # tuple's first member, and a negative value read without it came out positive (sin of a
    # negative denormal was +x)
    sign, man, exp, _ = mp.mpf(value)._mpf_
    if man and abs(int(exp) + int(man).bit_length()) > EXACT_EXPONENT_LIMIT:
        raise ArithmeticError("beyond the exact path's range")
    return (-1 if sign else 1) * Fraction(int(man)) * (Fraction(2) ** int(exp))


def _exact(name: str) -> Callable[..., Fraction]:
    def call(*args: Fraction) -> Fraction:
        mp = _mp()
        values = [mp.mpf(a.numerator) / mp.mpf(a.denominator) for a in args]
        if name == "pow":
            return _to_fraction(mp.power(values[0], values[1]))
        if name == "atan2":
            return _to_fraction(mp.atan2(values[0], values[1]))
        result = getattr(mp, name)(values[0])
        if isinstance(result, mp.mpc):
            raise ArithmeticError("outside the real domain")
        return _to_fraction(result)
    return call


def exact_value(name: str) -> Callable[[list[float]], Fraction]:
    """The exact value (mpmath, EXACT_DIGITS) of a reduction over float64 values, as a Fraction:
    `log_sum` (log of the sum), `log_sum_exp` (log of the sum of exponentials). ArithmeticError
    outside the real domain or far beyond float64's range."""
    def call(values: list[float]) -> Fraction:
        mp = _mp()
        if name == "log_sum_exp":
            total = mp.fsum(mp.exp(mp.mpf(v)) for v in values)
        else:
            total = mp.fsum(mp.mpf(v) for v in values)
        if total <= 0:
            raise ArithmeticError("log of a sum that is not positive")
        return _to_fraction(mp.log(total))
    return call


@dataclass(frozen=True)
class MathFunction:
    """A transcendental function of the formula language."""

    arity: int
    numpy: Callable[..., np.ndarray]
    exact: Callable[..., Fraction]
    interval_range: Callable[..., tuple[np.ndarray, np.ndarray]]  # (lo, hi[, lo2, hi2]) -> (low, high)
    meaning: str


def _unary(f: Callable[[np.ndarray], np.ndarray], mp_name: str, meaning: str) -> MathFunction:
    """A monotone function of one argument."""
    q = _quiet(f)
    return MathFunction(1, q, _exact(mp_name), _monotone(q), meaning)


MATH_FUNCTIONS: dict[str, MathFunction] = {
    "sqrt": _unary(np.sqrt, "sqrt", "the square root; sqrt(-0) = -0, NaN below zero"),
    "log": _unary(np.log, "log", "natural logarithm; log(+-0) = -inf, log(x < 0) = NaN"),
    "sin": MathFunction(1, _quiet(np.sin), _exact("sin"), _periodic(_quiet(np.sin), np.pi / 2), "sine (radians)"),
    "cos": MathFunction(1, _quiet(np.cos), _exact("cos"), _periodic(_quiet(np.cos), 0.0), "cosine (radians)"),
    "tan": MathFunction(1, _quiet(np.tan), _exact("tan"), _tan_range, "tangent (radians)"),
    "asin": _unary(np.arcsin, "asin", "arcsine in [-pi/2, pi/2]; NaN outside [-1, 1]"),
    "acos": _unary(np.arccos, "acos", "arccosine in [0, pi]; NaN outside [-1, 1]"),
    "atan": _unary(np.arctan, "atan", "arctangent in [-pi/2, pi/2]"),
    "sinh": _unary(np.sinh, "sinh", "hyperbolic sine"),
    "cosh": MathFunction(1, _quiet(np.cosh), _exact("cosh"), _cosh_range, "hyperbolic cosine"),
    "tanh": _unary(np.tanh, "tanh", "hyperbolic tangent"),
    "asinh": _unary(np.arcsinh, "asinh", "inverse hyperbolic sine"),
    "acosh": _unary(np.arccosh, "acosh", "inverse hyperbolic cosine; NaN below 1"),
    "atanh": _unary(np.arctanh, "atanh", "inverse hyperbolic tangent; +-inf at +-1, NaN beyond"),
    "erf": _unary(_erf, "erf", "the error function"),
    "atan2": MathFunction(2, _quiet(np.arctan2), _exact("atan2"), _atan2_range,
                          "atan2(y, x): the angle of (x, y) in [-pi, pi], IEEE/C99 atan2 at zeros and infinities"),
    "pow": MathFunction(2, _quiet(np.power), _exact("pow"), _pow_range,
                        "pow(x, y) = x^y, C99 pow at zeros, infinities and negative bases"),
}


# --- exact float functions without rounding ---------------------------------------------------------

def _fmod(a: Any, b: Any) -> Any:
    """The remainder of a / b truncated toward zero, with a's sign (C fmod); integers: 0 where b = 0
    (specs mark integer division by zero unspecified)."""
    with np.errstate(all="ignore"):
        if np.asarray(a).dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
            return np.where(np.asarray(b) == 0, 0, np.fmod(a, np.where(np.asarray(b) == 0, 1, b)))
        return np.fmod(_float(a), _float(b))


def _floor_mod(a: Any, b: Any) -> Any:
    """The remainder of a / b rounded toward -inf, with b's sign (Python's %); integers: 0 where b = 0."""
    with np.errstate(all="ignore"):
        if np.asarray(a).dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
            return np.where(np.asarray(b) == 0, 0, np.mod(a, np.where(np.asarray(b) == 0, 1, b)))
        return np.mod(_float(a), _float(b))


def _same_int_types(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two integer operands in one NumPy type (uint64 next to int64 would make NumPy use float64)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == np.uint64 or b.dtype == np.uint64:
        return a.astype(np.uint64), b.astype(np.uint64)
    return a.astype(np.int64), b.astype(np.int64)


def _shift(a: Any, n: Any, left: bool) -> np.ndarray:
    """a shifted by n bits, n taken as is (no masking to the width: specs say what a count at or past
    the width gives). Counts of 64 and more give 0 (left, or right of a non-negative value) or -1
    (right of a negative signed value); a negative count is treated as 0."""
    value = np.asarray(a)
    raw = np.asarray(n)
    count = (np.minimum(raw, 64) if raw.dtype.kind == "u" else np.clip(raw, 0, 64)).astype(np.int64)
    kind = value.dtype if value.dtype.kind in "iu" else np.dtype(np.int64)
    value = value.astype(kind)
    small = np.minimum(count, 63).astype(kind)
    with np.errstate(all="ignore"):
        shifted = np.left_shift(value, small) if left else np.right_shift(value, small)
    past = count >= 64
    if left or kind.kind == "u":
        return np.where(past, kind.type(0), shifted)
    return np.where(past, np.where(value < 0, kind.type(-1), kind.type(0)), shifted)


def _bitwise(f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda ctx, a, b: f(*_same_int_types(a, b))


# name -> (arity, implementation taking (ctx, *args), meaning); integer-only
BIT_FUNCTIONS: dict[str, tuple[int, Callable[..., Any], str]] = {
    "bitand": (2, _bitwise(np.bitwise_and), "bitwise AND of two integer values (two's complement)"),
    "bitor": (2, _bitwise(np.bitwise_or), "bitwise OR"),
    "bitxor": (2, _bitwise(np.bitwise_xor), "bitwise XOR"),
    "shl": (2, lambda ctx, a, n: _shift(a, n, True), "a shifted left by n bits (bits past the value's type wrap away)"),
    "shr": (2, lambda ctx, a, n: _shift(a, n, False), "a shifted right by n bits, arithmetic for signed values, logical for unsigned"),
    "popcount": (1, lambda ctx, v: np.bitwise_count(np.asarray(v)).astype(np.int64),
                 "the number of set bits (use with operands: raw_bits; a negative int64 counts its sign extension)"),
}

# name -> (arity, implementation taking (ctx, *args)); exact for any number type
EXACT_VALUE_FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "floor": (1, lambda ctx, v: np.floor(_float(v))),
    "ceil": (1, lambda ctx, v: np.ceil(_float(v))),
    "fmod": (2, lambda ctx, a, b: _fmod(a, b)),
    "floor_mod": (2, lambda ctx, a, b: _floor_mod(a, b)),
}


def exact_fmod(a: Fraction, b: Fraction) -> Fraction:
    if b == 0:
        raise ArithmeticError("fmod by zero")
    q = a / b
    return a - b * (q.numerator // q.denominator if q >= 0 else -((-q.numerator) // q.denominator))


def exact_floor_mod(a: Fraction, b: Fraction) -> Fraction:
    if b == 0:
        raise ArithmeticError("floor_mod by zero")
    return a - b * ((a / b).numerator // (a / b).denominator)
