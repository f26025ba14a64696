"""The results a conforming D3D device may return: a spec formula evaluated under the precision model.

The exact reference (`evaluate.py`) gives one correctly rounded value per element. Real hardware
may legally differ from it: fp32 denormals flushed on input and output of any operation, add and
multiply rounded either way, division through a reciprocal (whose flush turns INF / FLT_MAX into
NaN), FLOAT16 computed in FLOAT32 and converted toward zero, min/max returning the non-NaN
operand. The rules come from `specs/_arithmetic.yaml` (`harness.spec.arithmetic`).

Evaluation walks the formula's syntax tree over *value sets*: each element's set of legal values
is a union of parts, each part an interval [lo, hi] (float64; NaN endpoints: no real value), a flag
saying NaN is possible, and tags: the liberties the part needed. Flushes add parts (a flushed
input is the part {+-0}), rounding widens a part's interval to the representable neighbours the
rule allows, and an uncertain comparison gives both truth values, so a rounding that lands within
its bound of a tie accepts both sides. Intervals are closed hulls, so the set is a superset of
the legal results; parts stay small (few elements differ, and only those are evaluated).

Only the functions listed in `_FUNCTIONS` have a model (the transcendental ones through their
per-type bound in `_arithmetic.yaml`'s `functions`); a formula with another one raises
`ModelUnsupported` and the judge falls back to the exact comparison (and says so).
"""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from harness.spec.arithmetic import ArithmeticModel, TypeRules, liberty_bit
from harness.spec.expr import F32_SMALLEST_NORMAL, FUNCTIONS, Formula
from harness.spec.functions import MATH_FUNCTIONS

MAX_PARTS = 32  # parts per value before the extra ones are merged into one hull (over-approximation)
_NUMPY: dict[str, type[np.floating]] = {"FLOAT16": np.float16, "FLOAT32": np.float32, "FLOAT64": np.float64}
_WIDTH = {"FLOAT16": 0, "FLOAT32": 1, "FLOAT64": 2}


class ModelUnsupported(Exception):
    """The formula uses something the precision model has no rule for."""


@dataclass
class Part:
    """One interval of legal values per element (NaN endpoints where the part holds no real value)."""

    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray
    tags: np.ndarray
    is_float: bool

    @property
    def real(self) -> np.ndarray:
        return ~np.isnan(self.lo)

    @property
    def present(self) -> np.ndarray:
        return self.real | self.nan

    def masked(self, keep: np.ndarray, tags: int | np.ndarray = 0) -> "Part":
        """This part only where `keep`, with `tags` added."""
        return Part(np.where(keep, self.lo, np.nan), np.where(keep, self.hi, np.nan), self.nan & keep,
                    self.tags | np.asarray(tags, dtype=np.uint16), self.is_float)


Value = list[Part]


def _point(values: np.ndarray, is_float: bool, n: int) -> Part:
    with np.errstate(invalid="ignore"):  # signalling NaN payloads are quieted, as any float operation does
        v = np.broadcast_to(np.asarray(values, dtype=np.float64), (n,)).copy()
    nan = np.isnan(v)
    return Part(v, v.copy(), nan, np.zeros(n, dtype=np.uint16), is_float)


def _spread(part: Part, spread: np.ndarray) -> Part:
    """`part` widened by `spread` on each side where its value is real (a family's error bound),
    tagged `rounding` where it moved; an infinite spread holds every value, NaN included."""
    with np.errstate(invalid="ignore"):
        wide = part.real & (spread > 0)
        everything = part.real & np.isinf(spread)
        lo = np.where(everything, -np.inf, np.where(wide, part.lo - spread, part.lo))
        hi = np.where(everything, np.inf, np.where(wide, part.hi + spread, part.hi))
    tags = part.tags | np.where(wide, np.uint16(liberty_bit("rounding")), np.uint16(0))
    return Part(lo, hi, part.nan | everything, tags, part.is_float)


def _bool_part(true_possible: np.ndarray, false_possible: np.ndarray, tags: np.ndarray) -> Part:
    any_ = true_possible | false_possible
    lo = np.where(any_, np.where(false_possible, 0.0, 1.0), np.nan)
    hi = np.where(any_, np.where(true_possible, 1.0, 0.0), np.nan)
    return Part(lo, hi, np.zeros(lo.shape, dtype=bool), tags.copy(), False)


# --- rounding to a type, on interval endpoints ---------------------------------------------------

def _down(v: np.ndarray, dtype: Any, err: np.ndarray | None = None) -> np.ndarray:
    """The largest `dtype` value <= the exact value v + err (err: the float64 residual, or None)."""
    with np.errstate(all="ignore"):
        t = v.astype(dtype)
        above = t.astype(np.float64) > v
        if err is not None:
            above |= (t.astype(np.float64) == v) & (err < 0)
        t = np.where(above, np.nextafter(t, dtype(-np.inf)), t)
    return t.astype(np.float64)


def _up(v: np.ndarray, dtype: Any, err: np.ndarray | None = None) -> np.ndarray:
    with np.errstate(all="ignore"):
        t = v.astype(dtype)
        below = t.astype(np.float64) < v
        if err is not None:
            below |= (t.astype(np.float64) == v) & (err > 0)
        t = np.where(below, np.nextafter(t, dtype(np.inf)), t)
    return t.astype(np.float64)


def _nearest(v: np.ndarray, dtype: Any, err: np.ndarray | None = None) -> np.ndarray:
    """Round to nearest even; a residual `err` decides a float64 value lying on a midpoint of `dtype`."""
    with np.errstate(all="ignore"):
        t = v.astype(dtype).astype(np.float64)
        if err is not None and dtype is not np.float64:
            lower, upper = _down(v, dtype), _up(v, dtype)
            midpoint = (lower != upper) & ((lower + upper) / 2 == v) & (err != 0)
            t = np.where(midpoint, np.where(err > 0, upper, lower), t)
    return t


def _round(part: Part, mode: str, dtype: Any, err_lo: np.ndarray | None = None,
           err_hi: np.ndarray | None = None) -> Part:
    """`part`'s exact interval rounded to `dtype` under `mode` (nearest: each endpoint to nearest,
    faithful: outward to the representable neighbours; within_1ulp: as faithful, and an exactly
    representable finite, nonzero end may also move one step out: D3D bounds the reciprocal inside
    fp32 division by 1 ULP with no exactness clause (only double rcp has one), so rcp(-1) may be
    -1 - 2^-23 or -1 + 2^-24; its division table keeps x / 1.0 = x, so an end of exactly 1, the
    reciprocal of 1.0 alone, stays)."""
    if mode == "nearest":
        lo, hi = _nearest(part.lo, dtype, err_lo), _nearest(part.hi, dtype, err_hi)
    else:
        lo, hi = _down(part.lo, dtype, err_lo), _up(part.hi, dtype, err_hi)
        if mode == "within_1ulp":
            lo, hi = _step_out_if_exact(lo, part.lo, err_lo, dtype, -np.inf), _step_out_if_exact(hi, part.hi, err_hi, dtype, np.inf)
    lo = np.where(np.isnan(part.lo), np.nan, lo)
    hi = np.where(np.isnan(part.hi), np.nan, hi)
    return Part(lo, hi, part.nan, part.tags, True)


def _step_out_if_exact(rounded: np.ndarray, exact: np.ndarray, err: np.ndarray | None, dtype: Any,
                       toward: float) -> np.ndarray:
    """`rounded` moved one representable step toward `toward` where it equals the exact value
    (finite, nonzero and not 1: the special values of rcp and D3D's x / 1.0 = x stay exact)."""
    with np.errstate(all="ignore"):
        hit = (rounded == exact) & np.isfinite(exact) & (exact != 0) & (exact != 1.0)
        if err is not None:
            hit &= err == 0
        stepped = np.nextafter(rounded.astype(dtype), dtype(toward)).astype(np.float64)
    return np.where(hit, stepped, rounded)


def _two_sum_error(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The exact residual (a + b) - s of a float64 sum s (Knuth's TwoSum), 0 where not finite."""
    with np.errstate(all="ignore"):
        bb = s - a
        err = (a - (s - bb)) + (b - bb)
    return np.where(np.isfinite(err), err, 0.0)


def _flush_parts(part: Part, tag: int) -> list[Part]:
    """The part with its fp32 denormal values flushed to sign-preserved zero, where it holds any."""
    tiny = F32_SMALLEST_NORMAL
    with np.errstate(invalid="ignore"):
        touches = part.real & (part.lo < tiny) & (part.hi > -tiny) & ~((part.lo == 0) & (part.hi == 0))
    if not touches.any():
        return []
    lo = np.where(part.lo < 0, -0.0, 0.0)
    hi = np.where(part.hi > 0, 0.0, -0.0)
    return [Part(np.where(touches, lo, np.nan), np.where(touches, hi, np.nan), np.zeros_like(touches),
                 part.tags | np.uint16(tag), True)]


def _contains_zero(p: Part) -> np.ndarray:
    return p.real & (p.lo <= 0) & (p.hi >= 0)


def _contains_inf(p: Part) -> np.ndarray:
    return p.real & ((p.hi == np.inf) | (p.lo == -np.inf))


def _end_product(x: np.ndarray, px: Part, y: np.ndarray, py: Part) -> np.ndarray:
    """x * y for ends x of px and y of py. An infinite end of an interval that also holds finite
    values (a bound of inf around a dot product: [-inf, +inf]) times a zero end is that zero, signed,
    not NaN: the finite values near that end give it (the NaN that inf * 0 itself gives is the
    product's NaN flag, set apart). A point infinity times zero stays NaN only."""
    with np.errstate(all="ignore"):
        p = x * y
        limit = np.isnan(p) & ~np.isnan(x) & ~np.isnan(y) & ((np.isinf(x) & (px.lo != px.hi)) | (np.isinf(y) & (py.lo != py.hi)))
        return np.where(limit, np.copysign(0.0, np.copysign(1.0, x) * np.copysign(1.0, y)), p)


def _hull_of(corners: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The smallest interval holding every corner. Zeros keep their signs: nanmin/nanmax see -0 and
    +0 as equal and return either, so a hull whose end is a zero reached as -0 by one corner and +0
    by another (0 * [-2^-24, +0], Alpha 0 times exp(x) - 1 near x = 0) ends in -0 below and +0 above."""
    stack = np.stack(corners)
    with np.errstate(all="ignore"), _quiet_all_nan():
        lo, hi = np.nanmin(stack, axis=0), np.nanmax(stack, axis=0)
        zero = stack == 0
        lo = np.where((lo == 0) & (zero & np.signbit(stack)).any(axis=0), -0.0, lo)
        hi = np.where((hi == 0) & (zero & ~np.signbit(stack)).any(axis=0), 0.0, hi)
    return lo, hi


class _quiet_all_nan:
    """nanmin/nanmax warn on all-NaN slices (an empty part); the NaN they give is what we want."""

    def __enter__(self) -> None:
        import warnings
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


# --- the evaluator -----------------------------------------------------------------------------

@dataclass
class Operand:
    """A formula variable: its values (gathered at the elements asked about) and where it comes from."""

    values: np.ndarray
    source: str            # input | attribute | constant
    data_type: str | None  # the tensor's data type (inputs), FLOAT32 for FLOAT attributes, None otherwise
    # a value a family computed within a bound (matmul's dot product): the variable may be anything in
    # [values - spread, values + spread] (liberty `rounding`); an infinite spread also allows NaN
    spread: np.ndarray | None = None


class LegalEvaluator:
    """Evaluates one formula in one compute type under the model's rules for that type."""

    def __init__(self, model: ArithmeticModel, compute: str, operands: dict[str, Operand], n: int,
                 ctx: Any, base_tags: int = 0) -> None:
        self.model, self.compute = model, compute
        self.rules: TypeRules = model.types[compute]
        self.dtype = _NUMPY[compute]
        self.operands, self.n, self.ctx = operands, n, ctx
        self.base = np.full(n, base_tags, dtype=np.uint16)

    # leaves
    def variable(self, name: str) -> Value:
        op = self.operands.get(name)
        if op is None:
            raise ModelUnsupported(f"no value for {name!r}")
        is_float = op.data_type in _NUMPY or (op.source != "input" and np.asarray(op.values).dtype.kind == "f")
        part = _point(op.values, is_float, self.n)
        part.tags = self.base.copy()
        if op.spread is not None:
            part = _spread(part, np.broadcast_to(np.asarray(op.spread, dtype=np.float64), (self.n,)))
        parts = [part]
        if op.data_type == "FLOAT32" and op.source in ("input", "attribute"):
            liberty = "fp32_input_flush" if op.source == "input" else "fp32_attribute_flush"
            # D3D flushes fp32 inputs of math operations; states (attributes) may be flushed in any
            # compute type; an fp32 input converted to a compute type whose conversions from and to
            # FLOAT32 may flush (FLOAT64, §22.17.1) may lose its denormals there
            if self.rules.flush_denormals or op.source == "attribute" or (op.source == "input" and self.rules.fp32_conversion_flush):
                parts += _flush_parts(part, liberty_bit(liberty))
        if is_float and op.data_type is not None and _WIDTH.get(op.data_type, -1) > _WIDTH[self.compute]:
            narrowed = []
            for p in parts:
                q = _round(p, self.model.conversion_to_compute, self.dtype)
                changed = (q.lo != p.lo) | (q.hi != p.hi)
                q.tags = q.tags | np.where(changed, np.uint16(liberty_bit("attribute_narrowed")), np.uint16(0))
                narrowed.append(q)
            parts = narrowed
        return parts

    def constant(self, value: float | int) -> Value:
        part = _point(np.asarray(value, dtype=np.float64), isinstance(value, float), self.n)
        part.tags = self.base.copy()
        if isinstance(value, float):
            part = _round(part, "nearest", self.dtype)  # a literal is compiled into the compute type
        return [part]

    # results of float operations: rounding, then the fp32 result flush
    def _finish(self, parts: Sequence[tuple[Part, np.ndarray | None, np.ndarray | None]], mode: str) -> Value:
        out: Value = []
        for part, err_lo, err_hi in parts:
            if not part.present.any():
                continue
            if part.is_float:
                part = _round(part, mode, self.dtype, err_lo, err_hi)
                out.append(part)
                if self.rules.flush_denormals:
                    out += _flush_parts(part, liberty_bit("fp32_result_flush"))
            else:
                out.append(part)
        return _limit(out)

    def _float_operand(self, p: Part) -> Part:
        """An integer operand meeting a float one is converted to the compute type (exactly where it fits)."""
        return p if p.is_float else _round(Part(p.lo, p.hi, p.nan, p.tags, True), "nearest", self.dtype)

    def add(self, a: Value, b: Value, negate_b: bool = False) -> Value:
        results = []
        for pa in a:
            for pb in b:
                is_float = pa.is_float or pb.is_float
                if is_float:
                    pa_, pb_ = self._float_operand(pa), self._float_operand(pb)
                else:
                    pa_, pb_ = pa, pb
                blo, bhi = (-pb_.hi, -pb_.lo) if negate_b else (pb_.lo, pb_.hi)
                with np.errstate(all="ignore"):
                    s_lo, s_hi = pa_.lo + blo, pa_.hi + bhi
                    lo, hi = _hull_of([s_lo, s_hi, pa_.lo + bhi, pa_.hi + blo])
                err_lo = _two_sum_error(pa_.lo, blo, s_lo)
                err_hi = _two_sum_error(pa_.hi, bhi, s_hi)
                b_pos_inf = pb_.real & ((bhi == np.inf))
                b_neg_inf = pb_.real & ((blo == -np.inf))
                a_pos_inf, a_neg_inf = pa_.real & (pa_.hi == np.inf), pa_.real & (pa_.lo == -np.inf)
                both = pa_.present & pb_.present
                nan = both & (pa_.nan | pb_.nan | (a_pos_inf & b_neg_inf) | (a_neg_inf & b_pos_inf))
                real = pa_.real & pb_.real
                lo, hi = np.where(real, lo, np.nan), np.where(real, hi, np.nan)
                part = Part(lo, hi, nan, pa.tags | pb.tags, is_float)
                results.append((part, np.where(lo == s_lo, err_lo, 0.0), np.where(hi == s_hi, err_hi, 0.0)))
        return self._finish(results, self.rules.add_sub_mul)

    def _product(self, pa: Part, pb: Part, tags: np.ndarray) -> Part:
        with np.errstate(all="ignore"):
            lo, hi = _hull_of([_end_product(x, pa, y, pb) for x in (pa.lo, pa.hi) for y in (pb.lo, pb.hi)])
        both = pa.present & pb.present
        nan = both & (pa.nan | pb.nan | (_contains_zero(pa) & _contains_inf(pb)) | (_contains_inf(pa) & _contains_zero(pb)))
        real = pa.real & pb.real
        return Part(np.where(real, lo, np.nan), np.where(real, hi, np.nan), nan, tags, pa.is_float or pb.is_float)

    def mul(self, a: Value, b: Value) -> Value:
        results = []
        for pa in a:
            for pb in b:
                if pa.is_float or pb.is_float:
                    pa, pb = self._float_operand(pa), self._float_operand(pb)
                results.append((self._product(pa, pb, pa.tags | pb.tags), None, None))
        return self._finish(results, self.rules.add_sub_mul)

    def _quotient(self, pa: Part, pb: Part, tags: np.ndarray) -> Part:
        with np.errstate(all="ignore"):
            lo, hi = _hull_of([pa.lo / pb.lo, pa.lo / pb.hi, pa.hi / pb.lo, pa.hi / pb.hi])
        straddles = pb.real & (pb.lo < 0) & (pb.hi > 0)
        lo, hi = np.where(straddles, -np.inf, lo), np.where(straddles, np.inf, hi)
        both = pa.present & pb.present
        nan = both & (pa.nan | pb.nan | (_contains_zero(pa) & _contains_zero(pb)) | (_contains_inf(pa) & _contains_inf(pb)))
        real = pa.real & pb.real
        return Part(np.where(real, lo, np.nan), np.where(real, hi, np.nan), nan, tags, True)

    def div(self, a: Value, b: Value) -> Value:
        results: Value = []
        for pa in a:
            for pb in b:
                pa, pb = self._float_operand(pa), self._float_operand(pb)
                tags = pa.tags | pb.tags
                results += self._finish([(self._quotient(pa, pb, tags), None, None)], self.rules.division_direct)
                if self.rules.reciprocal is None:
                    continue
                rcp_mode, mul_mode = self.rules.reciprocal
                one = _point(np.ones(self.n), True, self.n)
                rcp_tags = tags | np.uint16(liberty_bit("reciprocal_division"))
                reciprocals = self._finish([(self._quotient(one, pb, rcp_tags), None, None)], rcp_mode)
                for r in reciprocals:
                    results += self._finish([(self._product(pa, r, r.tags | pa.tags), None, None)], mul_mode)
        return _limit(results)

    def negate(self, a: Value) -> Value:
        return [Part(-p.hi, -p.lo, p.nan, p.tags, p.is_float) for p in a]

    def min_max(self, a: Value, b: Value, which: str) -> Value:
        pick = np.fmin if which == "min" else np.fmax
        out: Value = []
        for pa in a:
            for pb in b:
                tags = pa.tags | pb.tags
                real = pa.real & pb.real
                lo, hi = np.where(real, pick(pa.lo, pb.lo), np.nan), np.where(real, pick(pa.hi, pb.hi), np.nan)
                zeros = _contains_zero(pa) & _contains_zero(pb)  # min(-0, +0) may give either zero
                lo = np.where(zeros & (lo == 0), -0.0, lo)
                hi = np.where(zeros & (hi == 0), 0.0, hi)
                out.append(Part(lo, hi, pa.nan & pb.nan, tags, pa.is_float or pb.is_float))
                if self.rules.min_max_nan == "other_operand":
                    nan_tag = np.uint16(liberty_bit("min_max_nan"))
                    out.append(pb.masked(pa.nan & pb.real, tags | nan_tag))
                    out.append(pa.masked(pb.nan & pa.real, tags | nan_tag))
                else:
                    out[-1].nan = out[-1].nan | ((pa.nan & pb.present) | (pb.nan & pa.present))
        return _limit([p for p in out if p.present.any()])

    # comparisons and logic: value sets of truth values
    def compare(self, op: type, a: Value, b: Value) -> Value:
        out: Value = []
        for pa in a:
            for pb in b:
                both = pa.present & pb.present
                real = pa.real & pb.real
                with np.errstate(invalid="ignore"):
                    if op in (ast.Lt, ast.LtE, ast.Gt, ast.GtE):
                        if op in (ast.Gt, ast.GtE):  # a > b is b < a
                            x, y, strict = pb, pa, op is ast.Gt
                        else:
                            x, y, strict = pa, pb, op is ast.Lt
                        true = real & ((x.lo < y.hi) if strict else (x.lo <= y.hi))
                        false = real & ((x.hi >= y.lo) if strict else (x.hi > y.lo))
                        false |= both & (pa.nan | pb.nan)
                    else:
                        overlap = real & (pa.lo <= pb.hi) & (pb.lo <= pa.hi)
                        single = real & (pa.lo == pa.hi) & (pb.lo == pb.hi) & (pa.lo == pb.lo)
                        true, false = overlap, real & ~single
                        false |= both & (pa.nan | pb.nan)
                        if op is ast.NotEq:
                            true, false = false, true
                out.append(_bool_part(true, false, pa.tags | pb.tags))
        return _limit(out)

    def logic(self, op: str, a: Value, b: Value | None = None) -> Value:
        out: Value = []
        for pa in a:
            ta, fa = pa.real & (pa.hi >= 1), pa.real & (pa.lo <= 0)
            if op == "not":
                out.append(_bool_part(fa, ta, pa.tags))
                continue
            assert b is not None
            for pb in b:
                tb, fb = pb.real & (pb.hi >= 1), pb.real & (pb.lo <= 0)
                both = pa.present & pb.present
                if op == "and":
                    out.append(_bool_part(ta & tb & both, (fa | fb) & both, pa.tags | pb.tags))
                else:
                    out.append(_bool_part((ta | tb) & both, fa & fb & both, pa.tags | pb.tags))
        return _limit(out)

    def select(self, c: Value, a: Value, b: Value) -> Value:
        out: Value = []
        for pc in c:
            may_true, may_false = pc.real & (pc.hi >= 1), pc.real & (pc.lo <= 0)
            out += [p.masked(may_true, pc.tags) for p in a]
            out += [p.masked(may_false, pc.tags) for p in b]
        return _limit([p for p in out if p.present.any()])

    def predicate(self, name: str, a: Value) -> Value:
        tiny = F32_SMALLEST_NORMAL
        out: Value = []
        for p in a:
            real = p.real
            with np.errstate(invalid="ignore"):
                if name == "isnan":
                    true, false = p.nan, real
                elif name == "isinf":
                    true = real & ((p.lo == -np.inf) | (p.hi == np.inf))
                    false = p.nan | (real & ~((p.lo == p.hi) & np.isinf(p.lo)))
                elif name == "is_negzero":
                    true = real & (p.lo <= 0) & (p.hi >= 0) & ((p.lo < 0) | np.signbit(p.lo))
                    false = p.nan | (real & ~((p.lo == 0) & (p.hi == 0) & np.signbit(p.hi)))
                elif name == "is_denormal_f32":
                    true = real & (p.lo < tiny) & (p.hi > -tiny) & ~((p.lo == 0) & (p.hi == 0))
                    false = p.nan | (real & ~((p.lo > -tiny) & (p.hi < tiny) & ((p.lo > 0) | (p.hi < 0))))
                else:  # is_half
                    lo_k, hi_k = np.floor(p.lo - 0.5), np.floor(p.hi - 0.5)
                    finite = real & np.isfinite(p.lo) & np.isfinite(p.hi)
                    true = finite & ((lo_k != hi_k) | (p.lo - 0.5 == lo_k))
                    false = p.nan | (real & ~((p.lo == p.hi) & (p.lo - 0.5 == lo_k)))
            out.append(_bool_part(true, false, p.tags))
        return out

    def _with_result_flush(self, *parts: Part) -> Value:
        """A function's result parts that hold values, each with its fp32 result flush where the
        compute type flushes denormals."""
        out: Value = []
        for part in parts:
            if part.present.any():
                out.append(part)
                if self.rules.flush_denormals:
                    out += _flush_parts(part, liberty_bit("fp32_result_flush"))
        return out

    def exp(self, a: Value) -> Value:
        """exp over each part (monotone): the exact exp rounded to its neighbours (the ordinary
        rounding liberty), and the D3D bound of the type's exp rule, exp(x) * e^(+-argument * |x|)
        * (1 +- relative) rounded outward (liberty exp_error); exp(+-0) = 1, exp(-inf) = +0,
        exp(+inf) = +inf exactly (§22.10.6's table); then the fp32 result flush."""
        if self.rules.exp is None:
            raise ModelUnsupported(f"the precision model has no exp rule for {self.compute}")
        relative, argument = self.rules.exp
        exp_tag = np.uint16(liberty_bit("exp_error"))
        out: Value = []
        for p in a:
            p = self._float_operand(p)
            real = p.real
            with np.errstate(all="ignore"):
                e_lo, e_hi = np.exp(p.lo), np.exp(p.hi)
                # the sign of exact - float64 where float64 gives exactly 1 (|x| < 2^-53): expm1's
                err_lo = np.where(e_lo == 1, np.expm1(p.lo), 0.0)
                err_hi = np.where(e_hi == 1, np.expm1(p.hi), 0.0)
                near = Part(np.where(real, _down(e_lo, self.dtype, err_lo), np.nan),
                            np.where(real, _up(e_hi, self.dtype, err_hi), np.nan), p.nan, p.tags, True)
                shifted_lo = np.where(np.isinf(p.lo), p.lo, p.lo - argument * np.abs(p.lo))
                shifted_hi = np.where(np.isinf(p.hi), p.hi, p.hi + argument * np.abs(p.hi))
                # exp2(+-0) = 1 exactly, but only a part that is the point zero keeps it: a part
                # from 0 to 2^-149 holds exp2(2^-149 * log2(e)) * (1 - 2^-21) below 1 too
                zero = (p.lo == 0) & (p.hi == 0)
                b_lo = np.exp(shifted_lo) * np.where(zero, 1.0, 1.0 - relative)
                b_hi = np.exp(shifted_hi) * np.where(zero, 1.0, 1.0 + relative)
                bound = Part(np.where(real, _down(b_lo, self.dtype), np.nan), np.where(real, _up(b_hi, self.dtype), np.nan),
                             np.zeros_like(p.nan), p.tags | exp_tag, True)
            out += self._with_result_flush(near, bound)
        return _limit(out)

    def math(self, name: str, args: list[Value]) -> Value:
        """A transcendental function (`harness.spec.functions`) over every combination of its
        arguments' parts: the exact range rounded to its neighbours (the ordinary rounding
        liberty), and the range widened by the type's bound for the function (liberty
        function_error), rounded outward; exact zeros and infinities of the function are not
        widened (sin(+-0) = +-0, log(0) = -inf), NaN where an argument is NaN or some point of
        the range lies outside the domain; then the fp32 result flush."""
        bound = self.rules.functions.get(name)
        if bound is None:
            raise ModelUnsupported(f"the precision model has no {name} rule for {self.compute}")
        fn = MATH_FUNCTIONS[name]
        tag = np.uint16(liberty_bit("function_error"))
        out: Value = []
        for combo in itertools.product(*args):
            parts = [self._float_operand(p) for p in combo]
            real = np.logical_and.reduce([p.real for p in parts])
            tags = np.bitwise_or.reduce([p.tags for p in parts])
            ends = [e for p in parts for e in (np.where(real, p.lo, 0.0), np.where(real, p.hi, 0.0))]
            with np.errstate(all="ignore"):
                lo, hi = fn.interval_range(*ends)
                corners = [fn.numpy(*c) for c in itertools.product(*[(p.lo, p.hi) for p in parts])]
            domain_nan = real & np.logical_or.reduce([np.isnan(c) for c in corners])
            nan = np.logical_or.reduce([p.nan for p in parts]) & np.logical_and.reduce([p.present for p in parts])
            has = real & ~np.isnan(lo)
            near = Part(np.where(has, _down(lo, self.dtype), np.nan), np.where(has, _up(hi, self.dtype), np.nan),
                        nan | domain_nan, tags, True)
            with np.errstate(all="ignore"):
                size = np.fmax(np.abs(lo), np.abs(hi))
                slack = bound.absolute + bound.relative * size + bound.ulp * np.spacing(self.dtype(np.minimum(size, np.finfo(self.dtype).max))).astype(np.float64)
                if bound.quadratic:  # tan near its poles: sin's and cos's absolute errors over cos^2
                    slack = slack + bound.quadratic * size * size
                if bound.log2_times_exponent and len(parts) == 2:  # pow(x, y): log2(x)'s error times |y|
                    x_big = np.fmax(np.abs(parts[0].lo), np.abs(parts[0].hi))
                    y_big = np.fmax(np.abs(parts[1].lo), np.abs(parts[1].hi))
                    factor = np.exp2(bound.log2_times_exponent * y_big * np.fmax(1.0, np.abs(np.log2(x_big))))
                    slack = slack + size * (factor - 1)
                exact = (lo == hi) & ((lo == 0) | np.isinf(lo))
                widen = has & ~exact & np.isfinite(lo) & np.isfinite(hi)
                b_lo, b_hi = np.where(widen, lo - slack, np.nan), np.where(widen, hi + slack, np.nan)
            wide = Part(np.where(widen, _down(b_lo, self.dtype), np.nan), np.where(widen, _up(b_hi, self.dtype), np.nan),
                        np.zeros_like(nan), tags | tag, True)
            out += self._with_result_flush(near, wide)
        return _limit(out)

    def remainder(self, name: str, a: Value, b: Value) -> Value:
        """fmod / floor_mod: exact (the remainder of two floats is representable), so a pair of
        point operands gives its point; wider operands give the hull every remainder lies in,
        (-max|b|, max|b|), a superset. NaN where an operand is NaN or the pair is (inf, b) or (a, 0)."""
        f = FUNCTIONS[name][1]
        out: Value = []
        for pa in a:
            for pb in b:
                real = pa.real & pb.real
                point = real & (pa.lo == pa.hi) & (pb.lo == pb.hi)
                with np.errstate(all="ignore"):
                    value = np.asarray(f(None, np.where(point, pa.lo, 0.0), np.where(point, pb.lo, 1.0)), dtype=np.float64)
                    reach = np.fmax(np.abs(pb.lo), np.abs(pb.hi))
                    lo, hi = np.where(point, value, -reach), np.where(point, value, reach)
                    nan = (pa.nan | pb.nan | (real & (np.isnan(lo) | _contains_zero(pb) | _contains_inf(pa)))) & pa.present & pb.present
                    has = real & ~np.isnan(lo)
                out.append(Part(np.where(has, lo, np.nan), np.where(has, hi, np.nan), nan, pa.tags | pb.tags, pa.is_float or pb.is_float))
        return _limit([p for p in out if p.present.any()])

    def unary(self, name: str, a: Value) -> Value:
        out: Value = []
        for p in a:
            with np.errstate(invalid="ignore"):
                if name == "abs":
                    straddle = (p.lo < 0) & (p.hi > 0)
                    lo = np.where(straddle, 0.0, np.minimum(np.abs(p.lo), np.abs(p.hi)))
                    hi = np.maximum(np.abs(p.lo), np.abs(p.hi))
                    out.append(Part(lo, hi, p.nan, p.tags, p.is_float))
                elif name == "round_half_even":  # exact (round_ne), monotone
                    out.append(Part(np.rint(p.lo), np.rint(p.hi), p.nan, p.tags, True))
                elif name in ("round_half_away", "trunc", "floor", "ceil"):  # exact (round_ni/pi/z), monotone
                    f = FUNCTIONS[name][1]
                    out.append(Part(np.asarray(f(None, p.lo)), np.asarray(f(None, p.hi)), p.nan, p.tags, True))
                else:  # f32 / f16: a conversion, rounded to nearest
                    target = np.float32 if name == "f32" else np.float16
                    out.append(Part(_nearest(p.lo, target), _nearest(p.hi, target), p.nan, p.tags, True))
        return out


def _limit(parts: Value) -> Value:
    """At most MAX_PARTS parts: the extra ones merged into a hull (a superset, never a loss)."""
    parts = [p for p in parts if p.present.any()]
    if len(parts) <= MAX_PARTS:
        return parts
    keep, extra = parts[:MAX_PARTS - 1], parts[MAX_PARTS - 1:]
    lo, hi = _hull_of([p.lo for p in extra] + [p.hi for p in extra])  # zeros keep their signs
    nan = np.logical_or.reduce([p.nan for p in extra])
    tags = np.bitwise_or.reduce([p.tags for p in extra])
    return keep + [Part(lo, hi, nan, tags, any(p.is_float for p in extra))]


_BINARY: dict[type, Callable[[LegalEvaluator, Value, Value], Value]] = {
    ast.Add: lambda ev, a, b: ev.add(a, b),
    ast.Sub: lambda ev, a, b: ev.add(a, b, negate_b=True),
    ast.Mult: lambda ev, a, b: ev.mul(a, b),
    ast.Div: lambda ev, a, b: ev.div(a, b),
    ast.BitAnd: lambda ev, a, b: ev.logic("and", a, b),
    ast.BitOr: lambda ev, a, b: ev.logic("or", a, b),
}
_FUNCTIONS = {"where", "min", "max", "clamp", "abs", "exp", "round_half_even", "round_half_away", "trunc", "floor", "ceil", "isnan", "isinf",
              "is_negzero", "is_denormal_f32", "is_half", "f32", "f16", "type_min", "type_max", "is_type", "fmod", "floor_mod",
              *MATH_FUNCTIONS}
_CONSTANT_FUNCTIONS = {"type_min", "type_max", "is_type"}


def evaluate_legal(formula: Formula, ev: LegalEvaluator) -> Value:
    """The value set of `formula` under `ev`'s compute type; ModelUnsupported if it has no model."""
    return _walk(formula.tree.body, ev)


def _walk(node: ast.AST, ev: LegalEvaluator) -> Value:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # a formula's constants are numbers (checked at load: harness.spec.expr)
        return ev.constant(node.value)
    if isinstance(node, ast.Name):
        return ev.variable(node.id)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](ev, _walk(node.left, ev), _walk(node.right, ev))
    if isinstance(node, ast.UnaryOp):
        operand = _walk(node.operand, ev)
        if isinstance(node.op, ast.USub):
            return ev.negate(operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        return ev.logic("not", operand)
    if isinstance(node, ast.BoolOp):
        value = _walk(node.values[0], ev)
        for other in node.values[1:]:
            value = ev.logic("and" if isinstance(node.op, ast.And) else "or", value, _walk(other, ev))
        return value
    if isinstance(node, ast.Compare):
        return ev.compare(type(node.ops[0]), _walk(node.left, ev), _walk(node.comparators[0], ev))
    if isinstance(node, ast.Call):
        name = node.func.id  # type: ignore[attr-defined]
        if name not in _FUNCTIONS:
            raise ModelUnsupported(f"the precision model has no rule for {name}()")
        if name in _CONSTANT_FUNCTIONS:
            literals = [a.id if isinstance(a, ast.Name) else a.value for a in node.args]  # type: ignore[attr-defined]
            value = FUNCTIONS[name][1](ev.ctx, *literals)
            if name == "is_type":
                return [_bool_part(np.full(ev.n, bool(value)), np.full(ev.n, not bool(value)), ev.base.copy())]
            return ev.constant(int(value))
        args = [_walk(a, ev) for a in node.args]
        if name == "where":
            return ev.select(*args)
        if name in ("min", "max"):
            return ev.min_max(args[0], args[1], name)
        if name == "clamp":
            return ev.min_max(ev.min_max(args[0], args[1], "max"), args[2], "min")
        if name in ("isnan", "isinf", "is_negzero", "is_denormal_f32", "is_half"):
            return ev.predicate(name, args[0])
        if name == "exp":
            return ev.exp(args[0])
        if name in MATH_FUNCTIONS:
            return ev.math(name, args)
        if name in ("fmod", "floor_mod"):
            return ev.remainder(name, args[0], args[1])
        return ev.unary(name, args[0])
    raise ModelUnsupported(f"the precision model has no rule for {type(node).__name__}")


# --- a case's legal results, and whether a backend's values are among them ---------------------

def _popcount(tags: np.ndarray) -> np.ndarray:
    count = np.zeros(tags.shape, dtype=np.int64)
    for bit in range(16):
        count += (tags >> np.uint16(bit)) & np.uint16(1)
    return count


def _fewest_liberties(matches: Iterable[tuple[Part, np.ndarray]], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Which elements some part matches, and for each the tags of the matching part that needed the
    fewest liberties (ties: the smaller tag value)."""
    accepted = np.zeros(shape, dtype=bool)
    best = np.full(shape, np.iinfo(np.int64).max)
    tags = np.zeros(shape, dtype=np.uint16)
    for p, match in matches:
        count = _popcount(p.tags)
        better = match & ((count < best) | ((count == best) & (p.tags < tags)))
        best = np.where(better, count, best)
        tags = np.where(better, p.tags, tags)
        accepted |= match
    return accepted, tags


def contains(parts: Value, actual: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of `actual`'s values (float64) lie in the value set, and the fewest liberties each needed."""
    a_nan = np.isnan(actual)
    a_zero = actual == 0
    a_neg = np.signbit(actual)

    def matches() -> Iterator[tuple[Part, np.ndarray]]:
        for p in parts:
            with np.errstate(invalid="ignore"):
                inside = p.real & (p.lo <= actual) & (actual <= p.hi)
                # zeros: -0 only if the part reaches below zero or holds -0, +0 likewise above
                neg_ok = (p.lo < 0) | ((p.lo == 0) & np.signbit(p.lo))
                pos_ok = (p.hi > 0) | ((p.hi == 0) & ~np.signbit(p.hi))
                inside &= ~a_zero | np.where(a_neg, neg_ok, pos_ok)
            yield p, np.where(a_nan, p.nan, inside)
    return _fewest_liberties(matches(), actual.shape)


def contains_integers(parts: Value, actual: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """As `contains`, for an integer output: a part's real values [lo, hi] written to the integer
    type `dtype` give every integer from trunc(lo) to trunc(hi) (toward zero, saturated: monotone),
    compared exactly in the integer type (float64 would merge neighbours beyond 2^53). NaN parts
    match nothing (an integer output holds no NaN)."""
    from harness.reference.rounding import float_to_integer

    def matches() -> Iterator[tuple[Part, np.ndarray]]:
        for p in parts:
            lo, hi = float_to_integer(p.lo, dtype), float_to_integer(p.hi, dtype)
            yield p, p.real & (lo <= actual) & (actual <= hi)
    return _fewest_liberties(matches(), actual.shape)


def may_be_true(parts: Value) -> tuple[np.ndarray, np.ndarray]:
    """Where a truth-valued set can be true, and the fewest liberties that makes it so."""
    true = np.zeros(parts[0].lo.shape if parts else (0,), dtype=bool)
    best = np.full(true.shape, np.iinfo(np.int64).max)
    tags = np.zeros(true.shape, dtype=np.uint16)
    for p in parts:
        match = p.real & (p.hi >= 1)
        count = _popcount(p.tags)
        better = match & (count < best)
        best = np.where(better, count, best)
        tags = np.where(better, p.tags, tags)
        true |= match
    return true, tags


def compute_types(model: ArithmeticModel, tensor_types: list[str]) -> tuple[str, ...]:
    """The compute types a formula over tensors of these types may run in (first: the native one);
    () when no tensor is a float (integer formulas are exact)."""
    floats = [t for t in tensor_types if t in _WIDTH]
    if not floats:
        return ()
    widest = max(floats, key=_WIDTH.__getitem__)
    return model.compute_in.get(widest, (widest,))


def legal_values(model: ArithmeticModel, formula: Formula, operands: dict[str, Operand], n: int, ctx: Any,
                 out_type: str, tensor_types: list[str], convert_output: bool = True) -> Value:
    """The union over the allowed compute types of the formula's value set, converted to `out_type`."""
    result: Value = []
    for index, compute in enumerate(compute_types(model, tensor_types)):
        base = liberty_bit("fp16_in_fp32") if index > 0 else 0
        ev = LegalEvaluator(model, compute, operands, n, ctx, base)
        parts = evaluate_legal(formula, ev)
        if convert_output and out_type in _WIDTH:
            parts = _convert_to_output(model, parts, compute, out_type, native=index == 0)
        result += parts
    return result


def _convert_to_output(model: ArithmeticModel, parts: Value, compute: str, out_type: str, native: bool) -> Value:
    """The formula's value set written to a float output: an integer value (a conversion from an integer
    type) rounded by the output type's `convert_from_integer` rule, a float value of a wider compute
    type by `convert_from_wider`; FLOAT32 written from a compute type whose FLOAT32 conversions may
    flush (FLOAT64) may also be a sign-preserved zero. A rounding that moves the native compute
    type's value (a FLOAT32 -> FLOAT16 conversion) is the `rounding` liberty; on the fp16-in-fp32 path it
    is that path's own conversion, already named."""
    rules, dtype = model.types[out_type], _NUMPY[out_type]
    out: Value = []
    for p in parts:
        if not p.is_float:
            mode = rules.convert_from_integer
        elif _WIDTH[out_type] < _WIDTH[compute]:
            mode = rules.convert_from_wider
        else:
            out.append(p)
            continue
        q = _round(p, mode, dtype)
        if native or not p.is_float:
            with np.errstate(invalid="ignore"):
                moved = p.real & ((q.lo != p.lo) | (q.hi != p.hi))
            q.tags = q.tags | np.where(moved, np.uint16(liberty_bit("rounding")), np.uint16(0))
        out.append(q)
        if out_type == "FLOAT32" and model.types[compute].fp32_conversion_flush:
            out += _flush_parts(q, liberty_bit("fp32_result_flush"))
    return _limit(out)
