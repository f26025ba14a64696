"""pytest options and fixtures of the conformance suite (tests/conformance) and shared set-up.

Options: --backend (repeatable), --feature-level (repeatable), --operator, --dtype, --max-examples,
--exhaustive, --fp32-chunks, --reports-dir. Hypothesis profiles: --hypothesis-profile ci|dev|thorough.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from harness.expectations import load_expectations
from harness.profiles import register_profiles
from harness.registry import DEFAULT_BACKENDS, backend_entry_points, load_backend
from harness.results import ResultWriter
from harness.spec import load_specs
from harness.suite import device_level

ROOT = Path(__file__).resolve().parents[1]
SPECS = load_specs()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dmlconform", "DirectML conformance")
    group.addoption("--backend", action="append", default=None, help=f"backend to test (repeatable; default: {', '.join(DEFAULT_BACKENDS)})")
    group.addoption("--feature-level", action="append", default=None, help="feature level(s) to generate cases at (default: each backend's own level)")
    group.addoption("--operator", action="append", default=None, help="operator(s) to test (default: all)")
    group.addoption("--dtype", action="append", default=None, help="data type(s) of the primary input (default: all in the table)")
    group.addoption("--max-examples", type=int, default=None, help="Hypothesis examples per test (default: the profile's)")
    group.addoption("--exhaustive", action="store_true", help="add the chunked fp32 sweeps (all 2^32 patterns)")
    group.addoption("--fp32-chunks", default=None, help="with --exhaustive: comma-separated chunk numbers (0-255) instead of all")
    group.addoption("--reports-dir", default=str(ROOT / "reports"), help="where results, case files and the Hypothesis database go")
    group.addoption("--directml-dll", default=None, help="path or version name of DirectML.dll for the directml backend")


def _check_choices(config: pytest.Config) -> None:
    """Bad option values stop the run with what is allowed."""
    levels = [l.name for l in SPECS.catalog.levels]
    for level in config.getoption("feature_level") or []:
        if level not in levels:
            raise pytest.UsageError(f"--feature-level {level!r}: allowed: {', '.join(levels)}")
    for op in config.getoption("operator") or []:
        if op not in SPECS.operators:
            raise pytest.UsageError(f"--operator {op!r}: allowed: {', '.join(sorted(SPECS.operators))}")
    for t in config.getoption("dtype") or []:
        if t not in SPECS.catalog.data_types:
            raise pytest.UsageError(f"--dtype {t!r}: allowed: {', '.join(SPECS.catalog.data_types)}")
    known = backend_entry_points()
    for b in config.getoption("backend") or []:
        if b not in known:
            raise pytest.UsageError(f"--backend {b!r}: installed backends: {', '.join(sorted(known))}")
    chunks = config.getoption("fp32_chunks")
    if chunks:
        try:
            values = [int(c) for c in chunks.split(",")]
        except ValueError:
            raise pytest.UsageError("--fp32-chunks: comma-separated integers 0..255") from None
        if any(not 0 <= c < 256 for c in values):
            raise pytest.UsageError("--fp32-chunks: chunks are 0..255")


def pytest_configure(config: pytest.Config) -> None:
    reports = Path(config.getoption("reports_dir"))
    register_profiles(reports)
    if not config.getoption("hypothesis_profile", default=None):
        settings.load_profile("ci")
    _check_choices(config)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    config.dml_backends = {}
    config.dml_unavailable = {}
    names = config.getoption("backend") or DEFAULT_BACKENDS
    options = {"specs": SPECS}
    if config.getoption("directml_dll"):
        options["dll"] = config.getoption("directml_dll")
    for name in names:
        try:
            backend = load_backend(name, **options)
        except Exception as exc:  # noqa: BLE001 - reported as a skip reason
            config.dml_unavailable[name] = f"cannot load: {exc}"
            continue
        ok, reason = backend.available()
        if ok:
            config.dml_backends[name] = backend
        else:
            config.dml_unavailable[name] = reason
    config.dml_writer = ResultWriter(reports / "results", worker)
    config.dml_expectations = {name: load_expectations(name) for name in names}
    config.dml_cases_dir = reports / "cases"
    config.dml_names = names


def pytest_unconfigure(config: pytest.Config) -> None:
    for backend in getattr(config, "dml_backends", {}).values():
        backend.close()
    writer = getattr(config, "dml_writer", None)
    if writer is not None:
        writer.close()


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not getattr(config, "dml_names", None) or not any("conformance" in str(a) for a in config.args + [str(config.rootpath)]):
        return
    tr = terminalreporter
    tr.section("dmlconform backends")
    for name in config.dml_names:
        if name in config.dml_backends:
            backend = config.dml_backends[name]
            tr.write_line(f"ran:     {name}: {backend.version()} (device FL {device_level(backend, SPECS)})")
        else:
            tr.write_line(f"skipped: {name}: {config.dml_unavailable.get(name, 'not loaded')}")
    for name, exp in config.dml_expectations.items():
        for item in exp.items:
            if item.exercised and not item.hits:
                tr.write_line(f"STALE expectation {name}:{item.id}: explained nothing in {item.exercised} case(s) of "
                              f"{item.operator} {'/'.join(item.data_types)} in this worker; it may be fixed")


@pytest.fixture(scope="session")
def specs():
    return SPECS
