"""The gate passes only a complete run whose every case conformed.

Each test writes the files of a run (records, plan, cell markers, completion marker) with one
thing wrong, and checks the gate's verdict and the line that explains it."""
from __future__ import annotations

from pathlib import Path

from harness.cli import main
from harness.report.gate import evaluate_gate
from harness.run.results import CaseRecord, read_records, worst_per_case
from harness.run.manifest import PlannedCell, load_manifest, plan_files
from tests.harness.run_files import write_run


def _rec(case: str, status: str = "pass", backend: str = "numpy", test_id: str = "", kind: str = "valid") -> CaseRecord:
    return CaseRecord(backend, "ELEMENT_WISE_SIGN", "6.4", "FLOAT32", kind, status, case, "summary", test_id=test_id)


def _gate(reports: Path):
    return evaluate_gate(list(read_records(reports / "results")), load_manifest(reports / "results"))


def test_complete_conforming_run_passes(tmp_path):
    write_run(tmp_path, [_rec("a"), _rec("b"), _rec("c", "rejected-invalid", kind="invalid")])
    result = _gate(tmp_path)
    assert result.passed, result.summary
    assert "numpy: 2 of 2 cells finished; 3 case(s) recorded of at most 50 planned" in result.summary


def test_run_without_completion_marker_fails_as_interrupted(tmp_path):
    write_run(tmp_path, [_rec("a")], complete=False)
    result = _gate(tmp_path)
    assert not result.passed
    assert "incomplete run: no completion marker (the session did not end normally)" in result.summary


def test_unfinished_cells_are_named_and_counted(tmp_path):
    records = [_rec("a", test_id="t1"), _rec("b", test_id="t2"), _rec("c", test_id="t3")]
    write_run(tmp_path, records, unfinished={"t2", "t3"}, complete=False)
    result = _gate(tmp_path)
    assert not result.passed
    assert "incomplete run: 1 of 3 cells have results; the run was interrupted" in result.summary
    assert "  unfinished: t2" in result.summary and "  unfinished: t3" in result.summary


def test_cell_that_died_in_a_completed_session_fails(tmp_path):
    """A killed xdist worker: the session ends normally (marker written) but one cell never finished."""
    write_run(tmp_path, [_rec("a", test_id="t1"), _rec("b", test_id="t2")], unfinished={"t2"})
    result = _gate(tmp_path)
    assert not result.passed
    assert any("1 of 2 cells have results; their tests ended without finishing" in line for line in result.summary)


def test_planned_cell_with_no_record_at_all_fails(tmp_path):
    never = PlannedCell("t-never", "numpy", "ELEMENT_WISE_SIGN", "6.4", "INT8", "valid", 200, False)
    write_run(tmp_path, [_rec("a", test_id="t1")], extra_cells=[never], unfinished={"t-never"})
    result = _gate(tmp_path)
    assert not result.passed and "  unfinished: t-never" in result.summary


def test_lost_records_fail(tmp_path):
    write_run(tmp_path, [_rec("a", test_id="t1")], ran={"t1": 5})
    result = _gate(tmp_path)
    assert not result.passed
    assert "  t1: ran 5, recorded 1" in result.summary


def test_no_plan_fails(tmp_path):
    write_run(tmp_path, [_rec("a")])
    for plan in plan_files(tmp_path / "results"):
        plan.unlink()
    result = _gate(tmp_path)
    assert not result.passed and any(line.startswith("incomplete run: no run plan") for line in result.summary)


def test_completion_marker_of_another_run_fails(tmp_path):
    write_run(tmp_path, [_rec("a")])
    (tmp_path / "results" / "complete.json").write_text('{"run_id": "other", "exitstatus": 0}')
    assert "incomplete run: the completion marker belongs to another run" in _gate(tmp_path).summary


def test_a_later_crash_of_the_same_case_is_not_lost(tmp_path):
    records = [_rec("same", "pass", test_id="t1"), _rec("same", "crashed", test_id="t1")]
    write_run(tmp_path, records)
    result = _gate(tmp_path)
    assert not result.passed
    assert [r.status for r in result.failures] == ["crashed"]


def test_worst_record_wins_whatever_the_order():
    for order in (["pass", "mismatch", "crashed"], ["crashed", "pass", "mismatch"], ["mismatch", "crashed", "pass"]):
        assert [r.status for r in worst_per_case([_rec("x", s) for s in order])] == ["crashed"]
    assert [r.status for r in worst_per_case([_rec("x", "pass"), _rec("x", "unsupported")])] == ["unsupported"]


def test_unknown_status_is_a_failure(tmp_path):
    write_run(tmp_path, [_rec("a", "some-new-status")])
    result = _gate(tmp_path)
    assert not result.passed and "some-new-status: numpy ELEMENT_WISE_SIGN" in "\n".join(result.summary)


def test_explicitly_requested_backend_that_did_not_run_fails(tmp_path):
    backends = {"numpy": {"available": True, "requested": True, "reason": ""},
                "directml": {"available": False, "requested": True, "reason": "the runner is not built"}}
    write_run(tmp_path, [_rec("a")], backends=backends)
    result = _gate(tmp_path)
    assert not result.passed
    assert "directml: not run: the runner is not built (requested explicitly: the gate cannot pass what it did not see)" in result.summary


def test_default_backend_that_is_unavailable_is_named_not_failed(tmp_path):
    backends = {"numpy": {"available": True, "requested": False, "reason": ""},
                "directml": {"available": False, "requested": False, "reason": "not Debian"}}
    write_run(tmp_path, [_rec("a")], backends=backends)
    result = _gate(tmp_path)
    assert result.passed and "directml: not run: not Debian" in result.summary


def test_gate_command_on_missing_reports_dir_is_a_usage_error(tmp_path, capsys):
    assert main(["gate", "--reports-dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "Traceback" not in err


def test_an_unseen_expectation_without_a_probe_is_stale_unless_it_names_a_flake(tmp_path):
    """An expectation with no probe that explained none of its operator's cases in a run is
    stale; a known flake (status flaky) shows in some runs only, so its absence is not."""
    write_run(tmp_path, [_rec("a"), _rec("b")])
    expectations = tmp_path / "expectations"
    expectations.mkdir()
    (expectations / "numpy.yaml").write_text(
        "backend: numpy\nexpectations:\n"
        "  - id: numpy-sign-crashes\n    operator: ELEMENT_WISE_SIGN\n    status: crashed\n    why: made up\n"
        "  - id: numpy-sign-flakes\n    operator: ELEMENT_WISE_SIGN\n    status: flaky\n    why: made up\n")
    result = evaluate_gate(list(read_records(tmp_path / "results")), load_manifest(tmp_path / "results"), expectations)
    assert not result.passed
    assert any("numpy:numpy-sign-crashes has no probe and explained none of 2 case(s)" in s for s in result.stale), result.stale
    assert not any("numpy-sign-flakes" in s for s in result.stale), result.stale


def test_an_expectation_about_one_rule_is_judged_on_that_rules_cases(tmp_path):
    """A probe-less expectation naming a rule is stale only where that rule's cases ran and none
    matched it: the ladder asks an older DLL only the rules a level gates, so the operator running
    (its other rules, its worked examples) says nothing of this one."""
    other_rule = CaseRecord("numpy", "ELEMENT_WISE_SIGN", "6.4", "FLOAT32", "invalid", "rejected-invalid", "c", "summary",
                            rule="tensor.data_type")
    write_run(tmp_path, [_rec("a"), _rec("b"), other_rule])
    expectations = tmp_path / "expectations"
    expectations.mkdir()
    (expectations / "numpy.yaml").write_text(
        "backend: numpy\nexpectations:\n"
        "  - id: numpy-sign-accepts-bad-strides\n    operator: ELEMENT_WISE_SIGN\n    status: accepted-invalid\n"
        "    rule: tensor.strides_length\n    why: made up\n"
        "  - id: numpy-sign-accepts-bad-types\n    operator: ELEMENT_WISE_SIGN\n    status: accepted-invalid\n"
        "    rule: tensor.data_type\n    why: made up\n")
    result = evaluate_gate(list(read_records(tmp_path / "results")), load_manifest(tmp_path / "results"), expectations)
    assert not any("numpy-sign-accepts-bad-strides" in s for s in result.stale), result.stale
    assert any("numpy:numpy-sign-accepts-bad-types has no probe and explained none of 1 case(s)" in s for s in result.stale), result.stale
