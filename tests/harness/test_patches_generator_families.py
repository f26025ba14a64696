"""The window family's im2col / col2im combines, the data movement family's coordinates_of_nonzero
mode and the generator family's Philox-4x32-10: what each computes, and what the judge accepts of a
device. Expected values are worked out by hand in each docstring or are published known answers;
none is taken from the reference's own output."""
from __future__ import annotations

import numpy as np

from harness.generate.cases import case_from_arrays
from harness.judge.diff import judge
from harness.model.backend import Outputs
from harness.model.descriptor import TensorDesc
from harness.model.layout import output_buffers
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute
from harness.reference.families.generator import philox4x32
from tests.helpers import SPECS


def _case(op: str, types: dict, sizes: dict, inputs: dict, attributes: dict):
    spec = SPECS.operator(op)
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    values = {n: np.asarray(v).astype(SPECS.catalog.dtype(types[n]).numpy).reshape(sizes[n]) for n, v in inputs.items()}
    return spec, case_from_arrays(spec, "6.4", types, values, attributes=attributes, layouts=layouts)


def _judge(spec, case, outputs: dict):
    arrays = {n: np.asarray(v).astype(SPECS.catalog.dtype(case.descriptor.tensors[n].data_type).numpy)
              .reshape(case.descriptor.tensors[n].sizes) for n, v in outputs.items()}
    return judge(spec, case, Outputs(output_buffers(spec, case, arrays)), True)


def test_philox_matches_the_random123_known_answers():
    """Random123's kat_vectors for philox4x32, 10 rounds (Salmon, Moraes, Dror, Shaw, SC11)."""
    kats = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
            ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
            ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
             (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for counter, key, words in kats:
        got = philox4x32(np.array([counter], dtype=np.uint64), key)[0]
        assert [int(w) for w in got] == list(words)


def test_col2im_is_the_adjoint_of_im2col():
    """<im2col(x), y> == <x, col2im(y)> for one geometry with stride, dilation and both paddings
    (integer-valued data: every sum is exact): the two combines read the same windows."""
    rng = np.random.default_rng(7)
    attributes = {"WindowSizes": [2, 3], "Strides": [2, 1], "Dilations": [1, 2], "StartPadding": [1, 0], "EndPadding": [0, 1]}
    # out/in spatial {5, 6}: blocks (5 + 1 - 1 - 1) // 2 + 1 = 3 and (6 + 1 - 4 - 1) // 1 + 1 = 3; columns 2 * 2 * 3 = 12
    x = rng.integers(-8, 8, size=(1, 2, 5, 6)).astype(np.float32)
    y = rng.integers(-8, 8, size=(1, 12, 9)).astype(np.float32)
    f32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    spec_u, case_u = _case("UNFOLD", f32, {"InputTensor": [1, 2, 5, 6], "OutputTensor": [1, 12, 9]}, {"InputTensor": x}, attributes)
    spec_f, case_f = _case("FOLD", f32, {"InputTensor": [1, 12, 9], "OutputTensor": [1, 2, 5, 6]}, {"InputTensor": y}, attributes)
    columns = family_compute("window")(spec_u, case_u.descriptor, family_inputs(spec_u, case_u.descriptor, case_u.inputs))
    folded = family_compute("window")(spec_f, case_f.descriptor, family_inputs(spec_f, case_f.descriptor, case_f.inputs))
    lhs = float((columns.outputs["OutputTensor"].astype(np.float64) * y).sum())
    rhs = float((x.astype(np.float64) * folded.outputs["OutputTensor"]).sum())
    assert lhs == rhs


def test_a_fold_sum_is_judged_within_its_bound():
    """out {1,1,3}, window [2], stride 1: out[1] = 2 + 3 = 5 (N = 2 terms, sum|x| = 5). The spec's bound
    2 (N - 1) eps sum|x| + 2 N (tiny + tiny_out eps) + eps |exact| = 10 eps + 5 eps = 15 eps (+ about
    2^-123) = 3.75 ULP at 5 (eps = 2^-23, the ULP 2^-21): 3 ULP off is legal, 4 is not."""
    f32 = {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"}
    attributes = {"WindowSizes": [2], "Strides": [1], "Dilations": [1], "StartPadding": [0], "EndPadding": [0]}
    spec, case = _case("FOLD", f32, {"InputTensor": [1, 2, 2], "OutputTensor": [1, 1, 3]}, {"InputTensor": [1, 2, 3, 4]}, attributes)
    ulp = 2.0 ** -21
    assert _judge(spec, case, {"OutputTensor": [1, 5 + 3 * ulp, 4]}).mismatch_count == 0
    assert _judge(spec, case, {"OutputTensor": [1, 5 - 3 * ulp, 4]}).mismatch_count == 0
    assert _judge(spec, case, {"OutputTensor": [1, 5 + 4 * ulp, 4]}).mismatch_count == 1


def test_nonzero_coordinates_take_the_flush_of_a_denormal_as_legal():
    """x {3} FLOAT32 [1e-45, 0, 2]: exactly 2 non-zero elements, rows [0], [2]; a device that flushes
    the fp32 denormal sees [0, 0, 2]: count 1, row [2]. Both are legal; rows past the fewer count (1)
    are open; a count of 3 is wrong."""
    types = {"InputTensor": "FLOAT32", "OutputCountTensor": "UINT32", "OutputCoordinatesTensor": "UINT32"}
    sizes = {"InputTensor": [3], "OutputCountTensor": [1], "OutputCoordinatesTensor": [3, 1]}
    spec, case = _case("NONZERO_COORDINATES", types, sizes, {"InputTensor": [1.0e-45, 0.0, 2.0]}, {})
    exact = _judge(spec, case, {"OutputCountTensor": [2], "OutputCoordinatesTensor": [0, 2, 77]})
    assert exact.mismatch_count == 0 and exact.status == "diverges-on-unspecified"  # row 2 is open
    flushed = _judge(spec, case, {"OutputCountTensor": [1], "OutputCoordinatesTensor": [2, 5, 9]})
    assert flushed.mismatch_count == 0 and flushed.liberties, flushed.summary
    assert _judge(spec, case, {"OutputCountTensor": [3], "OutputCoordinatesTensor": [0, 2, 0]}).status == "mismatch"
    assert _judge(spec, case, {"OutputCountTensor": [2], "OutputCoordinatesTensor": [1, 2, 0]}).status == "mismatch"
