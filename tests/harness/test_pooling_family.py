"""Pooling on the window family (combine max / average / lp): the average's and lp's bounds are what the judge
accepts, no more, and the worst legal device's results lie at its edge and pass.

Every expected value is worked out by hand in the test's docstring; none is taken from the
reference's own output."""
from __future__ import annotations

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import pack_buffer
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_device
from tests.helpers import SPECS

X = np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 1, 4)
ULP_AT_2_5 = 2.0 ** -22  # FLOAT32 spacing in [2, 4)


def _case(x: np.ndarray, out_sizes: list[int], window: list[int], include_padding: int = 0):
    spec = SPECS.operator("AVERAGE_POOLING")
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    layouts = {"InputTensor": TensorDesc("FLOAT32", list(x.shape)), "OutputTensor": TensorDesc("FLOAT32", out_sizes)}
    attributes = {"Strides": [1, 1], "WindowSize": window, "StartPadding": [0, 0], "EndPadding": [0, 0],
                  "IncludePadding": float(include_padding)}
    return spec, case_from_arrays(spec, "6.4", types, {"InputTensor": x}, layouts=layouts, attributes=attributes)


def _mismatches(actual: np.ndarray) -> int:
    spec, case = _case(X, [1, 1, 1, 1], [1, 4])
    out = np.asarray(actual, np.float32).reshape(1, 1, 1, 1)
    desc = case.descriptor.tensors["OutputTensor"]
    return judge(spec, case, Outputs({"OutputTensor": pack_buffer(out, desc, SPECS.catalog.dtype("FLOAT32"))}), True).mismatch_count


def test_the_average_is_judged_within_its_bound_and_no_further():
    """x [1, 2, 3, 4], one 1x4 window: exactly 2.5, N = D = 4, sum|x| = 10. The spec's bound
    (2N + 1) eps sum|x| / D + 2N (tiny + tiny_out eps) + 4 eps |exact| = 9 * 10 / 4 eps + 10 eps
    (+ about 2^-123) = 32.5 eps = 16.25 ULP at 2.5 (eps = 2^-23, the ULP 2^-22): 16 ULP above
    is legal, 17 is not."""
    assert _mismatches(np.float32(2.5 + 16 * ULP_AT_2_5)) == 0
    assert _mismatches(np.float32(2.5 - 16 * ULP_AT_2_5)) == 0
    assert _mismatches(np.float32(2.5 + 17 * ULP_AT_2_5)) == 1
    assert _mismatches(np.float32(2.5 - 17 * ULP_AT_2_5)) == 1


def test_the_legal_device_lands_at_the_edge_of_the_bound_and_passes():
    """The worst legal device's average of the same window moves 0.999 of the bound (16.25 ULP,
    less the fp32-flush reserve of 2N tiny / D): 16 ULP from 2.5, rounded towards it, and the judge
    accepts it."""
    spec, case = _case(X, [1, 1, 1, 1], [1, 4])
    device = family_device("window")
    assert device is not None
    for seed in range(4):  # up or down, at random per seed
        out = device(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs), np.random.default_rng(seed))
        value = float(np.asarray(out["OutputTensor"]).reshape(-1)[0])
        assert abs(value - 2.5) == 16 * ULP_AT_2_5
        assert _mismatches(np.float32(value)) == 0


def _lp_mismatches(actual: float) -> int:
    spec = SPECS.operator("LP_POOLING")
    x = np.array([3, -4], np.float32).reshape(1, 1, 1, 2)
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    layouts = {"InputTensor": TensorDesc("FLOAT32", [1, 1, 1, 2]), "OutputTensor": TensorDesc("FLOAT32", [1, 1, 1, 1])}
    attributes = {"Strides": [1, 1], "WindowSize": [1, 2], "StartPadding": [0, 0], "EndPadding": [0, 0], "P": 2.0}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": x}, layouts=layouts, attributes=attributes)
    out = np.asarray(actual, np.float32).reshape(1, 1, 1, 1)
    desc = case.descriptor.tensors["OutputTensor"]
    return judge(spec, case, Outputs({"OutputTensor": pack_buffer(out, desc, SPECS.catalog.dtype("FLOAT32"))}), True).mismatch_count


def test_the_lp_bound_reads_p_and_the_log_weighted_terms():
    """x [3, -4], one 1x2 window, P 2: exactly 5, N = 2, S = sum_abs = 9 + 16 = 25, the family's
    lp variables p = 2, max_log2 = log2 4 = 2, sum_abs_log2 = 9 log2 3 + 16 * 2 = 46.26. The
    spec's bound (eps = 2^-23; the tiny terms below 2^-120): Es = eps ((14 + 4) 25 + 7 * 2 *
    2^(20 eps) * 46.26) = 1097.7 eps; the root's part min(sqrt(Es), 5 Es / 25) = 219.5 eps; the
    pow factor (1 + 7 eps) 2^(7 eps log2(25) / 2) (1 + eps) = 1 + 19.27 eps on 5: 96.3 eps;
    together 315.9 eps = 79.0 ULP at 5 (the ULP in [4, 8) is 2^-21 = 4 eps): 77 ULP either side
    is legal, 81 is not."""
    ulp = 2.0 ** -21
    assert _lp_mismatches(5 + 77 * ulp) == 0
    assert _lp_mismatches(5 - 77 * ulp) == 0
    assert _lp_mismatches(5 + 81 * ulp) == 1
    assert _lp_mismatches(5 - 81 * ulp) == 1
