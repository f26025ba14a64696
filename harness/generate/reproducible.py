"""Hypothesis draws that depend on the strategy and the seed alone, not on what was imported.

Hypothesis (6.131 and later) mixes "local constants" into its draws: literals it harvests from every
non-library module imported so far (`providers._get_local_constants`). That pool grows as a worker
imports backends and report modules, so a derandomized cell drew different cases depending on which
tests ran before it in its xdist worker (two CI runs of one tree met different divergences), and an
edited literal anywhere in harness/ or backends/ changed every cell's draws. The specs give the
special values worth drawing (harness/generate/values.py), so the harness hands Hypothesis an empty
local pool; its own global constants (signed zeros, infinities, extremes) stay in play. Hypothesis
has no setting for this: the patch replaces a private function of the pinned version and raises if
that function is gone, so an upgrade that moves it fails loudly instead of silently unpinning.
"""
from __future__ import annotations

from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants

_PINNED_MARK = "_dmlconform_no_local_constants"


def _no_local_constants() -> Constants:
    """An empty pool, every time (a fresh one: Hypothesis never mutates what it is given, but a
    shared empty set would make that an assumption)."""
    return Constants()


setattr(_no_local_constants, _PINNED_MARK, True)


def pin_local_constants() -> None:
    """Make every later Hypothesis draw in this process independent of imported modules' literals.
    Idempotent; raises RuntimeError if the pinned Hypothesis no longer has the function it replaces."""
    current = getattr(providers, "_get_local_constants", None)
    if current is None:
        raise RuntimeError("hypothesis.internal.conjecture.providers._get_local_constants is gone: "
                           "this Hypothesis version draws local constants some other way; re-pin "
                           "harness/generate/reproducible.py before trusting derandomized draws")
    if getattr(current, _PINNED_MARK, False):
        return
    providers._get_local_constants = _no_local_constants
    providers.CONSTANTS_CACHE.cache.clear()  # pools computed before the pin would outlive it


def local_constants_pinned() -> bool:
    """Whether this process draws without local constants (the reproducibility test asks)."""
    return bool(getattr(getattr(providers, "_get_local_constants", None), _PINNED_MARK, False))
