"""A cell's generated cases, drawn once per worker and handed to each backend in turn.

Drawing is most of a generated cell's cost on a fast backend (about 280 cases/s against the NumPy
reference's 4,000: benchmarks/bench_catalogue.py), and every backend of a run draws the same cases
for the same cell (the `ci` profile is derandomized; the suite never fails inside Hypothesis, so
nothing is shrunk). The conformance tests are ordered so that a cell's backends are neighbours
(`parametrize._cells_together`) and xdist hands a worker neighbouring tests: the first backend draws,
the next ones reuse. A cell whose backends land on two workers is drawn on each, the same cases
(derandomized) or fresh ones (a random profile): slower, never different in kind.
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable

from hypothesis import given, settings as Settings

from harness.generate.reproducible import pin_local_constants

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from harness.model.descriptor import Case

CELLS_KEPT = 4  # a cell's backends run one after another: a few cells back is plenty
_drawn: OrderedDict[tuple, list] = OrderedDict()


def drawn_cases(cell: tuple, strategy: Callable[[], "SearchStrategy"], chosen: Settings) -> list["Case"]:
    """The cases Hypothesis draws from `strategy()` under `chosen` for `cell` (a hashable identity
    of everything the strategy depends on), drawn on the first call and remembered for the next
    few cells; each call gets its own Case objects (sharing descriptors and the immutable input
    bytes), so what one backend's run records on a case never reaches another's."""
    pin_local_constants()
    key = _key(cell, chosen)
    found = _drawn.get(key)
    if found is None:
        found = []
        # The source of `collect` is Hypothesis's derandomized seed: every cell's draws change if it
        # changes (so do the cases CI has seen), which is why the closure stays unannotated.

        @chosen
        @given(strategy())
        def collect(drawn) -> None:
            found.extend(drawn if isinstance(drawn, list) else [drawn])
        collect()
        _drawn[key] = found
        while len(_drawn) > CELLS_KEPT:
            _drawn.popitem(last=False)
    else:
        _drawn.move_to_end(key)
    return _copies(found)


def already_drawn(cell: tuple, chosen: Settings) -> list["Case"] | None:
    """The cases drawn_cases holds for `cell` under `chosen`, or None: what a backend that judges
    nothing by the draws (one that does not validate descriptors, for invalid cells) may take one
    of instead of drawing its own."""
    found = _drawn.get(_key(cell, chosen))
    return None if found is None else _copies(found)


def _key(cell: tuple, chosen: Settings) -> tuple:
    return (cell, chosen.max_examples, chosen.derandomize)


def _copies(found: list["Case"]) -> list["Case"]:
    """Each call's own Case objects (sharing descriptors and the immutable input bytes)."""
    return [dataclasses.replace(case, tags=list(case.tags)) for case in found]
