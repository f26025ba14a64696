"""The roi family: regions of interest pooled onto a grid (harness/reference/families/roi.py).

Each test states its values by hand from the pages' equations (ROI_POOLING's bins, ROI_ALIGN1's
general logic), never from the reference's own output; the element variables that mark what the
pages leave open are checked where a case is built to meet them."""
from __future__ import annotations

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.model.descriptor import TensorDesc
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute
from harness.reference.families.result import FamilyResult
from tests.helpers import SPECS


def _run(op: str, types: dict, sizes: dict, inputs: dict, attributes: dict, level: str = "6.4") -> FamilyResult:
    spec = SPECS.operator(op)
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    values = {n: np.asarray(v).astype(SPECS.catalog.dtype(types[n]).numpy).reshape(sizes[n]) for n, v in inputs.items()}
    case = case_from_arrays(spec, level, types, values, attributes=attributes, layouts=layouts)
    assert spec.formula.family is not None
    return family_compute(spec.formula.family.name)(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))


POOL_TYPES = {"InputTensor": "FLOAT32", "ROITensor": "FLOAT32", "OutputTensor": "FLOAT32"}


def _pool(x: np.ndarray, rois: list[float], pooled: tuple[int, int], scale: float) -> FamilyResult:
    regions = len(rois) // 5
    sizes = {"InputTensor": list(x.shape), "ROITensor": [1, 1, regions, 5],
             "OutputTensor": [regions, x.shape[1], pooled[0], pooled[1]]}
    return _run("ROI_POOLING", POOL_TYPES, sizes, {"InputTensor": x, "ROITensor": rois},
                {"SpatialScale": scale, "PooledSize_Height": pooled[0], "PooledSize_Width": pooled[1]})


def test_integer_bins_overlap_and_clamp():
    """A 3 x 3 region into 2 x 2 bins: rows 0-1 and 1-2 (start 3 // 2 = 1, end (6 + 1) // 2 = 3): the
    middle row is in both; a region past the input is clamped to it."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    out = _pool(x, [0, 0, 0, 2, 2, 0, 2, 2, 9, 9], (2, 2), 1.0).outputs["OutputTensor"]
    assert out[0, 0].tolist() == [[5.0, 6.0], [9.0, 10.0]]
    # region 2: x1 = y1 = 2, x2 = y2 = 9 (height 8): bins [2, 6) and [6, 10) clamped to [2, 4) and [4, 4)
    assert out[1, 0, 0, 0] == 15.0


def test_integer_bins_mark_ties_empty_bins_and_bad_batches():
    """0.5 * 1 = 0.5 is a .5 tie of round(); corners 3 and 4 of a 2 x 2 input clamp the bin to
    nothing; batch 1 of a one-batch input and batch 0.5 are not whole numbers in [0, N)."""
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    result = _pool(x, [0, 1, 0, 2, 0, 0, 6, 6, 8, 8, 1, 0, 0, 2, 2, 0.5, 0, 0, 2, 2], (1, 1), 0.5)
    masks = result.unspecified["OutputTensor"]
    assert masks["rounding_tie"][:, 0, 0, 0].tolist() == [True, False, False, False]
    assert masks["empty_bin"][:, 0, 0, 0].tolist() == [False, True, False, False]
    assert masks["batch_invalid"][:, 0, 0, 0].tolist() == [False, False, True, True]


ALIGN_TYPES = {"InputTensor": "FLOAT32", "ROITensor": "FLOAT32", "BatchIndicesTensor": "UINT32", "OutputTensor": "FLOAT32"}


def _align(x: np.ndarray, roi: list[float], out_hw: tuple[int, int], attributes: dict) -> FamilyResult:
    sizes = {"InputTensor": list(x.shape), "ROITensor": [1, 4], "BatchIndicesTensor": [1],
             "OutputTensor": [1, x.shape[1], out_hw[0], out_hw[1]]}
    base = {"ReductionFunction": 2, "InterpolationMode": 1, "SpatialScaleX": 1.0, "SpatialScaleY": 1.0,
            "OutOfBoundsInputValue": 0.0, "MinimumSamplesPerOutput": 1, "MaximumSamplesPerOutput": 1}
    return _run("ROI_ALIGN", ALIGN_TYPES, sizes, {"InputTensor": x, "ROITensor": roi, "BatchIndicesTensor": [0]},
                {**base, **attributes})


def test_sampled_average_of_bilinear_samples():
    """Row [0, 10, 20, 30], region x 0..4, one cell, 2 samples at (t + 0.5) * 2 - 0.5 = 0.5, 2.5:
    5 and 25, average 15, maximum 25; the count 4 / 1 = 4 clamped to 2 is whole."""
    x = np.array([0, 10, 20, 30], dtype=np.float32).reshape(1, 1, 1, 4)
    average = _align(x, [0, 0, 4, 1], (1, 1), {"MaximumSamplesPerOutput": 2})
    assert average.outputs["OutputTensor"].reshape(-1).tolist() == [15.0]
    assert "samples_open" not in average.unspecified["OutputTensor"]
    largest = _align(x, [0, 0, 4, 1], (1, 1), {"MaximumSamplesPerOutput": 2, "ReductionFunction": 7})
    assert largest.outputs["OutputTensor"].reshape(-1).tolist() == [25.0]


def test_sampled_fractional_count_is_open_and_ceiled():
    """Region width 3 into 2 cells: 1.5 samples per cell, between the minimum 1 and the maximum 4:
    the page names no count; the reference takes 2 and marks samples_open."""
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)
    result = _align(x, [0, 0, 3, 2], (1, 2), {"MaximumSamplesPerOutput": 4})
    assert result.unspecified["OutputTensor"]["samples_open"].all()


def test_sampled_nearest_tie_widens_the_bound():
    """Nearest, region x 0..4 into 2 cells of 1 sample: positions (t + 0.5) * 2 - 0.5 = 0.5, 2.5, each
    a .5 tie between elements 0/1 and 2/3: the bound holds how far the other neighbour moves it."""
    x = np.array([0, 10, 20, 30], dtype=np.float32).reshape(1, 1, 1, 4)
    result = _align(x, [0, 0, 4, 1], (1, 2), {"InterpolationMode": 0})
    exact, atol = result.bounds["OutputTensor"]
    assert set(exact.reshape(-1).tolist()) <= {0.0, 10.0, 20.0, 30.0}
    assert (atol.reshape(-1) >= 10.0).all()
