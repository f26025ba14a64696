"""The recurrent family: a time loop over a sequence, one hidden state per batch row and direction.

Per direction d and batch row b the plug-in runs the steps of the row's sequence (its length from
the `sequence_lengths` input, else every step), from the first step forwards or from the row's
last step backwards (the spec's `backward` and `bidirectional` expressions say which directions
exist: bidirectional is forward at index 0 and backward at index 1). Mode `rnn`: one gate,

    z_t = X_t W_d^T + H_(t-1) R_d^T + Wb_d + Rb_d,    H_t = f_d(z_t),

f_d the direction's activation from the spec's activation array (item d), evaluated with the
activation's own formula and attributes (its spec file), so nothing about a particular activation
lives here. Mode `gru`: three gates stacked in W, R and each bias (z, r, h), two activations per
direction (f for z and r, g for h, items 2d and 2d + 1) and the blend H_t = (1 - z) h + z H_(t-1)
(_gru_step; the spec's `linear_before_reset` expression picks where the reset gate multiplies). Mode
`lstm`: four gates stacked (i, o, f, c), three activations per direction (f for i, o and f, g for c,
h for the cell; items 3d to 3d + 2), peepholes, the cell state C and an optional clip of the four
gates' inputs (_lstm_step). The outputs are every step's H_t (`sequence`; zeros past a row's
length, which the spec's `unspecified` rules leave open through the element variable `past_length`),
each direction's last H_t (`single`) and, in mode lstm, its last C_t (`cell_single`).

Exactness. The reference computes in float64 from the inputs as stored: every product of two
FLOAT32 or FLOAT16 values is exact there, and a few steps of a few terms stay far inside the bounds.

Precision model. A device adds each step's K terms in any order and rounds each step (the spec's
`bounds.<mode>`, over `K`, `sum_abs`, `sum_inputs`, as the matmul family's dot product), then applies
the activation within its own error (`bounds.activation`, over the exact `y` and `z` and the
activation's `slope` near z). The error of H_(t-1) enters the next step through R: per element,
dz_t = step bound + sum_j |R_ij| dh_(t-1, j), and dh_t = the largest |f(z') - f(z)| over
|z' - z| <= dz_t (the activation is evaluated at both ends and at 0, where the piecewise ones
bend) plus the activation's own error. The judge accepts each output element within its dh_t of
the exact value (FamilyResult.bounds); an element fed by a non-finite value is left to the spec's
`nonfinite_in` rule (the activations' NaN and infinity behaviour is their own).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.result import (FamilyPlugin, FamilyResult, evaluate_bound, family_input, output_rule_masks,
                                                every_bound_toward_its_edge, type_bound_variables)
from harness.spec.context import formula_context
from harness.spec.expr import EvalContext
from harness.spec.families import DECLARATIONS
from harness.spec.fused import activation_items
from harness.spec.model import OperatorSpec

@dataclass(frozen=True)
class _Activation:
    """One item of the activation array: its spec and its attribute values."""

    spec: OperatorSpec
    values: dict[str, float]

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """f(z) in float64, by the activation's own formula."""
        (var,) = self.spec.formula.inputs
        types = {f.name: "FLOAT32" for f in self.spec.tensor_fields}
        ctx = formula_context(self.spec, types, {var: np.asarray(z, dtype=np.float64)}, self.values)
        with np.errstate(all="ignore"):
            return np.broadcast_to(np.asarray(self.spec.formula.expression.evaluate(ctx), dtype=np.float64), np.shape(z)).copy()


@dataclass
class _Run:
    """The exact outputs, their bounds and the element variables of one descriptor."""

    sequence: np.ndarray  # {S, D, B, H}
    seq_bound: np.ndarray
    single: np.ndarray  # {1, D, B, H}
    single_bound: np.ndarray
    past_length: np.ndarray  # {S, D, B, H} int
    length_open: np.ndarray  # {S, D, B, H} int (the row's)
    nonfinite_seq: np.ndarray
    nonfinite_single: np.ndarray
    cell: np.ndarray  # {1, D, B, H}: mode lstm's last C_t (zeros otherwise)
    cell_bound: np.ndarray
    clip_open: int


def _spread(f: _Activation, z: np.ndarray, y: np.ndarray, width: np.ndarray) -> np.ndarray:
    """The largest |f(z') - f(z)| over |z' - z| <= width: f at both ends and at 0 where it lies
    within (the piecewise activations bend there; the others are monotonic)."""
    with np.errstate(all="ignore"):
        lo, hi = z - width, z + width
        points = [lo, hi, np.clip(0.0, lo, hi)]
        out = np.zeros_like(z)
        for p in points:
            out = np.maximum(out, np.abs(f(p) - y))
        return np.where(np.isnan(out) | np.isinf(width), np.inf, out)


# per mode: the gates whose rows W, R and each bias stack (z, r, h for the gated mode), and the activations per direction
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
GATE_ACTIVATIONS = {"rnn": 1, "gru": 2, "lstm": 3}


@dataclass(frozen=True)
class _Gate:
    """One gate's step: y = f(W x + R h_in + Wb + Rb) and its propagated error (the module's docstring)."""

    bound_vars: dict[str, np.float64]
    step: Any
    activation: Any

    def pre_error(self, terms: int, sum_abs: np.ndarray, sum_inputs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """The spec's step bound for a sum of `terms` terms."""
        variables: dict[str, object] = {**self.bound_vars, "K": np.float64(terms), "sum_abs": sum_abs, "sum_inputs": sum_inputs,
                     "y": np.zeros(shape), "z": np.zeros(shape), "slope": np.zeros(shape)}
        return evaluate_bound(self.step.atol, variables, shape, None) if self.step else np.zeros(shape)

    def apply(self, f: _Activation, z: np.ndarray, dz: np.ndarray, clip: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """f(z) and its error for an input within dz: the spread of f over it plus f's own error
        (with `clip`, f's input is first clipped to [-clip, clip], which moves no error further apart)."""
        if clip is not None:  # a FLOAT16 device may hold the threshold rounded: one step of it more
            dz = dz + np.where(np.abs(z) > clip, self.bound_vars["eps"] * clip, 0.0)
            z = np.clip(z, -clip, clip)
        y = f(z)
        width = np.maximum(dz, self.bound_vars["eps"] * np.abs(z))
        slope = np.where(width > 0, _spread(f, z, y, width) / np.where(width > 0, width, 1.0), 0.0)
        variables: dict[str, object] = {**self.bound_vars, "K": np.float64(0), "sum_abs": np.zeros_like(z), "sum_inputs": np.zeros_like(z),
                     "y": y, "z": z, "slope": np.where(np.isfinite(slope), slope, np.inf)}
        own = evaluate_bound(self.activation.atol, variables, z.shape, None) if self.activation else np.zeros_like(z)
        return y, _spread(f, z, y, dz) + own

    def __call__(self, f: _Activation, wg: np.ndarray, rg: np.ndarray, wbg: np.ndarray, rbg: np.ndarray,
                 xt: np.ndarray, h: np.ndarray, dh: np.ndarray,
                 peep: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 clip: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`peep`: mode lstm's peephole (P, C, dC), one more product P . C per element, C within dC."""
        z = wg @ xt + rg @ h + wbg + rbg
        ax, ah = np.abs(xt), np.abs(h)
        sum_abs = np.abs(wg) @ ax + np.abs(rg) @ ah + np.abs(wbg) + np.abs(rbg)
        sum_inputs = np.abs(wg).sum(axis=1) + ax.sum() + np.abs(rg).sum(axis=1) + ah.sum() + np.abs(wbg) + np.abs(rbg)
        terms, carried = xt.size + h.size + 2, _through(rg, dh)
        if peep is not None:
            p, c, dc = peep
            z = z + p * c
            sum_abs = sum_abs + np.abs(p * c)
            sum_inputs = sum_inputs + np.abs(p) + np.abs(c)
            terms, carried = terms + 1, carried + np.abs(p) * dc
        acc = self.pre_error(terms, sum_abs, sum_inputs, z.shape)
        return self.apply(f, z, acc + carried, clip)


def _through(m: np.ndarray, dv: np.ndarray) -> np.ndarray:
    """|m| @ dv, an error dv carried through the matrix m (inf stays inf, never NaN)."""
    if not np.isfinite(dv).all():
        return np.where((np.abs(m) @ np.isinf(dv).astype(np.float64)) > 0, np.inf, np.abs(m) @ np.where(np.isinf(dv), 0.0, dv))
    return np.abs(m) @ dv


def _gru_step(gate: _Gate, blend: Any, fs: list[_Activation], wd: np.ndarray, rd: np.ndarray, wb: np.ndarray, rb: np.ndarray,
              xt: np.ndarray, h: np.ndarray, dh: np.ndarray, hidden: int, linear_before_reset: bool) -> tuple[np.ndarray, np.ndarray]:
    """One `gru` mode step (ONNX's equations, gates z, r, h stacked in that order):
    z = f(x Wz + h Rz + Wbz + Rbz), r = f(x Wr + h Rr + Wbr + Rbr),
    h~ = g(x Wh + (r . h) Rh + Rbh + Wbh), or with LinearBeforeReset g(x Wh + r . (h Rh + Rbh) + Wbh),
    H = (1 - z) . h~ + z . h. The errors: each gate's as in _Gate; the hidden gate's recurrent input r . h
    (or r . (h Rh + Rbh)) carries r's error and h's; the blend's first-order error
    |1 - z| dh~ + |z| dh + dz |h~ - h| + dz (dh~ + dh), plus its own rounding (the spec's `blend`)."""
    f, g = fs
    rows = [slice(k * hidden, (k + 1) * hidden) for k in range(3)]
    z, dz = gate(f, wd[rows[0]], rd[rows[0]], wb[rows[0]], rb[rows[0]], xt, h, dh)
    r, dr = gate(f, wd[rows[1]], rd[rows[1]], wb[rows[1]], rb[rows[1]], xt, h, dh)
    wh, rh, wbh, rbh = wd[rows[2]], rd[rows[2]], wb[rows[2]], rb[rows[2]]
    ax = np.abs(xt)
    if linear_before_reset:
        inner = rh @ h + rbh  # {hidden}: the linear transformation first
        d_inner = gate.pre_error(h.size + 1, np.abs(rh) @ np.abs(h) + np.abs(rbh),
                                 np.abs(rh).sum(axis=1) + np.abs(h).sum() + np.abs(rbh), inner.shape) + _through(rh, dh)
        pre = wh @ xt + wbh + r * inner
        sum_abs = np.abs(wh) @ ax + np.abs(wbh) + np.abs(r * inner)
        sum_inputs = np.abs(wh).sum(axis=1) + ax.sum() + np.abs(wbh) + np.abs(r) + np.abs(inner)
        d_pre = gate.pre_error(xt.size + 2, sum_abs, sum_inputs, pre.shape) + np.abs(r) * d_inner + dr * (np.abs(inner) + d_inner)
    else:
        rhd = r * h  # the reset hidden state, then the linear transformation
        d_rhd = np.abs(h) * dr + np.abs(r) * dh + dr * dh + gate.bound_vars["eps"] * np.abs(rhd)
        pre = wh @ xt + rh @ rhd + wbh + rbh
        sum_abs = np.abs(wh) @ ax + np.abs(rh) @ np.abs(rhd) + np.abs(wbh) + np.abs(rbh)
        sum_inputs = np.abs(wh).sum(axis=1) + ax.sum() + np.abs(rh).sum(axis=1) + np.abs(rhd).sum() + np.abs(wbh) + np.abs(rbh)
        d_pre = gate.pre_error(xt.size + hidden + 2, sum_abs, sum_inputs, pre.shape) + _through(rh, d_rhd)
    hh, dhh = gate.apply(g, pre, d_pre)
    out = (1 - z) * hh + z * h
    parts = np.abs(1 - z) * np.abs(hh) + np.abs(z) * np.abs(h)
    variables = {**gate.bound_vars, "K": np.float64(2), "sum_abs": parts, "sum_inputs": np.zeros_like(out), "y": out,
                 "z": np.zeros_like(out), "slope": np.zeros_like(out)}
    own = evaluate_bound(blend.atol, variables, out.shape, None) if blend else np.zeros_like(out)
    err = np.abs(1 - z) * dhh + np.abs(z) * dh + dz * np.abs(hh - h) + dz * (dhh + dh) + own
    return out, err


def _lstm_step(gate: _Gate, blend: Any, fs: list[_Activation], wd: np.ndarray, rd: np.ndarray, wb: np.ndarray, rb: np.ndarray,
               pd: np.ndarray, xt: np.ndarray, h: np.ndarray, dh: np.ndarray, c: np.ndarray, dc: np.ndarray, hidden: int,
               clip: float | None, couple: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One step of mode lstm (ONNX's equations, gates i, o, f, c stacked in that order, peepholes P_i, P_o, P_f):
    i = f(x Wi + h Ri + Pi . C + Wbi + Rbi), f = f(x Wf + h Rf + Pf . C + Wbf + Rbf) (coupled: 1 - i),
    c~ = g(x Wc + h Rc + Wbc + Rbc), C' = f . C + i . c~, o = f(x Wo + h Ro + Po . C' + Wbo + Rbo),
    H = o . h(C'), the four gates' inputs clipped to [-clip, clip] when clip is given (h's input, the cell,
    is not: ONNX's reading, which ONNX Runtime and DirectML 1.15.4 both compute). The errors:
    each gate's as in _Gate (the peephole one more product); the cell's first-order
    |f| dC + |C| df + df dC + |i| dc~ + |c~| di + di dc~ plus its own rounding (the spec's `blend`
    over |f C| + |i c~|); the output's |o| dh(C') + |h(C')| do + do dh(C') plus its rounding."""
    fa, ga, ha = fs
    rows = [slice(k * hidden, (k + 1) * hidden) for k in range(4)]
    peeps = [pd[k * hidden:(k + 1) * hidden] for k in range(3)]

    def pre(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return wd[rows[k]], rd[rows[k]], wb[rows[k]], rb[rows[k]]

    i, di = gate(fa, *pre(0), xt, h, dh, (peeps[0], c, dc), clip)
    if couple:
        f, df = 1 - i, di
    else:
        f, df = gate(fa, *pre(2), xt, h, dh, (peeps[2], c, dc), clip)
    g, dg = gate(ga, *pre(3), xt, h, dh, None, clip)
    cell = f * c + i * g
    parts = np.abs(f * c) + np.abs(i * g)
    d_cell = (np.abs(f) * dc + np.abs(c) * df + df * dc + np.abs(i) * dg + np.abs(g) * di + di * dg
              + _rounding(gate, blend, cell, parts))
    o, do = gate(fa, *pre(1), xt, h, dh, (peeps[1], cell, d_cell), clip)
    hc, dhc = gate.apply(ha, cell, d_cell)
    out = o * hc
    d_out = np.abs(o) * dhc + np.abs(hc) * do + do * dhc + _rounding(gate, blend, out, np.abs(out))
    return out, d_out, cell, d_cell


def _rounding(gate: _Gate, blend: Any, out: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """The spec's `blend` bound: the rounding of a few products and sums of states (over |parts|)."""
    variables: dict[str, object] = {**gate.bound_vars, "K": np.float64(2), "sum_abs": parts, "sum_inputs": np.zeros_like(out), "y": out,
                 "z": np.zeros_like(out), "slope": np.zeros_like(out)}
    return evaluate_bound(blend.atol, variables, out.shape, None) if blend else np.zeros_like(out)


def _run(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> _Run:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    x = family_input(spec, descriptor, inputs, "input")
    w = family_input(spec, descriptor, inputs, "weight")
    r = family_input(spec, descriptor, inputs, "recurrence")
    assert x is not None and w is not None and r is not None  # required inputs
    bias = family_input(spec, descriptor, inputs, "bias")
    h_init = family_input(spec, descriptor, inputs, "hidden_init")
    lengths = family_input(spec, descriptor, inputs, "sequence_lengths")
    c_init = family_input(spec, descriptor, inputs, "cell_init")
    peephole = family_input(spec, descriptor, inputs, "peephole")
    bidirectional = bool(family.expression("bidirectional").evaluate(names, facts))  # type: ignore[union-attr]
    backward = bool(family.expression("backward").evaluate(names, facts))  # type: ignore[union-attr]
    steps, batch, _ = x.shape[1:]
    directions, hidden = w.shape[1], w.shape[2] // GATES[str(family.params["mode"])]  # W stacks the gates' rows
    field = spec.field(str(family.params["activations"]))
    acts = [_Activation(a, v) for a, v in activation_items(spec, field, descriptor.attributes)]
    out_desc = descriptor.tensors[str(family.params["sequence"])] or descriptor.tensors[str(family.params["single"])]
    assert out_desc is not None
    out_type = spec.catalog.dtype(out_desc.data_type)
    bound_vars = type_bound_variables(out_type.numpy)
    step_bound, act_bound = family.bound(str(family.params["mode"])), family.bound("activation")
    seq = np.zeros((steps, directions, batch, hidden))
    seq_bound = np.zeros_like(seq)
    past = np.zeros(seq.shape, dtype=np.int64)
    open_ = np.zeros(seq.shape, dtype=np.int64)
    bad_seq = np.zeros(seq.shape, dtype=np.int64)
    single = np.zeros((1, directions, batch, hidden))
    single_bound = np.zeros_like(single)
    bad_single = np.zeros(single.shape, dtype=np.int64)
    mode = str(family.params["mode"])
    per_direction = GATE_ACTIVATIONS[mode]
    lbr = family.expression("linear_before_reset")
    linear_before_reset = bool(lbr.evaluate(names, facts)) if lbr is not None else False
    blend = family.bound("blend")
    use_clip = family.expression("use_clip")
    clip = (float(descriptor.attributes[str(family.params["clip"])])
            if use_clip is not None and bool(use_clip.evaluate(names, facts)) else None)
    clip_open = clip is not None and not clip >= 0  # a negative or NaN threshold: the spec's `clip_open`
    clip = None if clip_open else clip
    couple_expr = family.expression("couple_input_forget")
    couple = bool(couple_expr.evaluate(names, facts)) if couple_expr is not None else False
    cell_out = np.zeros_like(single)
    cell_bound = np.zeros_like(single)
    gate = _Gate(bound_vars, step_bound, act_bound)
    gates = GATES[mode]
    for d in range(directions):
        reverse = d == 1 if bidirectional else backward
        fs = [acts[min(d * per_direction + k, len(acts) - 1)] for k in range(per_direction)]
        wd, rd = w[0, d], r[0, d]
        size = gates * hidden
        wb = bias[0, 0, d, :size] if bias is not None else np.zeros(size)
        rb = bias[0, 0, d, size:2 * size] if bias is not None else np.zeros(size)
        pd = peephole[0, 0, d] if peephole is not None else np.zeros(3 * hidden)
        finite_weights = bool(np.isfinite(wd).all() and np.isfinite(rd).all() and np.isfinite(wb).all() and np.isfinite(rb).all()
                              and np.isfinite(pd).all())
        for b in range(batch):
            length = int(lengths.reshape(-1)[b]) if lengths is not None else steps
            if length == 0 or length > steps:
                open_[:, d, b, :] = 1
            length = min(length, steps)
            h = h_init[0, d, b].copy() if h_init is not None else np.zeros(hidden)
            dh = np.zeros(hidden)
            c = c_init[0, d, b].copy() if c_init is not None else np.zeros(hidden)
            dc = np.zeros(hidden)
            bad = not (finite_weights and np.isfinite(h).all() and np.isfinite(c).all())
            order = range(length - 1, -1, -1) if reverse else range(length)
            past[length:, d, b, :] = 1
            for t in order:
                xt = x[0, t, b]
                bad = bad or not np.isfinite(xt).all()
                with np.errstate(all="ignore"):
                    if mode == "rnn":
                        y, dy = gate(fs[0], wd, rd, wb, rb, xt, h, dh)
                    elif mode == "lstm":
                        y, dy, c, dc = _lstm_step(gate, blend, fs, wd, rd, wb, rb, pd, xt, h, dh, c, dc, hidden, clip, couple)
                        dc = np.where(np.isnan(dc) | (np.abs(c) + dc >= bound_vars["max_out"]), np.inf, dc)
                        bad = bad or not np.isfinite(c).all()
                    else:
                        y, dy = _gru_step(gate, blend, fs, wd, rd, wb, rb, xt, h, dh, hidden, linear_before_reset)
                    # a result that may reach the output type's overflow threshold: every value is legal
                    dy = np.where(np.isnan(dy) | (np.abs(y) + dy >= bound_vars["max_out"]), np.inf, dy)
                bad = bad or not np.isfinite(y).all()
                seq[t, d, b], seq_bound[t, d, b], bad_seq[t, d, b] = y, dy, int(bad)
                h, dh = y, dy
            single[0, d, b], single_bound[0, d, b], bad_single[0, d, b] = h, dh, int(bad)
            cell_out[0, d, b], cell_bound[0, d, b] = c, dc
    return _Run(seq, seq_bound, single, single_bound, past, open_, bad_seq, bad_single, cell_out, cell_bound, int(clip_open))


def _masks(spec: OperatorSpec, name: str, out_type: object, variables: dict[str, np.ndarray],
           shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    ctx = EvalContext(variables=dict(variables))
    return output_rule_masks(spec, name, out_type, ctx, shape)  # type: ignore[arg-type]


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    run = _run(spec, descriptor, inputs)
    result = FamilyResult({})
    row_open = run.length_open[:1].max(axis=0, keepdims=True) if run.length_open.size else run.single.astype(np.int64)
    for key, exact, bound, variables in (
            ("sequence", run.sequence, run.seq_bound,
             {"past_length": run.past_length, "length_open": run.length_open, "nonfinite_in": run.nonfinite_seq}),
            ("single", run.single, run.single_bound,
             {"past_length": np.zeros(run.single.shape, dtype=np.int64), "length_open": row_open,
              "nonfinite_in": run.nonfinite_single}),
            ("cell_single", run.cell, run.cell_bound,
             {"past_length": np.zeros(run.single.shape, dtype=np.int64), "length_open": row_open,
              "nonfinite_in": run.nonfinite_single})):
        if key not in family.params:
            continue
        name = str(family.params[key])
        desc = descriptor.tensors.get(name)
        if desc is None:
            continue
        out_type = spec.catalog.dtype(desc.data_type)
        with np.errstate(all="ignore"):
            result.outputs[name] = exact.astype(out_type.numpy)
        result.bounds[name] = (exact, bound)
        variables["clip_open"] = np.full(exact.shape, run.clip_open, dtype=np.int64)
        result.unspecified[name] = _masks(spec, name, out_type, variables, exact.shape)
        result.summaries[f"{name}.bound"] = bound
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One legal device's outputs (the worst legal backend): every bounded output moved from its
    exact value to EDGE of its bound, all up or all down for the case (at random), rounded towards
    the exact value so that it stays inside."""
    return every_bound_toward_its_edge(compute(spec, descriptor, inputs), rng)


PLUGIN = FamilyPlugin(DECLARATIONS["recurrent"], compute, legal_device)
