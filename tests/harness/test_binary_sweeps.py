"""Exhaustive sweeps of binary operators: every pair of 8-bit values once (65,536 elements)."""
import numpy as np

from harness.generate.sweeps import is_binary, sweep_case, sweeps
from harness.model.layout import read_logical
from harness.reference.evaluate import expected_for
from harness.spec.load import load_specs

SPECS = load_specs()


def _inputs(case, spec):
    out = []
    for f in spec.input_fields:
        desc = case.descriptor.tensors[f.name]
        out.append(read_logical(case.inputs[f.name], desc, SPECS.catalog.dtype(desc.data_type).numpy).ravel())
    return out


def test_binary_operators_are_swept_on_8_bit_types_only():
    found = [w for w in sweeps(SPECS) if is_binary(SPECS.operator(w.operator))]
    assert {w.data_type for w in found} <= {"INT8", "UINT8"}
    assert "ELEMENT_WISE_BIT_AND-FL6.4-INT8" in {w.id for w in found}


def test_a_binary_sweep_holds_every_pair_once_and_the_reference_agrees_with_python():
    sweep = next(w for w in sweeps(SPECS, operators=["ELEMENT_WISE_BIT_AND"]) if w.data_type == "INT8")
    spec = SPECS.operator("ELEMENT_WISE_BIT_AND")
    case = sweep_case(SPECS, sweep)
    a, b = _inputs(case, spec)
    assert a.size == 65536 and len(set(zip(a.tolist(), b.tolist()))) == 65536
    got = expected_for(spec, case).outputs["OutputTensor"].ravel()
    want = np.array([x & y for x, y in zip(a.tolist(), b.tolist())], dtype=np.int8)  # Python's own &
    assert np.array_equal(got, want)


def test_a_scalar_union_is_typed_by_the_swept_type():
    sweep = next(w for w in sweeps(SPECS, operators=["ELEMENT_WISE_CLIP_GRAD1"]) if w.data_type == "UINT8")
    case = sweep_case(SPECS, sweep)
    assert case.descriptor.attributes["MinMaxDataType"] == SPECS.catalog.dtype("UINT8").enum
