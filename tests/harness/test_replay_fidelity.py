"""Replay reproduces what the suite ran.

A case's verdict must depend on the case alone: not on which cases the same backend instance ran
before it (the suite runs hundreds through one instance; `dmlconform replay` runs one on a fresh
instance), and not on the trip through its YAML case file.

Regression (issue 11): the ONNX Runtime backend cached sessions under a key holding the attribute
values as Python floats, and `-0.0 == 0.0` (with the same hash). A HardSigmoid session built for
Beta = -0.0 then served a later case with Beta = +0.0 of the same shape: Alpha * x + Beta gave -0.0
where +0.0 is due (x = -0.0, or a negative denormal), a mismatch in the suite that its replay, on a
fresh backend, did not show.
"""
from __future__ import annotations

import shlex

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from harness.generate.cases import case_from_arrays
from harness.cli import main
from harness.model.descriptor import Case
from harness.run.registry import expectations_for
from harness.run.registry import load_backend
from harness.generate.breakers import candidate_rules, invalid_cases, rule_reachable
from harness.generate.strategies import valid_case_batches
from harness.run.case import run_case
from tests.helpers import SPECS

LEVEL = SPECS.catalog.newest_level.name
HSIG = "ACTIVATION_HARD_SIGMOID"
F32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
# 2 valid batches of 3 data sets and one invalid case for each of the first 3 rules, per operator
# and backend: the round trip and the fresh-backend replay are the same code for every operator
# (each operator's own fields and attribute kinds go through it); a hundred operators at 12
# batches and 6 rules took 20 CPU-minutes of make test, 156 at 4 and 4 about 3.5
SAMPLE = settings(max_examples=2, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))


def _backend(name: str):
    backend = load_backend(name, specs=SPECS)
    ok, reason = backend.available()
    if not ok:
        pytest.skip(f"backend {name} not available: {reason}")
    return backend


def _fresh_run(name: str, case: Case):
    """What `dmlconform replay` does: a new backend instance for the one case."""
    backend = _backend(name)
    try:
        spec = SPECS.operator(case.operator)
        result = backend.run(case)
        outcome = run_case(backend, spec, case, "valid" if case.expect_valid else "invalid", expectations=expectations_for(name))
        return result, outcome
    finally:
        backend.close()


def _output_bits(result) -> dict[str, bytes]:
    return dict(result.buffers) if result.kind == "outputs" else {}


# --- the regression: the same backend instance, suite order ---------------------------------------

def _hsig_case(beta: float) -> Case:
    x = np.array([-0.0, -1.401298464324817e-45, -1.1754942e-38, 0.0, 1.0, -1.0, 2.5, -3.0] * 2, np.float32).reshape(2, 8)
    return case_from_arrays(SPECS.operator(HSIG), LEVEL, F32, {"InputTensor": x}, attributes={"Alpha": 0.2, "Beta": beta})


@pytest.mark.parametrize("betas", [(-0.0, 0.0), (0.0, -0.0)], ids=["minus-then-plus-zero", "plus-then-minus-zero"])
def test_verdict_does_not_depend_on_the_cases_run_before(tmp_path, capsys, betas):
    """Two cases that differ only in the sign of a zero attribute, run in suite order through one
    backend instance: the second one's output and verdict equal its replay from the case file."""
    backend = _backend("onnxruntime")
    spec = SPECS.operator(HSIG)
    expectations = expectations_for("onnxruntime")
    first, second = (_hsig_case(b) for b in betas)
    assert first.case_id != second.case_id
    run_case(backend, spec, first, "valid", expectations=expectations)
    in_suite = backend.run(second)
    suite_outcome = run_case(backend, spec, second, "valid", expectations=expectations)

    case_file = second.save(tmp_path / "second.yaml")
    replayed, replay_outcome = _fresh_run("onnxruntime", Case.load(case_file))
    assert _output_bits(in_suite) == _output_bits(replayed), "the output depends on the case run before it"
    assert suite_outcome.status == replay_outcome.status

    # and through the command the failure message prints
    code = main(["replay", str(case_file), "--backend", "onnxruntime"])
    printed = capsys.readouterr().out.splitlines()[0]
    assert f"): {suite_outcome.status}: " in printed, printed
    assert code == (1 if suite_outcome.failed else 0)


def test_plus_zero_beta_gives_plus_zero_after_minus_zero_beta():
    """The observable symptom, stated directly: Beta = +0.0 after Beta = -0.0 on one instance."""
    backend = _backend("onnxruntime")
    backend.run(_hsig_case(-0.0))
    result = backend.run(_hsig_case(0.0))
    out = np.frombuffer(result.buffers["OutputTensor"], np.float32)
    assert not np.signbit(out[:2]).any(), out[:2]   # Alpha * (-0.0 or -denormal) + (+0.0) -> +0.0


# --- the general property: save/load round trip, fresh backends, suite order ----------------------

def _sample(op: str) -> list[Case]:
    """A deterministic sample of the cases the suite generates for an operator: valid batches (the
    suite's unit) and invalid cases for each reachable rule's first few draws."""
    spec = SPECS.operator(op)
    cases: list[Case] = []

    @SAMPLE
    @given(valid_case_batches(spec, LEVEL, per_descriptor=3))
    def valid(batch):
        cases.extend(batch)
    valid()
    for rule in candidate_rules(spec)[:3]:
        if not rule_reachable(spec, LEVEL, rule):
            continue

        @settings(SAMPLE, max_examples=1)
        @given(invalid_cases(spec, LEVEL, rule))
        def invalid(case):
            cases.append(case)
        invalid()
    return cases


@pytest.mark.parametrize("backend_name", ["numpy", "onnxruntime"])
@pytest.mark.parametrize("op", sorted(SPECS.operators))
def test_saved_case_replays_to_the_same_case_and_verdict(tmp_path, op, backend_name):
    """For generated cases run in suite order through one backend: Case.load(case.save(...)) is the
    same case (id, descriptor, inputs, level, expectation) and a fresh backend gives it the same
    output bits and the same verdict as the suite's run did."""
    shared = _backend(backend_name)
    spec = SPECS.operator(op)
    expectations = expectations_for(backend_name)
    cases = _sample(op)
    assert cases
    for i, case in enumerate(cases):
        in_suite = shared.run(case)
        suite_status = run_case(shared, spec, case, "valid" if case.expect_valid else "invalid", expectations=expectations).status

        loaded = Case.load(case.save(tmp_path / f"{i}.yaml"))
        assert loaded.case_id == case.case_id
        assert loaded.descriptor.key() == case.descriptor.key()
        assert loaded.inputs == case.inputs
        assert (loaded.feature_level, loaded.expect_valid, loaded.broken_rule) == (case.feature_level, case.expect_valid, case.broken_rule)

        replayed, outcome = _fresh_run(backend_name, loaded)
        where = f"{case!r} (case {i} in suite order)"
        assert replayed.kind == in_suite.kind, where
        assert _output_bits(replayed) == _output_bits(in_suite), where
        assert outcome.status == suite_status, where
    shared.close()


def test_replay_command_names_the_backend_options_that_change_the_result(tmp_path, capsys):
    """A case found with an older DirectML.dll or execution flags replays with the same ones."""
    from backends.directml import DirectMLBackend
    from harness.cli import build_parser
    from harness.run.case import replay_command
    backend = DirectMLBackend(SPECS, dll="1.14.1", adapter=1, exec_flags="ALLOW_HALF_PRECISION_COMPUTATION|DISABLE_META_COMMANDS",
                              timeout=12.5)
    command = replay_command(tmp_path / "case.yaml", backend)
    assert command == (f"dmlconform replay {tmp_path / 'case.yaml'} --backend directml --directml-dll 1.14.1 "
                       "--directml-adapter 1 --directml-exec-flags 'ALLOW_HALF_PRECISION_COMPUTATION|DISABLE_META_COMMANDS' "
                       "--directml-timeout 12.5")
    parsed = build_parser().parse_args(shlex.split(command)[1:])
    again = DirectMLBackend(SPECS, dll=parsed.directml_dll, adapter=parsed.directml_adapter, warp=parsed.directml_warp,
                            debug_layer=parsed.directml_debug_layer, exec_flags=parsed.directml_exec_flags,
                            timeout=parsed.directml_timeout)
    assert again.replay_args() == backend.replay_args()
    assert replay_command(tmp_path / "c.yaml", DirectMLBackend(SPECS)).endswith("--backend directml")


def test_unknown_execution_flag_is_a_clear_error():
    from backends.directml import DirectMLBackend
    with pytest.raises(ValueError, match="unknown DirectML execution flag"):
        DirectMLBackend(SPECS, exec_flags="FAST_MATH")
