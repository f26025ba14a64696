"""CAST under the precision model: an integer converted to a float output may take either
neighbour (D3D11.3 §22.13.5-6: round to nearest even "strongly recommended but not required"), a
float narrowed toward zero or to nearest (§3.2.2), fp32 denormals of float32 <-> double conversions
flushed or not (§22.17.1); float -> integer truncates, exactly. For each rule the outermost legal
values are accepted and one step beyond is rejected. The neighbours are written out by hand."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.layout import pack_buffer
from tests.helpers import SPECS

CAST = SPECS.operator("CAST")
ROUNDING = SPECS.catalog.arithmetic.liberty_names["rounding"]
RESULT_FLUSH = SPECS.catalog.arithmetic.liberty_names["fp32_result_flush"]
INPUT_FLUSH = SPECS.catalog.arithmetic.liberty_names["fp32_input_flush"]
_NP = {"FLOAT64": np.float64, "FLOAT32": np.float32, "FLOAT16": np.float16, "INT64": np.int64, "INT32": np.int32,
       "INT16": np.int16, "INT8": np.int8, "UINT64": np.uint64, "UINT32": np.uint32, "UINT16": np.uint16, "UINT8": np.uint8}


def _judge(src: str, dst: str, x, y):
    case = case_from_arrays(CAST, "6.4", {"InputTensor": src, "OutputTensor": dst},
                            {"InputTensor": np.array([x], dtype=_NP[src])})
    desc = case.descriptor.tensors["OutputTensor"]
    out = np.array([y], dtype=_NP[dst])
    return judge(CAST, case, Outputs({"OutputTensor": pack_buffer(out, desc, SPECS.catalog.dtype(dst))}), True)


def _bits(value: int, dtype) -> float:
    width = {np.float16: np.uint16, np.float32: np.uint32}[dtype]
    return float(np.array([value], dtype=width).view(dtype)[0])


@pytest.mark.parametrize("src,dst,x,legal,beyond", [
    # 2^24 + 1: 2^24 (nearest even) and 2^24 + 2; 2^24 - 2 and 2^24 + 4 are a step beyond
    ("INT32", "FLOAT32", 16777217, [16777216.0, 16777218.0], [16777214.0, 16777220.0]),
    # 2^31 - 1: 2^31 (nearest) and 2^31 - 128 (spacing 128 below 2^31, 256 above)
    ("INT32", "FLOAT32", 2147483647, [2147483648.0, 2147483520.0], [2147483392.0, 2147483904.0]),
    ("UINT32", "FLOAT32", 4294967295, [4294967296.0, 4294967040.0], [4294966784.0, 4294967808.0]),
    # 2049: 2048 (nearest even) and 2050 (FLOAT16 spacing 2)
    ("INT16", "FLOAT16", 2049, [2048.0, 2050.0], [2046.0, 2052.0]),
    # 65520 (the overflow midpoint): +inf (nearest) and 65504 (toward zero); 65472 is a step below
    ("UINT16", "FLOAT16", 65520, [np.inf, 65504.0], [65472.0]),
    # FLOAT32 -> FLOAT16: 0.1 (0x3DCCCCCD) lies between 0x2E66 (nearest) and 0x2E67
    ("FLOAT32", "FLOAT16", np.float32(0.1), [_bits(0x2E66, np.float16), _bits(0x2E67, np.float16)],
     [_bits(0x2E65, np.float16), _bits(0x2E68, np.float16)]),
    # 1e5 overflows: +inf (nearest) or 65504 (toward zero, D3D §3.2.2)
    ("FLOAT32", "FLOAT16", np.float32(1e5), [np.inf, 65504.0], [65472.0]),
    # FLOAT64 -> FLOAT32: 0.1 between 0x3DCCCCCC and 0x3DCCCCCD (nearest)
    ("FLOAT64", "FLOAT32", 0.1, [_bits(0x3DCCCCCD, np.float32), _bits(0x3DCCCCCC, np.float32)],
     [_bits(0x3DCCCCCB, np.float32), _bits(0x3DCCCCCE, np.float32)]),
])
def test_conversions_take_either_neighbour_and_no_further(src, dst, x, legal, beyond):
    for y in legal:
        assert _judge(src, dst, x, y).status == "pass", (x, y)
    for y in beyond:
        assert _judge(src, dst, x, y).status == "mismatch", (x, y)


def test_the_other_neighbour_names_the_rounding_liberty():
    diff = _judge("INT32", "FLOAT32", 16777217, 16777218.0)
    assert diff.status == "pass" and ROUNDING in diff.liberties
    assert _judge("INT32", "FLOAT32", 16777217, 16777216.0).liberties == {}


def test_float_to_integer_truncates_exactly():
    assert _judge("FLOAT32", "INT32", 2.5, 2).status == "pass"
    for wrong in (3, 1):
        assert _judge("FLOAT32", "INT32", 2.5, wrong).status == "mismatch"
    assert _judge("FLOAT32", "INT8", -0.9, -1).status == "mismatch"
    assert _judge("FLOAT16", "UINT8", 255.9, 255).status == "pass"


def test_double_float32_conversions_may_flush_fp32_denormals():
    # a double result in FLOAT32's denormal range: kept (nearest) or flushed to a signed zero
    assert _judge("FLOAT64", "FLOAT32", 1e-40, _bits(0x000116C2, np.float32)).status == "pass"
    flushed = _judge("FLOAT64", "FLOAT32", -1e-40, -0.0)
    assert flushed.status == "pass" and RESULT_FLUSH in flushed.liberties
    assert _judge("FLOAT64", "FLOAT32", -1e-40, 0.0).status == "mismatch"
    # an fp32 denormal input widened to double
    widened = _judge("FLOAT32", "FLOAT64", np.float32(1e-40), 0.0)
    assert widened.status == "pass" and INPUT_FLUSH in widened.liberties
    assert _judge("FLOAT32", "FLOAT64", np.float32(1e-40), -0.0).status == "mismatch"


def test_fp16_denormals_widen_exactly():
    assert _judge("FLOAT16", "FLOAT32", _bits(0x0001, np.float16), 0.0).status == "mismatch"
    assert _judge("FLOAT16", "FLOAT32", _bits(0x0001, np.float16), 2.0 ** -24).status == "pass"


@pytest.mark.parametrize("src,dst,x,y", [
    ("FLOAT32", "INT32", np.float32(3e9), 7),          # beyond INT32
    ("FLOAT32", "INT8", np.float32(np.nan), 7),        # NaN
    ("FLOAT32", "UINT16", np.float32(-1.0), 1),        # negative to unsigned
    ("FLOAT64", "INT64", 9.223372036854775808e18, 0),  # 2^63: one beyond INT64 (2^63 - 1 is not a double)
    ("FLOAT32", "UINT64", np.float32(1.8446744073709552e19), 0),  # 2^64
    ("INT32", "INT8", 300, 127),                       # integer narrowing (saturated; the reference wraps)
    ("INT8", "UINT32", -1, 0),
    ("INT64", "FLOAT32", 16777217, 16777220.0),        # a 64-bit integer beyond 2^24
])
def test_what_the_docs_leave_open_is_unspecified(src, dst, x, y):
    assert _judge(src, dst, x, y).status == "diverges-on-unspecified"


def test_the_largest_double_below_2_63_is_defined_for_int64():
    assert _judge("FLOAT64", "INT64", 9.2233720368547748e18, 9223372036854774784).status == "pass"
    assert _judge("FLOAT64", "INT64", 9.2233720368547748e18, 9223372036854774783).status == "mismatch"
