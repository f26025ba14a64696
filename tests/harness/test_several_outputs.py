"""An elementwise formula with several outputs (`formula.other_outputs`: ADAM_OPTIMIZER's updated
parameters and moments): each output is computed, rounded and judged by its own expression; an
`unspecified` rule may concern some outputs only; and an expectation explains a case element by
element over the union of the outputs' failures."""
from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.judge.expectations import Expectation, ExpectationSet
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import pack_buffer
from harness.spec.expr import NotExact, evaluate_exact, parse_formula
from tests.helpers import SPECS

ADAM = "ADAM_OPTIMIZER"
MOMENTS = ("InputParametersTensor", "InputFirstMomentTensor", "InputSecondMomentTensor", "GradientTensor")
OUTPUTS = ("OutputParametersTensor", "OutputFirstMomentTensor", "OutputSecondMomentTensor")


def _case(t: int, x, m, v, g, **attributes):
    spec = SPECS.operator(ADAM)
    types = {n: "FLOAT32" for n in MOMENTS + OUTPUTS} | {"TrainingStepTensor": "UINT32"}
    n = len(x)
    layouts = {name: TensorDesc(t_, [1, 1, 1, 1] if name == "TrainingStepTensor" else [1, 1, 1, n]) for name, t_ in types.items()}
    values = {name: np.asarray(vals, np.float32).reshape(1, 1, 1, n) for name, vals in zip(MOMENTS, (x, m, v, g))}
    values["TrainingStepTensor"] = np.asarray([t], np.uint32).reshape(1, 1, 1, 1)
    attrs = {"LearningRate": 1.0, "Beta1": 0.5, "Beta2": 0.75, "Epsilon": 0.0} | attributes
    return spec, case_from_arrays(spec, "6.4", types, values, layouts=layouts, attributes=attrs)


def _judge(spec, case, outputs: dict):
    buffers = {}
    for name, values in outputs.items():
        desc = case.descriptor.tensors[name]
        buffers[name] = pack_buffer(np.asarray(values, np.float32).reshape(desc.sizes), desc, SPECS.catalog.dtype("FLOAT32"))
    return judge(spec, case, Outputs(buffers), True)


# by hand (tests/golden/ADAM_OPTIMIZER.yaml, first_step): Beta1 0.5, Beta2 0.75, T = 1: Alpha = 1
X, M, V, G = [1.0, 3.0], [0.0, 2.0], [0.0, 4.0], [2.0, -2.0]
PARAMS, FIRST, SECOND = [0.0, 3.0], [1.0, 0.0], [1.0, 4.0]


def test_each_output_is_computed_and_judged_by_its_own_expression():
    spec, case = _case(1, X, M, V, G)
    assert _judge(spec, case, {"OutputParametersTensor": PARAMS, "OutputFirstMomentTensor": FIRST,
                               "OutputSecondMomentTensor": SECOND}).status == "pass"
    wrong_moment = _judge(spec, case, {"OutputParametersTensor": PARAMS, "OutputFirstMomentTensor": [1.0, 0.5],
                                       "OutputSecondMomentTensor": SECOND})
    assert wrong_moment.status == "mismatch" and "1 of 2 elements of OutputFirstMomentTensor" in wrong_moment.summary


def test_an_unspecified_rule_concerns_only_the_outputs_it_names():
    # T = 0: the page's Alpha is 0 / 0; the parameters are unspecified there, the moments are not
    spec, case = _case(0, X, M, V, G)
    params_differ = _judge(spec, case, {"OutputParametersTensor": [123.0, -7.0], "OutputFirstMomentTensor": FIRST,
                                        "OutputSecondMomentTensor": SECOND})
    assert not params_differ.failed and "training_step_zero" in params_differ.summary
    moment_differs = _judge(spec, case, {"OutputParametersTensor": PARAMS, "OutputFirstMomentTensor": FIRST,
                                         "OutputSecondMomentTensor": [1.0, 5.0]})
    assert moment_differs.status == "mismatch"


def test_an_expectation_explains_failures_spread_over_several_outputs():
    spec, case = _case(1, X, M, V, G)
    diff = _judge(spec, case, {"OutputParametersTensor": [0.5, 3.0], "OutputFirstMomentTensor": [1.0, 0.5],
                               "OutputSecondMomentTensor": SECOND})  # element 0 wrong in one output, element 1 in another
    assert diff.bad_mask is not None and diff.bad_mask.reshape(-1).tolist() == [True, True]
    first_only = Expectation("first", ADAM, ("FLOAT32",), parse_formula("x == 1"), "why")
    both = Expectation("both", ADAM, ("FLOAT32",), parse_formula("x > 0"), "why")
    assert ExpectationSet("b", [first_only]).explain(ADAM, "FLOAT32", diff, "FLOAT32") is None
    assert ExpectationSet("b", [first_only, both]).explain(ADAM, "FLOAT32", diff, "FLOAT32") is both


def test_the_exact_path_refuses_a_power_far_beyond_float64():
    # pow(0.999, 4e9) is 2^-5.8e6: as a fraction, a 5.7-million-bit denominator that the arithmetic
    # after it never finishes with (ADAM's Beta ** T with a random UINT32 step hung the suite)
    formula = parse_formula("1.0 - pow(b, t)")
    start = time.perf_counter()
    with pytest.raises(NotExact):
        evaluate_exact(formula, {"b": Fraction(999, 1000), "t": Fraction(4_000_000_000)})
    assert time.perf_counter() - start < 5
    assert evaluate_exact(formula, {"b": Fraction(1, 2), "t": Fraction(3)}) == Fraction(7, 8)
