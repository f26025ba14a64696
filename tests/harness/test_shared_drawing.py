"""A cell's cases are drawn once per worker and handed to each backend (harness.run.drawn), and the
conformance tests are ordered so that a cell's backends are neighbours (parametrize._cells_together):
the backends of a run see the same cases, drawn once, each as its own Case objects."""
from __future__ import annotations

import pytest
from hypothesis import settings

from harness.generate.strategies import valid_case_batches
from harness.run import drawn
from harness.run.parametrize import _cells_together
from tests.helpers import SPECS


def test_a_cell_is_drawn_once_and_each_backend_gets_its_own_cases(monkeypatch):
    monkeypatch.setattr(drawn, "_drawn", type(drawn._drawn)())
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    built = []

    def strategy():
        built.append(1)
        return valid_case_batches(spec, "6.4", "FLOAT32", per_descriptor=2)

    chosen = settings(max_examples=3, derandomize=True, database=None, deadline=None)
    first = drawn.drawn_cases(("SIGN", "6.4", "FLOAT32"), strategy, chosen)
    second = drawn.drawn_cases(("SIGN", "6.4", "FLOAT32"), strategy, chosen)
    assert len(built) == 1 and len(first) >= 3                      # drawn once: batches of 2, 3 examples
    assert [c.case_id for c in first] == [c.case_id for c in second]
    assert all(a is not b and a.tags is not b.tags for a, b in zip(first, second))
    first[0].tags.append("seen by the first backend")
    assert "seen by the first backend" not in second[0].tags
    other = drawn.drawn_cases(("SIGN", "6.4", "FLOAT32"), strategy, settings(chosen, max_examples=1))
    assert len(built) == 2 and len(other) < len(first)              # other settings: another draw


def test_only_the_last_few_cells_are_kept(monkeypatch):
    monkeypatch.setattr(drawn, "_drawn", type(drawn._drawn)())
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    chosen = settings(max_examples=1, derandomize=True, database=None, deadline=None)
    for n in range(drawn.CELLS_KEPT + 2):
        drawn.drawn_cases(("cell", n), lambda: valid_case_batches(spec, "6.4", "FLOAT32", per_descriptor=1), chosen)
    assert len(drawn._drawn) == drawn.CELLS_KEPT


def test_the_backends_of_a_cell_become_neighbours_in_the_order_named():
    params = [pytest.param((backend, "OP", level, "FLOAT32"), id=f"{level}-{backend}")
              for backend in ("numpy", "directml") for level in ("1.0", "6.4")]
    params.append(pytest.param(("onnxruntime", "OP", "6.4", "FLOAT32"), id="6.4-onnxruntime"))
    assert [p.id for p in _cells_together(params)] == ["1.0-numpy", "1.0-directml", "6.4-numpy", "6.4-directml",
                                                       "6.4-onnxruntime"]
