"""4-bit tensors (UINT4, INT4): two elements per byte, element 2k in the low nibble, strides in
elements, the minimum size of ceil(elements / 2) bytes rounded up to 4. Expected bytes are the
DML_TENSOR_DATA_TYPE page's example and hand-packed nibbles (each checked on DirectML 1.15.4)."""
import numpy as np
import pytest

from harness.model.descriptor import TensorDesc
from harness.model.layout import minimum_bytes, pack_buffer, pack_nibbles, read_tensor, unpack_nibbles, write_tensor
from tests.helpers import SPECS

U4, I4 = SPECS.catalog.dtype("UINT4"), SPECS.catalog.dtype("INT4")


def test_the_pages_example_packs_low_nibble_first():
    """'[1,2,3,4,5] ... yields 3 bytes [0x21, 0x43, 0x05] with an ignorable tail nibble' (padded to 4)."""
    desc = TensorDesc("UINT4", [5])
    assert pack_buffer(np.array([1, 2, 3, 4, 5]), desc, U4) == bytes([0x21, 0x43, 0x05, 0x00])
    assert read_tensor(bytes([0x21, 0x43, 0x05, 0xF0]), desc, U4).tolist() == [1, 2, 3, 4, 5]


def test_int4_is_sign_extended():
    """0x8..0xF are -8..-1: the bytes 0x10, 0x32, ..., 0xFE hold 0..7 then -8..-1."""
    data = bytes([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE])
    assert read_tensor(data, TensorDesc("INT4", [16]), I4).tolist() == list(range(8)) + list(range(-8, 0))
    assert unpack_nibbles(data, signed=False).tolist() == list(range(16))
    assert pack_nibbles(np.array([-8, 7, -1, 0], np.int8)).tolist() == [0x78, 0x0F]


@pytest.mark.parametrize("count, minimum", [(1, 4), (8, 4), (9, 8), (16, 8), (17, 12)])
def test_minimum_size_counts_started_bytes(count, minimum):
    """9 elements are 4.5 bytes: 5, rounded up to 8 (DirectML 1.15.4 rejects a total of 4 for 9, accepts it for 8)."""
    assert minimum_bytes(TensorDesc("UINT4", [count]), U4) == minimum


def test_strides_count_nibbles():
    """Sizes {2,3}, Strides {1,2} (transposed) over elements 0..5 reads [[0,2,4],[1,3,5]]; Strides
    {3,1} writes elements 0,1,3,4 and keeps the other nibbles (0xE fill)."""
    assert read_tensor(bytes([0x10, 0x32, 0x54, 0x00]), TensorDesc("UINT4", [2, 3], [1, 2]), U4).tolist() == [[0, 2, 4], [1, 3, 5]]
    buffer = bytearray([0xEE] * 4)
    write_tensor(buffer, TensorDesc("INT4", [2, 2], [3, 1]), I4, np.array([[1, 2], [-1, 4]]))
    assert bytes(buffer) == bytes([0x21, 0xFE, 0xE4, 0xEE])


def test_a_short_buffer_is_refused_before_reading():
    with pytest.raises(ValueError):
        read_tensor(bytes(2), TensorDesc("UINT4", [5]), U4)
