"""`dmlconform run` loses nothing previously recorded: every check it can make comes before it
touches the reports directory, the last run's files are set aside rather than deleted, and a run
that never starts gives them back (harness/run/previous.py). A run that starts and is interrupted
replaces the last one, and its gate fails: an interrupted run never passes."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--backend", "numpy", "--operator", "ELEMENT_WISE_ADD", "--max-examples", "1", "--workers", "0"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _snapshot(reports: Path) -> dict[str, str]:
    """Every file of the reports directory (the set-aside folder excepted) by path, with its digest."""
    return {str(p.relative_to(reports)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(reports.rglob("*")) if p.is_file() and ".previous-run" not in p.relative_to(reports).parts}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A complete run, copied for each test."""
    work = tmp_path_factory.mktemp("previous")
    proc = _cli("run", *RUN, "--reports-dir", str(work / "reports"), cwd=work)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return work / "reports"


@pytest.fixture
def reports(finished, tmp_path) -> Path:
    import shutil
    copy = tmp_path / "reports"
    shutil.copytree(finished, copy)
    return copy


def _gate(reports: Path) -> subprocess.CompletedProcess:
    return _cli("gate", "--reports-dir", str(reports), cwd=reports.parent)


def test_an_unknown_backend_instance_touches_nothing(reports):
    before = _snapshot(reports)
    proc = _cli("run", "--backend", "directml@9.9.9", "--operator", "ELEMENT_WISE_ADD", "--reports-dir", str(reports),
                cwd=reports.parent)
    assert proc.returncode == 2 and "unknown DirectML version '9.9.9'" in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(reports) == before


def test_a_run_that_never_starts_gives_the_last_run_back(reports):
    """Nothing selected (-k matching no test): the run starts no test, so the last run stays, bit for bit."""
    before = _snapshot(reports)
    proc = _cli("run", *RUN, "--reports-dir", str(reports), "-k", "no_test_has_this_name", cwd=reports.parent)
    assert "the run did not start; the previous run is kept" in proc.stderr, proc.stderr[-2000:]
    assert _snapshot(reports) == before and not (reports / ".previous-run").exists()
    assert _gate(reports).returncode == 0


def test_a_malformed_expectation_file_keeps_the_last_run(reports, tmp_path):
    bad = tmp_path / "expectations" / "numpy"
    bad.mkdir(parents=True)
    (bad / "broken.yaml").write_text("- a list where a mapping belongs\n")
    before = _snapshot(reports)
    proc = _cli("run", *RUN, "--reports-dir", str(reports), "--expectations-dir", str(tmp_path / "expectations"),
                cwd=reports.parent)
    assert proc.returncode != 0
    assert _snapshot(reports) == before


def test_an_interrupted_run_replaces_the_last_and_fails_the_gate(reports):
    """Interrupted after its first test: it started for real, so it is the run in place now (the
    set-aside one is dropped), and without its completion marker the gate fails."""
    proc = _cli("run", *RUN, "--reports-dir", str(reports), "-p", "tests.plugins.interrupt_run", cwd=ROOT)
    assert proc.returncode != 0
    assert not (reports / ".previous-run").exists() and not (reports / "results" / "complete.json").exists()
    gate = _gate(reports)
    assert gate.returncode == 1 and "GATE: FAIL" in gate.stdout, gate.stdout + gate.stderr


def test_after_a_killed_run_the_complete_one_is_what_comes_back(reports):
    """A run killed outright (SIGKILL) leaves the last complete run in .previous-run/ and its own
    partial files in place; the next run that never starts gives back the complete one."""
    import shutil
    aside = reports / ".previous-run"
    aside.mkdir()
    for name in ("results", "cases", "junit.xml"):
        if (reports / name).exists():
            shutil.copytree(reports / name, aside / name) if (reports / name).is_dir() else shutil.copy2(reports / name, aside / name)
    complete = _snapshot(aside)
    (reports / "results" / "complete.json").unlink()  # the killed run's partial files: no completion marker
    proc = _cli("run", *RUN, "--reports-dir", str(reports), "-k", "no_test_has_this_name", cwd=reports.parent)
    assert "previous run is kept" in proc.stderr
    derived = ("allure-results", "results.csv", "failures.csv")  # written at a run's end (not set aside here)
    assert {k: v for k, v in _snapshot(reports).items() if not k.startswith(derived)} == complete
    assert _gate(reports).returncode == 0


def test_a_results_folder_gone_read_only_stops_the_run_with_one_line(reports):
    """The results file refuses writes after the first test (a file system remounted read-only):
    the run stops there with one line naming the file and the cause, no traceback, no completion
    marker, and the gate fails."""
    proc = _cli("run", "--backend", "numpy", "--operator", "ELEMENT_WISE_ADD", "--operator", "ELEMENT_WISE_SUBTRACT",
                "--max-examples", "2", "--workers", "0", "--reports-dir", str(reports), "-p", "tests.plugins.readonly_results",
                cwd=ROOT)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "cannot write" in output and "Read-only file system" in output and "Traceback" not in output, output[-3000:]
    assert "the run stops here, incomplete" in output
    assert not (reports / "results" / "complete.json").exists()
    assert _gate(reports).returncode == 1
