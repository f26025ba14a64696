"""Tensor arrays (`_Field_size_(InputCount) const DML_TENSOR_DESC*`): JOIN's InputTensors, from
the spec to the type plan, the invalid generator, the case file check, the DirectML request and
the real DirectML.dll, and ONNX Runtime. Expected outputs are worked out by hand."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from harness.generate.breakers import invalid_cases
from harness.generate.cases import case_from_arrays, output_values
from harness.generate.types import valid_type_assignments
from harness.model.backend import Outputs, Rejected
from harness.model.descriptor import TensorDesc
from harness.model.wellformed import CaseFormatError, check_case
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import SpecError
from tests.helpers import SPECS, directml_or_skip

JOIN = SPECS.operator("JOIN")
ITEMS = ["InputTensors_0", "InputTensors_1", "InputTensors_2"]


def _join(sizes: list[list[int]], values: list[list[int]], out_sizes: list[int], axis: int, dtype: str = "FLOAT32",
          output: bool = True):
    names = ITEMS[:len(sizes)]
    types = {n: dtype for n in names} | ({"OutputTensor": dtype} if output else {})
    layouts = {n: TensorDesc(dtype, s) for n, s in zip(names, sizes)}
    if output:
        layouts["OutputTensor"] = TensorDesc(dtype, out_sizes)
    arrays = {n: np.array(v).reshape(s) for n, v, s in zip(names, values, sizes)}
    return case_from_arrays(JOIN, "6.4", types, arrays, attributes={"Axis": axis}, layouts=layouts)


def test_the_array_is_one_field_of_the_struct_and_one_tensor_per_item():
    assert JOIN.struct_field_names == ["InputCount", "InputTensors", "OutputTensor", "Axis"]
    assert JOIN.tensor_arrays == {"InputTensors": ITEMS}
    assert [f.slot for f in JOIN.input_fields] == [0, 1, 2]
    for table in JOIN.support:  # the page's one row holds for every item; only item 0 is required
        assert [table.tensors[n].kind for n in ITEMS] == ["input", "optional_input", "optional_input"]
        assert len({(table.tensors[n].dims, table.tensors[n].types) for n in ITEMS}) == 1


def test_type_plans_hold_the_items_as_a_prefix():
    """InputCount items, then nothing: no assignment has an item after an absent one, and every
    count from 1 to max_items is planned."""
    for level in ("1.0", "4.1"):
        counts = set()
        for types in valid_type_assignments(JOIN, level):
            present = [types[n] is not None for n in ITEMS]
            assert present == sorted(present, reverse=True), types
            counts.add(sum(present))
        assert counts == {1, 2, 3}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=invalid_cases(JOIN, "6.4", "tensor.missing"))
def test_a_missing_item_empties_the_array_from_there(case):
    """The required item 0 missing is an empty array (InputCount 0), never a hole."""
    present = [case.descriptor.tensors[n] is not None for n in ITEMS]
    assert present == sorted(present, reverse=True)
    assert not present[0] or case.descriptor.tensors["OutputTensor"] is None


def test_a_case_file_with_a_hole_in_the_array_is_refused():
    case = _join([[1, 1, 1, 2], [1, 1, 1, 1], [1, 1, 1, 1]], [[1, 2], [3], [4]], [1, 1, 1, 4], 3)
    check_case(case, JOIN)
    case.descriptor.tensors["InputTensors_1"] = None
    del case.inputs["InputTensors_1"]
    with pytest.raises(CaseFormatError, match="InputTensors_2 follows the absent InputTensors_1"):
        check_case(case, JOIN)


def test_the_directml_request_points_at_the_present_items_and_counts_them():
    from backends.directml import DirectMLBackend
    backend = DirectMLBackend(SPECS)
    case = _join([[1, 1, 1, 2], [1, 1, 1, 1]], [[1, 2], [3]], [1, 1, 1, 3], 3)
    header, buffers = backend.request_for(case)
    assert [t["name"] for t in header["tensors"]] == ["InputTensors_0", "InputTensors_1", "OutputTensor"]
    assert header["fields"] == [{"kind": "uint", "value": 2}, {"kind": "tensors", "items": [0, 1]},
                                {"kind": "tensor", "tensor": 2}, {"kind": "uint", "value": 3}]
    assert len(buffers) == 2
    empty = _join([], [], [1, 1, 1, 3], 3)
    header, buffers = backend.request_for(empty)
    assert header["fields"][:2] == [{"kind": "uint", "value": 0}, {"kind": "tensors", "items": []}] and not buffers


def test_directml_joins_the_items_and_rejects_an_empty_array():
    """Three items of widths 1, 2, 1 on axis 3 of {1,1,2,w}: row 0 = [1 | 2 3 | 10], row 1 = [4 | 5 6 | 20];
    InputCount 0 ('must be greater than 0') is rejected."""
    backend = directml_or_skip()
    try:
        case = _join([[1, 1, 2, 1], [1, 1, 2, 2], [1, 1, 2, 1]], [[1, 4], [2, 3, 5, 6], [10, 20]], [1, 1, 2, 4], 3)
        result = backend.run(case)
        assert isinstance(result, Outputs), result
        assert output_values(JOIN, case, result.buffers)["OutputTensor"].reshape(-1).tolist() == [1, 2, 3, 10, 4, 5, 6, 20]
        assert isinstance(backend.run(_join([], [], [1, 1, 2, 4], 3)), Rejected)
    finally:
        backend.close()


def test_onnx_runtime_concatenates_the_present_items():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    case = _join([[1, 1, 1, 2], [1, 1, 2, 2]], [[1, 2], [3, 4, 5, 6]], [1, 1, 3, 2], 2, dtype="INT16")
    result = OnnxRuntimeBackend(SPECS).run(case)
    assert isinstance(result, Outputs), result
    assert output_values(JOIN, case, result.buffers)["OutputTensor"].reshape(-1).tolist() == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("edit, replacement, message", [
    ("max_items: 3}", "}", "JOIN.yaml:18: fields[1]: a tensor array names its `count` field and its `max_items`"),
    ('c_type: "const DML_TENSOR_DESC*", count', 'c_type: "const UINT*", count',
     "JOIN.yaml:18: fields[1].c_type: a tensor array's c_type is 'const DML_TENSOR_DESC*'"),
])
def test_a_malformed_tensor_array_names_file_line_and_field(tmp_path, edit, replacement, message):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "JOIN.yaml"
    text = path.read_text()
    line = next(x for x in text.splitlines() if "name: InputTensors," in x)
    path.write_text(text.replace(line, line.replace(edit, replacement)))
    with pytest.raises(SpecError) as raised:
        load_specs(specs)
    assert message in str(raised.value)


# --- an output tensor array: SPLIT's OutputTensors ------------------------------------------------

SPLIT = SPECS.operator("SPLIT")
OUT_ITEMS = ["OutputTensors_0", "OutputTensors_1", "OutputTensors_2"]


def _split(x, in_sizes, item_sizes, axis, dtype="FLOAT32"):
    names = OUT_ITEMS[:len(item_sizes)]
    layouts = {"InputTensor": TensorDesc(dtype, in_sizes)} | {n: TensorDesc(dtype, s) for n, s in zip(names, item_sizes)}
    types = {n: dtype for n in layouts}
    values = {"InputTensor": np.array(x).reshape(in_sizes)} if x is not None else {}
    if x is None:
        del layouts["InputTensor"], types["InputTensor"]
    return case_from_arrays(SPLIT, "6.4", types, values, attributes={"Axis": axis}, layouts=layouts)


def test_output_items_after_the_first_are_optional_outputs():
    for table in SPLIT.support:
        assert [table.tensors[n].kind for n in OUT_ITEMS] == ["output", "optional_output", "optional_output"]


def test_directml_splits_into_the_items_and_rejects_an_empty_array():
    """Rows [1,2,3,4],[5,6,7,8] of a {1,1,2,4} split on axis 3 into widths 1, 2, 1:
    [1,5] | [2,3,6,7] | [4,8]; OutputCount 0 is rejected."""
    backend = directml_or_skip()
    try:
        case = _split([1, 2, 3, 4, 5, 6, 7, 8], [1, 1, 2, 4], [[1, 1, 2, 1], [1, 1, 2, 2], [1, 1, 2, 1]], 3)
        header, _ = backend.request_for(case)
        assert header["fields"][:3] == [{"kind": "tensor", "tensor": 0}, {"kind": "uint", "value": 3},
                                        {"kind": "tensors", "items": [1, 2, 3]}]
        result = backend.run(case)
        assert isinstance(result, Outputs), result
        got = {n: v.reshape(-1).tolist() for n, v in output_values(SPLIT, case, result.buffers).items()}
        assert got == {"OutputTensors_0": [1, 5], "OutputTensors_1": [2, 3, 6, 7], "OutputTensors_2": [4, 8]}
        empty = _split([1, 2], [1, 1, 1, 2], [], 3)
        assert isinstance(backend.run(empty), Rejected)
    finally:
        backend.close()


def test_a_wrong_second_item_is_a_mismatch_of_that_item():
    """The judge compares every present item: the reference's outputs with item 1 altered fail, on
    OutputTensors_1 alone."""
    from harness.judge.diff import compare_outputs
    from tests.helpers import REFERENCE
    case = _split([1, 2, 3, 4, 5, 6], [6], [[2], [3], [1]], 0, dtype="INT32")
    buffers = dict(REFERENCE.run(case).buffers)
    assert not compare_outputs(SPLIT, case, buffers).failed
    buffers["OutputTensors_1"] = np.array([3, 9, 5], np.int32).tobytes()
    result = compare_outputs(SPLIT, case, buffers)
    assert result.failed and result.output == "OutputTensors_1" and result.mismatch_count == 1, result.summary


def test_onnx_runtime_splits_into_the_present_items():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    case = _split([1, 2, 3, 4, 5, 6, 7, 8], [2, 4], [[2, 3], [2, 1]], 1, dtype="INT8")
    result = OnnxRuntimeBackend(SPECS).run(case)
    assert isinstance(result, Outputs), result
    got = {n: v.reshape(-1).tolist() for n, v in output_values(SPLIT, case, result.buffers).items()}
    assert got == {"OutputTensors_0": [1, 2, 3, 5, 6, 7], "OutputTensors_1": [4, 8]}
