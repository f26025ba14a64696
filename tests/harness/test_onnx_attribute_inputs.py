"""FLOAT fields that ONNX takes as scalar inputs (backends/onnxruntime_ops.yaml `attribute_inputs`,
ELEMENT_WISE_CLIP's Min and Max as Clip's min and max): given in the tensor's type, exactly where
that type holds them, and reported unsupported where it cannot (never an invented bound)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from tests.helpers import SPECS

CLIP = "ELEMENT_WISE_CLIP"


@pytest.fixture(scope="module")
def ort():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    return OnnxRuntimeBackend(SPECS)


def _run(ort, data_type: str, values: list, attributes: dict):
    spec = SPECS.operator(CLIP)
    types = {"InputTensor": data_type, "OutputTensor": data_type}
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": np.array(values, SPECS.catalog.dtype(data_type).numpy)},
                            attributes=attributes)
    result = ort.run(case)
    return result, (output_values(spec, case, result.buffers)["OutputTensor"] if result.kind == "outputs" else None)


def test_whole_bounds_reach_integer_tensors_exactly(ort):
    # one element: ONNX Runtime's scalar path (its INT64 vector path has a known divergence)
    result, out = _run(ort, "INT64", [2**53 + 1], {"Min": -(2.0**62), "Max": 2.0**62})
    assert result.kind == "outputs" and out.tolist() == [2**53 + 1]
    result, out = _run(ort, "UINT64", [2**64 - 1], {"Min": 0.0, "Max": 2.0**63})
    assert out.tolist() == [2**63]


@pytest.mark.parametrize("bound", [-1.5, np.nan, np.inf, 200.0])
def test_a_bound_the_integer_type_cannot_hold_is_unsupported(ort, bound):
    result, _ = _run(ort, "INT8", [1, 2], {"Min": bound, "Max": 100.0})
    assert result.kind == "unsupported" and "is not a value of INT8" in result.reason


def test_float16_tensors_get_the_nearest_float16_bound(ort):
    # float32(0.1) is nearest to 1638 * 2^-14 (0x2E66) among the FLOAT16 values
    _, out = _run(ort, "FLOAT16", [0.0, 0.5], {"Min": 0.1, "Max": 1000.0})
    assert out.view(np.uint16).tolist() == [0x2E66, 0x3800]


@pytest.mark.parametrize("given", ["Min", "[Min, 3]", "{Min: Max}"])
def test_attribute_inputs_must_be_a_list_of_field_names(tmp_path, given):
    """A malformed `attribute_inputs` is named where it is written (file, line, key), not met as
    a crash of every case of the operator."""
    from backends.onnxruntime_backend import load_mapping
    from harness.spec.source import SpecError
    bad = tmp_path / "ops.yaml"
    bad.write_text("ELEMENT_WISE_SIGN: {builder: node, op: Sign, inputs: [InputTensor]}\n"
                   f"ELEMENT_WISE_CLIP: {{builder: node, op: Clip, inputs: [InputTensor], attribute_inputs: {given}}}\n")
    with pytest.raises(SpecError) as raised:
        load_mapping(bad)
    message = str(raised.value)
    assert "ops.yaml:2" in message and "ELEMENT_WISE_CLIP" in message and "attribute_inputs must be a list of field names" in message
