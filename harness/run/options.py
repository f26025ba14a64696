"""Checks of a conformance run's options, shared by `dmlconform run` and the pytest suite.

`dmlconform run` checks them before pytest starts, so that a typo never wipes the previous run's
report; the suite checks them again for runs started with pytest directly. One function, so the
two entry points can never disagree on what is allowed.
"""
from __future__ import annotations

from typing import Iterable

from harness.spec.model import SpecSet

REPORT_DETAILS = ("failures", "full")  # --report-detail: what the Allure results and report hold (docs/reports.md)

# --feature-level keywords (beside level names): `own` (each backend at its own level), `newest`
# (the newest level of the catalog), `ladder` (every level where an operator's tables change, up to
# a device's own level)
LEVEL_KEYWORDS = ("own", "newest", "ladder")
DIRECTML_TIMEOUT = 60.0  # seconds one DirectML case may take (--directml-timeout)
MAX_DIRECTML_TIMEOUT = 3600.0


def directml_timeout_problem(seconds: float) -> str | None:
    """What is wrong with a --directml-timeout value (a number of seconds, more than 0, at most an hour), or None."""
    if not 0 < seconds <= MAX_DIRECTML_TIMEOUT:  # NaN fails too
        return f"--directml-timeout {seconds!r}: seconds, more than 0 and at most {MAX_DIRECTML_TIMEOUT:g}"
    return None


def directml_gpus_problem(text: str) -> str | None:
    """What is wrong with a --directml-gpus value ('all', or Vulkan device numbers 0-255 separated by
    commas), or None. Whether the devices exist is for the runner to find out (the DirectML backend's
    device-pick layer refuses a number the drivers do not have)."""
    items = [item.strip() for item in text.split(",")]
    if text.strip() == "all" or (items and all(item.isdigit() and int(item) < 256 for item in items)):
        return None
    return f"--directml-gpus {text!r}: 'all' or Vulkan device numbers (0-255) separated by commas, e.g. 0,1"


# Hypothesis examples per test at the most: the thorough profile's hundreds times a hundred. More is
# no deeper test but a run that never ends (1e20 examples per cell), so it is refused up front.
MAX_EXAMPLES = 100_000


def option_problem(specs: SpecSet, *, backends: Iterable[str] = (), known_backends: Iterable[str] = (),
                   levels: Iterable[str] = (), operators: Iterable[str] = (), dtypes: Iterable[str] = (),
                   max_examples: int | None = None, data_per_descriptor: int = 1) -> str | None:
    """The first thing wrong with these run options, as one line naming the option; None if all is well."""
    known = sorted(known_backends)
    for name in backends:
        base, sep, variant = name.partition("@")
        if base not in known:
            return f"--backend {name!r}: installed backends: {', '.join(known)} (an instance: NAME@VARIANT, e.g. directml@1.10.1)"
        if sep and not variant:
            return f"--backend {name!r}: an instance names a variant after '@' (e.g. directml@1.10.1)"
    allowed_levels = [level.name for level in specs.catalog.levels]
    levels = list(levels)
    for level in levels:
        if level not in allowed_levels and level not in LEVEL_KEYWORDS:
            return f"--feature-level {level!r}: allowed: {', '.join(allowed_levels)}, or {' or '.join(LEVEL_KEYWORDS)}"
    if len(levels) > 1 and set(levels) & set(LEVEL_KEYWORDS):
        return f"--feature-level {' '.join(sorted(set(levels) & set(LEVEL_KEYWORDS)))}: a keyword stands alone (not with other levels)"
    for op in operators:
        if op not in specs.operators:
            return f"--operator {op!r}: allowed: {', '.join(sorted(specs.operators))}"
    for t in dtypes:
        if t not in specs.catalog.data_types:
            return f"--dtype {t!r}: allowed: {', '.join(specs.catalog.data_types)}"
    if max_examples is not None and not 1 <= max_examples <= MAX_EXAMPLES:
        return f"--max-examples {max_examples}: a whole number from 1 to {MAX_EXAMPLES:,}"
    if data_per_descriptor < 1:
        return f"--data-per-descriptor {data_per_descriptor}: a whole number >= 1"
    return None
