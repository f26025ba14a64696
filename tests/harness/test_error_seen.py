"""How close to its bound a backend came (harness.judge.diff._error_seen, records' max_ulps and
bound_use): the figures docs/precision-model.md sets beside each bound. Hand-worked values."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from harness.judge.diff import _error_seen
from harness.spec.model import Comparison


def test_ulps_and_the_share_of_an_atol_used():
    want = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    got = np.array([np.nextafter(np.float32(1), np.float32(2)), 2.0 + 2 * 2.0 ** -22, 4.0], dtype=np.float32)
    # 1 ULP at 1 (2^-23), 2 ULPs at 2 (2 x 2^-22); atol 2^-21 everywhere: shares 2^-23/2^-21 = 0.25 and 2^-21/2^-21 = 1
    facts = SimpleNamespace(atol=np.full(3, 2.0 ** -21))
    most, largest, use = _error_seen(Comparison("exact"), facts, want, got, np.ones(3, dtype=bool))
    assert most == 2 and largest == 2.0 ** -21 and use == 1.0


def test_an_ulp_comparison_measures_against_its_max_ulp_and_failed_elements_do_not_count():
    want = np.array([1.0, 1.0], dtype=np.float32)
    got = want.view(np.uint32).copy()
    got += np.array([3, 40], dtype=np.uint32)  # 3 ULPs (accepted) and 40 (failed)
    got = got.view(np.float32)
    most, largest, use = _error_seen(Comparison("ulp", max_ulp=4), SimpleNamespace(atol=None), want, got, np.array([True, False]))
    assert most == 3 and largest == 3 * 2.0 ** -23 and use == 0.75


def test_nothing_to_say_for_integers_non_finite_values_or_no_bound():
    ints = np.array([1, 2], dtype=np.int32)
    assert _error_seen(Comparison("exact"), SimpleNamespace(atol=None), ints, ints + 1, np.ones(2, dtype=bool)) == (None, None, None)
    inf = np.array([np.inf], dtype=np.float32)
    assert _error_seen(Comparison("exact"), SimpleNamespace(atol=None), inf, np.array([np.nan], np.float32),
                       np.ones(1, dtype=bool)) == (None, None, None)
    most, largest, use = _error_seen(Comparison("exact"), SimpleNamespace(atol=None), np.array([1.0], np.float32),
                                     np.array([np.nextafter(np.float32(1), np.float32(0))], np.float32), np.ones(1, dtype=bool))
    assert most == 1 and largest == 2.0 ** -24 and use is None  # the precision model accepted it: no explicit bound


def test_a_family_bounds_share_counts_where_its_bound_is_finite():
    want = np.array([1.0, 1.0], dtype=np.float32)
    got = np.array([1.0 + 2.0 ** -20, 1.0 + 2.0 ** -10], dtype=np.float32)
    facts = SimpleNamespace(atol=None, bound_share=np.array([0.5, np.nan]))  # the second: an infinite bound
    assert _error_seen(Comparison("exact"), facts, want, got, np.ones(2, dtype=bool))[2] == 0.5



def test_elements_the_docs_leave_unspecified_use_no_bound():
    """DYNAMIC_QUANTIZE_LINEAR over FLOAT32's largest value and -1.19: the exact range exceeds
    FLT_MAX, which the spec leaves unspecified (range_overflow). A scale of 1 there, 1.3e36 from the
    exact one, says nothing of the family's bound: ONNX Runtime's records of such cases showed a
    share of 10^6 (the cap) and a max_abs of 1.3e36 before the unspecified elements were left out."""
    from harness.generate.cases import case_from_arrays
    from harness.judge.diff import judge
    from harness.model.backend import Outputs
    from harness.model.descriptor import TensorDesc
    from tests.helpers import SPECS
    spec = SPECS.operator("DYNAMIC_QUANTIZE_LINEAR")
    x = np.array([3.4028235e38, -1.19, 1.0, 2.0], np.float32).reshape(1, 1, 1, 4)
    types = {"InputTensor": "FLOAT32", "OutputTensor": "UINT8", "OutputScaleTensor": "FLOAT32", "OutputZeroPointTensor": "UINT8"}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": x}, layouts={
        "OutputScaleTensor": TensorDesc("FLOAT32", [1, 1, 1, 1]), "OutputZeroPointTensor": TensorDesc("UINT8", [1, 1, 1, 1])})
    out = {"OutputTensor": np.array([255, 0, 1, 1], np.uint8).tobytes(), "OutputScaleTensor": np.array([1.0], np.float32).tobytes(),
           "OutputZeroPointTensor": np.array([0], np.uint8).tobytes()}
    result = judge(spec, case, Outputs(out), True)
    assert result.status == "diverges-on-unspecified", result.summary
    assert "range_overflow" in result.summary
    assert result.max_abs is None and result.bound_use is None
