"""The gradient family's roi_sampled mode: the adjoint of the roi family's sampled mode.

Checked against the forward reference, never against the gradient's own output: for an average
(linear in the input), <roi_align(x), dy> == <x, roi_align_grad(dy)> in float64 (the plug-ins'
exact values), over overlapping, inverted and partly outside regions, bilinear and nearest, with
and without corner alignment; for a max, which is linear near an input whose samples differ, the
gradient is the forward's derivative (the largest sample's weights)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.model.descriptor import TensorDesc
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute
from tests.helpers import SPECS

FORWARD, BACKWARD = "ROI_ALIGN1", "ROI_ALIGN_GRAD"
ROIS = [[0.0, 0.0, 3.0, 2.0], [1.0, 0.5, 4.0, 3.0], [3.0, 3.0, 0.5, 1.0], [-1.0, 0.0, 2.0, 4.5]]
BATCH = [0, 1, 0, 1]


def _exact(op: str, types: dict, sizes: dict, inputs: dict, attributes: dict) -> dict:
    """The plug-in's exact (float64) value per output where it has a bound, else its output."""
    spec = SPECS.operator(op)
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    values = {n: np.asarray(v).astype(SPECS.catalog.dtype(types[n]).numpy).reshape(sizes[n]) for n, v in inputs.items()}
    case = case_from_arrays(spec, "6.4", types, values, attributes=attributes, layouts=layouts)
    assert spec.formula.family is not None
    result = family_compute(spec.formula.family.name)(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    return {n: np.asarray(result.bounds[n][0] if n in result.bounds else v, dtype=np.float64)
            for n, v in result.outputs.items()}


def _pair(x: np.ndarray, dy: np.ndarray, attributes: dict, count: int = len(ROIS)) -> tuple[np.ndarray, np.ndarray]:
    """(roi_align(x), roi_align_grad(dy)) over the first `count` of ROIS and BATCH."""
    f = "FLOAT32"
    rois, batch = np.asarray(ROIS[:count]), np.asarray(BATCH[:count])
    y = _exact(FORWARD, {"InputTensor": f, "ROITensor": f, "BatchIndicesTensor": "UINT32", "OutputTensor": f},
               {"InputTensor": x.shape, "ROITensor": rois.shape, "BatchIndicesTensor": batch.shape, "OutputTensor": dy.shape},
               {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": batch},
               {**attributes, "OutOfBoundsInputValue": 0.0})["OutputTensor"]
    grad = {k: v for k, v in attributes.items()}
    dx = _exact(BACKWARD, {"InputTensor": f, "InputGradientTensor": f, "ROITensor": f, "BatchIndicesTensor": "UINT32",
                           "OutputGradientTensor": f, "OutputROIGradientTensor": f},
                {"InputTensor": x.shape, "InputGradientTensor": dy.shape, "ROITensor": rois.shape,
                 "BatchIndicesTensor": batch.shape, "OutputGradientTensor": x.shape, "OutputROIGradientTensor": rois.shape},
                {"InputTensor": x, "InputGradientTensor": dy, "ROITensor": rois, "BatchIndicesTensor": batch},
                grad)["OutputGradientTensor"]
    return y, dx


def _attributes(reduction: int, mode: int, samples: tuple[int, int], offsets: tuple[float, float], corners: int) -> dict:
    return {"ReductionFunction": reduction, "InterpolationMode": mode, "SpatialScaleX": 1.0, "SpatialScaleY": 1.0,
            "InputPixelOffset": offsets[0], "OutputPixelOffset": offsets[1], "MinimumSamplesPerOutput": samples[0],
            "MaximumSamplesPerOutput": samples[1], "AlignRegionsToCorners": corners}


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("samples", [(1, 1), (2, 2), (1, 4)])
@pytest.mark.parametrize("offsets,corners", [((0.5, -0.5), 0), ((0.0, 0.0), 0), ((0.0, 0.0), 1)])
def test_average_is_the_adjoint_of_the_forward(mode: int, samples: tuple[int, int], offsets: tuple[float, float],
                                               corners: int) -> None:
    """<roi_align(x), dy> == <x, roi_align_grad(dy)> (float64): regions overlapping, inverted, partly
    outside the input, two batches, output cells 3 x 2."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32).astype(np.float64)  # the values the plug-ins read
    dy = rng.standard_normal((len(ROIS), 3, 3, 2)).astype(np.float32).astype(np.float64)
    y, dx = _pair(x, dy, _attributes(2, mode, samples, offsets, corners))
    assert np.isclose(float((y * dy).sum()), float((x * dx).sum()), rtol=1e-12, atol=1e-12)


def test_max_is_the_forward_derivative() -> None:
    """Max (bilinear, 2 x 2 samples per cell): each cell's gradient goes to its largest sample's
    neighbours with the bilinear weights: <dx, v> equals the forward's directional derivative
    along v, by central differences (the forward is linear near x, whose samples differ). The first
    three regions: no sample outside the input (the gradient's operator has no OutOfBoundsInputValue:
    such a cell is left open)."""
    rng = np.random.default_rng(11)
    x = rng.permutation(120).reshape(2, 3, 5, 4) / 4.0  # distinct quarters: exact in FLOAT32, x +- h v too
    dy = rng.integers(-8, 8, size=(3, 3, 3, 2)).astype(np.float64)
    attributes = _attributes(7, 1, (2, 2), (0.5, -0.5), 0)
    _, dx = _pair(x, dy, attributes, 3)
    v = rng.integers(-3, 4, size=x.shape).astype(np.float64)
    h = 2.0 ** -12
    up, _ = _pair(x + h * v, dy, attributes, 3)
    down, _ = _pair(x - h * v, dy, attributes, 3)
    derivative = float(((up - down) * dy).sum()) / (2 * h)
    assert np.isclose(float((dx * v).sum()), derivative, rtol=1e-9, atol=1e-9)


def test_page_example_within_the_tie_bound() -> None:
    """The page's example (nearest, 4 regions of 2 x 2 over {1, 1, 4, 4}, output 1 x 3, offsets 0.5
    and -0.5): its samples at x = -1/6, 1/2, 7/6 and y = 1/2 hold .5 ties, sent to the lower index
    there ([[3, 3, 9, 6], [0, 0, 0, 0], [15, 9, 21, 12], [0, 0, 0, 0]]): inside the bound."""
    spec = SPECS.operator(BACKWARD)
    f = "FLOAT32"
    types = {"InputTensor": f, "InputGradientTensor": f, "ROITensor": f, "BatchIndicesTensor": "UINT32",
             "OutputGradientTensor": f, "OutputROIGradientTensor": f}
    sizes = {"InputTensor": [1, 1, 4, 4], "InputGradientTensor": [4, 1, 1, 3], "ROITensor": [4, 4],
             "BatchIndicesTensor": [4], "OutputGradientTensor": [1, 1, 4, 4], "OutputROIGradientTensor": [4, 4]}
    inputs = {"InputTensor": np.arange(1, 17), "InputGradientTensor": np.arange(1, 13),
              "ROITensor": [0, 0, 2, 2, 2, 0, 4, 2, 0, 2, 2, 4, 2, 2, 4, 4], "BatchIndicesTensor": [0, 0, 0, 0]}
    values = {n: np.asarray(v).astype(SPECS.catalog.dtype(types[n]).numpy).reshape(sizes[n]) for n, v in inputs.items()}
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    case = case_from_arrays(spec, "6.4", types, values, attributes=_attributes(2, 0, (1, 1), (0.5, -0.5), 0), layouts=layouts)
    assert spec.formula.family is not None
    result = family_compute(spec.formula.family.name)(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    exact, atol = result.bounds["OutputGradientTensor"]
    page = np.array([[3, 3, 9, 6], [0, 0, 0, 0], [15, 9, 21, 12], [0, 0, 0, 0]], dtype=np.float64).reshape(1, 1, 4, 4)
    assert (np.abs(page - exact) <= atol).all()
    assert result.unspecified["OutputROIGradientTensor"]["roi_gradient_open"].all()
