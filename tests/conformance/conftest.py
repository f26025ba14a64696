"""Parametrization of the conformance suite from the specs and the command-line options."""
from __future__ import annotations

import pytest

from harness.strategies import candidate_rules, coverage_plan, primary_input, rule_reachable
from harness.suite import device_level
from harness.sweeps import sweeps


def _levels_for(config, backend_name: str) -> list[tuple[str, str | None]]:
    """(level, skip reason or None) to test for a backend."""
    specs = config.dml_specs
    backend = config.dml_backends.get(backend_name)
    requested = config.getoption("feature_level")
    if backend is None:
        return [(lvl, None) for lvl in (requested or [specs.catalog.newest_level.name])]
    own = device_level(backend, specs)
    if not requested:
        return [(own, None)]
    out = []
    for lvl in requested:
        if specs.catalog.level_order(lvl) > specs.catalog.level_order(own):
            out.append((lvl, f"device maximum feature level is {own}, below {lvl}"))
        else:
            out.append((lvl, None))
    return out


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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    specs = config.dml_specs
    dtypes = config.getoption("dtype")
    params = []
    if "valid_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            for level, skip in _levels_for(config, backend):
                for spec in _operators(config):
                    if spec.table_at(level) is None:
                        continue
                    types = sorted({cell[0][primary_input(spec)] for cell in coverage_plan(spec, level)},
                                   key=lambda t: specs.catalog.dtype(t).enum)
                    for t in types:
                        if dtypes and t not in dtypes:
                            continue
                        params.append(_param([(backend, spec.name, level, t)], f"{spec.name}-FL{level}-{t}-{backend}",
                                             _unavailable(config, backend) or skip))
        metafunc.parametrize("valid_cell", params)
    elif "invalid_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            for level, skip in _levels_for(config, backend):
                for spec in _operators(config):
                    if spec.table_at(level) is None and not rule_reachable(spec, level, "operator.unavailable"):
                        continue
                    for rule in candidate_rules(spec):
                        if rule_reachable(spec, level, rule):
                            params.append(_param([(backend, spec.name, level, rule)], f"{spec.name}-FL{level}-{rule}-{backend}",
                                                 _unavailable(config, backend) or skip))
        metafunc.parametrize("invalid_cell", params)
    elif "example_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            for spec in _operators(config):
                for example in spec.examples:
                    if dtypes and example.types[primary_input(spec)] not in dtypes:
                        continue
                    params.append(_param([(backend, spec.name, example.name)], f"{spec.name}-{example.name}-{backend}",
                                         _unavailable(config, backend)))
        metafunc.parametrize("example_cell", params)
    elif "probe_cell" in metafunc.fixturenames:
        for backend in config.dml_names:
            for item in config.dml_expectations[backend].items:
                if item.probe is None or (config.getoption("operator") and item.operator not in config.getoption("operator")):
                    continue
                params.append(_param([(backend, item.id)], f"{item.id}-{backend}", _unavailable(config, backend)))
        metafunc.parametrize("probe_cell", params)
    elif "sweep_cell" in metafunc.fixturenames:
        chunks = config.getoption("fp32_chunks")
        chosen_ops = config.getoption("operator")
        for backend in config.dml_names:
            for level, skip in _levels_for(config, backend):
                found = sweeps(specs, operators=chosen_ops, level=level, include_fp32=config.getoption("exhaustive"),
                               fp32_chunks=[int(c) for c in chunks.split(",")] if chunks else None)
                for sweep in found:
                    if dtypes and sweep.data_type not in dtypes:
                        continue
                    params.append(_param([(backend, sweep)], f"{sweep.id}-{backend}", _unavailable(config, backend) or skip))
        metafunc.parametrize("sweep_cell", params)
