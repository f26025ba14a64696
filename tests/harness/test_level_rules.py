"""Rules in force below a feature level only: a constraint's `when` reads the case's level
(FeatureLevel against FL_X_Y), for a type rule (ELEMENT_WISE_POW: "Until DML_FEATURE_LEVEL_3_0,
ExponentTensor must match the type of InputTensor") and an expression rule (BATCH_NORMALIZATION:
Spatial FALSE forbids a broadcast mean or variance in Width and Height, deprecated at FL 4.0).
Each descriptor below is written by hand; the verdicts follow from the two pages' sentences."""
from __future__ import annotations

from harness.generate.types import valid_type_assignments
from harness.model.descriptor import Descriptor, TensorDesc
from harness.model.validator import validate
from tests.helpers import SPECS


def _pow(input_type: str, exponent_type: str) -> Descriptor:
    return Descriptor("ELEMENT_WISE_POW", {"InputTensor": TensorDesc(input_type, [2, 3, 4, 5]),
                                           "ExponentTensor": TensorDesc(exponent_type, [2, 3, 4, 5]),
                                           "OutputTensor": TensorDesc(input_type, [2, 3, 4, 5])}, {})


def test_pow_exponent_type_is_tied_below_3_0_only():
    spec = SPECS.operator("ELEMENT_WISE_POW")
    mixed = _pow("FLOAT32", "FLOAT16")
    assert validate(spec, mixed, "2.1").rule_ids == {"constraint.exponent_type_until_3_0"}
    assert validate(spec, mixed, "1.0").rule_ids == {"constraint.exponent_type_until_3_0"}
    assert validate(spec, mixed, "3.0").accepted
    assert validate(spec, _pow("FLOAT16", "FLOAT16"), "2.1").accepted


def test_generation_ties_the_exponent_type_below_3_0():
    spec = SPECS.operator("ELEMENT_WISE_POW")
    old = valid_type_assignments(spec, "2.1")
    assert old and all(a["ExponentTensor"] == a["InputTensor"] for a in old)
    assert any(a["ExponentTensor"] != a["InputTensor"] for a in valid_type_assignments(spec, "3.0"))


def _batch_norm(spatial: float, mean_sizes: list[int]) -> Descriptor:
    full = [2, 3, 4, 5]
    tensors = {name: TensorDesc("FLOAT32", list(full)) for name in ("InputTensor", "ScaleTensor", "BiasTensor", "OutputTensor")}
    tensors["MeanTensor"] = TensorDesc("FLOAT32", mean_sizes)
    tensors["VarianceTensor"] = TensorDesc("FLOAT32", list(full))
    return Descriptor("BATCH_NORMALIZATION", tensors, {"Spatial": spatial, "Epsilon": 0.0})


def test_spatial_false_forbids_a_broadcast_mean_below_4_0_only():
    spec = SPECS.operator("BATCH_NORMALIZATION")
    broadcast_width = _batch_norm(0.0, [1, 3, 4, 1])
    assert validate(spec, broadcast_width, "3.1").rule_ids == {"constraint.spatial_false_mean_not_broadcast"}
    assert validate(spec, broadcast_width, "4.0").accepted
    assert validate(spec, _batch_norm(1.0, [1, 3, 4, 1]), "3.1").accepted  # Spatial TRUE
    assert validate(spec, _batch_norm(0.0, [1, 3, 4, 5]), "3.1").accepted  # batch and channel broadcast: not Width or Height
