"""QUANTIZE and DEQUANTIZE on ONNX Runtime (the `quantize_blocks` builder: opset-21 QuantizeLinear /
DequantizeLinear with one scale per element, 4-bit tensors cast inside the graph).

Expected outputs are worked by hand from the semantics observed on DirectML 1.15.4 (see
tests/golden/QUANTIZE.yaml), not taken from the reference: a one-element tensor (which ONNX Runtime
takes as per-tensor, refusing a block_size), the unsigned midpoint of type SCALE, INT4 blocks."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.model.descriptor import TensorDesc
from tests.helpers import SPECS


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


def _run(ort, op: str, types: dict, sizes: dict, values: dict, quantization_type: int) -> np.ndarray:
    spec = SPECS.operator(op)
    layouts = {name: TensorDesc(t, sizes[name]) for name, t in types.items()}
    arrays = {name: np.asarray(v).reshape(sizes[name]) for name, v in values.items()}
    case = case_from_arrays(spec, "6.4", types, arrays, attributes={"QuantizationType": quantization_type}, layouts=layouts)
    result = ort.run(case)
    assert result.kind == "outputs", result
    return output_values(spec, case, result.buffers)["OutputTensor"]


def test_dequantize_one_element_uint8_midpoint(ort):
    """{1,1} UINT8 200, type SCALE (zero point 128), scale 0.5: (200 - 128) * 0.5 = 36."""
    got = _run(ort, "DEQUANTIZE", {"InputTensor": "UINT8", "QuantizationTensors_0": "FLOAT32", "OutputTensor": "FLOAT32"},
               {"InputTensor": [1, 1], "QuantizationTensors_0": [1, 1], "OutputTensor": [1, 1]},
               {"InputTensor": [200], "QuantizationTensors_0": [0.5]}, 1)
    assert got.tolist() == [[36.0]]


def test_quantize_int4_blocks_with_zero_point(ort):
    """{2,4} input, {1,2} scale [1, 2] (blocks of two columns), INT4 zero point [1, -1]: row 0:
    0.5 -> 0 + 1 = 1, 9 -> 9 + 1 -> 7, 3 / 2 = 1.5 -> 2 - 1 = 1, -20 / 2 = -10 - 1 -> -8; row 1:
    -1.5 -> -2 + 1 = -1, 2.5 -> 2 + 1 = 3, 5 / 2 = 2.5 -> 2 - 1 = 1, 1 / 2 = 0.5 -> 0 - 1 = -1."""
    got = _run(ort, "QUANTIZE", {"InputTensor": "FLOAT32", "QuantizationTensors_0": "FLOAT32", "QuantizationTensors_1": "INT4",
                                 "OutputTensor": "INT4"},
               {"InputTensor": [2, 4], "QuantizationTensors_0": [1, 2], "QuantizationTensors_1": [1, 2], "OutputTensor": [2, 4]},
               {"InputTensor": [0.5, 9.0, 3.0, -20.0, -1.5, 2.5, 5.0, 1.0], "QuantizationTensors_0": [1.0, 2.0],
                "QuantizationTensors_1": [1, -1]}, 2)
    assert got.tolist() == [[1, 7, 1, -8], [-1, 3, 1, -1]]
