"""Strided, broadcast (stride 0) and padded inputs give the same values as packed ones."""
import numpy as np
import pytest

from harness.generate.cases import case_from_arrays, output_values
from harness.model.descriptor import TensorDesc
from harness.model.layout import minimum_bytes, output_overlaps, pack_buffer, packed_strides, read_logical, span_elements
from tests.helpers import REFERENCE, SPECS

RNG = np.random.default_rng(7)


def _run(spec, case):
    result = REFERENCE.run(case)
    assert result.kind == "outputs", result
    return output_values(spec, case, result.buffers)[spec.formula.output]


def test_minimum_bytes_matches_dmlcalcbuffertensorsize():
    f16 = SPECS.catalog.dtype("FLOAT16")
    assert minimum_bytes(TensorDesc("FLOAT16", [1, 1, 3, 5]), f16) == 32          # 30 rounded up to 4
    assert minimum_bytes(TensorDesc("FLOAT16", [2, 3], [5, 1]), f16) == 16        # (1*5+2*1+1)*2 = 16
    assert minimum_bytes(TensorDesc("FLOAT16", [2, 3], [0, 1]), f16) == 8         # broadcast: 3 elements, 6 -> 8
    assert minimum_bytes(TensorDesc("UINT8", [7]), SPECS.catalog.dtype("UINT8")) == 8
    assert packed_strides([2, 3, 4]) == [12, 4, 1]


@pytest.mark.parametrize("sizes,strides", [([1, 1, 3, 5], None), ([2, 3], [5, 1]), ([2, 3], [0, 1]), ([7], None), ([4, 2], [1, 9])])
def test_the_bounds_check_and_the_minimum_size_agree(sizes, strides):
    """The reads' bounds check (span_elements) and DMLCalcBufferTensorSize count the same elements:
    a buffer of the minimum size is always readable, and one element less never is."""
    f16 = SPECS.catalog.dtype("FLOAT16")
    desc = TensorDesc("FLOAT16", sizes, strides)
    span = span_elements(sizes, strides)
    assert minimum_bytes(desc, f16) == (span * 2 + 3) & ~3
    assert read_logical(bytes(span * 2), desc, np.float16).shape == tuple(sizes)
    with pytest.raises(ValueError, match="reaches byte"):
        read_logical(bytes(span * 2 - 2), desc, np.float16)


@pytest.mark.parametrize("op,dtype", [("ELEMENT_WISE_SIGN", "FLOAT32"), ("ACTIVATION_HARD_SIGMOID", "FLOAT16"),
                                      ("ELEMENT_WISE_BIT_NOT", "UINT16"), ("ELEMENT_WISE_SIGN", "INT8")])
@pytest.mark.parametrize("layout", ["padded", "transposed", "broadcast", "padded_total_size"])
def test_unary_layouts_equal_packed(op, dtype, layout):
    spec = SPECS.operator(op)
    t = SPECS.catalog.dtype(dtype)
    sizes = [2, 3, 4]
    if t.is_float:
        values = RNG.standard_normal(sizes).astype(t.numpy)
    else:
        values = RNG.integers(t.min, t.max, size=sizes, endpoint=True).astype(t.numpy)
    types = {"InputTensor": dtype, "OutputTensor": dtype}
    if layout == "padded":
        in_desc = TensorDesc(dtype, sizes, [20, 6, 1])           # rows padded to 6, planes to 20
    elif layout == "transposed":
        in_desc = TensorDesc(dtype, sizes, [1, 2, 6])            # column-major
    elif layout == "broadcast":
        values = np.broadcast_to(values[:1], sizes).copy()       # the same plane twice
        in_desc = TensorDesc(dtype, sizes, [0, 4, 1])
    else:
        in_desc = TensorDesc(dtype, sizes, None, total_bytes=minimum_bytes(TensorDesc(dtype, sizes), t) + 64)
    packed = case_from_arrays(spec, "6.4", types, {"InputTensor": values})
    strided = case_from_arrays(spec, "6.4", types, {"InputTensor": values},
                               layouts={"InputTensor": in_desc, "OutputTensor": TensorDesc(dtype, sizes, [24, 8, 2])})
    assert read_logical(strided.inputs["InputTensor"], in_desc, t.numpy).tobytes() == values.tobytes()
    a, b = _run(spec, packed), _run(spec, strided)
    assert a.tobytes() == b.tobytes()


def test_quantize_with_broadcast_scale_and_zero_point():
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    sizes = [2, 4]
    x = np.array([[0.5, 1.0, 1.5, 2.0], [10.0, 20.0, 30.0, 40.0]], np.float32)
    scale_row = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    types = {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"}
    packed = case_from_arrays(spec, "6.4", types, {"InputTensor": x, "ScaleTensor": np.broadcast_to(scale_row, sizes),
                                                   "ZeroPointTensor": np.full(sizes, 3)})
    broadcast = case_from_arrays(spec, "6.4", types, {"InputTensor": x, "ScaleTensor": np.broadcast_to(scale_row, sizes),
                                                      "ZeroPointTensor": np.full(sizes, 3)},
                                 layouts={"ScaleTensor": TensorDesc("FLOAT32", sizes, [0, 1]),
                                          "ZeroPointTensor": TensorDesc("UINT8", sizes, [0, 0])})
    assert len(broadcast.inputs["ScaleTensor"]) == 16 and len(broadcast.inputs["ZeroPointTensor"]) == 4
    assert _run(spec, packed).tolist() == _run(spec, broadcast).tolist() == [[4, 4, 4, 3], [23, 23, 18, 13]]


def test_in_place_output_writes_into_the_input_buffer():
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    types = {"InputTensor": "INT16", "OutputTensor": "INT16"}
    desc = TensorDesc("INT16", [2, 3], [4, 1])
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": np.array([[-5, 0, 5], [7, -7, 0]], np.int16)},
                            layouts={"InputTensor": desc, "OutputTensor": desc}, aliases={"OutputTensor": "InputTensor"})
    assert _run(spec, case).tolist() == [[-1, 0, 1], [1, -1, 0]]


def test_output_overlap_detection():
    assert output_overlaps(TensorDesc("FLOAT32", [2, 3], [0, 1]))
    assert output_overlaps(TensorDesc("FLOAT32", [2, 3], [2, 1]))
    assert not output_overlaps(TensorDesc("FLOAT32", [2, 3], [3, 1]))
    assert not output_overlaps(TensorDesc("FLOAT32", [2, 3], [1, 2]))
    assert not output_overlaps(TensorDesc("FLOAT32", [1, 3], [0, 1]))  # size-1 dims may have any stride
    assert output_overlaps(TensorDesc("FLOAT32", [2048, 1024], [512, 1]))  # large: sufficient condition path
    assert not output_overlaps(TensorDesc("FLOAT32", [2, 2], [1, 4]))      # interleaved columns
    assert not output_overlaps(TensorDesc("FLOAT32", [2, 3, 2], [1, 4, 2]))  # fails the quick test, exact says no


def test_pack_buffer_keeps_padding_bytes():
    t = SPECS.catalog.dtype("UINT8")
    desc = TensorDesc("UINT8", [2, 2], [3, 1])
    buf = pack_buffer(np.array([[1, 2], [3, 4]], np.uint8), desc, t, fill=0xEE)
    assert list(buf) == [1, 2, 0xEE, 3, 4, 0xEE, 0xEE, 0xEE]
