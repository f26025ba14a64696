"""DML_SCALAR_UNION fields (PADDING1's PaddingValue, typed by PaddingValueDataType): the case
check, the 8 bytes the runner writes, and the padding value reaching the real DirectML.dll."""
import numpy as np
import pytest

from backends.directml import DirectMLBackend, union_bytes
from harness.generate.cases import case_from_arrays
from harness.model.descriptor import TensorDesc
from harness.model.validator import validate
from harness.model.wellformed import CaseFormatError, check_case
from tests.helpers import REFERENCE, SPECS, directml_or_skip

INT64, FLOAT16, FLOAT32 = 11, 2, 1  # DML_TENSOR_DATA_TYPE values (DirectML.h)


def _case(dtype, numpy_type, value, type_enum, mode=0):
    spec = SPECS.operator("PADDING1")
    x = np.array([5, 6], numpy_type)
    return spec, case_from_arrays(spec, "6.4", {"InputTensor": dtype, "OutputTensor": dtype}, {"InputTensor": x},
                                  attributes={"PaddingMode": mode, "PaddingValueDataType": type_enum, "PaddingValue": value,
                                              "StartPadding": [1], "EndPadding": [2]},
                                  layouts={"OutputTensor": TensorDesc(dtype, [5])})


def test_the_union_holds_the_named_type_exactly():
    spec, case = _case("FLOAT16", np.float16, 0.1, FLOAT16)  # 0.1 is not a FLOAT16 value
    with pytest.raises(CaseFormatError, match="not a FLOAT16 value"):
        check_case(case, spec)
    spec, case = _case("INT64", np.int64, 2.0 ** 63, INT64)
    with pytest.raises(CaseFormatError, match="not an integer in"):
        check_case(case, spec)


def test_union_bytes_are_the_value_little_endian_zero_filled():
    assert union_bytes(SPECS.catalog, INT64, -2) == bytes.fromhex("feffffffffffffff")
    assert union_bytes(SPECS.catalog, FLOAT16, -0.0) == bytes.fromhex("0080000000000000")
    assert union_bytes(SPECS.catalog, FLOAT32, 9.0) == bytes.fromhex("0000104100000000")  # 9.0f = 0x41100000


def test_a_type_other_than_the_output_breaks_one_named_rule():
    spec, case = _case("INT64", np.int64, 7, FLOAT32)
    assert {v.rule for v in validate(spec, case.descriptor, "6.4").violations} == {"constraint.padding_value_data_type"}


def test_the_constant_reaches_the_output():
    """[5, 6] with 1 before and 2 after, constant INT64 -2^63: hand-written."""
    spec, case = _case("INT64", np.int64, -2 ** 63, INT64)
    expected = np.array([-2 ** 63, 5, 6, -2 ** 63, -2 ** 63], np.int64).tobytes()
    assert REFERENCE.run(case).buffers["OutputTensor"] == expected
    header, _ = DirectMLBackend(specs=SPECS).request_for(case)
    assert {"kind": "union", "hex": "0000000000000080"} in header["fields"]
    backend = directml_or_skip()
    try:
        assert backend.run(case).buffers["OutputTensor"] == expected
    finally:
        backend.close()
