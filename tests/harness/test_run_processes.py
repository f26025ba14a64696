"""Every process a run starts ends with it, whatever signal ends the run (issue 30): the runner and
its Xvfb die with the process that started them (PR_SET_PDEATHSIG, backends/directml/lifetime.py),
and SIGTERM ends a run as Ctrl-C does (the plugin closes its backends). The wineserver is shared by
every backend on the prefix and exits by itself PERSIST_S seconds after its last client: it is not
counted here."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import directml_or_skip

ROOT = Path(__file__).resolve().parents[2]


def _xvfbs() -> set[int]:
    """The Xvfb processes of this machine that dmlconform starts (-displayfd), by pid."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"Xvfb") and b"-displayfd" in cmdline:
            found.add(int(entry.name))
    return found


@pytest.fixture(scope="module")
def directml_here():
    directml_or_skip().close()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_no_xvfb_outlives_a_run_ended_by_a_signal(directml_here, how, tmp_path):
    before = _xvfbs()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--backend", "directml", "--operator", "ELEMENT_WISE_ADD",
                            "--operator", "ELEMENT_WISE_MULTIPLY", "--max-examples", "200", "--workers", "0",
                            "--reports-dir", str(tmp_path / "reports")],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        started: set[int] = set()
        while time.monotonic() < deadline and not started and run.poll() is None:
            started = _xvfbs() - before
            time.sleep(0.2)
        assert started, "the run started no Xvfb (or ended first)"
        time.sleep(1.0)  # the runner is up and cases are running
        run.send_signal(how)
        # how long the run takes to write its interrupted reports is not what this test is about: the
        # limit only catches a run that never ends (60 s once ran out on a loaded 2-core CI machine)
        run.wait(timeout=300)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and started & _xvfbs():
            time.sleep(0.2)
        assert not started & _xvfbs(), f"Xvfb {sorted(started & _xvfbs())} outlived the run ended by {how.name}"
    finally:
        if run.poll() is None:
            run.kill()
