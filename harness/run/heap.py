"""Fewer and cheaper garbage collections in a run's processes.

Why: a run's process holds a large heap that lives until it exits (177 specs with their parsed
formulas and shape expressions, the collected cells, Hypothesis' strategies), and generation makes
millions of short-lived objects. CPython's collector, at its default thresholds (700, 10, 10),
then ran thousands of collections and its full ones walked that whole long-lived heap each time:
a fifth of the time of drawing invalid cases (harness's own tests, 4 operators: 5.0 s of 22.7 s
in 3,850 collections, measured with gc.callbacks). Objects made before the cells start are moved
out of the collector's sight once (gc.freeze: they are never garbage), and the youngest generation
is collected less often. Nothing here changes what a run computes.
"""
from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000  # allocations between young collections (CPython's default: 700)
OLDER_THRESHOLDS = (50, 100)  # young collections per middle one, middle ones per full one (default: 10, 10)


def collect_less_often() -> None:
    """Raise the collector's thresholds (a collector turned off, threshold 0, stays off)."""
    young, middle, old = gc.get_threshold()
    if young and young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, max(middle, OLDER_THRESHOLDS[0]), max(old, OLDER_THRESHOLDS[1]))


def freeze_long_lived() -> None:
    """Collect what is garbage now, then keep every surviving object out of later collections:
    called once the session's long-lived objects exist (after collection)."""
    gc.collect()
    gc.freeze()
