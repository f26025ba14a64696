"""pytest options and fixtures of the conformance suite (tests/conformance) and shared set-up.

Options: --backend (repeatable), --feature-level (repeatable), --operator, --dtype, --max-examples,
--exhaustive, --fp32-chunks, --reports-dir. Hypothesis profiles: --hypothesis-profile ci|dev|thorough.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from harness.allocator import keep_freed_memory
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
    group.addoption("--data-per-descriptor", type=int, default=8, help="valid cases (data sets) per drawn descriptor (default: 8)")
    group.addoption("--exhaustive", action="store_true", help="add the chunked fp32 sweeps (all 2^32 patterns)")
    group.addoption("--fp32-chunks", default=None, help="with --exhaustive: comma-separated chunk numbers (0-255) instead of all")
    group.addoption("--reports-dir", default=str(ROOT / "reports"), help="where results, case files and the Hypothesis database go")
    group.addoption("--directml-dll", default=None, help="path or version name of DirectML.dll for the directml backend")
    group.addoption("--directml-adapter", type=int, default=0, help="DXGI adapter index for the directml backend")
    group.addoption("--directml-warp", action="store_true", help="use the WARP software adapter (Windows)")
    group.addoption("--directml-debug-layer", action="store_true", help="create the DirectML device with the debug layer")
    group.addoption("--directml-exec-flags", default="", help="e.g. ALLOW_HALF_PRECISION_COMPUTATION|DISABLE_META_COMMANDS")


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
    if config.getoption("data_per_descriptor") < 1:
        raise pytest.UsageError("--data-per-descriptor: a whole number >= 1")
    chunks = config.getoption("fp32_chunks")
    if chunks:
        try:
            values = [int(c) for c in chunks.split(",")]
        except ValueError:
            raise pytest.UsageError("--fp32-chunks: comma-separated integers 0..255") from None
        if any(not 0 <= c < 256 for c in values):
            raise pytest.UsageError("--fp32-chunks: chunks are 0..255")


def pytest_configure(config: pytest.Config) -> None:
    keep_freed_memory()  # large tensors: reuse freed arrays instead of page-faulting new ones
    reports = Path(config.getoption("reports_dir"))
    register_profiles(reports)
    if not config.getoption("hypothesis_profile", default=None):
        settings.load_profile("ci")
    _check_choices(config)
    # the xdist worker id from the config, not the environment: a pytest run started inside an
    # xdist worker (the harness's own report tests) inherits PYTEST_XDIST_WORKER but is no worker
    worker = config.workerinput["workerid"] if hasattr(config, "workerinput") else "main"
    config.dml_backends = {}
    config.dml_unavailable = {}
    names = config.getoption("backend") or DEFAULT_BACKENDS
    for name in names:
        options = {"specs": SPECS}
        if name == "directml":
            options.update(dll=config.getoption("directml_dll"), adapter=config.getoption("directml_adapter"),
                           warp=config.getoption("directml_warp"), debug_layer=config.getoption("directml_debug_layer"),
                           exec_flags=config.getoption("directml_exec_flags"))
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """environment.properties and categories.json for the Allure report (controller or single process)."""
    config = session.config
    alluredir = config.getoption("allure_report_dir", default=None)
    if not alluredir or hasattr(config, "workerinput"):
        return
    from harness.allure_report import write_run_files
    env = {"specs": str(SPECS.directory)}
    profile = config.getoption("hypothesis_profile", default=None) or "ci"
    env["hypothesis.profile"] = profile
    env["hypothesis.seed"] = str(config.getoption("hypothesis_seed", default=None) or ("derandomized" if profile == "ci" else "random"))
    for name in config.dml_names:
        backend = config.dml_backends.get(name)
        if backend is None:
            env[f"backend.{name}"] = f"not available: {config.dml_unavailable.get(name, '')}"
            continue
        env[f"backend.{name}"] = backend.version()
        env[f"backend.{name}.max_feature_level"] = device_level(backend, SPECS)
        if name == "directml":
            info = backend.info()
            env["directml.dll"] = str(backend._dll)
            env["directml.adapter"] = str(info.get("adapter"))
            env["directml.exec_flags"] = hex(backend.exec_flags)
    write_run_files(Path(alluredir), env)


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


@pytest.fixture(scope="session")
def specs():
    return SPECS
