"""Plain optional outputs (`kind: optional_output` on a field that is not a tensor array): the page
lets a descriptor leave them null, so a device must accept one (a rejection is rejected-valid);
generation binds them always, since the references compute every output field, and a case that
leaves one null (a case file) is accepted-and-not-judged: unsupported, with the reason, never a pass.

MAX_POOLING1's page: 'OutputIndicesTensor ... An optional output tensor'; 'When OutputIndicesTensor
is set to NULL, this operator is equivalent to DML_MAX_POOLING_OPERATOR_DESC'."""
from __future__ import annotations

import numpy as np

from backends.numpy_reference import NumpyReferenceBackend
from harness.generate.cases import case_from_arrays
from harness.generate.types import coverage_plan
from harness.judge.diff import judge
from harness.judge.status import Status
from harness.model.backend import Outputs, Rejected
from harness.model.validator import case_verdict
from tests.helpers import SPECS

POOL = {"Strides": [1, 1], "WindowSize": [1, 1], "StartPadding": [0, 0], "EndPadding": [0, 0]}


def _pool_case(with_indices: bool):
    spec = SPECS.operator("MAX_POOLING1")
    types = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"} | ({"OutputIndicesTensor": "UINT32"} if with_indices else {})
    case = case_from_arrays(spec, "6.4", types, {"InputTensor": np.asarray([[[[2.0]]]], np.float32)}, attributes=POOL)
    return spec, case


def test_the_spec_reads_a_plain_optional_output_apart_from_an_arrays_later_items():
    table = SPECS.operator("MAX_POOLING1").table_at("6.4", {})
    cell = table.tensors["OutputIndicesTensor"]
    assert cell.optional and cell.bound_always and not cell.omittable
    split = SPECS.operator("SPLIT").table_at("6.4", {})
    later = [c for n, c in split.tensors.items() if c.kind == "optional_output"]
    assert later and all(c.omittable and not c.bound_always for c in later)  # an output array's items 1..


def test_a_null_optional_output_is_valid_and_generation_never_draws_one():
    spec, case = _pool_case(with_indices=False)
    assert case_verdict(spec, case).accepted
    for level in ("5.0", "6.4"):
        plans = coverage_plan(spec, level)
        assert plans and all(types.get("OutputIndicesTensor") is not None for types, *_ in plans)


def test_a_device_must_accept_it_and_its_values_are_not_judged():
    spec, case = _pool_case(with_indices=False)
    reference = NumpyReferenceBackend(SPECS).run(case)
    assert reference.kind == "unsupported" and "OutputIndicesTensor" in reference.reason
    out = judge(spec, case, Outputs({}), backend_validates=True)
    assert out.status == Status.UNSUPPORTED and out.summary.startswith("accepted; ")
    refused = judge(spec, case, Rejected("E_INVALIDARG"), backend_validates=True)
    assert refused.status == Status.REJECTED_VALID


def test_bound_it_is_computed_and_judged_as_before():
    spec, case = _pool_case(with_indices=True)
    reference = NumpyReferenceBackend(SPECS).run(case)
    assert reference.kind == "outputs"
    assert judge(spec, case, reference, backend_validates=True).status == Status.PASS


ROI_GRAD_ATTRIBUTES = {"ReductionFunction": 2, "InterpolationMode": 1, "SpatialScaleX": 1.0, "SpatialScaleY": 1.0,
                       "InputPixelOffset": 0.5, "OutputPixelOffset": -0.5, "MinimumSamplesPerOutput": 1,
                       "MaximumSamplesPerOutput": 1, "AlignRegionsToCorners": 0}


def _roi_grad_case(roi_gradient: bool, reduction: int):
    """ROI_ALIGN_GRAD without InputTensor: one 2 x 2 region's gradient into a 2 x 2 output gradient."""
    from harness.model.descriptor import TensorDesc
    spec = SPECS.operator("ROI_ALIGN_GRAD")
    sizes = {"InputGradientTensor": [1, 1, 1, 1], "ROITensor": [1, 4], "BatchIndicesTensor": [1], "OutputGradientTensor": [1, 1, 2, 2]}
    if roi_gradient:
        sizes["OutputROIGradientTensor"] = [1, 4]
    types = {n: "UINT32" if n == "BatchIndicesTensor" else "FLOAT32" for n in sizes}
    values = {"InputGradientTensor": np.asarray([[[[4.0]]]]), "ROITensor": np.asarray([[0.0, 0.0, 2.0, 2.0]]), "BatchIndicesTensor": np.asarray([0])}
    layouts = {n: TensorDesc(types[n], s) for n, s in sizes.items()}
    return spec, case_from_arrays(spec, "6.4", types, values, layouts=layouts,
                                  attributes=ROI_GRAD_ATTRIBUTES | {"ReductionFunction": reduction})


def test_roi_align_grads_input_is_required_only_where_its_page_says():
    """ROI_ALIGN_GRAD's page: InputTensor 'must be supplied when OutputROIGradientTensor is
    supplied, or when ReductionFunction == DML_REDUCE_FUNCTION_MAX'. An average without the
    regions' gradient may leave it null (the spec required it always until the eighteenth session:
    DirectML accepting such a case was recorded against it); with either, that rule alone is broken,
    and generation can break it (DirectML 1.15.4 rejects those, as the page asks)."""
    from harness.generate.breakers import rule_reachable
    average, maximum = 2, 7
    spec, case = _roi_grad_case(roi_gradient=False, reduction=average)
    assert case_verdict(spec, case).accepted
    for roi_gradient, reduction in ((True, average), (False, maximum), (True, maximum)):
        spec, case = _roi_grad_case(roi_gradient, reduction)
        assert case_verdict(spec, case).rule_ids == {"constraint.input_supplied"}, (roi_gradient, reduction)
    assert rule_reachable(spec, "4.1", "constraint.input_supplied") and rule_reachable(spec, "6.4", "constraint.input_supplied")


def test_a_type_assignment_no_reduction_makes_valid_is_not_a_valid_cell():
    """Generation binds both outputs, so InputTensor null can never be valid there, whatever
    ReductionFunction is drawn: the coverage plan leaves such assignments out (a cell of them was
    Unsatisfiable: every draw rejected), and the type machinery reports the rule broken."""
    from harness.generate.types import broken_type_constraints
    spec = SPECS.operator("ROI_ALIGN_GRAD")
    for level in ("4.1", "6.4"):
        plans = coverage_plan(spec, level)
        assert plans and all(types["InputTensor"] is not None for types, *_ in plans)
    types = {f.name: "FLOAT32" for f in spec.tensor_fields} | {"BatchIndicesTensor": "UINT32", "InputTensor": None}
    assert "input_supplied" in broken_type_constraints(spec, types, level="6.4")
    assert "input_supplied" not in broken_type_constraints(spec, types | {"OutputROIGradientTensor": None}, level="6.4")
