"""PADDING1 on ONNX Runtime (the `pad` builder of backends/onnxruntime_ops.yaml, one ONNX Pad).

The golden outputs below were worked out by hand from the DML_PADDING1_OPERATOR_DESC page's
semantics (CONSTANT: the value around the input; EDGE: the nearest edge element; REFLECTION: the
input mirrored about its edges, the edges not repeated), not taken from the reference. What ONNX
cannot express (SYMMETRIC; a reflect pad reaching its dimension's size, which ONNX Runtime
rejects where the page folds periodically) must come back unsupported with a reason: never a
pass, never a crash.
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import pack_buffer
from tests.helpers import SPECS

PAD = "PADDING1"
CONSTANT, EDGE, REFLECTION, SYMMETRIC = 0, 1, 2, 3
X = [[1, 2, 3],
     [4, 5, 6]]
START, END = [1, 2], [1, 1]   # one row before and after, two columns before and one after: 4 x 6


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


def _case(data_type: str, x: np.ndarray, mode: int, start: list[int], end: list[int], value: float | int = 0):
    spec = SPECS.operator(PAD)
    out = [n + a + b for n, a, b in zip(x.shape, start, end)]
    layouts = {"InputTensor": TensorDesc(data_type, list(x.shape)), "OutputTensor": TensorDesc(data_type, out)}
    attributes = {"PaddingMode": mode, "PaddingValueDataType": SPECS.catalog.dtype(data_type).enum, "PaddingValue": value,
                  "StartPadding": list(start), "EndPadding": list(end)}
    return case_from_arrays(spec, "6.4", {"InputTensor": data_type, "OutputTensor": data_type}, {"InputTensor": x},
                            layouts=layouts, attributes=attributes)


def _run(ort, case):
    result = ort.run(case)
    out = output_values(SPECS.operator(PAD), case, result.buffers)["OutputTensor"] if result.kind == "outputs" else None
    return result, out


@pytest.mark.parametrize("mode, expected", [
    (CONSTANT, [[9, 9, 9, 9, 9, 9],
                [9, 9, 1, 2, 3, 9],
                [9, 9, 4, 5, 6, 9],
                [9, 9, 9, 9, 9, 9]]),
    (EDGE, [[1, 1, 1, 2, 3, 3],        # the row before repeats row 0, the row after row 1
            [1, 1, 1, 2, 3, 3],
            [4, 4, 4, 5, 6, 6],
            [4, 4, 4, 5, 6, 6]]),
    (REFLECTION, [[6, 5, 4, 5, 6, 5],  # row -1 mirrors row 1, row 2 mirrors row 0;
                  [3, 2, 1, 2, 3, 2],  # columns -2, -1 mirror 2, 1 and column 3 mirrors 1
                  [6, 5, 4, 5, 6, 5],
                  [3, 2, 1, 2, 3, 2]]),
])
def test_hand_computed_padding(ort, mode, expected):
    result, out = _run(ort, _case("FLOAT32", np.array(X, np.float32), mode, START, END, 9.0))
    assert result.kind == "outputs", getattr(result, "reason", "")
    assert out.tolist() == expected


def test_the_constant_is_the_union_value_in_the_tensor_type_exactly(ort):
    # INT64 beyond 2^53 and UINT64's maximum: a conversion through float would change them
    for data_type, value in (("INT64", 2**53 + 1), ("UINT64", 2**64 - 1)):
        _, out = _run(ort, _case(data_type, np.array([[7]], SPECS.catalog.dtype(data_type).numpy), CONSTANT, [0, 1], [0, 0], value))
        assert out.tolist() == [[value, 7]]
    _, out = _run(ort, _case("FLOAT32", np.array([[1.0]], np.float32), CONSTANT, [0, 0], [0, 1], -0.0))
    assert out.view(np.uint32).tolist() == [[0x3F800000, 0x80000000]]  # 1.0, then -0.0 (not +0)


def test_symmetric_is_unsupported(ort):
    result, _ = _run(ort, _case("FLOAT32", np.array(X, np.float32), SYMMETRIC, START, END))
    assert result.kind == "unsupported" and "SYMMETRIC" in result.reason


@pytest.mark.parametrize("start, end", [([0, 3], [0, 0]),    # a start pad equal to the size (3 columns)
                                        ([0, 0], [2, 0]),    # an end pad equal to the size (2 rows)
                                        ([0, 0], [0, 5])])   # beyond it (the page folds periodically)
def test_reflection_reaching_the_dimension_size_is_unsupported(ort, start, end):
    result, _ = _run(ort, _case("FLOAT32", np.array(X, np.float32), REFLECTION, start, end))
    assert result.kind == "unsupported" and "reflect" in result.reason


def test_a_type_onnx_runtime_cannot_pad_is_unsupported_with_its_message(ort):
    result, _ = _run(ort, _case("INT16", np.array(X, np.int16), EDGE, START, END))
    assert result.kind == "unsupported" and "NOT_IMPLEMENTED" in result.reason


def test_the_pad_table_entry_is_checked(tmp_path):
    from backends.onnxruntime_backend import MAPPING_FILE, load_mapping
    from harness.spec.source import SpecError
    assert load_mapping(MAPPING_FILE)[PAD]["modes"] == {"CONSTANT": "constant", "EDGE": "edge", "REFLECTION": "reflect"}
    bad = tmp_path / "ops.yaml"
    bad.write_text("PADDING1: {builder: pad, inputs: [InputTensor], mode: PaddingMode, value: PaddingValue,\n"
                   "           starts: StartPadding, ends: EndPadding, modes: [constant]}\n")
    with pytest.raises(SpecError) as raised:
        load_mapping(bad)
    assert "PADDING1" in str(raised.value) and "modes" in str(raised.value)


def _float16_diff(x_bits: list[int], actual_bits: list[int]):
    """The judged result of a backend that gave `actual_bits` for EDGE padding of one element at
    both ends of a [1, n] float16 input."""
    spec = SPECS.operator(PAD)
    case = _case("FLOAT16", np.array([x_bits], np.uint16).view(np.float16), EDGE, [0, 1], [0, 1])
    desc = case.descriptor.tensors["OutputTensor"]
    actual = np.array([actual_bits], np.uint16).view(np.float16)
    return judge(spec, case, Outputs({"OutputTensor": pack_buffer(actual, desc, SPECS.catalog.dtype("FLOAT16"))}), True)


def test_the_quieted_nan_expectation_explains_nans_only():
    """ort-pad-float16-quiets-signaling-nan reads `x`, the value the reference moved to each output
    element: a NaN's bits changed are explained, any other changed value is not."""
    from harness.run.registry import expectations_for
    expectations = expectations_for("onnxruntime")
    quieted = _float16_diff([0x7C01, 0x3C00], [0x7E01, 0x7E01, 0x3C00, 0x3C00])
    assert quieted.mismatch_count == 2
    found = expectations.explain(PAD, "FLOAT16", quieted, "FLOAT16")
    assert found is not None and found.id == "ort-pad-float16-quiets-signaling-nan"
    also_wrong = _float16_diff([0x7C01, 0x3C00], [0x7E01, 0x7E01, 0x3C00, 0x4000])  # 1.0 -> 2.0 as well
    assert expectations.explain(PAD, "FLOAT16", also_wrong, "FLOAT16") is None
