"""MULTIHEAD_ATTENTION on ONNX Runtime (the `attention` builder, backends/onnxruntime_attention.py).

Hand-computed from the page's 'GEMM(Query, Transposed(Key)) * Scale -> [Add RelativePositionBias]
-> [Add Mask] -> Softmax -> GEMM(SoftmaxResult, Value)', one head of size 2:
- q [1, 0], K rows [1, 0] and [0, 1], V rows [2, 0] and [0, 4], Scale 1, position bias [0, 1]:
  scores [1, 1], weights [1/2, 1/2], output [1, 2];
- the same without the bias and with KEY_SEQUENCE_LENGTH 1 (the second key masked by -10000):
  weights [1, e^-10001], output [2, 0];
- two queries [1, 0] and [0, 1] over those keys, stacked as {1, 2, 1, 3, 2} or apart: scores [1, 0]
  and [0, 1], weights e/(e+1) = 0.7310586 and 1/(e+1) = 0.2689414, output rows
  [1.4621172, 1.0757656] and [0.5378828, 2.9242344];
- a past key [5, 5] before K: the present key is [[5, 5], [1, 0], [0, 1]], a copy.
The probe of dml-mha-boolean-mask-scales-position-bias, where DirectML 1.15.4 gives 0.7310585, is
0.8807971 on ONNX Runtime, the page's reading (softmax([0.5, 2.5])).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.model.descriptor import TensorDesc
from tests.helpers import SPECS

SPEC = SPECS.operator("MULTIHEAD_ATTENTION")
NONE, KEY_SEQUENCE_LENGTH, KEY_SEQUENCE_END_START = 0, 1, 2
K_ROWS, V_ROWS = [[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 4.0]]


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


def _case(arrays: dict, sizes: dict, attributes: dict, dtype: str = "FLOAT32"):
    types = {n: ("INT32" if n == "MaskTensor" else dtype) for n in sizes}
    layouts = {n: TensorDesc(types[n], s) for n, s in sizes.items()}
    attrs = {"Scale": 1.0, "MaskFilterValue": -10000.0, "HeadCount": 1, "MaskType": NONE} | attributes
    return case_from_arrays(SPEC, "6.4", types, {n: np.asarray(a, dtype=np.float64).reshape(sizes[n]) for n, a in arrays.items()},
                            layouts=layouts, attributes=attrs)


def _outputs(ort, case) -> dict[str, list]:
    result = ort.run(case)
    assert result.kind == "outputs", getattr(result, "reason", "")
    return {n: v.ravel().tolist() for n, v in output_values(SPEC, case, result.buffers).items()}


ONE_QUERY = {"QueryTensor": [1, 1, 2], "KeyTensor": [1, 2, 2], "ValueTensor": [1, 2, 2], "OutputTensor": [1, 1, 2],
             "OutputPresentKeyTensor": [1, 1, 2, 2], "OutputPresentValueTensor": [1, 1, 2, 2]}
QKV = {"QueryTensor": [1.0, 0.0], "KeyTensor": K_ROWS, "ValueTensor": V_ROWS}


def test_the_position_bias_is_added_after_the_scale(ort):
    case = _case(QKV | {"RelativePositionBiasTensor": [0.0, 1.0]}, ONE_QUERY | {"RelativePositionBiasTensor": [1, 1, 1, 2]}, {})
    assert _outputs(ort, case)["OutputTensor"] == pytest.approx([1.0, 2.0], abs=1e-6)


def test_a_key_length_masks_the_keys_after_it(ort):
    case = _case(QKV | {"MaskTensor": [1]}, ONE_QUERY | {"MaskTensor": [1, 1]}, {"MaskType": KEY_SEQUENCE_LENGTH})
    assert _outputs(ort, case)["OutputTensor"] == pytest.approx([2.0, 0.0], abs=1e-6)


def test_a_stacked_query_key_and_value_is_the_same_as_apart(ort):
    w = math.e / (math.e + 1)
    expected = [2 * w, 4 * (1 - w), 2 * (1 - w), 4 * w]
    q_rows = [[1.0, 0.0], [0.0, 1.0]]
    apart = _case({"QueryTensor": q_rows, "KeyTensor": K_ROWS, "ValueTensor": V_ROWS},
                  {"QueryTensor": [1, 2, 2], "KeyTensor": [1, 2, 2], "ValueTensor": [1, 2, 2], "OutputTensor": [1, 2, 2],
                   "OutputPresentKeyTensor": [1, 1, 2, 2], "OutputPresentValueTensor": [1, 1, 2, 2]}, {})
    stacked_values = [[q, k, v] for q, k, v in zip(q_rows, K_ROWS, V_ROWS)]  # {batch, sequence, heads 1, 3, headSize}
    stacked = _case({"StackedQueryKeyValueTensor": stacked_values},
                    {"StackedQueryKeyValueTensor": [1, 2, 1, 3, 2], "OutputTensor": [1, 2, 2],
                     "OutputPresentKeyTensor": [1, 1, 2, 2], "OutputPresentValueTensor": [1, 1, 2, 2]}, {})
    out_apart, out_stacked = _outputs(ort, apart), _outputs(ort, stacked)
    assert out_apart["OutputTensor"] == pytest.approx(expected, abs=1e-6)
    assert out_stacked == out_apart


def test_the_past_key_comes_before_the_key_in_the_present_key(ort):
    case = _case(QKV | {"PastKeyTensor": [5.0, 5.0], "PastValueTensor": [1.0, 1.0]},
                 ONE_QUERY | {"PastKeyTensor": [1, 1, 1, 2], "PastValueTensor": [1, 1, 1, 2],
                              "OutputPresentKeyTensor": [1, 1, 3, 2], "OutputPresentValueTensor": [1, 1, 3, 2]}, {})
    out = _outputs(ort, case)
    assert out["OutputPresentKeyTensor"] == [5.0, 5.0, 1.0, 0.0, 0.0, 1.0]
    assert out["OutputPresentValueTensor"] == [1.0, 1.0, 2.0, 0.0, 0.0, 4.0]


@pytest.mark.parametrize("attributes, arrays, sizes, reason", [
    ({"Scale": 0.0}, {}, {}, "reads a scale of 0 as its default"),
    ({"MaskType": KEY_SEQUENCE_END_START}, {"MaskTensor": [2, 0]}, {"MaskTensor": [2, 1]}, "MaskType KEY_SEQUENCE_END_START"),
    ({}, {"ValueTensor": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "PastKeyTensor": [5.0, 5.0], "PastValueTensor": [1.0, 1.0, 1.0]},
     {"ValueTensor": [1, 2, 3], "PastKeyTensor": [1, 1, 1, 2], "PastValueTensor": [1, 1, 1, 3], "OutputTensor": [1, 1, 3],
      "OutputPresentKeyTensor": [1, 1, 3, 2], "OutputPresentValueTensor": [1, 1, 3, 3]}, "past value whose head size is not the key's"),
])
def test_what_the_node_cannot_say_is_unsupported_with_the_reason(ort, attributes, arrays, sizes, reason):
    result = ort.run(_case(QKV | arrays, ONE_QUERY | sizes, attributes))
    assert result.kind == "unsupported" and reason in result.reason


def test_the_page_reading_of_the_boolean_mask_with_a_position_bias(ort):
    """The probe DirectML diverges on (it scales the bias): ONNX Runtime agrees with the page."""
    from harness.judge.expectations import probe_case
    from harness.run.registry import expectations_for
    items = expectations_for("directml").items
    item = next(i for i in items if i.id == "dml-mha-boolean-mask-scales-position-bias")
    case = probe_case(item, SPECS, "6.4")
    assert _outputs(ort, case)["OutputTensor"] == pytest.approx([0.8807971, 0.8807971], abs=1e-6)
