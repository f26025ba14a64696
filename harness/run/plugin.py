"""The dmlconform pytest plugin (entry point `pytest11: dmlconform`): the conformance suite's
options, backends set up per session, and the run's files; its parametrization from the specs
is harness.run.parametrize.

The suite's tests are in harness/run/conformance.py; `dmlconform run` runs that module, and
tests/conformance/ in a checkout imports it, so both collect the same cells.

Options: --backend (repeatable), --feature-level (repeatable), --operator, --dtype, --max-examples,
--exhaustive, --fp32-chunks, --reports-dir, --specs-dir, --shard I/N|auto and --shard-durations FILE
(one part of a run split across machines: harness.run.shard). Hypothesis profiles:
--hypothesis-profile ci|dev|thorough.

A session that runs the conformance suite is a run: after its options are checked (never before:
a typo must not wipe the last report) it empties the results, case files and Allure results of
the reports directory, writes its plan at collection, a marker per finished cell, and a completion
marker when it ends normally (harness.run.manifest); the gate refuses a run without them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generator, Protocol, cast

if TYPE_CHECKING:
    from harness.judge.expectations import ExpectationSet
    from harness.model.backend import Backend
    from harness.spec.model import SpecSet

import os
import signal
import shutil
import socket
import sys
import threading
import uuid
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import settings

from harness.run.allocator import keep_freed_memory
from harness.run.heap import collect_less_often, freeze_long_lived
from harness.run.hang_probes import HANG_PROBE_CHOICES, barrier_dir, hang_probe_expectation, move_hang_probes_last, note_finished
from harness.run.profiles import register_profiles
from harness.run.registry import DEFAULT_BACKENDS, expectations_for, backend_entry_points, load_backend, split_instance
from harness.run.results import ResultWriter
from harness.run.options import (DIRECTML_TIMEOUT, REPORT_DETAILS, directml_gpus_problem, directml_timeout_problem,
                                 option_problem)
from harness.run.previous import drop, give_back, set_aside
from harness.run.results import RecordingError
from harness.run.manifest import CellWriter, PlannedCell, write_complete, write_plan
from harness.run.record_schema import RunFileError
from harness.run.shard import (DURATIONS_FILE, Shard, ShardError, durations_digest, parse_shard, partition, plan_digest,
                               read_durations, source_digest, write_durations)
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.run.case import device_level
from harness.run.ladder import data_sets_per_descriptor, invalid_examples
from harness.spec.source import SpecError
from harness.run.parametrize import pytest_generate_tests  # noqa: F401  (the hook: registered with this plugin)

CONFORMANCE_MODULE = Path(__file__).resolve().with_name("conformance.py")
_DEFAULT_SPECS: SpecSet | None = None  # loaded once, on first use


class DmlConfig(Protocol):
    """pytest's Config as this plugin and the suite use it: its options, and the attributes
    pytest_configure sets on it (for typing: a hook reads them through `cast(DmlConfig, config)`,
    the same object)."""

    dml_specs: SpecSet
    dml_is_run: bool
    dml_run_id: str
    dml_backends: dict[str, Backend]
    dml_unavailable: dict[str, str]
    dml_requested: set[str]
    dml_names: list[str]
    dml_expectations: dict[str, ExpectationSet]
    dml_writer: ResultWriter
    dml_cells: CellWriter
    dml_worker: str
    dml_cases_dir: Path
    dml_shard: Shard | None
    dml_shard_durations: dict[str, float]
    dml_full_cells: list[PlannedCell]
    dml_before_hang_probes: frozenset[str]  # the planned cells a known hang's probe waits for

    def getoption(self, name: str, default: Any = ..., skip: bool = ...) -> Any: ...


class _DirectMLBackend(Protocol):
    """What the Allure environment reads of a DirectML backend (backends.directml)."""

    _dll: Path | None
    exec_flags: int

    def info(self) -> dict[str, Any]: ...


def _default_specs() -> SpecSet:
    global _DEFAULT_SPECS
    if _DEFAULT_SPECS is None:
        _DEFAULT_SPECS = load_specs()
    return _DEFAULT_SPECS


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dmlconform", "DirectML conformance")
    group.addoption("--backend", action="append", default=None, help=f"backend to test (repeatable; default: {', '.join(DEFAULT_BACKENDS)})")
    group.addoption("--feature-level", action="append", default=None, help="feature level(s) to generate cases at, or `ladder` (each level where an operator's tables change, up to the device's own) or `own` (default: each backend's own level)")
    group.addoption("--operator", action="append", default=None, help="operator(s) to test (default: all)")
    group.addoption("--dtype", action="append", default=None, help="data type(s) of the primary input (default: all in the table)")
    group.addoption("--max-examples", type=int, default=None, help="Hypothesis examples per test (default: the profile's)")
    group.addoption("--data-per-descriptor", type=int, default=8, help="valid cases (data sets) per drawn descriptor (default: 8)")
    group.addoption("--exhaustive", action="store_true", help="add the chunked fp32 sweeps (all 2^32 patterns)")
    group.addoption("--fp32-chunks", default=None, help="with --exhaustive: comma-separated chunk numbers (0-255) instead of all")
    group.addoption("--reports-dir", default="reports", help="where results, case files and the Hypothesis database go (default: ./reports)")
    group.addoption("--expectations-dir", default=None,
                    help="directory of BACKEND.yaml expectation files (default: the one each backend ships)")
    group.addoption("--specs-dir", default=str(DEFAULT_SPECS_DIR), help="directory of operator specs (default: %(default)s)")
    group.addoption("--directml-dll", default=None, help="path or version name of DirectML.dll for the directml backend")
    group.addoption("--directml-adapter", type=int, default=0, help="DXGI adapter index for the directml backend")
    group.addoption("--directml-warp", action="store_true", help="use the WARP software adapter (Windows)")
    group.addoption("--directml-debug-layer", action="store_true", help="create the DirectML device with the debug layer")
    group.addoption("--directml-exec-flags", default="", help="e.g. ALLOW_HALF_PRECISION_COMPUTATION|DISABLE_META_COMMANDS")
    group.addoption("--directml-vulkan", default=None,
                    help="Vulkan driver under Wine: auto (a hardware GPU's ICD if installed, else lavapipe; the default), lavapipe, or an ICD json path")
    group.addoption("--directml-gpus", default=None,
                    help="on a host with several GPUs: all (pytest-xdist worker K uses GPU K mod n) or Vulkan device "
                         "numbers, e.g. 1 (default: the drivers' first; docs/sharding.md)")
    group.addoption("--directml-timeout", type=float, default=DIRECTML_TIMEOUT,
                    help="seconds one DirectML case may take before its runner is stopped and restarted (the case is "
                         "recorded crashed, the run goes on; default %(default)s). A GPU whose driver hangs on some "
                         "cases fits a time-limited machine with a shorter one")
    group.addoption("--directml-stack", default=None,
                    help="an unpacked portable DirectML stack (`dmlconform directml unpack`; default: DMLCONFORM_DIRECTML_STACK or .cache/directml)")
    group.addoption("--report-detail", choices=REPORT_DETAILS, default="failures",
                    help="Allure attachments and report: `failures` (default) for failures and divergences only, "
                         "`full` adds passing cases' attachments (the liberties they took) and the passing tests "
                         "to the HTML report (docs/reports.md)")
    group.addoption("--hang-probes", choices=HANG_PROBE_CHOICES, default="last",
                    help="the probes of known hangs (expectations marked `hangs`): `last` (default) sends them after "
                         "every other cell of the run has finished, so that a GPU stalled by a hung channel stalls "
                         "nothing else; `skip` does not send them (each recorded unsupported: not probed)")
    group.addoption("--shard", default=None,
                    help="run only shard I of N (I/N, 1-based) of the collected cells, or `auto`: the index from CI variables "
                         "(GitLab CI_NODE_INDEX/CI_NODE_TOTAL, Kubernetes JOB_COMPLETION_INDEX with DMLCONFORM_SHARD_TOTAL); "
                         "`dmlconform merge` joins the shards' reports (docs/sharding.md)")
    group.addoption("--shard-durations", default=None,
                    help="a durations file ({test id: seconds}; a run writes its own to REPORTS/results/durations.json) "
                         "that balances --shard (default: none, every cell weighs the same)")


def _load_run_specs(config: pytest.Config) -> SpecSet:
    """The specs of --specs-dir; a broken spec stops the session with its file:line: key: message."""
    specs_dir = Path(config.getoption("specs_dir"))
    if specs_dir.resolve() == DEFAULT_SPECS_DIR.resolve():
        return _default_specs()
    if not specs_dir.is_dir():
        raise pytest.UsageError(f"--specs-dir {specs_dir}: not a directory")
    try:
        return load_specs(specs_dir)
    except SpecError as exc:
        raise pytest.UsageError(f"--specs-dir {specs_dir}: {exc.render()}") from None


def _check_reports_dir(config: pytest.Config) -> Path:
    reports = Path(config.getoption("reports_dir"))
    if reports.exists() and not reports.is_dir():
        raise pytest.UsageError(f"--reports-dir {reports}: exists and is not a directory")
    return reports


def _runs_conformance(config: pytest.Config) -> bool:
    """Whether this session collects the conformance suite (and so is a run that owns the reports
    directory): an argument naming the suite module, or a directory holding a conformance/ folder
    of tests (a checkout's tests/ or tests/conformance/), or a path inside one."""
    if config.getoption("collectonly", default=False):
        return False  # listing tests runs none: the last run's reports stay
    for arg in config.args or [str(config.rootpath)]:
        path = (Path(config.invocation_params.dir) / str(arg).split("::", 1)[0]).resolve()
        if path == CONFORMANCE_MODULE:
            return True
        suites = [path / "conformance", path / "tests" / "conformance"]
        if path.name == "conformance" or any(p.is_dir() for p in suites) or "conformance" in path.parts:
            return True
    return False


def _check_choices(config: DmlConfig) -> None:
    """Bad option values stop the run with what is allowed."""
    problem = option_problem(config.dml_specs, backends=config.getoption("backend") or [],
                             known_backends=backend_entry_points(), levels=config.getoption("feature_level") or [],
                             operators=config.getoption("operator") or [], dtypes=config.getoption("dtype") or [],
                             max_examples=config.getoption("max_examples"),
                             data_per_descriptor=config.getoption("data_per_descriptor"))
    if problem:
        raise pytest.UsageError(problem)
    timeout_problem = directml_timeout_problem(config.getoption("directml_timeout"))
    if timeout_problem:
        raise pytest.UsageError(timeout_problem)
    gpus = config.getoption("directml_gpus")
    if gpus is not None and directml_gpus_problem(gpus):
        raise pytest.UsageError(directml_gpus_problem(gpus))
    chunks = config.getoption("fp32_chunks")
    if chunks:
        try:
            values = [int(c) for c in chunks.split(",")]
        except ValueError:
            raise pytest.UsageError("--fp32-chunks: comma-separated integers 0..255") from None
        if any(not 0 <= c < 256 for c in values):
            raise pytest.UsageError("--fp32-chunks: chunks are 0..255")


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run as Ctrl-C does: backends closed, their processes stopped


def pytest_configure(config: pytest.Config) -> None:
    keep_freed_memory()  # large tensors: reuse freed arrays instead of page-faulting new ones
    collect_less_often()  # generation's many short-lived objects beside a large long-lived heap (harness.run.heap)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    run = cast(DmlConfig, config)  # the same object, typed with the attributes set here
    run.dml_specs = _load_run_specs(config)
    reports = _check_reports_dir(config)
    register_profiles(reports)
    run.dml_is_run = _runs_conformance(config)
    if not config.getoption("hypothesis_profile", default=None) and (run.dml_is_run or _is_checkout(config)):
        settings.load_profile("ci")
    _check_choices(run)
    _configure_shard(run)
    if hasattr(config, "workerinput"):
        run.dml_run_id = config.workerinput.get("dml_run_id", "unknown")
    else:
        run.dml_run_id = uuid.uuid4().hex
    # the xdist worker id from the config, not the environment: a pytest run started inside an
    # xdist worker (the harness's own report tests) inherits PYTEST_XDIST_WORKER but is no worker
    worker = config.workerinput["workerid"] if hasattr(config, "workerinput") else "main"
    run.dml_backends = {}
    run.dml_unavailable = {}
    names = config.getoption("backend") or DEFAULT_BACKENDS
    run.dml_requested = set(config.getoption("backend") or [])
    run.dml_names = names
    override = config.getoption("expectations_dir")  # read even when listing tests: the probe cells come from it
    try:
        run.dml_expectations = {name: expectations_for(name, Path(override) if override else None, run.dml_specs) for name in names}
    except SpecError as exc:  # harness.judge.expectations.ExpectationError: every problem, the first one shown
        raise pytest.UsageError(f"expectation file {exc.render()}") from None
    if not run.dml_is_run:
        return  # not a conformance run (or only listing its tests): no backend to start, no run files to write
    for name in names:
        options: dict[str, Any] = {"specs": run.dml_specs}
        if split_instance(name)[0] == "directml":
            options.update(dll=config.getoption("directml_dll"), adapter=config.getoption("directml_adapter"),
                           warp=config.getoption("directml_warp"), debug_layer=config.getoption("directml_debug_layer"),
                           exec_flags=config.getoption("directml_exec_flags"),
                           vulkan=config.getoption("directml_vulkan"), stack=config.getoption("directml_stack"),
                           timeout=config.getoption("directml_timeout"), gpus=config.getoption("directml_gpus"))
        try:
            backend = load_backend(name, **options)
        except Exception as exc:  # noqa: BLE001 - reported as a skip reason
            run.dml_unavailable[name] = f"cannot load: {exc}"
            continue
        ok, reason = backend.available()
        if ok:
            run.dml_backends[name] = backend
            run.dml_expectations[name] = run.dml_expectations[name].for_backend(backend.version)
        else:
            run.dml_unavailable[name] = reason
    global _STARTED
    _STARTED = False
    if not hasattr(config, "workerinput"):  # every start-up check has passed: the last run's files go aside
        set_aside(reports, _alluredir(config))
    run.dml_writer = ResultWriter(reports / "results", worker, run_id=run.dml_run_id)
    run.dml_cells = CellWriter(reports / "results", worker, run_id=run.dml_run_id)
    run.dml_worker = worker
    run.dml_cases_dir = reports / "cases"


def _configure_shard(config: DmlConfig) -> None:
    """--shard and --shard-durations, checked at start-up (a bad value is a usage error, before the
    last run's files are set aside). The controller reads the durations file now, since it may be
    the last run's own `results/durations.json`, which set_aside is about to move, and hands it to
    the xdist workers (pytest_configure_node), so that every worker splits with the same weights."""
    config.dml_full_cells = []
    config.dml_shard_durations = {}
    value = config.getoption("shard")
    path = config.getoption("shard_durations")
    try:
        config.dml_shard = parse_shard(value, os.environ) if value else None
    except ShardError as exc:
        raise pytest.UsageError(str(exc)) from None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.dml_shard_durations = dict(workerinput.get("dml_shard_durations") or {})
    elif path:
        try:
            config.dml_shard_durations = read_durations(Path(path))
        except RunFileError as exc:
            raise pytest.UsageError(f"--shard-durations {exc.render()}") from None


def _is_checkout(config: pytest.Config) -> bool:
    """A session of this project's own tests (a checkout: its tests use the ci profile too)."""
    return (Path(config.rootpath) / "harness" / "run" / "plugin.py").resolve() == Path(__file__).resolve()


def _alluredir(config: pytest.Config) -> Path | None:
    value = config.getoption("allure_report_dir", default=None)
    return Path(value) if value else None


_STARTED = False  # some test of this run has reported (controller or single process)


_RECORDING_FAILED: str | None = None  # why this process could not write the run's files (RecordingError)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A run that cannot write what it finds (a results folder made read-only mid-run) stops after
    this test, with one line instead of a traceback; without its completion marker the gate fails."""
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(RecordingError):
        global _RECORDING_FAILED
        _RECORDING_FAILED = str(call.excinfo.value)
        report.longrepr = f"dmlconform: {_RECORDING_FAILED}: the run stops here, incomplete (the gate fails)"
        item.session.shouldstop = f"dmlconform: {_RECORDING_FAILED}"
    return report


_DURATIONS: dict[str, float] = {}  # test id -> seconds, measured in this session (durations.json)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A run has started for real once a test reports: the last run's files are then dropped at its end.
    Each test's call time (its setup time when it was skipped there) is noted for durations.json:
    the controller sees every worker's reports, so it holds the whole run's."""
    global _STARTED
    _STARTED = True
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _DURATIONS[report.nodeid] = max(0.0, float(report.duration))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A planned cell is finished, whatever its outcome (skipped too): noted for the known hangs'
    probes, which wait for every other cell (harness.run.hang_probes)."""
    config = cast(DmlConfig, item.config)
    if item.nodeid in getattr(config, "dml_before_hang_probes", ()):
        note_finished(barrier_dir(Path(config.getoption("reports_dir")), config.dml_run_id), config.dml_worker, item.nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker writes under the controller's run id."""
    node.workerinput["dml_run_id"] = node.config.dml_run_id
    node.workerinput["dml_shard_durations"] = getattr(node.config, "dml_shard_durations", {})


def _planned_cell(item: pytest.Item, max_examples: int) -> PlannedCell | None:
    """The plan entry of one conformance test, from its parameters (None for other tests); the
    case budget of a ladder cell below its backend's own level is that level's (harness.run.ladder)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    params = {k: v for k, v in callspec.params.items() if isinstance(v, tuple)}  # not an empty parameter set
    skip = item.get_closest_marker("skip")
    reason = (skip.kwargs.get("reason") or (skip.args[0] if skip.args else "skipped")) if skip else None
    if "valid_cell" in params:
        backend, op, level, dtype = params["valid_cell"]
        per_descriptor = data_sets_per_descriptor(item.config, backend, level)
        return PlannedCell(item.nodeid, backend, op, level, dtype, "valid", max_examples * per_descriptor, False, reason)
    if "invalid_cell" in params:
        backend, op, level, rule = params["invalid_cell"]
        examples = invalid_examples(item.config, backend, level, max_examples) or max_examples
        return PlannedCell(item.nodeid, backend, op, level, rule, "invalid", examples, False, reason)
    if "example_cell" in params:
        backend, op, name = params["example_cell"]
        return PlannedCell(item.nodeid, backend, op, "", name, "example", 1, True, reason)
    if "sweep_cell" in params:
        backend, sweep = params["sweep_cell"]
        return PlannedCell(item.nodeid, backend, sweep.operator, sweep.level, sweep.id, "sweep", 1, True, reason)
    if "probe_cell" in params:
        backend, expectation = params["probe_cell"]
        return PlannedCell(item.nodeid, backend, "", "", expectation, "probe", 1, True, reason)
    return None


def _drawing_group(test_id: str, cell: PlannedCell | None) -> str:
    """The tests a shard keeps together: a cell's backends, which share one drawing of its cases
    (harness.run.drawn; `_cells_together` makes them neighbours for the same reason)."""
    if cell is None:
        return test_id
    return f"{cell.kind}|{cell.operator}|{cell.level}|{cell.subject}"


def _is_hang_probe(config: Any) -> Callable[[pytest.Item], bool]:
    """Whether a collected test is a known hang's probe (harness.run.hang_probes)."""
    expectations = getattr(config, "dml_expectations", {})
    return lambda item: hang_probe_expectation(item, expectations) is not None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The known hangs' probes moved after every other test (harness.run.hang_probes), then
    --shard I/N: this shard's items kept, the other shards' deselected (harness.run.shard.partition:
    the same answer on every xdist worker and every machine). Last of the collection hooks, so
    that the full plan is what -k, -m and the other plugins left; the full plan's cells are kept
    for the shard's plan (pytest_collection_finish)."""
    run = cast(DmlConfig, config)
    if getattr(config, "dml_is_run", False):
        move_hang_probes_last(items, _is_hang_probe(config))
    shard = getattr(run, "dml_shard", None)
    if shard is None:
        return
    max_examples = config.getoption("max_examples") or settings().max_examples
    planned = {item.nodeid: _planned_cell(item, max_examples) for item in items}
    run.dml_full_cells = [c for c in planned.values() if c is not None]
    assignment = partition(list(planned), run.dml_shard_durations, shard.total,
                           group_of=lambda test_id: _drawing_group(test_id, planned[test_id]))
    keep = [item for item in items if assignment[item.nodeid] == shard.index]
    others = [item for item in items if assignment[item.nodeid] != shard.index]
    if items and not keep and not hasattr(config, "workerinput"):
        # an empty shard would end as a run that never started, which no merge accepts (on xdist
        # workers, whose errors the controller cannot show, it ends as `no tests ran`)
        units = len({_drawing_group(t, c) for t, c in planned.items()})
        raise pytest.UsageError(f"--shard {shard}: no test falls to this shard ({units} unit(s) of work for "
                                f"{shard.total} shards): use at most {units} shards")
    if others:
        config.hook.pytest_deselected(items=others)
    items[:] = keep


def _run_options(config: DmlConfig, max_examples: int) -> dict[str, str]:
    """The options that make two shards' runs the same run (what a machine's own paths and
    devices are, --directml-adapter, --directml-stack, --directml-vulkan, is left out)."""
    def listed(name: str) -> str:
        return ",".join(config.getoption(name) or [])
    return {"backend": ",".join(config.dml_names), "feature_level": listed("feature_level") or "own",
            "operator": listed("operator"), "dtype": listed("dtype"), "max_examples": str(max_examples),
            "data_per_descriptor": str(config.getoption("data_per_descriptor")),
            "exhaustive": str(bool(config.getoption("exhaustive"))), "fp32_chunks": config.getoption("fp32_chunks") or "",
            "hypothesis_profile": str(config.getoption("hypothesis_profile", default=None) or ""),
            "hypothesis_seed": str(config.getoption("hypothesis_seed", default=None) or ""),
            "directml_dll": str(config.getoption("directml_dll") or ""),
            "directml_exec_flags": str(config.getoption("directml_exec_flags") or ""),
            "directml_timeout": str(config.getoption("directml_timeout")),
            "hang_probes": str(config.getoption("hang_probes"))}


def _shard_block(config: DmlConfig, max_examples: int) -> dict[str, Any] | None:
    """What a shard's plan says of the whole run (harness.run.record_schema.check_shard): the full
    plan's test ids and digest, the digest of the code, specs and expectation files, the options
    and the durations file, so that `dmlconform merge` can tell shards of one run from strangers."""
    shard = config.dml_shard
    if shard is None:
        return None
    override = config.getoption("expectations_dir")
    roots = [Path(__file__).resolve().parents[1], Path(config.dml_specs.directory), *([Path(override)] if override else [])]
    for backend in config.dml_backends.values():  # each backend's package (its code and expectation files)
        package = sys.modules.get(type(backend).__module__.split(".")[0])
        roots += [Path(p) for p in getattr(package, "__path__", [])]
    full = config.dml_full_cells
    return {"index": shard.index, "total": shard.total, "cells": [c.test_id for c in full],
            "digest": plan_digest([asdict(c) for c in full]), "source": source_digest(roots),
            "options": _run_options(config, max_examples), "durations": durations_digest(config.dml_shard_durations)}


def _backend_entry(config: DmlConfig, name: str) -> dict[str, Any]:
    """A backend's line of the plan; an available one's version names device, driver and DLL."""
    entry: dict[str, Any] = {"available": name in config.dml_backends, "requested": name in config.dml_requested,
                             "reason": config.dml_unavailable.get(name, "")}
    backend = config.dml_backends.get(name)
    if backend is not None:
        try:
            entry["version"] = backend.version()
        except Exception as exc:  # noqa: BLE001 - the plan says why rather than the run stopping
            entry["version"] = f"unknown: {type(exc).__name__}: {exc}"
    return entry


def pytest_collection_finish(session: pytest.Session) -> None:
    """The run's plan written (_write_plan). Then the specs, the cells and every module are in
    memory and stay until the process ends: out of the garbage collector's sight from here on
    (harness.run.heap)."""
    _write_plan(session)
    freeze_long_lived()


def _write_plan(session: pytest.Session) -> None:
    """The run's plan: every conformance cell collected (a shard's own), with its case budget or
    skip reason; the host, each backend's version and, for a shard, the full plan."""
    config = cast(DmlConfig, session.config)
    if not getattr(config, "dml_is_run", False):
        return
    max_examples = config.getoption("max_examples") or settings().max_examples
    cells = [c for c in (_planned_cell(i, max_examples) for i in session.items) if c is not None]
    hang_probe = _is_hang_probe(config)
    config.dml_before_hang_probes = frozenset(i.nodeid for i in session.items
                                              if not hang_probe(i) and _planned_cell(i, max_examples) is not None)
    backends = {name: _backend_entry(config, name) for name in config.dml_names}
    write_plan(Path(config.getoption("reports_dir")) / "results", config.dml_worker, config.dml_run_id, cells, backends,
               host=socket.gethostname(), shard=_shard_block(config, max_examples))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """results.csv and failures.csv, the records gzip-compressed (a normal end only: _finish_records)
    and the completion marker (a normal end only, last), then environment.properties and
    categories.json for the Allure report (controller or single process)."""
    config = cast(DmlConfig, session.config)
    if not getattr(config, "dml_is_run", False):
        return
    if not hasattr(config, "workerinput"):
        global _LIBERTIES, _SLOWEST
        _LIBERTIES, _SLOWEST = None, []  # this session's, never an earlier one's in the same process
        if not _STARTED:  # nothing ran: pytest_unconfigure gives the last run back
            return
        _write_durations(Path(config.getoption("reports_dir")) / "results")
        shutil.rmtree(barrier_dir(Path(config.getoption("reports_dir")), config.dml_run_id).parent, ignore_errors=True)
        normal_end = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and _RECORDING_FAILED is None
        _finish_records(Path(config.getoption("reports_dir")), compress=normal_end)
        # the last run's Allure results, packed by its `dmlconform report`: this run's replace them
        (Path(config.getoption("reports_dir")) / "allure-results.zip").unlink(missing_ok=True)
        if normal_end:
            try:
                write_complete(Path(config.getoption("reports_dir")) / "results", config.dml_run_id, int(exitstatus))
            except OSError as exc:  # the completion marker is the last write: without it the gate fails
                print(f"dmlconform: cannot write the completion marker: {exc.strerror or exc}", file=sys.stderr)
    specs = config.dml_specs
    alluredir = config.getoption("allure_report_dir", default=None)
    if not alluredir or hasattr(config, "workerinput"):
        return
    from harness.report.allure import write_run_files
    env = {"specs": str(specs.directory)}
    profile = config.getoption("hypothesis_profile", default=None) or "ci"
    env["hypothesis.profile"] = profile
    env["hypothesis.seed"] = str(config.getoption("hypothesis_seed", default=None) or ("derandomized" if profile == "ci" else "random"))
    for name in config.dml_names:
        backend = config.dml_backends.get(name)
        if backend is None:
            env[f"backend.{name}"] = f"not available: {config.dml_unavailable.get(name, '')}"
            continue
        env[f"backend.{name}"] = backend.version()
        env[f"backend.{name}.max_feature_level"] = device_level(backend, specs)
        if split_instance(name)[0] == "directml":
            directml = cast(_DirectMLBackend, backend)
            info = directml.info()
            env[f"{name}.dll"] = str(directml._dll)
            env[f"{name}.adapter"] = str(info.get("adapter"))
            vulkan = backend.vulkan() if hasattr(backend, "vulkan") else None
            if vulkan is not None:
                env[f"{name}.vulkan"] = vulkan.describe()
            env[f"{name}.exec_flags"] = hex(directml.exec_flags)
    env["report.detail"] = config.getoption("report_detail", default="failures")  # what `dmlconform report` builds
    env.update(_liberty_environment(Path(config.getoption("reports_dir")) / "results"))
    write_run_files(Path(alluredir), env)


_LIBERTIES: dict[str, Any] | None = None  # liberty totals of the run's records, read once at its end
_SLOWEST: list[Any] = []  # the run's slowest cases (harness.report.csv_results.SlowCase), for the terminal summary


def _finish_records(reports: Path, compress: bool) -> None:
    """At the run's end, on the controller, once every worker's records are written: read them once,
    write results.csv and failures.csv (harness.report.csv_results, deqp-runner's form) and note the
    slowest cases; then, on a normal end, gzip the records (an interrupted run keeps its .jsonl
    files as they are). Before the completion marker, which stays the run's last write; a problem
    here is one line, never the run's verdict."""
    global _LIBERTIES, _SLOWEST
    from harness.report.csv_results import slowest, write_csv_results
    from harness.report.matrix import liberty_totals
    from harness.run.results import compress_records, read_records
    results = reports / "results"
    _LIBERTIES, _SLOWEST = None, []
    try:
        records = list(read_records(results))
        write_csv_results(reports, records)
        _SLOWEST = slowest(records)
        _LIBERTIES = liberty_totals(records)
        del records  # a large run's records are hundreds of MB in memory
        if compress:
            compress_records(results)
    except (RunFileError, OSError) as exc:
        why = exc.render() if isinstance(exc, RunFileError) else f"{exc.filename or results}: {exc.strerror or exc}"
        print(f"dmlconform: cannot finish the run's results files: {why}", file=sys.stderr)


def _write_durations(results: Path) -> None:
    """results/durations.json: each test's measured seconds, what the next sharded run balances
    with (`--shard-durations`); before the completion marker, which stays the last write."""
    if not _DURATIONS:
        return
    try:
        write_durations(results / DURATIONS_FILE, _DURATIONS)
    except OSError as exc:  # the run's verdict does not depend on it
        print(f"dmlconform: cannot write {results / DURATIONS_FILE}: {exc.strerror or exc}", file=sys.stderr)


def _settle_previous_run(config: pytest.Config) -> None:
    """After every plugin's end of session (JUnit XML is written then): a run that started drops the
    last run's set-aside files; one that never started (a collection error, an interrupt during
    start-up, nothing selected) removes its own and gives the last run back."""
    if not getattr(config, "dml_is_run", False) or hasattr(config, "workerinput"):
        return
    if not hasattr(config, "dml_writer"):
        return  # start-up stopped before the last run was set aside
    reports = Path(config.getoption("reports_dir"))
    if _STARTED:
        drop(reports)
        return
    kept = give_back(reports, _alluredir(config))
    print(f"dmlconform: the run did not start; {'the previous run is kept in ' + str(reports) if kept else 'no reports written'}",
          file=sys.stderr)


def _liberty_environment(results_dir: Path) -> dict[str, str]:
    """`liberties.<backend>` lines for the Allure environment: each precision-model liberty the
    backend's results needed, with the cases and elements that needed it."""
    from harness.report.matrix import liberty_totals
    from harness.run.results import read_records
    env = {}
    totals = _LIBERTIES if _LIBERTIES is not None else liberty_totals(list(read_records(results_dir)))
    for backend, taken in totals.items():
        env[f"liberties.{backend}"] = "; ".join(f"{lib}: {n['cases']} cases, {n['elements']} elements"
                                                for lib, n in sorted(taken.items()))
    return env


def pytest_unconfigure(config: pytest.Config) -> None:
    for backend in getattr(config, "dml_backends", {}).values():
        backend.close()
    for name in ("dml_writer", "dml_cells"):
        writer = getattr(config, name, None)
        if writer is not None:
            writer.close()
    _settle_previous_run(config)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    if not getattr(config, "dml_is_run", False):
        return
    tr = terminalreporter
    run = cast(DmlConfig, config)
    specs = run.dml_specs
    tr.section("dmlconform backends")
    for name in run.dml_names:
        if name in run.dml_backends:
            backend = run.dml_backends[name]
            tr.write_line(f"ran:     {name}: {backend.version()} (device FL {device_level(backend, specs)})")
        else:
            tr.write_line(f"skipped: {name}: {run.dml_unavailable.get(name, 'not loaded')}")
    _summarize_slowest(tr)


def _summarize_slowest(tr: pytest.TerminalReporter) -> None:
    """The run's slowest cases (the controller read them at its end), where a slow device, stage
    or operator shows first; the whole list is results.csv.gz."""
    from harness.report.csv_results import SLOWEST, slowest_lines
    lines = slowest_lines(_SLOWEST)
    if lines:
        tr.section(f"dmlconform: the {min(SLOWEST, len(_SLOWEST))} slowest cases (all of them: results.csv.gz)")
        for line in lines:
            tr.write_line(line)


@pytest.fixture(scope="session")
def specs(request: pytest.FixtureRequest) -> SpecSet:
    return cast(DmlConfig, request.config).dml_specs
