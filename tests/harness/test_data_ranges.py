"""generation.data_ranges, with GATHER's indices as the worked case: generated data keeps to a
range given by shape expressions per case (and per feature level), a small share of data sets
gets values just outside it, and the outputs those values select are unspecified (any value,
but no failure) while every other element is still judged."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.generate.data import just_outside, make_input_batch, ranged_values
from harness.judge.diff import judge
from harness.model.backend import Crashed, Outputs
from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.layout import pack_buffer, read_logical
from harness.reference.evaluate import expected_for
from tests.helpers import SPECS

GATHER = SPECS.operator("GATHER")


def test_values_are_folded_into_the_range_and_inside_ones_kept():
    int32 = SPECS.catalog.dtype("INT32")
    values = np.array([-7, -3, 0, 2, 3, 4, 100, -2**31], dtype=np.int32)
    out = ranged_values(values, int32, -3, 2)   # span 6: v -> -3 + (v + 3) mod 6
    # -7: -4 mod 6 = 2 -> -1; 3: 6 mod 6 = 0 -> -3; 4: 7 mod 6 = 1 -> -2; 100: 103 = 6*17 + 1 -> -2;
    # -2^31: -2147483645 = 6*(-357913941) + 1 -> -2
    assert out.tolist() == [-1, -3, 0, 2, -3, -2, -2, -2]
    assert ((out >= -3) & (out <= 2)).all()


def test_just_outside_values_in_the_tensor_type():
    assert just_outside(SPECS.catalog.dtype("INT32"), -4, 3) == [4, -5]
    # below an unsigned type's 0: -1's bit pattern, what a driver casting -1 passes
    assert just_outside(SPECS.catalog.dtype("UINT32"), 0, 3) == [4, 2**32 - 1]
    assert just_outside(SPECS.catalog.dtype("UINT8"), 0, 255) == [255]  # 256 does not exist in UINT8


def _gather(index_type: str, axis_size: int = 5, count: int = 12) -> Descriptor:
    return Descriptor("GATHER", {"InputTensor": TensorDesc("FLOAT32", [axis_size, 2]),
                                 "IndicesTensor": TensorDesc(index_type, [1, count]),
                                 "OutputTensor": TensorDesc("FLOAT32", [count, 2])}, {"Axis": 0.0, "IndexDimensions": 1.0})


def _indices(descriptor: Descriptor, level: str, sets: int = 400) -> np.ndarray:
    desc = descriptor.tensors["IndicesTensor"]
    batch = make_input_batch(GATHER, descriptor, seed=3, count=sets, level=level)
    return np.stack([read_logical(b["IndicesTensor"], desc, SPECS.catalog.dtype(desc.data_type).numpy) for b in batch])


def test_signed_indices_use_negatives_from_fl_3_0_only():
    """The same INT32 descriptor: from FL 3.0 the range is [-5, 4] (just outside: 5 and -6); the
    spec's entry below FL 3.0 (which no table reaches: signed indices start at FL 3.0) is [0, 4]
    (just outside: 5 and -1). The level reaches the expressions as FeatureLevel."""
    descriptor = _gather("INT32")
    new = _indices(descriptor, "4.1")
    assert new.min() >= -6 and new.max() <= 5
    assert (new < -1).any() and (new >= 0).any()
    old = _indices(descriptor, "2.1")
    assert old.min() >= -1 and old.max() <= 5
    assert set(np.unique(old[(old < 0) | (old > 4)])) <= {-1, 5}


def test_a_small_share_of_data_sets_goes_just_outside():
    values = _indices(_gather("UINT32"), "4.1")
    values = values.reshape(values.shape[0], -1)   # one row per data set
    outside = (values > 4)
    assert set(np.unique(values[outside])) <= {5, 2**32 - 1}
    share = outside.any(axis=1).mean()
    assert 0.03 <= share <= 0.2, share   # the spec's outside: 0.1 of the data sets
    assert outside.sum(axis=1).max() <= 3


def _case(indices, index_type: str = "INT32"):
    x = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    # equal DimensionCounts: the n indices as a {1, n} IndicesTensor, the output {n, 2}
    layouts = {"InputTensor": TensorDesc("FLOAT32", [4, 2]), "IndicesTensor": TensorDesc(index_type, [1, len(indices)]),
               "OutputTensor": TensorDesc("FLOAT32", [len(indices), 2])}
    return case_from_arrays(GATHER, "4.1", {"InputTensor": "FLOAT32", "IndicesTensor": index_type, "OutputTensor": "FLOAT32"},
                            {"InputTensor": x, "IndicesTensor": np.asarray(indices).reshape(1, -1)},
                            attributes={"Axis": 0, "IndexDimensions": 1}, layouts=layouts)


def _outputs(case, rows: list[list[float]]) -> Outputs:
    desc = case.descriptor.tensors["OutputTensor"]
    return Outputs({"OutputTensor": pack_buffer(np.array(rows, dtype=np.float32), desc, SPECS.catalog.dtype("FLOAT32"))})


def test_out_of_range_indices_leave_only_their_elements_open():
    """Indices [1, 4, -5, -4] on an axis of 4: 4 and -5 are outside [-4, 4); -4 is row 0."""
    case = _case([1, 4, -5, -4])
    expected = expected_for(GATHER, case)
    assert expected.unspecified("OutputTensor").tolist() == [[False, False], [True, True], [True, True], [False, False]]
    # any value where the index is invalid (DirectML clamps within the buffer): unspecified, not a failure
    open_rows = judge(GATHER, case, _outputs(case, [[3, 4], [7, 8], [1, 2], [1, 2]]), True)
    assert open_rows.status == "diverges-on-unspecified", open_rows.summary
    # a wrong element where the index is valid is still a mismatch
    wrong = judge(GATHER, case, _outputs(case, [[3, 4], [7, 8], [1, 2], [7, 8]]), True)
    assert wrong.status == "mismatch", wrong.summary
    # and a failure is a failure: the page says 'no failure will occur'
    assert judge(GATHER, case, Crashed("device removed"), True).status == "crashed"


def test_an_unsigned_index_beyond_int64_is_out_of_range():
    case = _case(np.array([2**64 - 1, 3], dtype=np.uint64), "UINT64")
    assert expected_for(GATHER, case).unspecified("OutputTensor").tolist() == [[True, True], [False, False]]


@pytest.mark.parametrize("level,indices", [("4.1", [-1, 0])])
def test_negative_indices_count_from_the_end(level, indices):
    case = _case(indices)
    assert expected_for(GATHER, case).outputs["OutputTensor"].tolist() == [[7, 8], [1, 2]]


def test_no_level_reads_as_the_newest():
    """`FeatureLevel` without a case level is the newest level's DML_FEATURE_LEVEL value (what a
    device reports); this path once called the catalog's property as a function."""
    from harness.model.facts import level_facts
    facts = level_facts(SPECS.catalog, None)
    assert facts["FeatureLevel"] == SPECS.catalog.newest_level.enum == facts["FL_6_4"]
