"""Flakes named, never hidden, and known hangs not sent (issue 31).

An unexpected failure is run once more, alone: a rerun that comes out otherwise makes the case
`flaky`, a failure of its own unless an expectation names it; a failure that repeats stays what it
is. A valid case of an expectation marked `hangs` is not sent to the device (recorded as that known
divergence, tagged not-run), nor are invalid ones of such descriptors; its probe is."""
from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from backends.numpy_reference import NumpyReferenceBackend
from harness.generate.cases import case_from_arrays
from harness.judge.expectations import ExpectationError, load_expectations
from harness.judge.status import Status, is_failure
from harness.model.backend import Crashed, Outputs
from harness.run.case import run_case, run_cases
from harness.run.results import ResultWriter, read_records
from tests.helpers import SPECS

SIGN = SPECS.operator("ELEMENT_WISE_SIGN")


class _Scripted(NumpyReferenceBackend):
    """The reference's answers, as a device (not the reference), except for the scripted first
    answers of a case: `crash` (a driver crash) or `wrong` (all-zero outputs)."""

    name = "scripted"

    def __init__(self, script: dict[int, list[str]]) -> None:
        super().__init__(SPECS)
        self.script = script  # call number per case -> what goes wrong on those calls
        self.calls: Counter[str] = Counter()
        self.sent: list[str] = []

    def capabilities(self):
        return dataclasses.replace(super().capabilities(), is_reference=False)

    def run(self, case):
        self.calls[case.case_id] += 1
        self.sent.append(case.case_id)
        trouble = self.script.get(self.calls[case.case_id], [])
        if "crash" in trouble:
            return Crashed("driver lost (simulated)")
        if "held" in trouble:  # as DirectML answers a case whose family hung: never sent to the device
            return Crashed("not run: 2 other descriptors of this operator hung (simulated)", sent=False)
        result = super().run(case)
        if "wrong" in trouble and isinstance(result, Outputs):
            return Outputs({name: bytes(len(data)) for name, data in result.buffers.items()})
        return result


def _case(values, dtype="INT8"):
    return case_from_arrays(SIGN, "6.4", {"InputTensor": dtype, "OutputTensor": dtype}, {"InputTensor": np.array(values)})


def _expectations(tmp_path: Path, text: str):
    (tmp_path / "scripted.yaml").write_text("backend: scripted\nexpectations:\n" + text)
    return load_expectations("scripted", tmp_path, SPECS)


def test_a_crash_that_does_not_repeat_is_flaky_never_a_pass(tmp_path):
    backend = _Scripted({1: ["crash"]})
    writer = ResultWriter(tmp_path, "main")
    outcome = run_case(backend, SIGN, _case([-3, 0, 2]), "valid", writer=writer)
    writer.close()
    assert outcome.status == Status.FLAKY and is_failure(outcome.status)
    assert "flaky" in outcome.record.tags
    assert outcome.record.summary.startswith("flaky: first crashed (driver lost (simulated))")
    assert "run again: pass" in outcome.record.summary
    [record] = list(read_records(tmp_path))
    assert record.status == "flaky"


def test_a_mismatch_that_does_not_repeat_is_flaky():
    backend = _Scripted({1: ["wrong"]})
    outcome = run_case(backend, SIGN, _case([-3, 5, 2]), "valid")
    assert outcome.status == Status.FLAKY
    assert outcome.record.summary.startswith("flaky: first mismatch")
    assert outcome.record.mismatches > 0  # the failing run's diff is what the record keeps


def test_a_failure_that_repeats_stays_that_failure():
    backend = _Scripted({1: ["crash"], 2: ["crash"]})
    case = _case([1, 2])
    outcome = run_case(backend, SIGN, case, "valid")
    assert outcome.status == Status.CRASHED and "flaky" not in outcome.record.tags
    assert backend.calls[case.case_id] == 2


def test_a_case_the_backend_never_sent_is_not_run_again():
    """Its rerun would only send a descriptor whose family hung: 16 such reruns cost 14.5 s each
    on an NVIDIA H200 (call 16). It stays crashed, a failure, saying why."""
    backend = _Scripted({1: ["held"]})
    case = _case([1, 2])
    outcome = run_case(backend, SIGN, case, "valid")
    assert outcome.status == Status.CRASHED and "flaky" not in outcome.record.tags
    assert outcome.record.summary.startswith("not run: 2 other descriptors")
    assert backend.calls[case.case_id] == 1


def test_a_pass_is_not_run_again():
    backend = _Scripted({})
    case = _case([1, 2])
    assert run_case(backend, SIGN, case, "valid").status == Status.PASS
    assert backend.calls[case.case_id] == 1


def test_an_expectation_naming_flaky_explains_it(tmp_path):
    known = _expectations(tmp_path, "  - id: scripted-sign-flakes\n    operator: ELEMENT_WISE_SIGN\n    status: flaky\n"
                                    "    why: a scripted flake\n")
    outcome = run_case(_Scripted({1: ["crash"]}), SIGN, _case([1, -1]), "valid", expectations=known)
    assert outcome.status == Status.EXPECTED_DIVERGENCE and outcome.record.expectation == "scripted-sign-flakes"


HANGS = """  - id: scripted-sign-int16-hangs
    operator: ELEMENT_WISE_SIGN
    status: crashed
    devices: [scripted]
    hangs: true
    data_types: [INT16]
    reason_contains: "hang in execute"
    why: a scripted hang
    probe:
      types: {InputTensor: INT16, OutputTensor: INT16}
      inputs: {InputTensor: [1, -1]}
"""


def test_cases_of_a_known_hang_are_not_sent_valid_or_invalid(tmp_path):
    known = _expectations(tmp_path, HANGS)
    backend = _Scripted({})
    hang, other = _case([1, -2], "INT16"), _case([1, -2], "INT8")
    invalid = dataclasses.replace(case_from_arrays(SIGN, "6.4", {"InputTensor": "INT16", "OutputTensor": "INT8"},
                                                   {"InputTensor": np.array([1])}),
                                  expect_valid=False, broken_rule="constraint.same_data_type")
    invalid_other = dataclasses.replace(case_from_arrays(SIGN, "6.4", {"InputTensor": "INT8", "OutputTensor": "INT16"},
                                                         {"InputTensor": np.array([1])}),
                                        expect_valid=False, broken_rule="constraint.same_data_type")
    outcomes = run_cases(backend, SIGN, [hang, other, invalid, invalid_other], "valid", expectations=known)
    assert outcomes[0].status == Status.EXPECTED_DIVERGENCE and outcomes[0].record.expectation == "scripted-sign-int16-hangs"
    assert "not-run" in outcomes[0].record.tags and outcomes[0].record.summary.startswith("not run:")
    assert outcomes[1].status == Status.PASS
    # an invalid case of such a descriptor is not sent either (one the device accepts would hang);
    # one of another descriptor is, and its rejection is judged
    assert outcomes[2].status == Status.EXPECTED_DIVERGENCE and "not-run" in outcomes[2].record.tags
    assert backend.sent == [other.case_id, invalid_other.case_id]
    assert outcomes[3].status == Status.REJECTED_INVALID
    probe = run_case(backend, SIGN, hang, "probe", expectations=known, run_known_hangs=True)
    assert backend.sent[-1] == hang.case_id and probe.status == Status.PASS


@pytest.mark.parametrize("entry, message", [
    (HANGS.replace("    probe:\n      types: {InputTensor: INT16, OutputTensor: INT16}\n      inputs: {InputTensor: [1, -1]}\n", ""),
     "probe"),
    (HANGS.replace("    devices: [scripted]\n", ""), "devices"),
    (HANGS.replace("status: crashed", "status: rejected-valid"), "crashed"),
])
def test_a_known_hang_needs_a_probe_devices_and_status_crashed(tmp_path, entry, message):
    with pytest.raises(ExpectationError) as error:
        _expectations(tmp_path, entry)
    assert message in str(error.value.render())


def test_a_known_divergence_keeps_one_case_file_per_test_a_failure_every_one(tmp_path):
    known = _expectations(tmp_path, "  - id: scripted-sign-crashes\n    operator: ELEMENT_WISE_SIGN\n    status: crashed\n"
                                    "    data_types: [INT8]\n    why: a scripted crash\n")
    crashes = {1: ["crash"], 2: ["crash"]}
    kept: dict[str, int] = {}
    cases = [_case([1, i]) for i in range(3)] + [_case([1, 2, 3], "INT16")]
    outcomes = run_cases(_Scripted(crashes), SIGN, cases, "valid", expectations=known, cases_dir=tmp_path / "cases",
                         divergence_files=kept)
    assert [o.status for o in outcomes] == ["expected-divergence"] * 3 + ["crashed"]
    assert [o.case_file is not None for o in outcomes] == [True, False, False, True]
    assert kept == {"scripted-sign-crashes": 1}
    every = run_cases(_Scripted(crashes), SIGN, cases[:2], "valid", expectations=known, cases_dir=tmp_path / "all")
    assert all(o.case_file is not None for o in every)  # no budget given (--report-detail full): every one


def test_a_known_hangs_probe_waits_at_most_the_probe_limit_and_the_limit_comes_back():
    from harness.run.case import HANG_PROBE_SECONDS, hang_probe_limit

    class Limited:
        def __init__(self, timeout: float) -> None:
            self.timeout = timeout
    slow, quick = Limited(60.0), Limited(10.0)
    with hang_probe_limit(slow, True):
        assert slow.timeout == HANG_PROBE_SECONDS == 15.0
    assert slow.timeout == 60.0
    with hang_probe_limit(slow, False):  # not a known hang: the run's limit
        assert slow.timeout == 60.0
    with hang_probe_limit(quick, True):  # already shorter: kept
        assert quick.timeout == 10.0
    with pytest.raises(RuntimeError):  # restored when the probe raises too
        with hang_probe_limit(slow, True):
            raise RuntimeError("probe failed")
    assert slow.timeout == 60.0
    with hang_probe_limit(_Scripted({}), True):  # a backend without a limit
        pass


# --- known hangs' probes after every other cell, or not sent ----------------------------------------

def test_known_hang_probes_go_after_every_other_test_each_group_in_its_order():
    from harness.run.hang_probes import move_hang_probes_last
    items = ["a", "hang-1", "b", "c", "hang-2", "d"]
    assert move_hang_probes_last(items, lambda item: item.startswith("hang")) == 2
    assert items == ["a", "b", "c", "d", "hang-1", "hang-2"]
    unchanged = ["a", "b"]
    assert move_hang_probes_last(unchanged, lambda item: False) == 0 and unchanged == ["a", "b"]



def test_a_hang_probe_waits_for_every_other_cell_and_no_longer_than_a_stall(tmp_path):
    from harness.run.hang_probes import finished_test_ids, note_finished, wait_for_other_cells
    note_finished(tmp_path, "gw0", "t1")
    note_finished(tmp_path, "gw1", "t2")
    (tmp_path / "gw1.jsonl").open("a").write('"t3')  # a line being written: not read yet
    assert finished_test_ids(tmp_path) == {"t1", "t2"}
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # another worker finishes t3 while this one waits
        slept.append(seconds)
        now[0] += seconds
        if len(slept) == 3:
            (tmp_path / "gw1.jsonl").open("a").write('"\n')
    assert wait_for_other_cells(tmp_path, ["t1", "t2", "t3"], clock=lambda: now[0], sleep=sleep) == (0, 1.5)
    # a worker that died in t4 never notes it: the probe waits for progress, then goes on
    now[0], slept[:] = 0.0, []
    missing, waited = wait_for_other_cells(tmp_path, ["t1", "t4"], stall_seconds=10, clock=lambda: now[0], sleep=sleep)
    assert (missing, waited) == (1, 10.0)


HANG_PROBE_RUN = """backend: numpy
expectations:
  - id: numpy-sign-int16-hangs
    operator: ELEMENT_WISE_SIGN
    status: crashed
    devices: [dmlconform-reference]
    hangs: true
    data_types: [INT16]
    reason_contains: "hang in execute"
    why: a made-up hang, to see where its probe runs
    probe:
      types: {InputTensor: INT16, OutputTensor: INT16}
      inputs: {InputTensor: [1, -1]}
"""


@pytest.mark.parametrize("mode", ["last", "skip"])
def test_a_runs_known_hang_probe_is_its_last_test_or_not_sent(tmp_path, mode):
    """Through the CLI: the probe is the run's last test (the reference does not hang, so the
    made-up hang is stale there: the run fails, as it must); under skip it is not sent, recorded
    unsupported and named by the gate as not probed, and the run passes."""
    import xml.etree.ElementTree as ET

    from harness.cli import main
    from harness.report.gate import evaluate_gate
    from harness.run.manifest import load_manifest
    expectations = tmp_path / "expectations"
    expectations.mkdir()
    (expectations / "numpy.yaml").write_text(HANG_PROBE_RUN)
    reports = tmp_path / "reports"
    code = main(["run", "--operator", "ELEMENT_WISE_SIGN", "--backend", "numpy", "--workers", "0", "--max-examples", "2",
                 "--expectations-dir", str(expectations), "--reports-dir", str(reports), "--hang-probes", mode])
    names = [case.get("name") for case in ET.parse(reports / "junit.xml").iter("testcase")]
    probe = "test_expectation_probe[numpy-sign-int16-hangs-numpy]"
    assert names[-1] == probe and names.count(probe) == 1 and len(names) > 10
    [record] = [r for r in read_records(reports / "results") if r.kind == "probe"]
    verdict = evaluate_gate(list(read_records(reports / "results")), load_manifest(reports / "results"), expectations)
    if mode == "last":
        assert code == 1 and record.status == "stale-expectation"
        assert not verdict.passed
    else:
        assert code == 0 and record.status == "unsupported" and "not-run" in record.tags
        assert "--hang-probes skip" in record.summary
        assert verdict.passed
        assert any("not probed in this run" in line and "numpy:numpy-sign-int16-hangs" in line for line in verdict.summary)


def test_a_known_hang_that_hung_twice_in_different_stages_still_shows():
    """An NVIDIA H200 (fifteenth session): the MEAN_VARIANCE_NORMALIZATION1 hang's probe hung in
    initialize, then in execute; a flaky outcome with two hangs confirms the hang, one with a hang and
    a result does not, nor does a flaky probe of a divergence that is not a hang."""
    from harness.run.conformance import hung_both_times
    twice = ("flaky: first crashed (runner did not answer within 10 s (hang in initialize 1/1)); "
             "run again: expected-divergence (runner did not answer within 10 s (hang in execute 1/1))")
    once = "flaky: first crashed (runner did not answer within 10 s (hang in execute 1/1)); run again: pass (4 elements match)"
    assert hung_both_times(True, "flaky", twice)
    assert not hung_both_times(True, "flaky", once)
    assert not hung_both_times(False, "flaky", twice)
    assert not hung_both_times(True, "crashed", twice)


def test_a_known_hang_whose_probe_hangs_in_two_stages_passes_the_run(tmp_path, monkeypatch):
    """Through the CLI, the H200 case of the seventeenth session's GPU run: the probe hung in
    initialize, then in execute. Its record said the hang shows (the gate passed) while its test
    failed as a stale expectation, so `dmlconform run` exited 1 on a run the gate passed. Now the
    test's verdict is the record's: the run and the gate both pass."""
    import xml.etree.ElementTree as ET

    from harness.cli import main
    from harness.report.gate import evaluate_gate
    from harness.run.manifest import load_manifest
    monkeypatch.setenv("DMLCONFORM_EXTRA_BACKENDS", "broken-hangs-twice=tests.plugins.broken_backend:HangsInTwoStagesBackend")
    expectations = tmp_path / "expectations"
    expectations.mkdir()
    (expectations / "broken-hangs-twice.yaml").write_text(
        HANG_PROBE_RUN.replace("backend: numpy", "backend: broken-hangs-twice").replace("a made-up hang", "a scripted hang"))
    reports = tmp_path / "reports"
    code = main(["run", "--operator", "ELEMENT_WISE_SIGN", "--backend", "broken-hangs-twice", "--workers", "0",
                 "--max-examples", "2", "--expectations-dir", str(expectations), "--reports-dir", str(reports)])
    [record] = [r for r in read_records(reports / "results") if r.kind == "probe"]
    assert record.status == "expected-divergence" and "hung both times" in record.summary
    probe = "test_expectation_probe[numpy-sign-int16-hangs-broken-hangs-twice]"
    [case] = [c for c in ET.parse(reports / "junit.xml").iter("testcase") if c.get("name") == probe]
    assert case.find("failure") is None and case.find("error") is None
    verdict = evaluate_gate(list(read_records(reports / "results")), load_manifest(reports / "results"), expectations)
    assert verdict.passed and code == 0
