"""`--feature-level ladder`: each operator at every level where its tables change (up to a
device's own level, at which the device judges every descriptor), instead of each backend at
its own level only; `own` is the default; a keyword stands alone."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.run.options import option_problem
from harness.run.results import record_dicts
from tests.helpers import SPECS

ROOT = Path(__file__).resolve().parents[2]


def test_keywords_are_options_of_their_own():
    assert option_problem(SPECS, levels=["ladder"]) is None and option_problem(SPECS, levels=["own"]) is None
    assert "a keyword stands alone" in option_problem(SPECS, levels=["ladder", "5.0"])
    assert option_problem(SPECS, levels=["newest"]) is None
    assert option_problem(SPECS, levels=["every"]).endswith("or own or newest or ladder")


def test_the_ladder_runs_each_level_where_the_tables_change(tmp_path):
    gather = SPECS.operator("GATHER")
    assert gather.table_change_levels == ("1.0", "2.0", "2.1", "3.0", "4.0", "4.1", "6.4")  # tables 1.0, 2.1, 3.0, 4.1 (hand-read)
    assert gather.table_start_levels == ("1.0", "2.1", "3.0", "4.1", "6.4")  # valid cells: where a table starts
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backend", "numpy", "--operator", "GATHER",
                           "--feature-level", "ladder", "--max-examples", "1", "--workers", "0", "--reports-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = record_dicts(tmp_path / "results")  # results-*.jsonl, gzip-compressed at the run's end
    # invalid cells below the newest level break the rules that level gates only: 4.1 has the
    # newest table (nothing refused there that 6.4 accepts), the levels before it older tables
    assert {r["feature_level"] for r in records if r["kind"] == "invalid"} == {"1.0", "2.0", "2.1", "3.0", "4.0", "6.4"}
    below = {r["rule"] for r in records if r["kind"] == "invalid" and r["feature_level"] != "6.4"}
    assert below and below <= {"tensor.data_type", "tensor.dimension_count", "tensor.missing"}, below
    assert {r["feature_level"] for r in records if r["kind"] == "valid"} == set(gather.table_start_levels)
    # below the own level (6.4) a valid descriptor gets one data set, at it --data-per-descriptor's 8
    # (harness.run.ladder); max-examples 1: one descriptor per cell
    per_cell: dict[tuple, int] = {}
    for r in records:
        if r["kind"] == "valid":
            per_cell[(r["feature_level"], r["data_type"])] = per_cell.get((r["feature_level"], r["data_type"]), 0) + 1
    assert {n for (lvl, _), n in per_cell.items() if lvl == "6.4"} == {8}
    assert {n for (lvl, _), n in per_cell.items() if lvl != "6.4"} == {1}
    gate = subprocess.run([sys.executable, "-m", "harness.cli", "gate", "--reports-dir", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 0 and "GATE: PASS" in gate.stdout


class _Device:
    """A stand-in device: what the ladder reads of a backend is its capabilities."""

    def __init__(self, level: str, reference: bool = False):
        from harness.model.backend import Capabilities
        self._caps = Capabilities(max_feature_level=level, validates_descriptors=True, is_reference=reference)

    def capabilities(self):
        return self._caps


class _Config:
    def __init__(self, backends: dict):
        self.dml_specs = SPECS
        self.dml_backends = backends

    def getoption(self, name: str):
        return {"feature_level": ["ladder"], "data_per_descriptor": 8}.get(name)


def test_the_ladder_asks_a_device_valid_cells_below_its_level_and_an_older_dll_its_rejections():
    """ELEMENT_WISE_POW's tables start at FL 1.0 and 3.0 (hand-read). The reference runs its
    invalid cells at each of those and the level just before, its valid cells where a table starts;
    the newest DLL its valid cells at those levels and its invalid ones at its
    own (an invalid case of a lower level is judged at the device's level); an older DLL only its
    invalid cells, at its own level; no sweeps on it."""
    from harness.run.parametrize import levels_for
    config = _Config({"numpy": _Device("6.4", reference=True), "directml": _Device("6.4"), "directml@1.10.1": _Device("5.2")})
    pow_ = SPECS.operator("ELEMENT_WISE_POW")
    ladder = [lvl for lvl in pow_.table_change_levels]
    starts = [lvl for lvl in pow_.table_start_levels]
    assert ladder == ["1.0", "2.1", "3.0", "6.4"] and starts == ["1.0", "3.0", "6.4"]
    levels = lambda backend, kind: [lvl for lvl, _ in levels_for(config, backend, pow_, kind)]  # noqa: E731
    assert levels("numpy", "invalid") == ladder and levels("numpy", "valid") == starts
    assert levels("directml", "valid") == starts and levels("directml", "invalid") == ["6.4"]
    assert levels("directml@1.10.1", "valid") == [] and levels("directml@1.10.1", "invalid") == ["5.2"]
    assert [lvl for lvl, _ in levels_for(config, "directml@1.10.1", kind="sweep")] == []
    assert [lvl for lvl, _ in levels_for(config, "directml", kind="sweep")] == ["6.4"]


def test_below_its_own_level_a_cell_draws_fewer_data_and_the_reference_fewer_rejections():
    """harness.run.ladder: one data set per valid descriptor and a third of the profile's invalid
    descriptors below the backend's own level on the ladder; the own level and an explicit level
    list keep the full count."""
    from harness.run.ladder import below_own_level, data_sets_per_descriptor, invalid_examples
    config = _Config({"numpy": _Device("6.4", reference=True), "directml@1.10.1": _Device("5.2")})
    assert data_sets_per_descriptor(config, "numpy", "6.4") == 8 and invalid_examples(config, "numpy", "6.4", 10) is None
    assert data_sets_per_descriptor(config, "numpy", "3.0") == 1 and invalid_examples(config, "numpy", "3.0", 10) == 3
    assert invalid_examples(config, "numpy", "3.0", 1) == 1
    assert not below_own_level(config, "directml@1.10.1", "5.2") and below_own_level(config, "directml@1.10.1", "5.1")
    explicit = _Config({"numpy": _Device("6.4", reference=True)})
    explicit.getoption = lambda name: {"feature_level": ["3.0"], "data_per_descriptor": 8}.get(name)
    assert data_sets_per_descriptor(explicit, "numpy", "3.0") == 8 and invalid_examples(explicit, "numpy", "3.0", 10) is None


def test_an_older_dll_is_asked_only_the_rules_a_level_gates():
    """harness.run.ladder.level_gated, on hand-read page facts: ACTIVATION_HARD_SWISH is
    introduced at FL 6.2 (unavailable at 5.2, not at 6.4); ELEMENT_WISE_POW's tables start at
    FL 1.0 and 3.0 (a type or dimension count refused at 5.2 is refused at 6.4 too, at 2.1 it may
    not be), and its exponent-type rule holds below FL 3.0 only; RESAMPLE2's table changes at
    FL 6.2 (5.2's table is not the newest). A rule no level touches (strides) is never gated."""
    from harness.run.ladder import level_gated
    swish, pow_, resample2 = (SPECS.operator(n) for n in ("ACTIVATION_HARD_SWISH", "ELEMENT_WISE_POW", "RESAMPLE2"))
    assert level_gated(swish, "operator.unavailable", "5.2") and not level_gated(swish, "operator.unavailable", "6.4")
    assert not level_gated(pow_, "operator.unavailable", "5.2")
    for rule in ("tensor.data_type", "tensor.dimension_count", "tensor.missing"):
        assert not level_gated(pow_, rule, "5.2") and level_gated(pow_, rule, "2.1")
        assert level_gated(resample2, rule, "5.2") and not level_gated(resample2, rule, "6.4")
    assert level_gated(pow_, "constraint.exponent_type_until_3_0", "2.1")
    assert not level_gated(pow_, "constraint.same_shape", "2.1")
    assert not any(level_gated(s, "tensor.strides_length", "5.0") for s in (swish, pow_, resample2))


def test_below_the_newest_level_the_ladder_breaks_only_level_gated_rules():
    """The reference's lower ladder levels and an older DLL's own level get the level-gated rules
    only; the newest level keeps every rule, and so does any level asked for explicitly (whoever
    names it wants it judged in full)."""
    from harness.run.parametrize import gated_rules_only
    config = _Config({"numpy": _Device("6.4", reference=True), "directml": _Device("6.4"), "directml@1.10.1": _Device("5.2")})
    assert gated_rules_only(config, "5.2") and gated_rules_only(config, "2.1") and not gated_rules_only(config, "6.4")
    config.getoption = lambda name: {"feature_level": ["5.2"]}.get(name)
    assert not gated_rules_only(config, "5.2")
