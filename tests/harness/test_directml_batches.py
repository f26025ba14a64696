"""Batched DirectML execution (issue 31): one runner request carries many cases, each descriptor is
compiled once, and a crash or hang still costs only the case that caused it; every answer carries
its stages' seconds, and a hang names the stage it hung in."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from backends.directml import DirectMLBackend
from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Crashed, Outputs
from tests.helpers import SPECS, directml_or_skip

SIGN = SPECS.operator("ELEMENT_WISE_SIGN")
ROOT = Path(__file__).resolve().parents[2]


def _sign(values, dtype="INT8"):
    return case_from_arrays(SIGN, "6.4", {"InputTensor": dtype, "OutputTensor": dtype},
                            {"InputTensor": np.array(values)})


def _backend(timeout: float = 60.0) -> DirectMLBackend:
    return directml_or_skip(timeout=timeout)


def _with_hook(backend: DirectMLBackend, hooks: dict[str, str]) -> None:
    """Requests for the cases whose id is in `hooks` carry the runner's test hook `test_hang`
    (compile: CompileOperator never returns; execute: the batch's submit never completes)."""
    original = backend.request_for

    def request_for(case):
        header, buffers = original(case)
        if case.case_id in hooks:
            header["test_hang"] = hooks[case.case_id]
        return header, buffers
    backend.request_for = request_for  # type: ignore[method-assign]


def test_a_batch_answers_as_the_cases_one_by_one_with_stage_timings():
    cases = [_sign([-3, 0, i]) for i in range(5)] + [_sign([-1.5, 0.0, 2.0], "FLOAT32"), _sign([1, 2], "UINT8")]
    invalid = case_from_arrays(SIGN, "6.4", {"InputTensor": "INT8", "OutputTensor": "UINT8"}, {"InputTensor": np.array([1])})
    cases.append(invalid)  # different data types: CreateOperator rejects it, the others run
    backend = _backend()
    try:
        batched = backend.run_batch(cases)
        alone = [backend.run(case) for case in cases]
    finally:
        backend.close()
    assert [type(r).__name__ for r, _ in batched] == ["Outputs"] * 7 + ["Rejected"]
    assert [type(r).__name__ for r in alone] == ["Outputs"] * 7 + ["Rejected"]
    for case, (result, _), single in zip(cases[:7], batched, alone):
        assert judge(SIGN, case, result, True).status == "pass"
        assert judge(SIGN, case, single, True).status == "pass"
    # SIGN of [-3, 0, 4] is [-1, 0, 1]: the bytes of the batch's third output, checked by hand
    assert np.frombuffer(batched[4][0].buffers["OutputTensor"][:3], np.int8).tolist() == [-1, 0, 1]
    first = batched[0][1]
    assert {"create", "compile", "initialize", "upload", "execute", "readback"} <= set(first.stages)
    assert "compile" not in batched[1][1].stages  # the same descriptor: compiled once
    assert all(t.seconds > 0 for _, t in batched)


def test_a_hang_while_compiling_costs_only_its_case_and_names_the_stage():
    cases = [_sign([-3, 0, 1]), _sign([1, 2, 3, 4]), _sign([5, 6])]
    backend = _backend(timeout=5)
    _with_hook(backend, {cases[1].case_id: "compile"})
    try:
        answers = backend.run_batch(cases)
    finally:
        backend.close()
    hung, timing = answers[1]
    assert isinstance(hung, Crashed) and "hang in compile 2/3" in hung.reason, hung
    assert timing.stages.get("compile", 0) >= 4
    assert [type(r).__name__ for r, _ in answers] == ["Outputs", "Crashed", "Outputs"]
    assert judge(SIGN, cases[2], answers[2][0], True).status == "pass"


def test_a_hang_while_executing_runs_the_batch_again_case_by_case():
    """The culprit of a hang in the batch's one submit cannot be told: the cases run alone, the one
    that hangs is `crashed` (hang in execute), and a case of the same descriptor is not sent again."""
    same_a, other, same_b = _sign([-3, 0, 1]), _sign([1, 2, 3, 4]), _sign([7, -7, 0])
    backend = _backend(timeout=5)
    _with_hook(backend, {same_a.case_id: "execute", same_b.case_id: "execute"})
    try:
        answers = backend.run_batch([same_a, other, same_b])
    finally:
        backend.close()
    first, skipped = answers[0][0], answers[2][0]
    assert isinstance(first, Crashed) and "hang in execute 1/1" in first.reason, first
    assert isinstance(answers[1][0], Outputs) and judge(SIGN, other, answers[1][0], True).status == "pass"
    assert isinstance(skipped, Crashed) and skipped.reason.startswith("not run: its descriptor hung the device")
    assert "hang in execute" in skipped.reason


def test_a_case_asked_for_alone_is_sent_even_after_its_descriptor_hung():
    case = _sign([-3, 0, 1])
    backend = _backend(timeout=5)
    try:
        backend._hung[backend.request_for(case)[0]["key"]] = "not run: (test)"
        result = backend.run(case)
    finally:
        backend.close()
    assert isinstance(result, Outputs)


def test_an_empty_batch_sends_nothing():
    backend = DirectMLBackend(SPECS)
    assert backend.run_batch([]) == []
    assert backend._process is None


def test_a_crash_in_a_batch_is_said_at_once_and_costs_only_its_case():
    """DirectML 1.15.4 dereferences JOIN's null OutputTensor in CreateOperator (an expectation of
    its own): the runner says so on stderr as Wine would word it and ends; the other cases of the
    batch run again without it."""
    from harness.model.descriptor import Case
    convolution = Case.load(ROOT / "docs" / "gpu-cases" / "nvidia-hangs" / "conv-4d-minimal-forward.yaml")  # another operator
    spec = SPECS.operator("JOIN")
    null_output = case_from_arrays(spec, "6.4", {"InputTensors_0": "FLOAT32", "InputTensors_1": "FLOAT32"},
                                   {"InputTensors_0": np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32),
                                    "InputTensors_1": np.array([[[[5.0], [6.0]]]], np.float32)},
                                   attributes={"Axis": 3}, layouts={})
    null_output = dataclasses.replace(null_output, expect_valid=False, broken_rule="tensor.missing")
    signs = [_sign([-3, 0, 1]), _sign([4, -4])]
    backend = _backend()
    try:
        answers = backend.run_batch([signs[0], null_output, convolution, signs[1]])
    finally:
        backend.close()
    crashed = answers[1][0]
    assert isinstance(crashed, Crashed), crashed
    assert "page fault on read access to 0000000000000008" in crashed.reason and "in create 2/4" in crashed.reason
    assert [type(r).__name__ for r, _ in answers] == ["Outputs", "Crashed", "Outputs", "Outputs"]


def test_a_full_cache_never_evicts_an_operator_its_own_batch_uses():
    """The CI failure of 2026-11-28 (a page fault in DirectML during 'initialize' after thousands of
    descriptors): with the cache full, a batch's case that found its operator cached could have its
    slot evicted by a later case of the same batch, and would then dispatch that case's operator.
    With a cache of two, the second batch's first case hits slot 0 and its next two cases need room."""
    a, b = _sign([-3, 0, 5]), _sign([1, -2, 3, -4])
    c, d = _sign([7, -7, 0, 1, 2], "INT16"), _sign([-1, 1], "INT32")
    backend = _backend()
    backend.cache_max = 2
    try:
        first = backend.run_batch([a, b])
        second = backend.run_batch([a, c, d, b])
    finally:
        backend.close()
    for case, (result, _) in zip([a, b, a, c, d, b], first + second):
        assert isinstance(result, Outputs), result
        assert judge(SIGN, case, result, True).status == "pass"
    # by hand: SIGN of [-3, 0, 5] is [-1, 0, 1]; of [7, -7, 0, 1, 2] (INT16) is [1, -1, 0, 1, 1]
    assert np.frombuffer(second[0][0].buffers["OutputTensor"][:3], np.int8).tolist() == [-1, 0, 1]
    assert np.frombuffer(second[1][0].buffers["OutputTensor"][:10], np.int16).tolist() == [1, -1, 0, 1, 1]
    assert "compile" not in second[0][1].stages  # a's operator was found in the cache, not rebuilt


def test_after_two_descriptors_of_a_family_hung_its_other_descriptors_are_not_batched():
    """An operator with the same tensor types: once two of its descriptors hung, a third is not
    sent in a batch (crashed, saying why); another type is; one asked for alone still is."""
    first, second, third = _sign([-3, 0, 1]), _sign([1, 2, 3, 4]), _sign([5, 6])
    other_type = _sign([1, -1], "INT16")
    backend = _backend(timeout=5)
    _with_hook(backend, {first.case_id: "execute", second.case_id: "execute"})
    try:
        answers = backend.run_batch([first, second, third, other_type])
        alone = backend.run(third)
    finally:
        backend.close()
    assert all(isinstance(a[0], Crashed) and "hang in execute" in a[0].reason for a in answers[:2]), answers[:2]
    skipped = answers[2][0]
    assert isinstance(skipped, Crashed) and skipped.reason.startswith("not run: 2 other descriptors of this operator")
    assert [a[0].sent for a in answers[:3]] == [True, True, False]  # the third is not run again as a flake check
    assert isinstance(answers[3][0], Outputs)
    assert isinstance(alone, Outputs)
