"""The normalize family's accumulating modes (lp, mean_variance): the bound a spec states is what
the judge accepts, no more, and the worst legal device's results lie at its edge and pass.

The expected values and bounds are worked out by hand in each docstring; none is taken from the
reference's own output."""
from __future__ import annotations

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import pack_buffer
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute, family_device
from tests.helpers import SPECS

EPS = 2.0 ** -23
ULP_BELOW_1 = 2.0 ** -24  # FLOAT32 spacing in [0.5, 1)


def _lp_case():
    spec = SPECS.operator("LP_NORMALIZATION")
    x = np.array([3, 4], np.float32).reshape(1, 1, 1, 2)
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    layouts = {"InputTensor": TensorDesc("FLOAT32", [1, 1, 1, 2]), "OutputTensor": TensorDesc("FLOAT32", [1, 1, 1, 2])}
    attributes = {"Axis": 3.0, "P": 2.0, "Epsilon": 0.0}
    return spec, case_from_arrays(spec, "6.4", types, {"InputTensor": x}, layouts=layouts, attributes=attributes)


def _lp_mismatches(first: float) -> int:
    spec, case = _lp_case()
    out = np.array([first, 0.8], np.float32).reshape(1, 1, 1, 2)
    desc = case.descriptor.tensors["OutputTensor"]
    return judge(spec, case, Outputs({"OutputTensor": pack_buffer(out, desc, SPECS.catalog.dtype("FLOAT32"))}), True).mismatch_count


def test_lp_is_judged_within_its_bound_and_no_further():
    """x [3, 4] along the last axis, P 2, Epsilon 0: exactly [0.6, 0.8], N = 2, T = 25. The spec's
    nu_T = (1 + eps)^2 (1 + 4 eps)^2 - 1 + 6 t / 25, about 10 eps, and the bound
    0.6 ((1 + 2^-21)(1 + eps)^4 / sqrt(1 - 10 eps) - 1), about 0.6 (4 + 4 + 5) eps = 7.8 eps: 15.6
    ULP of 0.6 (the ULP in [0.5, 1) is eps / 2). FLOAT32 0.6 lies 0.4 ULP above 0.6, so 15 ULP above
    it is legal and 16 is not; 15 below is legal and 17 is not."""
    near = float(np.float32(0.6))
    assert _lp_mismatches(near + 15 * ULP_BELOW_1) == 0
    assert _lp_mismatches(near - 15 * ULP_BELOW_1) == 0
    assert _lp_mismatches(near + 16 * ULP_BELOW_1) == 1
    assert _lp_mismatches(near - 17 * ULP_BELOW_1) == 1


def test_lp_legal_device_lands_at_the_edge_of_the_bound_and_passes():
    """The worst legal device moves each result 0.999 of its bound, rounded towards the exact
    value (the bound is about 15.6 ULP of 0.6 and 11.4 of 0.8: one ULP of rounding is 6 to 9% of
    it): at least 0.9 of it away, never beyond, and the judge accepts it."""
    spec, case = _lp_case()
    inputs = family_inputs(spec, case.descriptor, case.inputs)
    exact, bound = family_compute("normalize")(spec, case.descriptor, inputs).bounds["OutputTensor"]
    device = family_device("normalize")
    assert device is not None
    for seed in range(4):
        out = np.asarray(device(spec, case.descriptor, inputs, np.random.default_rng(seed))["OutputTensor"])
        share = np.abs(out.astype(np.float64) - exact) / bound
        assert np.all((share >= 0.9) & (share <= 1.0)), share
        desc = case.descriptor.tensors["OutputTensor"]
        packed = pack_buffer(out, desc, SPECS.catalog.dtype("FLOAT32"))
        assert judge(spec, case, Outputs({"OutputTensor": packed}), True).mismatch_count == 0


def _mvn_case(x: list[float]):
    spec = SPECS.operator("MEAN_VARIANCE_NORMALIZATION")
    arr = np.array(x, np.float32).reshape(1, 1, 1, len(x))
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    sizes = [1, 1, 1, len(x)]
    layouts = {"InputTensor": TensorDesc("FLOAT32", sizes), "OutputTensor": TensorDesc("FLOAT32", sizes)}
    attributes = {"CrossChannel": 0.0, "NormalizeVariance": 1.0, "Epsilon": 0.0}
    return spec, case_from_arrays(spec, "6.4", types, {"InputTensor": arr}, layouts=layouts, attributes=attributes)


def test_mean_variance_bound_grows_with_the_mean_against_the_spread():
    """[1, 3], [11, 13] and [1001, 1003] all normalise to [-1, 1] (variance 1), but the one-pass
    variance a device may use cancels sum x^2 / N (5, 145, 1004005) against the mean's square: the
    second bound is some 6 to 29 times the first (the variance's share grows with sum x^2 / N, the
    mean's with sum |x| / N), and for the third Ew = 29 eps 1004005, about 3.5, exceeds half the
    variance: every value is legal (a FLOAT32 one-pass device keeps no digit of it)."""
    bounds = []
    for x in ([1.0, 3.0], [11.0, 13.0], [1001.0, 1003.0]):
        spec, case = _mvn_case(x)
        result = family_compute("normalize")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
        normalized, spread = result.epilogue["OutputTensor"]["normalized"]
        assert np.array_equal(normalized.reshape(-1), [-1.0, 1.0])
        assert spread is not None
        bounds.append(float(spread.reshape(-1)[0]))
    assert bounds[0] < 120 * EPS  # (6 N + 17) eps 5 / 2 + the mean's (2 N + 5) eps 2: about 100 eps
    assert 6 < bounds[1] / bounds[0] < 29
    assert bounds[2] == np.inf


def test_mean_variance_legal_device_passes():
    """The worst legal device's `normalized` at 0.999 of its bound, then the epilogue (here the
    identity: no Scale, no Bias), is accepted."""
    spec, case = _mvn_case([1.0, 3.0, -2.0, 7.5])
    inputs = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("normalize")(spec, case.descriptor, inputs)
    normalized, spread = result.epilogue["OutputTensor"]["normalized"]
    device = family_device("normalize")
    assert device is not None and spread is not None
    for seed in range(4):
        out = np.asarray(device(spec, case.descriptor, inputs, np.random.default_rng(seed))["OutputTensor"])
        share = np.abs(out.astype(np.float64) - normalized) / spread
        assert np.all(share >= 0.9), share  # 0.999 of the bound, less the output's rounding
        desc = case.descriptor.tensors["OutputTensor"]
        packed = pack_buffer(out, desc, SPECS.catalog.dtype("FLOAT32"))
        assert judge(spec, case, Outputs({"OutputTensor": packed}), True).mismatch_count == 0
