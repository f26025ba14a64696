"""What the reference knows about the output elements a backend's result differs at, as plain data.

The judge (harness.judge.diff) decides a verdict from the backend's values, the reference's values
and these facts alone, as TOSA's result checker is a function of the implementation's result, the
reference and its bounds: it asks the reference one question per output (`Expected.element_facts`)
and questions no object after that. The facts are computed only for the elements that differ bit
for bit from the reference (`index`, flat), usually few, so the common passing case pays nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ElementFacts:
    """Facts over `index` (each array has one entry per element of `index`)."""

    index: np.ndarray                  # flat indices into the output's logical shape
    atol: np.ndarray | None            # the spec's absolute slack per element (None: the comparison has none)
    legal: np.ndarray                  # the backend's value is a legal D3D result (precision model)
    legal_tags: np.ndarray             # the liberties (bit set, harness.spec.arithmetic) each legal value needed
    model_applies: bool                # False: the precision model does not judge this output (raw bits, no float)
    legal_note: str | None             # why the model could not judge (no rule for a function): exact comparison
    ties: np.ndarray | None            # the exact value is a rounding tie (integer outputs; None: the spec names none)
    unspecified: np.ndarray            # the docs leave the element's result open
    unspecified_reasons: tuple[str, ...]  # the rules behind `unspecified`, in spec order
    # rules an element meets only on some legal evaluation (a flushed denormal times INF is NaN):
    # (reason, elements), over the elements neither legal nor unspecified as given
    reachable: tuple[tuple[str, np.ndarray], ...]
    # |actual - exact| / bound per element where a family states an error bound (its `bounds`):
    # how much of the bound the backend used (NaN where the bound is infinite or not positive)
    bound_share: np.ndarray | None = None
