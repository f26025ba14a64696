"""The harness's own tests take their operators from the specs (issue 12).

Adding an operator is adding its YAML file: no harness test may hard-code the operator set or its
size. The proof: a copy of the specs with one more operator (ELEMENT_WISE_SIGN's spec under another
name and DML_OPERATOR_TYPE) lints clean, and the tests that enumerate the operators, run against
it (DMLCONFORM_TEST_SPECS_DIR, read by tests/helpers.py), fail only where hand-checked data is due:
"no golden data for ELEMENT_WISE_SIGN_COPY (add tests/golden/ELEMENT_WISE_SIGN_COPY.yaml)".
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main
from tests.helpers import GOLDEN_DIR, SPECS

ROOT = Path(__file__).resolve().parents[2]
NEW = "ELEMENT_WISE_SIGN_COPY"
NO_GOLDEN = f"no golden data for {NEW} (add tests/golden/{NEW}.yaml)"

# Every test that enumerates the operators of the specs (parametrized over them, or aggregating
# over all of them). test_every_enumerating_test_is_in_the_proof keeps this list complete.
ENUMERATING = [
    "tests/harness/test_reference_vectors.py",
    "tests/harness/test_spec_fidelity.py",
    "tests/harness/test_spec_show.py",
    "tests/harness/test_generation.py",
    "tests/harness/test_validator_rules.py",
    "tests/harness/test_fast_paths.py::test_evaluation_in_place_never_writes_the_variables",
    "tests/harness/test_hostile_cases.py::test_generated_cases_are_well_formed",
    "tests/harness/test_replay_fidelity.py::test_saved_case_replays_to_the_same_case_and_verdict",
]


@pytest.fixture(scope="module")
def five_specs(tmp_path_factory) -> Path:
    """The specs plus ELEMENT_WISE_SIGN_COPY: SIGN's file with a new name, desc struct and an unused
    operator type (operator types must be unique across the specs)."""
    assert not (GOLDEN_DIR / f"{NEW}.yaml").exists()
    specs = tmp_path_factory.mktemp("specs") / "specs"
    shutil.copytree(SPECS.directory, specs)
    text = (specs / "ELEMENT_WISE_SIGN.yaml").read_text()
    unused = max(op.operator_type for op in SPECS.operators.values()) + 1
    for old, new in [("operator: ELEMENT_WISE_SIGN\n", f"operator: {NEW}\n"),
                     ("operator_type: 79\n", f"operator_type: {unused}\n"),
                     ("desc_struct: DML_ELEMENT_WISE_SIGN_OPERATOR_DESC\n", f"desc_struct: DML_{NEW}_OPERATOR_DESC\n")]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (specs / f"{NEW}.yaml").write_text(text)
    return specs


def _pytest(specs: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DMLCONFORM_TEST_SPECS_DIR=str(specs))
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def test_the_fifth_spec_lints_clean(five_specs, capsys):
    count = len(SPECS.operators) + 1
    assert main(["--specs-dir", str(five_specs), "spec", "lint"]) == 0
    assert f"{count} of {count} spec file(s) OK" in capsys.readouterr().out


def test_every_enumerating_test_is_in_the_proof(five_specs):
    """Every harness test that the new operator reaches (its id names the operator) is one of
    ENUMERATING, so the proof below runs it."""
    proc = _pytest(five_specs, "--collect-only", "-q", "tests/harness")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reached = {line.split("[", 1)[0] for line in proc.stdout.splitlines() if NEW in line}
    assert reached, proc.stdout[-3000:]
    missing = {t for t in reached if not any(t == e or t.startswith(e + "::") for e in ENUMERATING)}
    assert not missing, f"add to ENUMERATING: {sorted(missing)}"


@pytest.mark.slow  # the enumerating tests once more, for five operators (about a minute on two cores)
def test_a_new_operator_fails_only_for_want_of_golden_data(five_specs, tmp_path):
    """Run ENUMERATING against the five specs: the only failures are the new operator's tests that
    need hand-checked data, each with exactly NO_GOLDEN; its generation, validation and replay
    tests pass, and so do the tests that aggregate over every operator."""
    junit = tmp_path / "junit.xml"
    workers = ["-n", "2"] if _has_xdist() else []
    # the new operator's tests and those that name no operator (they aggregate over all of them);
    # the other operators' own tests ran in this suite already. The names come from the specs.
    others = " or ".join(sorted(SPECS.operators))
    select = ["-k", f"{NEW} or not ({others})"]
    proc = _pytest(five_specs, "-q", *workers, *select, f"--junitxml={junit}", f"--reports-dir={tmp_path / 'reports'}", *ENUMERATING)
    output = proc.stdout[-6000:] + proc.stderr[-3000:]
    assert proc.returncode in (0, 1) and junit.is_file(), output
    passed, failed, errors = [], {}, []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("error") is not None:
            errors.append(name)
        elif case.find("failure") is not None:
            failure = case.find("failure")
            failed[name] = re.sub(r"^Failed: ", "", failure.get("message", ""))
        elif case.find("skipped") is None:
            passed.append(name)
    assert not errors, output
    # the new operator's golden tests fail, with exactly the message, and nothing else fails
    assert any("test_golden_vectors" in n and NEW in n for n in failed), output
    wrong = {n: m for n, m in failed.items() if m != NO_GOLDEN or NEW not in n}
    assert not wrong, wrong
    # and the new operator was exercised where no golden data is needed
    reached = {n.split("[", 1)[0].rsplit("::", 1)[-1] for n in passed if f"[{NEW}" in n or f"-{NEW}" in n}
    assert {"test_valid_cases_are_accepted", "test_invalid_cases_break_exactly_their_rule",
            "test_every_table_cell_is_generated", "test_generated_cases_are_well_formed"} <= reached, sorted(reached)
    for aggregate in ("test_spec_lint_passes_on_specs", "test_every_rule_id_is_reached_by_some_operator",
                      "test_every_rule_id_has_a_case", "test_sweeps_cover_only_supported_unary_pairs"):
        assert any(n.endswith("::" + aggregate) for n in passed), aggregate


def _has_xdist() -> bool:
    from importlib.util import find_spec
    return find_spec("xdist") is not None
