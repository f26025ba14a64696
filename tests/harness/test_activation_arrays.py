"""Arrays of fused activations (`_Field_size_(Count) const DML_OPERATOR_DESC*`) and the recurrent
family that applies them: RNN names one activation per direction; a descriptor holds the items'
operator types as a list and item k's fields as `ActivationDescs_k.Member`; the case check refuses
what DirectML's struct cannot hold, generation draws as many items as the spec's `items` says, the
runner gets consecutive DML_OPERATOR_DESCs, and the plug-in runs the time loop within a bound that
grows with the steps."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from backends.directml import DirectMLBackend
from harness.generate.cases import case_from_arrays
from harness.generate.strategies import valid_descriptors
from harness.model.descriptor import TensorDesc
from harness.model.validator import validate
from harness.model.wellformed import CaseFormatError, check_case
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute, family_device
from tests.helpers import SPECS, directml_or_skip

RELU, LEAKY_RELU, TANH = 44, 39, 51  # DML_OPERATOR_TYPE values (DirectML.h)
FORWARD, BACKWARD, BIDIRECTIONAL = 0, 1, 2


def _rnn(direction: int, attributes: dict, steps: int = 2, batch: int = 1, inputs: int = 2, hidden: int = 2,
         lengths: list[int] | None = None, seed: int = 0, scale: float = 0.5):
    """An RNN case of small random FLOAT32 values (multiples of 1/8 up to `scale`)."""
    spec = SPECS.operator("RNN")
    d = 2 if direction == BIDIRECTIONAL else 1
    rng = np.random.default_rng(seed)
    shapes = {"InputTensor": [1, steps, batch, inputs], "WeightTensor": [1, d, hidden, inputs],
              "RecurrenceTensor": [1, d, hidden, hidden], "BiasTensor": [1, 1, d, 2 * hidden],
              "OutputSequenceTensor": [steps, d, batch, hidden], "OutputSingleTensor": [1, d, batch, hidden]}
    values = {n: (rng.integers(-8, 9, size=s) / 8 * scale).astype(np.float32) for n, s in shapes.items() if "Output" not in n}
    types = {n: "FLOAT32" for n in shapes}
    if lengths is not None:
        shapes["SequenceLengthsTensor"] = [1, 1, 1, batch]
        types["SequenceLengthsTensor"] = "UINT32"
        values["SequenceLengthsTensor"] = np.array(lengths, np.uint32).reshape(shapes["SequenceLengthsTensor"])
    layouts = {n: TensorDesc(types[n], list(s)) for n, s in shapes.items()}
    return spec, case_from_arrays(spec, "6.4", types, values, layouts=layouts, attributes={"Direction": direction, **attributes})


def test_the_case_check_reads_the_list_and_each_items_fields():
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [RELU, LEAKY_RELU], "ActivationDescs_1.Alpha": 0.5})
    check_case(case, spec)
    spec, case = _rnn(FORWARD, {"ActivationDescs": [4]})  # ELEMENT_WISE_ADD's type: no allowed activation
    with pytest.raises(CaseFormatError, match=r"ActivationDescs\[0\].*not the operator type of an allowed"):
        check_case(case, spec)
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [RELU, LEAKY_RELU]})
    with pytest.raises(CaseFormatError, match="missing ActivationDescs_1.Alpha"):
        check_case(case, spec)
    spec, case = _rnn(FORWARD, {"ActivationDescs": RELU})
    with pytest.raises(CaseFormatError, match="must be a list"):
        check_case(case, spec)
    spec, case = _rnn(FORWARD, {"ActivationDescs": [RELU], "ActivationDescs_0.Alpha": 0.5})  # RELU has no Alpha
    with pytest.raises(CaseFormatError, match="has no attribute"):
        check_case(case, spec)


def test_the_count_is_the_lists_length_and_a_wrong_one_breaks_the_named_rule():
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [RELU]})
    assert validate(spec, case.descriptor, "6.4").rule_ids == {"constraint.activation_count"}
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [RELU, RELU]})
    assert validate(spec, case.descriptor, "6.4").accepted


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_generation_draws_one_activation_per_direction_with_its_fields(data):
    spec = SPECS.operator("RNN")
    d = data.draw(valid_descriptors(spec, "6.4"))
    items = d.attributes["ActivationDescs"]
    assert len(items) == (2 if d.attributes["Direction"] == BIDIRECTIONAL else 1)
    allowed = spec.activations["ActivationDescs"]
    want = {f"ActivationDescs_{k}.{f.name}" for k, t in enumerate(items) for f in allowed[int(t)].attribute_fields}
    assert {k for k in d.attributes if k.startswith("ActivationDescs_")} == want
    assert validate(spec, d, "6.4").accepted


def test_the_runner_request_packs_consecutive_activation_descs():
    backend = DirectMLBackend(specs=SPECS)
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [RELU, LEAKY_RELU], "ActivationDescs_1.Alpha": 0.5})
    header, _ = backend.request_for(case)
    names = [f.name for f in spec.fields]
    assert header["fields"][names.index("ActivationDescCount")] == {"kind": "uint", "value": 2}
    assert header["fields"][names.index("ActivationDescs")] == {"kind": "opdescs", "items": [
        {"op_type": RELU, "fields": [{"kind": "tensor", "tensor": -1}, {"kind": "tensor", "tensor": -1}]},
        {"op_type": LEAKY_RELU, "fields": [{"kind": "tensor", "tensor": -1}, {"kind": "tensor", "tensor": -1},
                                           {"kind": "float", "value": 0.5}]}]}


def _numpy_rnn(x, w, r, b, activations, reverse):
    """The page's equation, one direction at a time, in float64 (an independent loop)."""
    steps, batch = x.shape[1], x.shape[2]
    dirs, hidden = w.shape[1], w.shape[2]
    seq = np.zeros((steps, dirs, batch, hidden))
    for d in range(dirs):
        h = np.zeros((batch, hidden))
        order = range(steps - 1, -1, -1) if reverse[d] else range(steps)
        for t in order:
            z = x[0, t] @ w[0, d].T + h @ r[0, d].T + b[0, 0, d, :hidden] + b[0, 0, d, hidden:]
            h = activations[d](z)
            seq[t, d] = h
    return seq


def test_the_loop_runs_each_direction_with_its_own_activation():
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [TANH, LEAKY_RELU], "ActivationDescs_1.Alpha": 0.25},
                      steps=3, batch=2, inputs=3, hidden=2, seed=3)
    arrays = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("recurrent")(spec, case.descriptor, arrays)
    f64 = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
    want = _numpy_rnn(f64["x"], f64["w"], f64["r"], f64["b"],
                      [np.tanh, lambda z: np.where(z >= 0, z, 0.25 * z)], [False, True])
    exact, bound = result.bounds["OutputSequenceTensor"]
    np.testing.assert_allclose(exact, want, rtol=1e-12, atol=1e-12)
    single, _ = result.bounds["OutputSingleTensor"]
    np.testing.assert_allclose(single[0, 0], want[-1, 0], rtol=1e-12)  # forward ends at the last step
    np.testing.assert_allclose(single[0, 1], want[0, 1], rtol=1e-12)  # backward ends at the first
    # the bound is positive and grows along each direction's steps (the error carried through R)
    assert (bound > 0).all()
    assert (bound[2, 0] >= bound[0, 0]).all() and (bound[0, 1] >= bound[2, 1]).all()


def test_steps_past_a_rows_length_are_left_open_and_its_last_step_is_the_single_output():
    spec, case = _rnn(BACKWARD, {"ActivationDescs": [RELU]}, steps=3, batch=2, lengths=[2, 3], seed=1)
    arrays = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("recurrent")(spec, case.descriptor, arrays)
    mask = result.unspecified["OutputSequenceTensor"]["past_sequence_length"]
    assert mask[2, 0, 0].all() and not mask[:2, 0, 0].any() and not mask[:, 0, 1].any()
    seq, _ = result.bounds["OutputSequenceTensor"]
    single, _ = result.bounds["OutputSingleTensor"]
    np.testing.assert_array_equal(single[0, 0, 0], seq[0, 0, 0])  # backward over 2 steps ends at t = 0
    np.testing.assert_array_equal(seq[2, 0, 0], 0.0)


def test_the_legal_device_stays_within_the_bound():
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [TANH, TANH]}, steps=4, batch=2, inputs=3, hidden=3, seed=5, scale=2.0)
    arrays = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("recurrent")(spec, case.descriptor, arrays)
    device = family_device("recurrent")
    assert device is not None
    moved = device(spec, case.descriptor, arrays, np.random.default_rng(0))
    for name, (exact, bound) in result.bounds.items():
        off = np.abs(moved[name].astype(np.float64) - exact)
        assert (off <= bound).all() and (off > 0).any()


def test_directml_runs_two_directions_with_their_activations():
    backend = directml_or_skip()
    try:
        spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [RELU, LEAKY_RELU], "ActivationDescs_1.Alpha": 0.25},
                          steps=1, batch=1, inputs=1, hidden=1)
        arrays = family_inputs(spec, case.descriptor, case.inputs)
        want, _ = family_compute("recurrent")(spec, case.descriptor, arrays).bounds["OutputSequenceTensor"]
        got = np.frombuffer(backend.run(case).buffers["OutputSequenceTensor"], np.float32)
        np.testing.assert_allclose(got, want.reshape(-1), rtol=1e-6, atol=1e-6)
    finally:
        backend.close()


def test_onnx_runtime_takes_the_activations_with_their_alpha_in_item_order():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    backend = OnnxRuntimeBackend(specs=SPECS)
    spec, case = _rnn(BIDIRECTIONAL, {"ActivationDescs": [LEAKY_RELU, TANH], "ActivationDescs_0.Alpha": 0.25},
                      steps=3, batch=2, inputs=2, hidden=2, seed=7, scale=2.0)
    arrays = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("recurrent")(spec, case.descriptor, arrays)
    got = backend.run(case).buffers
    for name, (exact, bound) in result.bounds.items():
        value = np.frombuffer(got[name], np.float32).reshape(exact.shape).astype(np.float64)
        assert (np.abs(value - exact) <= bound).all(), name


HARD_SIGMOID = 37


def _gru(direction: int, lbr: int, attributes: dict, steps: int = 3, batch: int = 2, inputs: int = 2, hidden: int = 2,
         seed: int = 0, scale: float = 1.0):
    spec = SPECS.operator("GRU")
    d = 2 if direction == BIDIRECTIONAL else 1
    rng = np.random.default_rng(seed)
    shapes = {"InputTensor": [1, steps, batch, inputs], "WeightTensor": [1, d, 3 * hidden, inputs],
              "RecurrenceTensor": [1, d, 3 * hidden, hidden], "BiasTensor": [1, 1, d, 6 * hidden],
              "HiddenInitTensor": [1, d, batch, hidden],
              "OutputSequenceTensor": [steps, d, batch, hidden], "OutputSingleTensor": [1, d, batch, hidden]}
    values = {n: (rng.integers(-8, 9, size=s) / 8 * scale).astype(np.float32) for n, s in shapes.items() if "Output" not in n}
    layouts = {n: TensorDesc("FLOAT32", list(s)) for n, s in shapes.items()}
    return spec, case_from_arrays(spec, "6.4", {n: "FLOAT32" for n in shapes}, values, layouts=layouts,
                                  attributes={"Direction": direction, "LinearBeforeReset": lbr, **attributes})


def _numpy_gru(x, w, r, b, h0, f, g, lbr):
    """ONNX's GRU equations, forward, in float64 (an independent loop)."""
    hidden = r.shape[-1]
    wz, wr, wh = np.split(w[0, 0], 3)
    rz, rr, rh = np.split(r[0, 0], 3)
    wbz, wbr, wbh, rbz, rbr, rbh = np.split(b[0, 0, 0], 6)
    h = h0[0, 0]
    out = []
    for t in range(x.shape[1]):
        xt = x[0, t]
        z = f(xt @ wz.T + h @ rz.T + wbz + rbz)
        rr_ = f(xt @ wr.T + h @ rr.T + wbr + rbr)
        if lbr:
            hh = g(xt @ wh.T + rr_ * (h @ rh.T + rbh) + wbh)
        else:
            hh = g(xt @ wh.T + (rr_ * h) @ rh.T + rbh + wbh)
        h = (1 - z) * hh + z * h
        out.append(h)
    assert hidden == out[0].shape[-1]
    return np.stack(out)


@pytest.mark.parametrize("lbr", [0, 1])
def test_the_gru_step_follows_the_gates_and_linear_before_reset(lbr):
    spec, case = _gru(FORWARD, lbr, {"ActivationDescs": [HARD_SIGMOID, TANH], "ActivationDescs_0.Alpha": 0.5,
                                     "ActivationDescs_0.Beta": 0.5}, seed=11)
    arrays = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("recurrent")(spec, case.descriptor, arrays)
    f64 = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
    hard = lambda v: np.clip(0.5 * v + 0.5, 0, 1)  # noqa: E731
    want = _numpy_gru(f64["x"], f64["w"], f64["r"], f64["b"], f64["h0"], hard, np.tanh, lbr)
    exact, bound = result.bounds["OutputSequenceTensor"]
    np.testing.assert_allclose(exact[:, 0], want, rtol=1e-12, atol=1e-12)
    assert (bound > 0).all() and np.isfinite(bound).all()


def test_onnx_runtime_gru_lands_within_the_bound():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    backend = OnnxRuntimeBackend(specs=SPECS)
    for lbr in (0, 1):
        spec, case = _gru(BIDIRECTIONAL, lbr, {"ActivationDescs": [HARD_SIGMOID, TANH, TANH, LEAKY_RELU],
                                               "ActivationDescs_0.Alpha": 0.25, "ActivationDescs_0.Beta": 0.5,
                                               "ActivationDescs_3.Alpha": 0.5}, seed=13, scale=2.0)
        arrays = family_inputs(spec, case.descriptor, case.inputs)
        result = family_compute("recurrent")(spec, case.descriptor, arrays)
        got = backend.run(case).buffers
        for name, (exact, bound) in result.bounds.items():
            value = np.frombuffer(got[name], np.float32).reshape(exact.shape).astype(np.float64)
            assert (np.abs(value - exact) <= bound).all(), (lbr, name)


SIGMOID = 47


def _lstm(direction: int, attributes: dict, steps: int = 3, batch: int = 2, inputs: int = 2, hidden: int = 2,
          seed: int = 0, scale: float = 1.0):
    spec = SPECS.operator("LSTM")
    d = 2 if direction == BIDIRECTIONAL else 1
    rng = np.random.default_rng(seed)
    shapes = {"InputTensor": [1, steps, batch, inputs], "WeightTensor": [1, d, 4 * hidden, inputs],
              "RecurrenceTensor": [1, d, 4 * hidden, hidden], "BiasTensor": [1, 1, d, 8 * hidden],
              "HiddenInitTensor": [1, d, batch, hidden], "CellMemInitTensor": [1, d, batch, hidden],
              "PeepholeTensor": [1, 1, d, 3 * hidden],
              "OutputSequenceTensor": [steps, d, batch, hidden], "OutputSingleTensor": [1, d, batch, hidden],
              "OutputCellSingleTensor": [1, d, batch, hidden]}
    values = {n: (rng.integers(-8, 9, size=s) / 8 * scale).astype(np.float32) for n, s in shapes.items() if "Output" not in n}
    layouts = {n: TensorDesc("FLOAT32", list(s)) for n, s in shapes.items()}
    return spec, case_from_arrays(spec, "6.4", {n: "FLOAT32" for n in shapes}, values, layouts=layouts,
                                  attributes={"Direction": direction, "ClipThreshold": 0.0, "UseClipThreshold": 0,
                                              "CoupleInputForget": 0, **attributes})


def _numpy_lstm(x, w, r, b, h0, c0, p, f, g, h_act, clip, couple):
    """ONNX's LSTM equations (gates i, o, f, c; peepholes i, o, f; the clip on the gates' inputs, not on h's),
    forward, in float64 (an independent loop)."""
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)  # noqa: E731
    wi, wo, wf, wc = np.split(w[0, 0], 4)
    ri, ro, rf, rc = np.split(r[0, 0], 4)
    wbi, wbo, wbf, wbc, rbi, rbo, rbf, rbc = np.split(b[0, 0, 0], 8)
    pi, po, pf = np.split(p[0, 0, 0], 3)
    h, c = h0[0, 0], c0[0, 0]
    out = []
    for t in range(x.shape[1]):
        xt = x[0, t]
        i = f(cl(xt @ wi.T + h @ ri.T + pi * c + wbi + rbi))
        fg = 1 - i if couple else f(cl(xt @ wf.T + h @ rf.T + pf * c + wbf + rbf))
        cc = g(cl(xt @ wc.T + h @ rc.T + wbc + rbc))
        c = fg * c + i * cc
        o = f(cl(xt @ wo.T + h @ ro.T + po * c + wbo + rbo))
        h = o * h_act(c)
        out.append(h)
    return np.stack(out), c


@pytest.mark.parametrize("clip,couple", [(None, 0), (0.75, 0), (None, 1), (0.5, 1)])
def test_the_lstm_step_follows_the_gates_the_cell_the_peepholes_and_the_clip(clip, couple):
    spec, case = _lstm(FORWARD, {"ActivationDescs": [HARD_SIGMOID, TANH, TANH], "ActivationDescs_0.Alpha": 0.5,
                                 "ActivationDescs_0.Beta": 0.5, "CoupleInputForget": couple,
                                 "UseClipThreshold": int(clip is not None), "ClipThreshold": clip or 0.0}, seed=17, scale=2.0)
    arrays = family_inputs(spec, case.descriptor, case.inputs)
    result = family_compute("recurrent")(spec, case.descriptor, arrays)
    f64 = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
    hard = lambda v: np.clip(0.5 * v + 0.5, 0, 1)  # noqa: E731
    want_h, want_c = _numpy_lstm(f64["x"], f64["w"], f64["r"], f64["b"], f64["h0"], f64["c0"], f64["p"], hard, np.tanh,
                                 np.tanh, clip, couple)
    exact, bound = result.bounds["OutputSequenceTensor"]
    np.testing.assert_allclose(exact[:, 0], want_h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.bounds["OutputCellSingleTensor"][0][0, 0], want_c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.bounds["OutputSingleTensor"][0][0, 0], want_h[-1], rtol=1e-12, atol=1e-12)
    assert (bound > 0).all() and np.isfinite(bound).all()


def test_onnx_runtime_lstm_lands_within_the_bound():
    pytest.importorskip("onnxruntime")
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    backend = OnnxRuntimeBackend(specs=SPECS)
    for couple, clip in ((0, None), (1, 1.5)):
        spec, case = _lstm(BIDIRECTIONAL, {"ActivationDescs": [SIGMOID, TANH, TANH, HARD_SIGMOID, TANH, LEAKY_RELU],
                                           "ActivationDescs_3.Alpha": 0.25, "ActivationDescs_3.Beta": 0.5,
                                           "ActivationDescs_5.Alpha": 0.5, "CoupleInputForget": couple,
                                           "UseClipThreshold": int(clip is not None), "ClipThreshold": clip or 0.0},
                           seed=19, scale=2.0)
        arrays = family_inputs(spec, case.descriptor, case.inputs)
        result = family_compute("recurrent")(spec, case.descriptor, arrays)
        got = backend.run(case).buffers
        for name, (exact, bound) in result.bounds.items():
            value = np.frombuffer(got[name], np.float32).reshape(exact.shape).astype(np.float64)
            assert (np.abs(value - exact) <= bound).all(), (couple, name)
