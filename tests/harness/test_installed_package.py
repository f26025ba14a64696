"""dmlconform works as an installed package, away from any checkout.

A fresh virtualenv outside the checkout gets `pip install <checkout>` (a real, non-editable
install: the harness, the backends, the specs and expectation files as package data, the pytest
plugin and the backends as entry points); then `dmlconform run --backend numpy` in an empty
directory must run the suite from the package, write its reports there, and pass the gate.

No network: the new environment takes its third-party dependencies (numpy, hypothesis, pytest,
...) from this project's virtualenv through a path file, with dmlconform's own files left out.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OWN = ("__editable__", "dmlconform", "harness", "backends", "__pycache__")


def _dependencies_dir(tmp: Path) -> Path:
    """This environment's site-packages, minus dmlconform itself (links, no copies)."""
    deps = tmp / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OWN) and not entry.name.endswith(".pth"):
            (deps / entry.name).symlink_to(entry)
    return deps


def _source_copy(tmp: Path) -> Path:
    """The files git tracks (and new ones it does not ignore), as a clean source tree."""
    import shutil
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    source = tmp / "source"
    for name in listed:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    return source


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("installed")
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "dmlconform-test-deps.pth").write_text(str(_dependencies_dir(tmp)) + "\n")
    source = _source_copy(tmp)  # pip builds in the source tree: build it in a copy, not the checkout
    proc = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                           "--disable-pip-version-check", str(source)], capture_output=True, text=True, timeout=600,
                          cwd=tmp, env=_clean_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return env_dir


def _clean_env() -> dict[str, str]:
    """No trace of the checkout: no PYTHONPATH, no extra backends."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DMLCONFORM_EXTRA_BACKENDS", "VIRTUAL_ENV")}
    return env


def test_installed_harness_does_not_come_from_the_checkout(installed, tmp_path):
    python = installed / "bin" / "python"
    where = subprocess.run([python, "-c", "import harness, harness.spec.operator as o; print(harness.__file__); print(o.DEFAULT_SPECS_DIR)"],
                           capture_output=True, text=True, cwd=tmp_path, env=_clean_env(), check=True).stdout.split()
    assert not where[0].startswith(str(ROOT)) and not where[1].startswith(str(ROOT)), where
    assert (Path(where[1]) / "ELEMENT_WISE_SIGN.yaml").is_file()


def test_run_in_an_empty_directory_writes_its_reports_there(installed, tmp_path):
    work = tmp_path / "empty"
    work.mkdir()
    cli = installed / "bin" / "dmlconform"
    env = _clean_env()
    run = subprocess.run([cli, "run", "--backend", "numpy", "--operator", "ELEMENT_WISE_SIGN", "--max-examples", "2",
                          "--workers", "0"], capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = work / "reports" / "results"
    assert list(results.glob("results-*.jsonl")) and (results / "complete.json").is_file()
    assert (work / "reports" / "junit.xml").is_file()
    gate = subprocess.run([cli, "gate"], capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert gate.returncode == 0 and "GATE: PASS" in gate.stdout, gate.stdout + gate.stderr
    assert "numpy: " in gate.stdout and " cells finished;" in gate.stdout
    assert sys.executable != str(installed / "bin" / "python")
