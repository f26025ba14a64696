"""The window family: each output element is an element-wise epilogue of one windowed dot product.

Per output element {n, m, spatial...} the plug-in computes `xw`: the sum, over the input channels
of output channel m's group and over the kernel positions, of input times filter, where each
kernel position reads the input position harness.reference.families.windowing gives it (forward:
a strided, dilated window over the zero-padded input; transposed: the adjoint, each input element
scattered through the filter, then cropped by the paddings). A kernel position that reads no input
element (padding, a stride's gap) is no term: it adds nothing, and an infinite filter element there
meets no zero. The spec's expression then gives the output from `xw` (a bias added, say), and a
fused activation composes over it (harness.spec.fused), exactly as for the matmul family, whose
judgement this family shares (harness.reference.families.matmul.dot_epilogue): the bound of the
dot product, the fp32 input flush, the unspecified rules over the epilogue.

A pooling (`combine` max, average or lp: no filter, the window's extent from `window_size`) reads
the same windows and is computed in harness.reference.families.pooling; im2col and col2im (the
windows moved into columns, and summed back) in harness.reference.families.patches.

The spec names everything (harness.spec.families): the `input` and `filter` tensors, the arrays
`strides`, `dilations`, `start`, `end` (and `output_padding`, which only the output's Sizes show: the
positions it adds past the window's reach read nothing, in either direction),
the `groups` field, and the expressions `transposed` and `flip` (the filter read in reverse along
each spatial dimension). Filter layout: {out channels, channels / groups, kernel...} forward,
{in channels, out channels / groups, kernel...} transposed (the forward filter of its adjoint).

Exactness: each product of two FLOAT32 (or FLOAT16) values is exact in float64, and the sums are
of few terms, so the float64 result is far inside any bound a spec states.
"""
from __future__ import annotations

from math import prod

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families import patches, pooling
from harness.reference.families.result import FamilyPlugin, FamilyResult, flush_f32_denormals
from harness.reference.families.matmul import dot_epilogue
from harness.reference.families.windowing import Window, output_padded, past_reach, window_positions
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

VARIABLE = "xw"  # the family's formula variable (its formula_variables in harness.spec.families)
PATCHES = ("im2col", "col2im")  # the combines harness.reference.families.patches computes


def _raw(spec: OperatorSpec, inputs: dict[str, np.ndarray], tensor: str) -> np.ndarray:
    """The formula input variable that reads `tensor` (the plug-in's inputs are keyed by variable)."""
    return np.asarray(inputs[next(v for v, t in spec.formula.inputs.items() if t == tensor)])


def _as_f64(x: np.ndarray, flush: bool) -> np.ndarray:
    if flush:
        flushed = flush_f32_denormals(x)
        x = x if flushed is None else flushed
    with np.errstate(invalid="ignore"):
        return x.astype(np.float64)


def _operands(x: np.ndarray, w: np.ndarray, groups: int, transposed: bool, flip: bool,
              positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The windows as matrices: A {N, G, P, T} (each output position's window, T = channels per
    group x kernel positions) and B {G, T, M / G} (each group's filter), so that the window sum of
    output {n, g * M/G + m, p} is sum_t A[n, g, p, t] * B[g, t, m]."""
    n, c = x.shape[:2]
    kernel = w.shape[2:]
    if flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * len(kernel)]
    cg, kk = c // groups, prod(kernel)
    if transposed:  # {C, M/G, k...}
        b: np.ndarray = w.reshape(groups, cg, w.shape[1], kk).transpose(0, 1, 3, 2)
    else:  # {M, C/G, k...}
        b = w.reshape(groups, w.shape[0] // groups, cg, kk).transpose(0, 2, 3, 1)
    b = b.reshape(groups, cg * kk, -1)
    xs = x.reshape(n, groups, cg, -1)[..., positions]  # {N, G, C/G, P, K}
    a = xs.transpose(0, 1, 3, 2, 4).reshape(n, groups, positions.shape[0], cg * kk)
    return a, b


def _masked_dot(a: np.ndarray, b: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sum, sum |a b| over finite factors, sum |a| + |b| over finite factors) over the valid terms
    only, per {N, G, P, M/G}: an invalid term (padding) is not a product of anything."""
    mask = valid[None, None, :, :, None]  # {1, 1, P, T, 1}
    with np.errstate(all="ignore"):
        terms = a[..., None] * b[None, :, None, :, :]  # {N, G, P, T, M/G}
        exact = np.where(mask, terms, 0.0).sum(axis=3)
        fa, fb = np.where(np.isfinite(a), np.abs(a), 0.0), np.where(np.isfinite(b), np.abs(b), 0.0)
        sum_abs = np.where(mask, fa[..., None] * fb[None, :, None, :, :], 0.0).sum(axis=3)
        sum_inputs = (np.where(valid, fa, 0.0).sum(axis=3)[..., None]
                      + np.einsum("pt,gtm->gpm", valid.astype(np.float64), fb)[None])
    return exact, sum_abs, sum_inputs


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    if family.params.get("combine", "dot") in PATCHES:  # windows moved into columns, or summed back
        return patches.compute(spec, descriptor, inputs)
    if family.params.get("combine", "dot") != "dot":  # a pooling: the same windows, no filter
        return pooling.compute(spec, descriptor, inputs)
    names, facts = expression_scope(spec, descriptor)
    p = family.params
    transposed = bool(family.expression("transposed").evaluate(names, facts))  # type: ignore[union-attr]
    flip = bool(family.expression("flip").evaluate(names, facts))  # type: ignore[union-attr]
    groups = int(names[p["groups"]])
    window = Window(tuple(int(v) for v in names[p["strides"]]), tuple(int(v) for v in names[p["dilations"]]),
                    tuple(int(v) for v in names[p["start"]]), transposed)
    x_raw, w_raw = _raw(spec, inputs, p["input"]), _raw(spec, inputs, p["filter"])
    out_desc = descriptor.tensors[spec.formula.output]
    assert out_desc is not None
    out_shape = tuple(out_desc.sizes)
    if "input_zero_point" in p or "filter_zero_point" in p:  # a quantized convolution: integers less their zero points
        x_raw, w_raw = _less_zero_points(spec, inputs, x_raw, w_raw, out_shape, transposed)
    kernel = tuple(w_raw.shape[2:])
    positions, valid = window_positions(window, tuple(x_raw.shape[2:]), out_shape[2:], kernel)
    # an output padding's positions (past the window's reach) read nothing: the padding is zeros
    past = past_reach(window, tuple(int(v) for v in names[p["end"]]), tuple(x_raw.shape[2:]), out_shape[2:], kernel)
    valid = valid & ~past.reshape(-1)[:, None]
    valid_terms = np.repeat(valid[:, None, :], x_raw.shape[1] // groups, axis=1).reshape(valid.shape[0], -1)

    def to_output(s: np.ndarray) -> np.ndarray:  # {N, G, P, M/G} -> {N, M, spatial...}
        return np.broadcast_to(s, (out_shape[0],) + s.shape[1:]).transpose(0, 1, 3, 2).reshape(out_shape)

    def window_sums(flush: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b = _operands(_as_f64(x_raw, flush), _as_f64(w_raw, flush), groups, transposed, flip, positions)
        return tuple(to_output(s) for s in _masked_dot(a, b, valid_terms))  # type: ignore[return-value]

    exact, sum_abs, sum_inputs = window_sums(False)
    # a kernel position off the input meeting a non-finite filter element, per {1, G, P, M/G}
    _, b = _operands(x_raw[:1].astype(np.float64), _as_f64(w_raw, False), groups, transposed, flip, positions)
    off_nonfinite = ((~valid_terms)[None, :, :, None] & ~np.isfinite(b)[:, None, :, :]).any(axis=2)
    element_facts = {"off_input_nonfinite": to_output(off_nonfinite[None].astype(np.int64)),
                     "past_reach": np.broadcast_to(past.astype(np.int64), out_shape),
                     "output_padded": np.broadcast_to(output_padded(out_shape[2:], _output_padding(p, names, len(out_shape) - 2))
                                                      .astype(np.int64), out_shape)}
    flushed = None
    if flush_f32_denormals(x_raw) is not None or flush_f32_denormals(w_raw) is not None:
        flushed = window_sums(True)[0]
    terms = (x_raw.shape[1] // groups) * prod(kernel)
    operands = tuple(p[k] for k in ("input", "filter", "input_zero_point", "filter_zero_point") if k in p)
    return dot_epilogue(spec, descriptor, inputs, VARIABLE, operands, exact, sum_abs, sum_inputs,
                        terms, flushed, element_facts)


def _less_zero_points(spec: OperatorSpec, inputs: dict[str, np.ndarray], x: np.ndarray, w: np.ndarray,
                      out_shape: tuple[int, ...], transposed: bool) -> tuple[np.ndarray, np.ndarray]:
    """x and w (float64) less the family's `input_zero_point` and `filter_zero_point` (absent: the
    formula's absent value), exactly: a quantized convolution subtracts them from the integers
    before accumulating, so a kernel position on the padding, which is no term, reads the input's
    zero point. The input's broadcasts against the input, right-aligned; the filter's holds one
    value per output channel, laid out as the output ({1, M, 1, ...}, right-aligned against it,
    leading 1s beyond it dropped): forward filters only ({M, C / G, k...})."""
    p = spec.formula.family.params  # type: ignore[union-attr]
    with np.errstate(invalid="ignore"):
        x = x.astype(np.float64)
        w = w.astype(np.float64)
        if "input_zero_point" in p:
            zp = _raw(spec, inputs, p["input_zero_point"]).astype(np.float64)
            while zp.ndim > x.ndim and zp.shape[0] == 1:
                zp = zp[0]
            x = x - zp
        if "filter_zero_point" in p:
            zp = _raw(spec, inputs, p["filter_zero_point"]).astype(np.float64)
            if zp.ndim:
                if transposed:
                    raise ValueError("a filter zero point of a transposed window is not defined")
                while zp.ndim > len(out_shape) and zp.shape[0] == 1:
                    zp = zp[0]
                per_channel = np.broadcast_to(zp, (1,) * (len(out_shape) - zp.ndim) + zp.shape)  # the output's rank
                per_channel = np.broadcast_to(per_channel, (1, out_shape[1]) + per_channel.shape[2:])
                zp = per_channel.reshape(out_shape[1], -1)[:, 0].reshape((-1,) + (1,) * (w.ndim - 1))
            w = w - zp
    return x, w


def _output_padding(p: dict, names: dict, rank: int) -> tuple[int, ...]:
    """The family's `output_padding` array (zeros where the spec names none or it is shorter)."""
    values = [int(v) for v in names.get(p["output_padding"], [])] if p.get("output_padding") else []
    return tuple(values[d] if d < len(values) else 0 for d in range(rank))


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One legal device's outputs (the worst legal backend): a pooling's own (an arithmetic one at
    the edge of its bound); a dot product's exact result (its epilogue takes the element-wise
    liberties in the judge)."""
    family = spec.formula.family
    assert family is not None
    if family.params.get("combine", "dot") in PATCHES:
        return patches.legal_device(spec, descriptor, inputs, rng)
    if family.params.get("combine", "dot") != "dot":
        return pooling.legal_device(spec, descriptor, inputs, rng)
    return compute(spec, descriptor, inputs).outputs


PLUGIN = FamilyPlugin(DECLARATIONS["window"], compute, legal_device)
