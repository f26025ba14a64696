"""The quantize_dynamic family (DYNAMIC_QUANTIZE_LINEAR): what the judge accepts of a device's scale,
zero point and values. Expected values are worked out by hand in each docstring, not taken from
the reference's own output."""
from __future__ import annotations

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import output_buffers
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute
from tests.helpers import SPECS

OP = "DYNAMIC_QUANTIZE_LINEAR"
U8 = {"InputTensor": "FLOAT32", "OutputTensor": "UINT8", "OutputScaleTensor": "FLOAT32", "OutputZeroPointTensor": "UINT8"}


def _case(x: list[float], types: dict = U8):
    spec = SPECS.operator(OP)
    n = len(x)
    sizes = {"InputTensor": [n], "OutputTensor": [n], "OutputScaleTensor": [1], "OutputZeroPointTensor": [1]}
    layouts = {name: TensorDesc(t, sizes[name]) for name, t in types.items()}
    values = {"InputTensor": np.asarray(x, dtype=SPECS.catalog.dtype(types["InputTensor"]).numpy)}
    return spec, case_from_arrays(spec, "6.4", types, values, layouts=layouts)


def _judge(spec, case, values: list[int], scale: float, zero_point: int):
    d = case.descriptor.tensors
    arrays = {"OutputTensor": np.asarray(values).astype(SPECS.catalog.dtype(d["OutputTensor"].data_type).numpy),
              "OutputScaleTensor": np.asarray([scale], dtype=np.float32),
              "OutputZeroPointTensor": np.asarray([zero_point]).astype(SPECS.catalog.dtype(d["OutputZeroPointTensor"].data_type).numpy)}
    return judge(spec, case, Outputs(output_buffers(spec, case, arrays)), True)


def test_range_includes_zero_and_the_reference_rounds_half_to_even():
    """x [1, 3, 5, 8]: range [0, 8] (zero included), scale 8 / 255, zero point 0; x * 255 / 8 =
    31.875, 95.625, 159.375, 255 -> 32, 96, 159, 255."""
    spec, case = _case([1.0, 3.0, 5.0, 8.0])
    got = family_compute("quantize_dynamic")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    assert got.outputs["OutputTensor"].tolist() == [32, 96, 159, 255]
    assert got.outputs["OutputScaleTensor"].tolist() == [np.float32(8 / 255)]
    assert got.outputs["OutputZeroPointTensor"].tolist() == [0]


def test_a_quotient_near_a_tie_accepts_either_neighbour():
    """x [2, 4]: range [0, 4], scale fl32(4 / 255); 2 / scale is 127.5 in exact arithmetic, so the
    FLOAT32 scale and a division through the reciprocal may land on either side: 127 and 128 are
    legal, 126 is not; 4 / scale = 255 stays 255."""
    spec, case = _case([2.0, 4.0])
    scale = float(np.float32(4 / 255))
    assert _judge(spec, case, [127, 255], scale, 0).mismatch_count == 0
    assert _judge(spec, case, [128, 255], scale, 0).mismatch_count == 0
    assert _judge(spec, case, [126, 255], scale, 0).mismatch_count == 1


def test_the_scale_is_judged_within_three_faithful_steps():
    """Scale 4 / 255 = 0.0157 lies in [2^-6, 2^-5): one ULP is 2^-29 = 1.86e-9, and the bound
    (3 + 4 eps) eps * exact + tiny is 3.01 ULP about the exact value, which the nearest FLOAT32 is
    within half a ULP of: 2 ULPs from it on either side are legal, 4 (at least 3.5 from the exact
    value) are not."""
    spec, case = _case([2.0, 4.0])
    nearest = np.float32(4 / 255)
    ulp = np.float32(2.0 ** -29)
    for steps, mismatches in ((2, 0), (-2, 0), (4, 1), (-4, 1)):
        scale = float(nearest + np.float32(steps) * ulp)
        result = _judge(spec, case, [128, 255], scale, 0)
        assert result.mismatch_count == mismatches, (steps, result)


def test_a_zero_point_off_by_one_away_from_a_tie_is_a_mismatch():
    """x [-55, 0, 200]: range 255, scale 1, zero point 55 (-(-55) / 1, far from any tie): 56 is
    wrong; the values round(x) + 55 = [0, 55, 255]."""
    spec, case = _case([-55.0, 0.0, 200.0])
    assert _judge(spec, case, [0, 55, 255], 1.0, 55).mismatch_count == 0
    assert _judge(spec, case, [0, 55, 255], 1.0, 56).mismatch_count == 1


def test_a_range_just_above_the_largest_float32_is_open():
    """x [FLOAT32's largest value, -1.19]: the exact range exceeds 3.4028235e38 by 1.19, which
    float64 cannot resolve there (its ULP is 2^76) but a FLOAT32 subtraction may round up to
    infinity (either neighbour): `range_overflow`, every output open. Seen on an NVIDIA H200, whose
    values came back 0 where the largest element's quotient is 255
    (docs/gpu-cases/nvidia-mismatches/directml-DYNAMIC_QUANTIZE_LINEAR-048bc3be4e6b1cb5.yaml)."""
    spec, case = _case([3.4028234663852886e38, -1.19])
    result = family_compute("quantize_dynamic")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    assert set(result.unspecified["OutputTensor"]) == {"range_overflow"}
    spec, case = _case([3.4028234663852886e38, 0.0])  # range exactly the largest value: judged
    result = family_compute("quantize_dynamic")(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
    assert "range_overflow" not in result.unspecified.get("OutputTensor", {})
