"""Start a large case's reference (and its digest) while the backend is still running it.

Why: at 2^20 elements the reference evaluation and the case id's digest take milliseconds (figures:
docs/performance.md), and they do not depend on the backend's answer. NumPy's ufuncs release
the GIL, and the
DirectML runner is another process, so doing this work in a thread during `backend.run` takes it
off the critical path: afterwards the diff finds the reference ready (see ReferenceMemo).
Small cases are not worth a thread hand-off and are left to the diff, as are invalid ones (they
have no reference). One prefetch is in flight at most, so a backend that answers `unsupported`
at once cannot make reference work pile up.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from harness.model.descriptor import Case
from harness.model.layout import element_count
from harness.reference.evaluate import expected_for
from harness.spec.model import OperatorSpec
from harness.model.validator import case_verdict

PREFETCH_MIN_ELEMENTS = 1 << 16

_executor: ThreadPoolExecutor | None = None
_pending: Future | None = None


def _warm(spec: OperatorSpec, case: Case) -> None:
    expected_for(spec, case)  # first: the NumPy backend and the diff wait for it
    case.case_id  # noqa: B018 - remembered on the case; overlaps the diff


def start_reference(spec: OperatorSpec, case: Case, level: str) -> Future | None:
    """Begin computing the reference of `case` in the background when it is large and valid at
    `level`; None when it is left to the diff. Errors surface when the diff asks for it."""
    global _executor, _pending
    out = case.descriptor.tensors.get(spec.formula.output)
    if out is None or element_count(out) < PREFETCH_MIN_ELEMENTS:
        return None
    if not case_verdict(spec, case, level).accepted:
        return None
    if _pending is not None and not _pending.done():
        return None  # one in flight at most: cases the diff never needed must not queue up
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dmlconform-reference")
    _pending = _executor.submit(_warm, spec, case)
    return _pending
