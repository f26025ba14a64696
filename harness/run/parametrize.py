"""The conformance suite's cells, from the specs and the options: which (backend, operator,
level, data type or rule, example, probe, sweep) tests `pytest_generate_tests` makes, and in what
order. The dmlconform pytest plugin (harness.run.plugin) registers the hook; this module only
decides the cells, so that what a run plans can be read without the plugin's session machinery.

The ladder (`--feature-level ladder`) is decided here: the reference at each level where an
operator's tables change, a device's valid cells at its own level and below, an older DLL's
invalid cells at its own level only (`levels_for`); below the newest level an invalid cell runs
the rules that level gates only (`gated_rules_only`, harness.run.ladder.level_gated)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from harness.generate.breakers import candidate_rules, rule_reachable
from harness.generate.sweeps import sweeps
from harness.generate.types import coverage_plan, primary_type
from harness.run.case import device_level
from harness.run.ladder import level_gated
from harness.run.registry import expectations_for, split_instance

if TYPE_CHECKING:
    from harness.run.plugin import DmlConfig
    from harness.spec.model import OperatorSpec


def levels_for(config: DmlConfig, backend_name: str, spec: OperatorSpec | None = None, kind: str = "valid") -> list[tuple[str, str | None]]:
    """(level, skip reason or None) to test for a backend (and an operator) and a kind of cell
    (valid, invalid, sweep): its own level by default (`own`); with `ladder`, for a backend that
    validates descriptors (the reference, a device), each level where the operator's tables
    change, up to the device's own (a device judges every descriptor at its own level: one valid
    at a lower level must be accepted), and for one that does not (ONNX Runtime) its own level;
    else the levels asked for, those above the device's skipped.

    The ladder asks of a device (not the reference) at a lower level only its valid cells: an
    invalid case of a lower level is, at the device's own level, either invalid for the same rule
    (the own level's invalid cells run it) or valid (the own level's valid cells cover it). An
    older DLL (directml@1.10.1) runs its invalid cells only, at its own level: its level-gated
    rejections, what it is in the run for (pytest_generate_tests keeps the rules that are
    level-gated there); its arithmetic, and its checks of rules that judge alike at every level,
    are the newest DLL's business. Valid
    cells skip the level just before each table change (its valid cases are those of the level its
    table starts at); invalid cells keep it (a level-gated rule breaks there)."""
    specs = config.dml_specs
    backend = config.dml_backends.get(backend_name)
    requested = config.getoption("feature_level") or ["own"]
    own = device_level(backend, specs) if backend is not None else specs.catalog.newest_level.name
    if requested == ["ladder"] and kind == "sweep" and split_instance(backend_name)[1] is not None:
        return []  # an older DLL runs its invalid cells only (below)
    if requested == ["own"] or (requested == ["ladder"] and spec is None):
        return [(own, None)]  # sweeps stay at the own level: the newest tables hold every type an older one does
    if requested == ["ladder"]:
        assert spec is not None
        if backend is not None and not backend.capabilities().validates_descriptors:
            return [(own, None)]  # no levels of its own (ONNX Runtime): a lower level only repeats its computations
        if split_instance(backend_name)[1] is not None:
            return [(own, None)] if kind == "invalid" else []  # an older DLL: its own level, where its level-gated rejections are;
            # the levels below are the newest DLL's ladder
        if kind == "invalid" and backend is not None and not backend.capabilities().is_reference:
            return [(own, None)]
        levels = spec.table_change_levels if kind == "invalid" else spec.table_start_levels
        return [(lvl, None) for lvl in levels if specs.catalog.level_order(lvl) <= specs.catalog.level_order(own)]
    out: list[tuple[str, str | None]] = []
    for lvl in (specs.catalog.newest_level.name if r == "newest" else r for r in requested):
        if backend is not None and specs.catalog.level_order(lvl) > specs.catalog.level_order(own):
            out.append((lvl, f"device maximum feature level is {own}, below {lvl}"))
        else:
            out.append((lvl, None))
    return out


def gated_rules_only(config: DmlConfig, level: str) -> bool:
    """Whether an invalid cell at `level` runs only the rules that level gates
    (harness.run.ladder.level_gated): on the ladder, below the newest level. The reference's
    lower levels and an older DLL's own level are there for the level-gated rejections; a rule that
    judges a descriptor alike at every level is broken at the newest level already (the reference's
    and the newest DLL's invalid cells), and breaking it again below only repeated that (41 % of
    make run's cells). An explicit --feature-level list keeps every rule: whoever names a level wants
    it judged in full."""
    specs = config.dml_specs
    return (config.getoption("feature_level") or ["own"]) == ["ladder"] and level != specs.catalog.newest_level.name


def _operators(config):
    specs = config.dml_specs
    chosen = config.getoption("operator")
    return [specs.operators[n] for n in sorted(specs.operators) if not chosen or n in chosen]


def _param(values, id_, skip):
    marks = [pytest.mark.skip(reason=skip)] if skip else []
    return pytest.param(*values, id=id_, marks=marks)


def _unavailable(config, backend):
    if backend in config.dml_backends:
        return None
    return f"backend {backend} not available: {config.dml_unavailable.get(backend, 'not loaded')}"


def _cells_together(params: list) -> list:
    """The parameters reordered so that the backends of one cell (operator, level, type or rule)
    are neighbours, in the order the backends were named: the conformance module draws a cell's
    cases once and hands them to each backend in turn (harness.run.drawn), and xdist gives a worker
    neighbouring tests, so the drawing is shared instead of repeated per backend."""
    first: dict[tuple, int] = {}
    for position, param in enumerate(params):
        first.setdefault(tuple(param.values[0][1:]), position)
    return sorted(params, key=lambda param: first[tuple(param.values[0][1:])])


def _plan_type(spec: OperatorSpec, types: dict[str, str | None]) -> str:
    """The primary type of a coverage-plan cell: never None (a valid cell's output has a type)."""
    t = primary_type(spec, types)
    assert t is not None
    return t


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = cast("DmlConfig", metafunc.config)
    specs = config.dml_specs
    dtypes = config.getoption("dtype")
    params = []
    if "valid_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            for spec in _operators(config):
                for level, skip in levels_for(config, backend, spec):
                    if not spec.has_table_at(level):
                        continue
                    types = sorted({_plan_type(spec, cell[0]) for cell in coverage_plan(spec, level)},
                                   key=lambda t: specs.catalog.dtype(t).enum)
                    for t in types:
                        if dtypes and t not in dtypes:
                            continue
                        params.append(_param([(backend, spec.name, level, t)], f"{spec.name}-FL{level}-{t}-{backend}",
                                             _unavailable(config, backend) or skip))
        metafunc.parametrize("valid_cell", _cells_together(params))
    elif "invalid_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            for spec in _operators(config):
                for level, skip in levels_for(config, backend, spec, "invalid"):
                    if not spec.has_table_at(level) and not rule_reachable(spec, level, "operator.unavailable"):
                        continue
                    for rule in candidate_rules(spec):
                        if gated_rules_only(config, level) and not level_gated(spec, rule, level):
                            continue  # judged alike at every level: the newest level's invalid cells break it
                        if rule_reachable(spec, level, rule):
                            params.append(_param([(backend, spec.name, level, rule)], f"{spec.name}-FL{level}-{rule}-{backend}",
                                                 _unavailable(config, backend) or skip))
        metafunc.parametrize("invalid_cell", _cells_together(params))
    elif "example_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            for spec in _operators(config):
                for example in spec.examples:
                    if dtypes and primary_type(spec, example.types) not in dtypes:
                        continue
                    params.append(_param([(backend, spec.name, example.name)], f"{spec.name}-{example.name}-{backend}",
                                         _unavailable(config, backend)))
        metafunc.parametrize("example_cell", params)
    elif "probe_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            base, variant = split_instance(backend)
            # an instance (directml@1.10.1) probes its own files' divergences; its backend's are the
            # newest DLL's, probed there (one it does not show on an older DLL is not stale)
            inherited: set[str] = set()
            if variant is not None:
                override = config.getoption("expectations_dir")
                inherited = {i.id for i in expectations_for(base, Path(override) if override else None, config.dml_specs).items}
            for item in config.dml_expectations[backend].items:
                if item.probe is None or item.id in inherited or (config.getoption("operator") and item.operator not in config.getoption("operator")):
                    continue
                params.append(_param([(backend, item.id)], f"{item.id}-{backend}", _unavailable(config, backend)))
        metafunc.parametrize("probe_cell", params)
    elif "sweep_cell" in metafunc.fixturenames:
        chunks = config.getoption("fp32_chunks")
        chosen_ops = config.getoption("operator")
        for backend in config.dml_names:
            for level, skip in levels_for(config, backend, kind="sweep"):
                found = sweeps(specs, operators=chosen_ops, level=level, include_fp32=config.getoption("exhaustive"),
                               fp32_chunks=[int(c) for c in chunks.split(",")] if chunks else None)
                for sweep in found:
                    if dtypes and sweep.data_type not in dtypes:
                        continue
                    params.append(_param([(backend, sweep)], f"{sweep.id}-{backend}", _unavailable(config, backend) or skip))
        metafunc.parametrize("sweep_cell", params)
