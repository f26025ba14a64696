"""Blocked operands (harness.model.blocks): each size divides the output's, an element covering a
block of consecutive output elements; hand-written expansions."""
import numpy as np
import pytest

from harness.model.blocks import spread_blocks


def test_blocks_along_both_axes():
    """A {2,2} scale over a {4,4} input: each 2x2 quadrant takes one value."""
    got = spread_blocks(np.array([[1, 2], [4, 8]]), (4, 4))
    assert got.tolist() == [[1, 1, 2, 2], [1, 1, 2, 2], [4, 4, 8, 8], [4, 4, 8, 8]]


def test_size_one_broadcasts_and_a_batch_axis_is_kept():
    assert spread_blocks(np.array([[3], [5]]), (2, 3)).tolist() == [[3, 3, 3], [5, 5, 5]]
    batch = np.array([[[1, 2]], [[3, 4]]])  # (2 data sets, 1, 2) over (2, 2, 4)
    assert spread_blocks(batch, (2, 2, 4)).tolist() == [[[1, 1, 2, 2], [1, 1, 2, 2]], [[3, 3, 4, 4], [3, 3, 4, 4]]]


def test_a_scalar_or_an_equal_shape_is_returned_as_is():
    same = np.arange(6).reshape(2, 3)
    assert spread_blocks(same, (2, 3)) is same
    assert spread_blocks(np.float64(2.5), (2, 3)) == 2.5


def test_a_size_that_does_not_divide_is_refused():
    with pytest.raises(ValueError, match="does not divide"):
        spread_blocks(np.ones((1, 3)), (2, 4))
