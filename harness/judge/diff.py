"""The diff engine: a backend's result against the reference, under the spec's comparison rules.

Classifications (`Status`): pass; mismatch (a failure); diverges-on-unspecified (informational:
the backend differs only where the docs leave the result open, or at rounding ties); unsupported
(the backend cannot express the case: not a pass); rejected-valid (a failure); accepted-invalid
(a failure for backends that validate DirectML descriptors); crashed (a failure, the run goes on);
rejected-invalid (the expected rejection: a pass for invalid cases).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, NamedTuple

import numpy as np

from harness.judge.status import FAILURES, Status, severity
from harness.model.backend import Crashed, Outputs, Rejected, RunResult, Unsupported
from harness.model.descriptor import Case
from harness.model.layout import elements_bytes, read_tensor, span_elements
from harness.reference.evaluate import Expected, expected_for
from harness.reference.facts import ElementFacts
from harness.spec.catalog import DataType
from harness.spec.model import Comparison, OperatorSpec
from harness.model.validator import NULL_OUTPUT_REASON, case_verdict, null_optional_outputs

PASS, MISMATCH, UNSPECIFIED = Status.PASS, Status.MISMATCH, Status.UNSPECIFIED
UNSUPPORTED, REJECTED_VALID, ACCEPTED_INVALID = Status.UNSUPPORTED, Status.REJECTED_VALID, Status.ACCEPTED_INVALID
CRASHED, REJECTED_INVALID = Status.CRASHED, Status.REJECTED_INVALID
MAX_REPORTED = 10


@dataclass
class ElementReport:
    index: tuple[int, ...]
    inputs: dict[str, str]
    expected: str
    actual: str
    expected_hex: str
    actual_hex: str
    ulp: int | None


@dataclass
class DiffResult:
    status: Status
    summary: str
    output: str | None = None
    data_type: str | None = None
    elements: int = 0
    mismatch_count: int = 0
    unspecified_count: int = 0
    tie_count: int = 0
    legal_count: int = 0       # elements accepted only under the precision model
    liberties: dict[str, int] = field(default_factory=dict)  # liberty name -> elements that needed it
    first: list[ElementReport] = field(default_factory=list)
    # ULP distance of every element, flat (float outputs that failed or diverged; None otherwise)
    ulp_errors: np.ndarray | None = None
    bad_mask: np.ndarray | None = None    # elements that failed the comparison (None: none did)
    expected: Expected | None = None
    unspecified_reasons: list[str] = field(default_factory=list)
    legal_note: str | None = None  # why the precision model could not judge (the comparison was exact)
    # the largest error the backend made that was accepted (passes and divergences alike), for
    # "how much of each bound do devices use" (docs/precision-model.md): the most ULPs apart any
    # finite float element was, and the largest share of its explicit allowance (the spec's or its
    # family's atol, or an ULP comparison's max_ulp) any element used; None: no element differed,
    # or none had such an allowance
    max_ulps: int | None = None
    max_abs: float | None = None  # the largest |got - expected| of those elements
    bound_use: float | None = None

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def table(self) -> str:
        """The first mismatching elements, as a table people read."""
        if not self.first:
            return ""
        rows = [("index", "inputs", "expected", "actual", "expected hex", "actual hex", "ULP")]
        for e in self.first:
            rows.append((str(list(e.index)), ", ".join(f"{k}={v}" for k, v in e.inputs.items()), e.expected, e.actual,
                         e.expected_hex, e.actual_hex, "" if e.ulp is None else str(e.ulp)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def render(self) -> str:
        parts = [f"{self.status}: {self.summary}"]
        if self.first:
            parts.append(self.table())
        return "\n".join(parts)


def _hex(value: np.generic) -> str:
    arr = np.asarray(value)
    width = arr.dtype.itemsize
    return f"0x{int(arr.view(f'uint{width * 8}')):0{width * 2}x}"


def _fmt(value: np.generic) -> str:
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        v = float(arr)
        if np.isnan(v):
            return "nan"
        if v == 0:
            return "-0.0" if np.signbit(v) else "0.0"
        return repr(np.float32(v).item()) if arr.dtype == np.float32 else repr(arr.item())
    return str(arr.item())


def ordered_key(values: np.ndarray) -> np.ndarray:
    """Floats mapped to integers that count representable values: ULP distance is a difference.
    +0 and -0 both map to 0."""
    width = values.dtype.itemsize * 8
    ints = values.view(f"int{width}").astype(np.int64)
    minimum = np.int64(-(1 << (width - 1)))
    return np.where(ints < 0, minimum - ints, ints)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|key(a) - key(b)| as Python-safe int64 (float64 keys may overflow: clipped).

    The difference is taken in uint64, where it is exact (it is below 2^64), then clipped to
    int64's maximum: in int64, float64 keys of opposite signs wrapped around (2.0 against -2.0
    gave -2^63, within any max_ulp)."""
    ka, kb = ordered_key(a), ordered_key(b)
    with np.errstate(over="ignore"):
        diff = np.maximum(ka, kb).astype(np.uint64) - np.minimum(ka, kb).astype(np.uint64)
    return np.minimum(diff, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(f"uint{values.dtype.itemsize * 8}")


def _rules_ok(comparison: Comparison, expected: np.ndarray, actual: np.ndarray,
              atol: np.ndarray | None) -> np.ndarray:
    """The float comparison rules on elements that differ bit for bit."""
    e_nan, a_nan = np.isnan(expected), np.isnan(actual)
    if comparison.nan_payload == "exact":
        width = expected.dtype.itemsize * 8
        nan_ok = e_nan & a_nan & (expected.view(f"uint{width}") == actual.view(f"uint{width}"))
    else:
        nan_ok = e_nan & a_nan
    both_zero = (expected == 0) & (actual == 0)
    zero_ok = both_zero & (np.signbit(expected) == np.signbit(actual))
    if comparison.kind == "exact":
        value_ok = (expected == actual) & ~both_zero
    else:
        ulps = ulp_distance(expected, actual)
        finite = np.isfinite(expected) & np.isfinite(actual)
        value_ok = (expected == actual) & ~both_zero  # infinities must match exactly
        within = finite & ~both_zero & (ulps <= comparison.max_ulp)
        if atol is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                within |= finite & ~both_zero & (np.abs(expected.astype(np.float64) - actual.astype(np.float64)) <= atol)
        value_ok |= within
    return np.where(e_nan | a_nan, nan_ok, value_ok | zero_ok)


def _near_same_sign(expected: np.ndarray, actual: np.ndarray, max_ulp: int) -> np.ndarray:
    """Elements that pass the ULP rule for the plainest reason: both finite, same sign bit, at
    most `max_ulp` representable values apart (for floats of one sign the bit patterns count the
    values between them). This is what a backend that rounds differently produces in most
    differing elements; deciding it in a few integer passes keeps them out of the full rules
    (NaN, signed zeros, infinities, atol), which see the rest."""
    signed = np.dtype(f"int{expected.dtype.itemsize * 8}")
    a, b = expected.view(signed), actual.view(signed)
    exponent = np.array(np.inf, dtype=expected.dtype).view(signed)  # all exponent bits set
    finite = ((a & exponent) != exponent) & ((b & exponent) != exponent)
    with np.errstate(over="ignore"):
        distance = np.abs(a - b)  # same sign: no wrap-around beyond the type's range
    return finite & ((a ^ b) >= 0) & (distance <= max_ulp) & (distance >= 0)


def _accepted(comparison: Comparison, expected: np.ndarray, actual: np.ndarray,
              atol: Callable[[np.ndarray], np.ndarray | None]) -> np.ndarray:
    """Which elements that differ bit for bit the spec's rules accept. `atol(positions)` gives
    the absolute slack at those positions of these arrays (evaluated only if needed)."""
    if comparison.kind == "bitwise" or expected.dtype.kind in "iub":
        return np.zeros(expected.shape, dtype=bool)
    ok = np.zeros(expected.shape, dtype=bool)
    if comparison.kind == "ulp" and comparison.max_ulp > 0:
        ok = _near_same_sign(expected, actual, comparison.max_ulp)
    rest = np.flatnonzero(~ok)
    if rest.size:
        ok[rest] = _rules_ok(comparison, expected[rest], actual[rest], atol(rest))
    return ok


def _read_output(spec: OperatorSpec, case: Case, buffers: dict[str, bytes], expected: Expected,
                 name: str) -> tuple[DataType, np.ndarray, np.ndarray] | DiffResult:
    """The output's type, reference and logical backend array, or the mismatch of a missing or short buffer."""
    desc = case.descriptor.tensors[name]
    assert desc is not None
    out_type = spec.catalog.dtype(desc.data_type)
    want = expected.outputs[name]
    if name not in buffers:
        return DiffResult(MISMATCH, f"the backend returned no {name}", name, out_type.name)
    need = elements_bytes(span_elements(desc.sizes, desc.strides), out_type)
    if len(buffers[name]) < need:  # never read past what the backend returned
        return DiffResult(MISMATCH, f"the backend returned {len(buffers[name])} bytes of {name}; its layout needs {need}",
                          name, out_type.name)
    return out_type, want, read_tensor(buffers[name], desc, out_type)


def _differing(want: np.ndarray, got: np.ndarray) -> tuple[int, np.ndarray | None]:
    """The fast path: element count and flat indices that differ bit for bit (None: all identical)."""
    same = _bits(want) == _bits(got)
    if same.all():
        return int(same.size), None
    return int(same.size), np.flatnonzero(~same)


class Settlement(NamedTuple):
    """How the judge settled the differing elements (masks over them)."""

    legal: np.ndarray        # accepted only under the precision model
    tags: np.ndarray         # the liberties each legal element needed
    ties: np.ndarray         # an integer result rounding a tie the other way
    unspecified: np.ndarray  # where the docs leave the result open (as given, or reached through a liberty)
    bad: np.ndarray          # failed
    reasons: list[str]       # the unspecified rules met
    model_asked: bool        # some element needed the precision model (the comparison did not accept it)


def _settle_differences(comparison: Comparison, facts: ElementFacts, out_type: DataType, want_d: np.ndarray,
                        got_d: np.ndarray) -> Settlement:
    """Masks over the differing elements (legal, ties, unspecified, bad), the liberty tags of the
    legal ones and the unspecified rules met: the spec's comparison first, then the precision
    model, then rounding ties, then the unspecified regions (exact, or reached through a
    liberty). A pure function of the values and the reference's facts about them."""
    def atol_at(positions: np.ndarray) -> np.ndarray | None:
        return None if facts.atol is None else facts.atol[positions]

    ok = _accepted(comparison, want_d, got_d, atol_at)
    model_asked = bool((~ok).any())  # the precision model judges what the comparison does not accept
    legal = ~ok & facts.legal
    tags = np.where(legal, facts.legal_tags, np.uint16(0)).astype(np.uint16)
    ok = ok | legal
    ties = np.zeros(want_d.shape, dtype=bool)
    unspecified_d = np.zeros(want_d.shape, dtype=bool)
    reasons: list[str] = []
    if facts.ties is not None and out_type.kind != "float":
        near = np.abs(got_d.astype(np.int64) - want_d.astype(np.int64)) <= 1
        ties = ~ok & facts.ties & near
    if not (ok | ties).all():
        unspecified_d = facts.unspecified.copy()
        reasons = list(facts.unspecified_reasons)
        rest = ~ok & ~ties & ~unspecified_d
        for reason, reached in facts.reachable:
            hit = reached & rest
            if hit.any():
                unspecified_d |= hit
                if reason not in reasons:
                    reasons.append(reason)
    unspecified_d = ~ok & ~ties & unspecified_d
    bad_d = ~ok & ~ties & ~unspecified_d
    return Settlement(legal, tags, ties, unspecified_d, bad_d, reasons, model_asked)


def liberty_counts(expected: Expected, tags: np.ndarray) -> dict[str, int]:
    """How many elements needed each liberty (an element accepted with no tag needed only the
    per-operation rounding the model allows)."""
    model = expected.spec.catalog.arithmetic
    counts: dict[str, int] = {}
    values, numbers = np.unique(tags, return_counts=True)
    for value, number in zip(values, numbers):
        names = model.names(int(value)) or [model.liberty_names["rounding"]]
        for liberty in names:
            counts[liberty] = counts.get(liberty, 0) + int(number)
    return counts


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _report_rows(expected: Expected, want: np.ndarray, got: np.ndarray, ulps: np.ndarray | None,
                 shown: np.ndarray) -> list[ElementReport]:
    """Report rows (index, inputs, values, hex, ULP) for the first MAX_REPORTED flat indices of `shown`."""
    rows = []
    for flat in shown[:MAX_REPORTED]:
        where = np.unravel_index(int(flat), want.shape)
        inputs = {}
        for var, arr in expected.variables.items():
            arr = np.asarray(arr)
            if arr.shape != want.shape and arr.size != 1 and not _broadcasts(arr.shape, want.shape):
                continue  # another output's variable (an output tensor array's items differ in shape)
            value = arr[where] if arr.shape == want.shape else (arr.reshape(-1)[0] if arr.size == 1 else np.broadcast_to(arr, want.shape)[where])
            inputs[var] = _fmt(value) + (f" ({_hex(value)})" if np.asarray(value).dtype.kind == "f" else "")
        rows.append(ElementReport(tuple(int(i) for i in where), inputs, _fmt(want[where]), _fmt(got[where]),
                                  _hex(want[where]), _hex(got[where]),
                                  int(ulps[flat]) if ulps is not None and not (np.isnan(want[where]) or np.isnan(got[where])) else None))
    return rows


def _set_verdict(result: DiffResult, comparison: Comparison, out_type: DataType, bad_d: np.ndarray,
                 unspecified_d: np.ndarray, ties: np.ndarray) -> None:
    """Set `result`'s status and summary from its counts and the masks of bad, unspecified and tie elements."""
    name = result.output
    notes = []
    if result.legal_note:  # the judge fell back to the exact comparison
        notes.append(f"precision model not applied: {result.legal_note}")
    if result.legal_count:
        taken = ", ".join(f"{liberty} x{count}" for liberty, count in sorted(result.liberties.items()))
        notes.append(f"{result.legal_count} element(s) legal under the D3D precision model ({taken})")
    if bad_d.any():
        result.status = MISMATCH
        result.summary = (f"{result.mismatch_count} of {result.elements} elements of {name} ({out_type.name}) differ "
                          f"under '{comparison.kind}' comparison" + (f"; {'; '.join(notes)}" if notes else ""))
    elif unspecified_d.any() or ties.any():
        result.status = UNSPECIFIED
        parts = []
        if unspecified_d.any():
            parts.append(f"{result.unspecified_count} element(s) differ where the docs leave the result unspecified "
                         f"({', '.join(result.unspecified_reasons) or 'see spec'})")
        if ties.any():
            parts.append(f"{result.tie_count} element(s) round a tie the other way")
        result.summary = "; ".join(parts + notes)
    else:
        result.summary = f"{result.elements} elements of {name} ({out_type.name}) match" + (f"; {'; '.join(notes)}" if notes else "")


def compare_outputs(spec: OperatorSpec, case: Case, buffers: dict[str, bytes], expected: Expected | None = None) -> DiffResult:
    """Compare a backend's output buffers with the reference.

    Elements equal bit for bit pass at once (the common case costs one comparison of the bits).
    The rules (NaN, signed zeros, ULPs, the spec's atol, fp32 denormal flushes, rounding ties,
    unspecified regions) are then applied to the elements that differ only, gathered by index.
    """
    expected = expected or expected_for(spec, case)
    names = [f.name for f in spec.output_fields if f.name in expected.outputs]
    results = [_compare_output(spec, case, buffers, expected, name) for name in names]
    return results[0] if len(results) == 1 else combine_outputs(results)


def combine_outputs(results: list[DiffResult]) -> DiffResult:
    """One result for an operator with several outputs (values and their indices): the worst
    output's status, rows and masks, every output's summary, the counts summed."""
    worst = min(results, key=lambda r: severity(r.status))
    combined = replace(worst, summary="; ".join(r.summary for r in results),
                       elements=sum(r.elements for r in results), mismatch_count=sum(r.mismatch_count for r in results),
                       unspecified_count=sum(r.unspecified_count for r in results), tie_count=sum(r.tie_count for r in results),
                       legal_count=sum(r.legal_count for r in results),
                       unspecified_reasons=sorted({x for r in results for x in r.unspecified_reasons}))
    liberties: dict[str, int] = {}
    for r in results:
        for k, v in r.liberties.items():
            liberties[k] = liberties.get(k, 0) + v
    combined.liberties = liberties
    seen = [r.max_ulps for r in results if r.max_ulps is not None]
    largest = [r.max_abs for r in results if r.max_abs is not None]
    used = [r.bound_use for r in results if r.bound_use is not None]
    combined.max_ulps, combined.max_abs = (max(seen) if seen else None), (max(largest) if largest else None)
    combined.bound_use = max(used) if used else None
    masks = [r.bad_mask for r in results if r.bad_mask is not None]
    if len(masks) > 1 and all(m.shape == masks[0].shape for m in masks):
        # outputs of one shape (an optimizer's parameters and moments): an element fails where
        # any output fails there, so that an expectation explains the case element by element
        combined.bad_mask = np.logical_or.reduce(masks)
    return combined


def _error_seen(comparison: Comparison, facts: ElementFacts, want_d: np.ndarray, got_d: np.ndarray,
                accepted: np.ndarray) -> tuple[int | None, float | None, float | None]:
    """Over the differing elements that did not fail (`accepted`): the most ULPs apart a finite
    float pair is, the largest absolute difference, and the largest share of an explicit bound any of them used: |got - expected| /
    atol (the spec's), ULPs / max_ulp (an ULP comparison), |got - exact| / bound (a family's error
    bound). What a bound is measured against: how close devices come."""
    if want_d.dtype.kind != "f" or not accepted.any():
        return None, None, None
    with np.errstate(invalid="ignore", over="ignore"):
        w64, g64 = want_d.astype(np.float64), got_d.astype(np.float64)
        finite = accepted & np.isfinite(w64) & np.isfinite(g64)
        if not finite.any():
            return None, None, None
        ulps = ulp_distance(want_d[finite], got_d[finite])
        most = int(ulps.max())
        largest = float(np.abs(w64[finite] - g64[finite]).max())
        use: float | None = None
        if facts.atol is not None:
            atol = np.broadcast_to(np.asarray(facts.atol, dtype=np.float64), want_d.shape)[finite]
            bounded = np.isfinite(atol) & (atol > 0)
            if bounded.any():
                use = float((np.abs(w64[finite] - g64[finite])[bounded] / atol[bounded]).max())
        if comparison.kind == "ulp" and comparison.max_ulp > 0:
            use = max(use or 0.0, most / comparison.max_ulp)
        share = getattr(facts, "bound_share", None)  # a family plug-in's error bound (FamilyResult.bounds)
        if share is not None:
            picked = np.asarray(share)[accepted]
            picked = picked[np.isfinite(picked)]
            if picked.size:
                use = max(use or 0.0, float(picked.max()))
    return most, largest, use


def _compare_output(spec: OperatorSpec, case: Case, buffers: dict[str, bytes], expected: Expected, name: str) -> DiffResult:
    """compare_outputs for the output field `name`."""
    read = _read_output(spec, case, buffers, expected, name)
    if isinstance(read, DiffResult):
        return read
    out_type, want, got = read
    comparison = spec.comparison_for(out_type.name)
    compared, index = _differing(want, got)
    if index is None:
        return DiffResult(PASS, f"{compared} elements of {name} ({out_type.name}) match", name, out_type.name,
                          elements=compared, expected=expected)

    facts = expected.element_facts(name, index, got.reshape(-1)[index])
    settled_as = _settle_differences(comparison, facts, out_type, want.reshape(-1)[index], got.reshape(-1)[index])
    legal, tags, ties, unspecified_d, bad_d, reasons = settled_as[:6]
    settled = not (bad_d.any() or unspecified_d.any() or ties.any())
    bad = None
    if bad_d.any():  # for the expectations, which match explained divergences element by element
        bad = np.zeros(want.shape, dtype=bool)
        bad.reshape(-1)[index[bad_d]] = True
    ulps = None
    if want.dtype.kind == "f" and (not settled or legal.any()):  # for the ULP picture attached to failures and divergences
        with np.errstate(invalid="ignore"):
            ulps = np.where(np.isnan(want) | np.isnan(got), 0, ulp_distance(want, got)).reshape(-1)
    result = DiffResult(PASS, "", name, out_type.name, elements=int(want.size), mismatch_count=int(bad_d.sum()),
                        unspecified_count=int(unspecified_d.sum()), tie_count=int(ties.sum()), legal_count=int(legal.sum()),
                        liberties=liberty_counts(expected, tags[legal]) if legal.any() else {},
                        ulp_errors=ulps, unspecified_reasons=reasons,
                        bad_mask=bad, expected=expected, legal_note=facts.legal_note if settled_as.model_asked else None)
    # what a bound accepted: not the unspecified elements (any value is legal there) nor the ties
    # (either rounding is), which said nothing of the bound and showed shares of 10^6
    result.max_ulps, result.max_abs, result.bound_use = _error_seen(comparison, facts, want.reshape(-1)[index],
                                                                    got.reshape(-1)[index], ~(bad_d | unspecified_d | ties))
    shown = index[bad_d] if bad_d.any() else (index[unspecified_d | ties] if (unspecified_d | ties).any() else index[legal])
    result.first = _report_rows(expected, want, got, ulps, shown)
    _set_verdict(result, comparison, out_type, bad_d, unspecified_d, ties)
    return result


def judge(spec: OperatorSpec, case: Case, run_result: RunResult, backend_validates: bool,
          device_level: str | None = None) -> DiffResult:
    """Classify one backend result for one case.

    A case built invalid at a lower level may be valid on a newer device: validity is judged at
    `device_level` (default: the case's level), so such a case must then be accepted and computed.
    """
    kind = run_result.kind
    level = device_level or case.feature_level
    verdict = case_verdict(spec, case, level)
    # `kind` says which of RunResult's shapes this is; an Outputs has no reason, the others no buffers
    if kind == "crashed":
        assert not isinstance(run_result, Outputs)
        return DiffResult(CRASHED, run_result.reason)
    if kind == "unsupported":
        assert not isinstance(run_result, Outputs)
        return DiffResult(UNSUPPORTED, run_result.reason)
    if not verdict.accepted:
        if kind == "rejected":
            assert not isinstance(run_result, Outputs)
            return DiffResult(REJECTED_INVALID, f"rejected as expected ({', '.join(sorted(verdict.rule_ids))}): {run_result.reason}")
        if not backend_validates:
            return DiffResult(UNSUPPORTED, "the backend does not validate DirectML descriptors; invalid case not applicable")
        return DiffResult(ACCEPTED_INVALID, f"accepted a descriptor that breaks {verdict.summary()}")
    if kind == "rejected":
        assert not isinstance(run_result, Outputs)
        return DiffResult(REJECTED_VALID, f"rejected a descriptor valid at FL {level}: {run_result.reason}")
    assert not isinstance(run_result, (Rejected, Unsupported, Crashed))
    null = null_optional_outputs(spec, case, level)
    if null:  # accepted, as it must be; nothing to compare its values with
        return DiffResult(UNSUPPORTED, "accepted; " + NULL_OUTPUT_REASON.format(names=", ".join(null)))
    return compare_outputs(spec, case, run_result.buffers)
