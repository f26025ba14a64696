"""`align: leading_ones` (harness.spec.shape_expr.aligned): 1s may be added before a shape rule's
sizes, none of its entries left out; and the generic breakers on a spec whose every tensor is
derived (harness.generate.breakers._resized): each breaks its one rule alone."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.generate.breakers import invalid_cases
from harness.generate.strategies import _realigned
from harness.model.descriptor import TensorDesc
from harness.generate.cases import case_from_arrays
from harness.model.validator import validate
from harness.spec.shape_expr import aligned
from tests.helpers import SPECS


def test_leading_ones_adds_but_never_drops():
    assert aligned([1, 1, 2, 3], [2, 3], "leading_ones") == ([2, 3], [2, 3])
    assert aligned([2, 3], [2, 3], "leading_ones") == ([2, 3], [2, 3])
    assert aligned([3], [1, 3], "leading_ones") is None  # right alignment would accept it
    assert aligned([3], [1, 3], "right") is not None
    assert aligned([2, 2, 3], [2, 3], "leading_ones") is None  # an added size that is not 1


@settings(max_examples=50, suppress_health_check=list(HealthCheck), database=None)
@given(st.data())
def test_generation_keeps_every_entry(data):
    sizes = [1, 1, 4]
    got = _realigned(data.draw, sizes, 1, 5, None, keep_all=True)
    assert len(got) >= len(sizes) and got[len(got) - len(sizes):] == sizes and all(s == 1 for s in got[:len(got) - len(sizes)])


def _mask_case(mask_sizes: list[int]):
    spec = SPECS.operator("MULTIHEAD_ATTENTION")
    sizes = {"QueryTensor": [2, 1, 1], "KeyTensor": [2, 2, 1], "ValueTensor": [2, 2, 1], "MaskTensor": mask_sizes,
             "OutputTensor": [2, 1, 1], "OutputPresentKeyTensor": [2, 1, 2, 1], "OutputPresentValueTensor": [2, 1, 2, 1]}
    types = {n: ("INT32" if n == "MaskTensor" else "FLOAT32") for n in sizes}
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    values = {n: np.ones(sizes[n], dtype=np.int32 if n == "MaskTensor" else np.float32) for n in sizes if spec.field(n).role == "input"}
    case = case_from_arrays(spec, "6.4", types, values, layouts=layouts,
                            attributes={"Scale": 1.0, "MaskFilterValue": -1e4, "HeadCount": 1, "MaskType": 1})
    return validate(spec, case.descriptor, "6.4").rule_ids


def test_a_length_mask_may_take_leading_ones_but_not_lose_its_first_size():
    """KEY_SEQUENCE_LENGTH's mask is [1, batchSize]: {1, 1, 2} holds, {2} breaks mask_sizes alone."""
    assert _mask_case([1, 2]) == set()
    assert _mask_case([1, 1, 2]) == set()
    assert _mask_case([2]) == {"constraint.mask_sizes"}


@settings(max_examples=8, suppress_health_check=list(HealthCheck), database=None, deadline=None)
@given(st.data())
def test_generic_breakers_on_a_spec_whose_every_tensor_is_derived(data):
    """No free tensor to resize: the breaker takes a root of the derivation (a query source) and the
    others are derived again; too many elements go to its `free` positions, so a stacked tensor
    keeps its head count and its 2 or 3."""
    spec = SPECS.operator("MULTIHEAD_ATTENTION")
    rule = data.draw(st.sampled_from(["tensor.too_many_elements", "tensor.zero_size", "tensor.sizes_length"]))
    case = data.draw(invalid_cases(spec, "6.4", rule))
    assert validate(spec, case.descriptor, "6.4").rule_ids == {rule}
