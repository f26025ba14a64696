"""Fault injection: a crash costs one case, and an unfinished run can never pass the gate.

Faults injected: a backend that crashes in the middle of a cell; the DirectML runner killed in
the middle of a case, once and in a loop; a runner that cannot be restarted; a run interrupted
with Ctrl-C; a pytest-xdist worker killed mid-cell. Each test checks the records the run left
and the gate's verdict on them."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from backends.directml import DirectMLBackend
from backends.directml.process import RunnerDied
from harness.generate.cases import case_from_arrays
from harness.run.results import ResultWriter, read_records
from harness.run.case import run_case
from tests.helpers import SPECS, directml_or_skip

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "harness.cli"]
PLUGINS = ("broken-every-third=tests.plugins.broken_backend:CrashEveryThirdBackend,"
           "broken-kills-worker=tests.plugins.broken_backend:KillsItsWorkerBackend")


def _env() -> dict[str, str]:
    return dict(os.environ, DMLCONFORM_EXTRA_BACKENDS=PLUGINS, PYTHONPATH=str(ROOT))


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=timeout)


def _sign_cases(count: int) -> list:
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    return [case_from_arrays(spec, "6.4", {"InputTensor": "INT8", "OutputTensor": "INT8"},
                             {"InputTensor": np.array([-3, 0, i], np.int8)}) for i in range(count)]


# --- a crash in the middle of a cell ------------------------------------------------------------------

def test_crash_mid_cell_costs_one_case_and_the_cell_runs_on(tmp_path):
    proc = _cli("run", "--backend", "broken-every-third", "--operator", "ELEMENT_WISE_SIGN", "--dtype", "INT8",
                "--max-examples", "5", "--workers", "0", "--reports-dir", str(tmp_path), "-k", "test_valid")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = list(read_records(tmp_path / "results"))
    marker = [json.loads(line) for p in (tmp_path / "results").glob("cells-*.jsonl.gz")  # compressed at the run's end
              for line in gzip.decompress(p.read_bytes()).decode().splitlines()]
    assert len(marker) == 1
    ran = marker[0]["cases"]
    statuses = [r.status for r in records]
    assert ran == len(records) == 40  # 5 descriptors x 8 data sets: none abandoned after the first crash
    assert statuses.count("crashed") == ran // 3 and statuses.count("pass") == ran - ran // 3
    assert f"{ran // 3} of {ran} case(s) failed ({ran // 3} crashed)" in proc.stdout
    gate = _cli("gate", "--reports-dir", str(tmp_path))
    assert gate.returncode == 1
    assert "broken-every-third: 1 of 1 cells finished; 40 case(s) recorded of at most 40 planned" in gate.stdout
    assert f"crashed: broken-every-third ELEMENT_WISE_SIGN FL 6.4 INT8 x{ran // 3}" in gate.stdout
    assert "incomplete" not in gate.stdout


# --- the DirectML runner killed mid-case, a crash loop, a runner that cannot restart -------------------

def _directml() -> DirectMLBackend:
    return directml_or_skip(timeout=30)


def _kill_during_requests(backend: DirectMLBackend, which: set[int]) -> list[int]:
    """Make the runner die after the request of the n-th case (0-based) in `which` is sent."""
    calls: list[int] = []
    original = type(backend)._send

    def send(self, header, buffers, spec):
        n = len(calls)
        calls.append(n)
        if n in which:
            process = self._ensure()
            real_request = process.request

            def dying_request(h, b, timeout):
                os.killpg(process.proc.pid, signal.SIGKILL)  # xvfb-run, Wine and the runner, mid-request
                return real_request(h, b, timeout)
            process.request = dying_request
            try:
                return original(self, header, buffers, spec)
            finally:
                process.request = real_request
        return original(self, header, buffers, spec)
    backend._send = send.__get__(backend)  # type: ignore[method-assign]
    return calls


def test_directml_runner_killed_mid_cell_costs_one_case_each_time(tmp_path):
    """A runner killed once during a case: the case is run again on a restarted runner, and a crash
    the rerun does not repeat makes the case `flaky` (tag, summary, message), never a pass."""
    backend = _directml()
    try:
        _kill_during_requests(backend, {1, 4})
        writer = ResultWriter(tmp_path, "main")
        spec = SPECS.operator("ELEMENT_WISE_SIGN")
        outcomes = [run_case(backend, spec, case, "valid", writer=writer, test_id="cell") for case in _sign_cases(6)]
        writer.close()
    finally:
        backend.close()
    assert [o.status for o in outcomes] == ["pass", "flaky", "pass", "flaky", "pass", "pass"], [o.message for o in outcomes]
    once = [i for i, o in enumerate(outcomes) if "flaky" in o.record.tags]
    assert once == [1, 3], [o.message for o in outcomes]
    for i in once:  # the runner is found dead while the request is written or while its answer is awaited
        assert any(words in outcomes[i].record.summary for words in ("runner exited", "runner not running", "runner pipe closed"))
        assert outcomes[i].record.summary.startswith("flaky: first crashed (")
        assert "run again: pass" in outcomes[i].message
    assert len(list(read_records(tmp_path))) == 6


def test_directml_crash_loop_records_every_case_and_recovers(tmp_path):
    backend = _directml()
    try:
        _kill_during_requests(backend, {0, 1, 2, 3, 4})
        spec = SPECS.operator("ELEMENT_WISE_SIGN")
        outcomes = [run_case(backend, spec, case, "valid") for case in _sign_cases(7)]
    finally:
        backend.close()
    # each case is tried twice: requests 0-3 kill both tries of the first two cases, request 4 the
    # first try of the third, whose rerun passes: flaky, a failure of its own
    assert [o.status for o in outcomes] == ["crashed"] * 2 + ["flaky"] + ["pass"] * 4
    assert "flaky" in outcomes[2].record.tags and "flaky" not in outcomes[3].record.tags


class _NeverStarts:
    """A runner process whose every start fails, as when Wine or the GPU driver is gone for good."""

    starts = 0
    alive = False

    def __init__(self, config) -> None:
        self.config = config

    def start(self):
        type(self).starts += 1
        raise RunnerDied("wine: could not load the Vulkan driver (simulated)")

    def stop(self) -> None:
        pass


def test_runner_that_cannot_restart_makes_each_remaining_case_crashed(monkeypatch):
    """No Wine needed: the backend is given a device description and a process that never starts."""
    import backends.directml as directml
    monkeypatch.setattr(directml, "RunnerProcess", _NeverStarts)
    monkeypatch.setattr(_NeverStarts, "starts", 0)
    backend = DirectMLBackend(SPECS)
    backend._info = {"max_feature_level": SPECS.catalog.level("6.4").enum, "types": {}, "adapter": "simulated"}
    backend._dll = Path("DirectML.dll")
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    outcomes = [run_case(backend, spec, case, "valid") for case in _sign_cases(6)]
    assert [o.status for o in outcomes] == ["crashed"] * 6
    assert _NeverStarts.starts == 3  # then it stops paying a start-up per case
    assert "could not load the Vulkan driver" in outcomes[0].diff.summary
    assert "could not be restarted (3 failed starts in a row)" in outcomes[5].diff.summary


# --- interrupted runs and killed workers -------------------------------------------------------------

def _wait_for_records(results: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.stat().st_size > 0 for p in results.glob("results-*.jsonl")):
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it wrote a record: {proc.communicate()}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail("no record within the timeout")


def _default_sigint() -> None:
    """Ctrl-C's default action in the child: a suite started in the background by a
    non-interactive shell inherits SIGINT ignored, and Python then keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupted_run_fails_the_gate(tmp_path):
    # many examples of two operators: the run is surely still going when its first record is
    # written (a whole ci-profile run can finish within a loaded machine's polling gap)
    proc = subprocess.Popen([*CLI, "run", "--backend", "numpy", "--operator", "ELEMENT_WISE_SIGN", "--operator", "ELEMENT_WISE_ADD",
                             "--max-examples", "500", "--workers", "2", "--reports-dir", str(tmp_path)],
                            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    _wait_for_records(tmp_path / "results", proc)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground process group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, out[-2000:]
    gate = _cli("gate", "--reports-dir", str(tmp_path))
    assert gate.returncode == 1, gate.stdout
    assert "incomplete run:" in gate.stdout and "GATE: FAIL" in gate.stdout
    assert not (tmp_path / "results" / "complete.json").exists()


def test_killed_xdist_worker_fails_the_gate_and_names_the_cell(tmp_path):
    proc = _cli("run", "--backend", "broken-kills-worker", "--operator", "ELEMENT_WISE_BIT_NOT", "--dtype", "UINT8",
                "--dtype", "INT8", "--max-examples", "2", "--workers", "2", "--reports-dir", str(tmp_path), "-k", "test_valid")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    gate = _cli("gate", "--reports-dir", str(tmp_path))
    assert gate.returncode == 1
    assert "incomplete run: 1 of 2 cells have results; their tests ended without finishing" in gate.stdout
    unfinished = [line for line in gate.stdout.splitlines() if line.strip().startswith("unfinished: ")]
    assert len(unfinished) == 1 and unfinished[0].endswith("::test_valid[ELEMENT_WISE_BIT_NOT-FL6.4-UINT8-broken-kills-worker]")


class _CrashingDevice:
    """A device (not the reference) whose every run crashes like DirectML's null-tensor
    dereference; it counts the runs."""
    name = "directml"

    def __init__(self, reason: str) -> None:
        self.runs, self.reason = 0, reason

    def capabilities(self):
        from harness.model.backend import Capabilities
        return Capabilities(max_feature_level="6.4", validates_descriptors=True)

    def run(self, case):
        from harness.model.backend import Crashed
        self.runs += 1
        return Crashed(self.reason)


def test_a_crash_an_expectation_explains_is_not_rerun():
    """DirectML's known null-tensor crashes: the one run is the observation (the expectation's
    probe runs every time too); an unexplained crash is still run twice (flaky or repeatable)."""
    from harness.judge.expectations import probe_case
    from harness.run.registry import expectations_for
    expectations = expectations_for("directml")
    item = next(i for i in expectations.items if i.id == "dml-split-null-input-crash")
    spec = SPECS.operator("SPLIT")
    case = probe_case(item, SPECS, "6.4")
    known = _CrashingDevice("page fault on read access to 0000000000000008")
    outcome = run_case(known, spec, case, "invalid", expectations=expectations)
    assert known.runs == 1 and outcome.status == "expected-divergence" and outcome.record.expectation == item.id
    unknown = _CrashingDevice("access violation somewhere else")
    outcome = run_case(unknown, spec, case, "invalid", expectations=expectations)
    assert unknown.runs == 2 and outcome.status == "crashed"
    without = _CrashingDevice("page fault on read access to 0000000000000008")
    run_case(without, spec, case, "invalid")
    assert without.runs == 2
