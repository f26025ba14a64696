"""dmlconform works as an installed package, away from any checkout: what a user installs.

A wheel is built from a clean copy of the checkout (the files git tracks, and new ones it does
not ignore) and installed, not editable, into a fresh virtualenv outside the checkout. Then, from
an empty directory:

- `dmlconform run --backend numpy` runs one operator of every family (the element-wise formula
  path and each index-space family the specs name, found in the specs at test time) in one
  invocation: exit 0, the gate passes, no case crashed, every operator has records;
- `dmlconform spec check-docs` on the fixture pages (with the installed catalog) finds no drift,
  and `dmlconform spec lint` passes on the installed specs;
- the installed distribution holds every file of the checkout's harness/ and backends/ (every
  module, every data file: expectations, ONNX Runtime tables, runner.c, versions.yaml) and every
  specs/ file as `dmlconform_specs`, byte for byte, and every installed module imports. This is
  what catches a package or a data file the packaging config leaves out.

No network: the wheel is built with this environment's setuptools (no build isolation, no
index), and the new environment takes its third-party dependencies (numpy, hypothesis, pytest,
...) from this project's virtualenv through a path file, with dmlconform's own files left out.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from harness.run.results import record_dicts

ROOT = Path(__file__).resolve().parents[2]
OWN = ("__editable__", "dmlconform", "harness", "backends", "__pycache__")
ELEMENT_WISE = "ELEMENT_WISE_SIGN"  # the element-wise formula path (no `formula.family`)
PACKAGES = ("harness", "backends")  # shipped under their own names; specs/ ships as dmlconform_specs


@dataclass(frozen=True)
class Installed:
    env: Path       # the fresh virtualenv
    python: Path
    cli: Path       # its `dmlconform` script
    site: Path      # its site-packages
    source: Path    # the clean copy of the checkout the wheel was built from
    wheel: Path


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
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    source = tmp / "source"
    for name in listed:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    return source


def _clean_env() -> dict[str, str]:
    """No trace of the checkout: no PYTHONPATH, no extra backends."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DMLCONFORM_EXTRA_BACKENDS", "VIRTUAL_ENV")}


def _run(args: list, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=_clean_env(),
                          timeout=timeout)


def _output(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout[-4000:] + proc.stderr[-4000:]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    tmp = tmp_path_factory.mktemp("installed")
    source = _source_copy(tmp)  # setuptools builds in the source tree: build in a copy, not the checkout
    wheels = tmp / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                  "--disable-pip-version-check", "--wheel-dir", wheels, source], cwd=tmp, timeout=600)
    assert built.returncode == 0, _output(built)
    [wheel] = wheels.glob("dmlconform-*.whl")

    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)  # pip comes with the dependencies below
    python = env_dir / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp).stdout.strip())
    (site / "dmlconform-test-deps.pth").write_text(str(_dependencies_dir(tmp)) + "\n")
    proc = _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check", wheel],
                cwd=tmp, timeout=600)
    assert proc.returncode == 0, _output(proc)
    return Installed(env_dir, python, env_dir / "bin" / "dmlconform", site, source, wheel)


def _family_operators(specs_dir: Path) -> dict[str, str]:
    """Family name -> the first operator (alphabetically) whose spec names it; the element-wise
    formula path as "element-wise". A family new to the specs is covered without a change here."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    chosen: dict[str, str] = {"element-wise": ELEMENT_WISE}
    for path in sorted(specs_dir.glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        formula = (yaml.load(path.read_text(), Loader=loader) or {}).get("formula") or {}
        family = formula.get("family") if isinstance(formula, dict) else None
        name = family.get("name") if isinstance(family, dict) else family
        if name:
            chosen.setdefault(str(name), path.stem)
    return chosen


def test_installed_harness_does_not_come_from_the_checkout(installed, tmp_path):
    where = _run([installed.python, "-c", "\n".join([
        "import importlib, harness",
        "for name in ('harness.spec.load', 'harness.cli'):",
        "    specs = getattr(importlib.import_module(name), 'DEFAULT_SPECS_DIR', None)",
        "    if specs is not None: break",
        "print(harness.__file__); print(specs)"])], cwd=tmp_path)
    assert where.returncode == 0, _output(where)
    harness_file, specs_dir = where.stdout.split()
    assert not harness_file.startswith(str(ROOT)) and not specs_dir.startswith(str(ROOT)), where.stdout
    assert Path(harness_file).is_relative_to(installed.site) and Path(specs_dir) == installed.site / "dmlconform_specs"
    assert (Path(specs_dir) / f"{ELEMENT_WISE}.yaml").is_file()
    assert sys.executable != str(installed.python)


def test_the_wheel_holds_every_module_and_data_file_of_the_checkout(installed, tmp_path):
    """Every file of harness/ and backends/ (modules and the data they read) at its own path, every
    specs/ file under dmlconform_specs/, byte for byte; nothing else but the metadata and the script."""
    listing = _run([installed.python, "-c", "import importlib.metadata as m, json; "
                    "print(json.dumps([str(f) for f in m.distribution('dmlconform').files]))"], cwd=tmp_path)
    assert listing.returncode == 0, _output(listing)
    recorded = set(json.loads(listing.stdout))

    expected: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((installed.source / package).rglob("*")):
            if path.is_file():
                expected[path.relative_to(installed.source).as_posix()] = path
    for path in sorted((installed.source / "specs").rglob("*")):
        if path.is_file():
            expected["dmlconform_specs/" + path.relative_to(installed.source / "specs").as_posix()] = path
    # the harness reads these at run time: a check that the listing above is not empty or misplaced
    for needed in ["dmlconform_specs/_data_types.yaml", "dmlconform_specs/_feature_levels.yaml",
                   "dmlconform_specs/_enums.yaml", "dmlconform_specs/_structs.yaml", "dmlconform_specs/_arithmetic.yaml",
                   "harness/reference/families/__init__.py", "harness/pages/__init__.py",
                   "backends/expectations/directml.yaml", "backends/onnxruntime_ops.yaml",
                   "backends/directml/runner.c", "backends/directml/versions.yaml",
                   "backends/directml/vk_device_pick.c", "backends/directml/VkLayer_DMLCONFORM_device_pick.json"]:
        assert needed in expected, needed

    missing = sorted(name for name in expected if name not in recorded or not (installed.site / name).is_file())
    assert not missing, f"{len(missing)} file(s) of the checkout not installed (pyproject.toml [tool.setuptools*]): {missing}"
    changed = sorted(name for name, path in expected.items() if (installed.site / name).read_bytes() != path.read_bytes())
    assert not changed, f"installed files that differ from the checkout: {changed}"
    metadata = re.compile(r"(dmlconform-[^/]+\.dist-info/|\.\./)")  # RECORD, entry points; bin/dmlconform
    extra = sorted(n for n in recorded - set(expected) if not metadata.match(n) and "__pycache__/" not in n)
    assert not extra, f"installed files that are not in the checkout's harness/, backends/ or specs/: {extra}"

    imports = _run([installed.python, "-c", "\n".join([
        "import importlib, pkgutil, harness, backends",
        "bad = []",
        "for package in (harness, backends):",
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):",
        "        try: importlib.import_module(module.name)",
        "        except Exception as exc: bad.append(f'{module.name}: {exc!r}')",
        "print('\\n'.join(bad))"])], cwd=tmp_path)
    assert imports.returncode == 0 and not imports.stdout.strip(), _output(imports)


def test_one_operator_of_every_family_runs_in_an_empty_directory(installed, tmp_path):
    operators = _family_operators(installed.source / "specs")
    assert len(operators) > 1 and all((installed.site / "dmlconform_specs" / f"{op}.yaml").is_file()
                                      for op in operators.values()), operators
    work = tmp_path / "empty"
    work.mkdir()
    run = _run([installed.cli, "run", "--backend", "numpy", *[a for op in operators.values() for a in ("--operator", op)],
                "--max-examples", "2", "--workers", "0"], cwd=work, timeout=600)
    results = work / "reports" / "results"
    records = record_dicts(results)  # results-*.jsonl, gzip-compressed at the run's end
    # crashes first: a module or data file missing from the wheel shows as crashed cases (their why)
    crashed = [f"{r['operator']} {r['test_id']}: {r['summary']}" for r in records if r["status"] == "crashed"]
    assert not crashed, f"{len(crashed)} crashed case(s), first: {crashed[:5]}"
    assert run.returncode == 0, _output(run)
    assert records and (results / "complete.json").is_file()
    assert (work / "reports" / "junit.xml").is_file()
    ran = {r["operator"] for r in records}
    assert not {op for op in operators.values() if op not in ran}, (operators, sorted(ran))

    gate = _run([installed.cli, "gate"], cwd=work, timeout=120)
    assert gate.returncode == 0 and "GATE: PASS" in gate.stdout, _output(gate)
    assert "numpy: " in gate.stdout and " cells finished;" in gate.stdout


def test_spec_check_docs_and_lint_run_from_the_installed_specs(installed, tmp_path):
    pages = installed.source / "tests" / "fixtures" / "pages"
    specs = tmp_path / "specs"  # the installed catalog (_*.yaml) and the fixture spec, as scripts/check_docs_fixtures.sh
    specs.mkdir()
    for catalog in (installed.site / "dmlconform_specs").glob("_*.yaml"):
        shutil.copy(catalog, specs)
    for spec in (pages / "specs").glob("*.yaml"):
        shutil.copy(spec, specs)
    work = tmp_path / "empty"
    work.mkdir()
    drift = _run([installed.cli, "--specs-dir", specs, "spec", "check-docs", pages, pages / "defects",
                  "--json", work / "drift.json"], cwd=work, timeout=120)
    assert drift.returncode == 0, _output(drift)
    assert drift.stdout.startswith("# Spec drift against the API pages"), drift.stdout
    assert re.search(r"^1 operator\(s\), 3 page\(s\), \d+ table\(s\), \d+ cell\(s\) compared: \*\*0 drift\*\*",
                     drift.stdout, re.M), drift.stdout
    summary = json.loads((work / "drift.json").read_text())["summary"]
    assert summary["operators"] == 1 and summary["drift"] == 0 and summary["page_defects"] > 0, summary

    operators = len([p for p in (installed.source / "specs").glob("*.yaml") if not p.name.startswith("_")])
    lint = _run([installed.cli, "spec", "lint"], cwd=work, timeout=120)
    assert lint.returncode == 0, _output(lint)
    assert f"{operators} of {operators} spec file(s) OK" in lint.stdout, lint.stdout
