"""The attention family: multi-head scaled dot-product attention with optional stacked inputs, a
bias, a position bias, a mask, past keys and values, and the present keys and values.

Per batch row b, head h and query position s (the spec's family parameters name every tensor):

    q, k, v   = the query, key and value of head h (from Q/K/V, or the stacked tensors), each
                plus its slice of `bias` (Q's, then K's, then V's) where it is present;
    K, V      = the past key and value (where present) followed by k and v along the sequence:
                the present key and value outputs, [batch, heads, total, head_size];
    z_t       = scale * q . K_t + position_bias[b, h, s, t] + the mask's filter value where t is masked;
    p         = softmax(z) over t (the max-shifted form, exact in float64);
    out[b, s, h * value_head_size + d] = sum_t p_t V_td.

The mask reads as `mask_type` says (the family's declaration, harness.spec.families); a masked
score gets the filter value added, or written over it where the spec's `mask_set` expression
holds, and the element variable `mask_reading` tells the spec's `unspecified` rules where the two
readings give different outputs. Nothing about one operator lives here: the spec names the
tensors, the attributes and the mask reading.

Exactness. float64 from the inputs as stored: every product of two FLOAT32 or FLOAT16 values is
exact; the softmax's exp is float64's (far inside the bounds).

Precision model. A device computes each score as a dot product in any order, each step rounded
(the spec's `bounds.score`, over `K`, `sum_abs`, `sum_inputs`, as the matmul family's), after a
bias addition that rounds q, k and v once each (carried through the product:
|scale| sum_d (|k_d| dq_d + |q_d| dk_d + dq_d dk_d)). Scores off by dz_t move the softmax's weights
by a factor of at most exp(dz_t + D) (D = the log of the weighted mean of exp(dz), up or down:
a masked score's error weighs as little as its weight), plus the softmax's own error over the
scores (`bounds.softmax`, over `N`, `arg`, `exact`); the weighted sum of V (`bounds.weighted_sum`,
over the weights a device may hold) adds sum_t dp_t |V_t| + (p_t + dp_t) dV_t. Each output
element is judged within its bound (FamilyResult.bounds); the present outputs within the bias
addition's rounding (exact without a bias). An element a non-finite value feeds is left to the
spec's rules (`nonfinite_in`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.result import (FamilyPlugin, FamilyResult, evaluate_bound, family_input,
                                                flush_f32_denormals, toward_the_bound, output_rule_masks,
                                                type_bound_variables)
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS, FamilySpec
from harness.spec.model import OperatorSpec


def _last(x: np.ndarray, count: int) -> np.ndarray:
    """`x` with its leading dimensions (1s, by the spec's rules) folded away: its last `count`."""
    return x.reshape(x.shape[x.ndim - count:]) if x.ndim >= count else x.reshape((1,) * (count - x.ndim) + x.shape)


def _heads(x: np.ndarray, heads: int) -> np.ndarray:
    """[batch, sequence, heads * size] -> [batch, heads, sequence, size]."""
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


@dataclass
class _Operands:
    """q [B, H, S, d], k [B, H, T, d], v [B, H, T, e] after the bias and the past, with each element's
    rounding error (the bias addition), and the part of k and v that had a non-zero bias added."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    k_biased: np.ndarray
    v_biased: np.ndarray


def _operands(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], heads: int,
              eps: float, tiny: float, max_out: float, kv_heads: int | None = None) -> _Operands:
    """The query, key and value per head from whichever tensors are present (the spec's rules keep
    exactly one source of each), the bias added, the past put before; the key and value with their
    own head count (`kv_heads`, default `heads`)."""
    kv_heads = heads if kv_heads is None else kv_heads
    def get(key: str) -> np.ndarray | None:
        return family_input(spec, descriptor, inputs, key)
    q = k = v = None
    if (x := get("stacked_query_key_value")) is not None:
        x = _last(x, 5).transpose(0, 2, 1, 3, 4)  # [B, H, S, 3, d]
        q, k, v = x[..., 0, :], x[..., 1, :], x[..., 2, :]
    if (x := get("stacked_query_key")) is not None:
        x = _last(x, 5).transpose(0, 2, 1, 3, 4)
        q, k = x[..., 0, :], x[..., 1, :]
    if (x := get("stacked_key_value")) is not None:
        x = _last(x, 5).transpose(0, 2, 1, 3, 4)
        k, v = x[..., 0, :], x[..., 1, :]
    if (x := get("query")) is not None:
        q = _heads(_last(x, 3), heads)
    if (x := get("key")) is not None:
        k = _heads(_last(x, 3), kv_heads)
    if (x := get("value")) is not None:
        v = _heads(_last(x, 3), kv_heads)
    assert q is not None and k is not None and v is not None  # a valid descriptor has one source of each
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    k_biased, v_biased = np.zeros(k.shape, dtype=bool), np.zeros(v.shape, dtype=bool)
    if (bias := get("bias")) is not None:
        flat = bias.reshape(-1)
        hq, hk, hv = q.shape[3] * heads, k.shape[3] * kv_heads, v.shape[3] * kv_heads
        parts = [flat[:hq], flat[hq:hq + hk], flat[hq + hk:hq + hk + hv]]
        biased = []
        for x, part in zip((q, k, v), parts):
            b = part.reshape(x.shape[1], 1, -1)  # [H, 1, d]: per head, broadcast over batch and sequence
            with np.errstate(all="ignore"):
                y = x + b
            # one rounding of the addition, and a flushed fp32 denormal addend (less than tiny); a sum
            # that may round past the largest finite value may be an infinity (then anything follows)
            err = np.where(np.abs(y) * (1 + eps) >= max_out, np.inf, eps * np.abs(y) + tiny)
            biased.append((y, err, np.broadcast_to(b != 0, y.shape)))
        (q, dq, _), (k, dk, k_biased), (v, dv, v_biased) = biased
    past_k, past_v = get("past_key"), get("past_value")
    if past_k is not None:
        past = _last(past_k, 4)
        k, dk = np.concatenate([past, k], axis=2), np.concatenate([np.zeros_like(past), dk], axis=2)
        k_biased = np.concatenate([np.zeros(past.shape, dtype=bool), k_biased], axis=2)
    if past_v is not None:
        past = _last(past_v, 4)
        v, dv = np.concatenate([past, v], axis=2), np.concatenate([np.zeros_like(past), dv], axis=2)
        v_biased = np.concatenate([np.zeros(past.shape, dtype=bool), v_biased], axis=2)
    return _Operands(q, k, v, dq, dk, dv, np.asarray(k_biased), np.asarray(v_biased))


def _grouped(ops: _Operands, heads: int) -> _Operands:
    """`ops` with the key's and value's heads repeated for the query heads that read them: query
    head h reads key and value head h // (heads // kv_heads) (grouped-query attention; the same
    operands where the counts agree)."""
    group = heads // ops.k.shape[1]
    if group == 1:
        return ops
    def rep(x: np.ndarray) -> np.ndarray:
        return np.repeat(x, group, axis=1)
    return _Operands(ops.q, rep(ops.k), rep(ops.v), ops.dq, rep(ops.dk), rep(ops.dv), rep(ops.k_biased), rep(ops.v_biased))


def _mask(kind: str, mask: np.ndarray | None, shape: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(where a score [B, H, S, T] is masked, where the mask holds a value the page gives no meaning)."""
    b, h, s, t = shape
    masked = np.zeros(shape, dtype=bool)
    open_ = np.zeros(shape, dtype=bool)
    if kind == "none" or mask is None:
        return masked, open_
    position = np.arange(t).reshape(1, 1, 1, t)
    flat = mask.reshape(-1)
    if kind == "boolean":
        m = np.broadcast_to(_last(mask, 4), shape)
        return m == 0, (m != 0) & (m != 1)
    if kind in ("key_sequence_length", "key_query_sequence_length_start_end"):
        length = flat[:b].reshape(b, 1, 1, 1)
        masked = np.broadcast_to(position >= length, shape)
        open_ = np.broadcast_to((length < 0) | (length > t), shape)
        return masked, open_
    end, start = flat[:b].reshape(b, 1, 1, 1), flat[b:2 * b].reshape(b, 1, 1, 1)  # key_sequence_end_start
    masked = np.broadcast_to((position < start) | (position >= end), shape)
    open_ = np.broadcast_to((start < 0) | (start > t) | (end < 0) | (end > t), shape)
    return masked, open_


def _softmax(z: np.ndarray) -> np.ndarray:
    """Over the last axis, max-shifted (exact in float64 far inside every bound); NaN where a row
    holds a NaN or +inf or only -inf."""
    with np.errstate(all="ignore"):
        top = np.max(z, axis=-1, keepdims=True)
        e = np.exp(z - top)
        return e / np.sum(e, axis=-1, keepdims=True)


@dataclass
class _Attention:
    """The exact outputs, their bounds and the element variables of one descriptor."""

    out: np.ndarray  # [B, S, H * e]
    bound: np.ndarray
    nonfinite: np.ndarray
    reading: np.ndarray
    value_open: np.ndarray
    operands: _Operands


def _bound(family: FamilySpec, key: str, variables: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """The spec's bound `key` over `variables` (0 where the spec states none)."""
    entry = family.bound(key)
    return evaluate_bound(entry.atol, variables, shape, None) if entry is not None else np.zeros(shape)


def _scores(family: FamilySpec, ops: _Operands, scale: float, position: np.ndarray | None, added: np.ndarray,
            bound_vars: dict[str, np.float64]) -> tuple[np.ndarray, np.ndarray]:
    """The exact scores [B, H, S, T] and each one's error: the spec's `score` bound over the
    product's terms, position bias and mask addend, plus the bias additions' errors carried through."""
    with np.errstate(all="ignore"):
        z = scale * np.einsum("bhsd,bhtd->bhst", ops.q, ops.k)
        pos = position if position is not None else np.zeros_like(z)
        z = z + pos + added
        terms = np.abs(scale) * np.einsum("bhsd,bhtd->bhst", np.abs(ops.q), np.abs(ops.k))
        extra = np.abs(pos) + np.where(np.isfinite(added), np.abs(added), 0.0)
        sum_abs = np.where(np.isfinite(terms), terms, 0.0) + np.where(np.isfinite(extra), extra, 0.0)
        # a flushed fp32 denormal factor moves its scaled product by less than tiny |scale| |other|
        factors = (max(1.0, abs(scale)) * (np.abs(ops.q).sum(axis=-1)[..., :, None] + np.abs(ops.k).sum(axis=-1)[..., None, :])
                   + extra)
        carried = np.abs(scale) * (np.einsum("bhsd,bhtd->bhst", ops.dq, np.abs(ops.k))
                                   + np.einsum("bhsd,bhtd->bhst", np.abs(ops.q), ops.dk)
                                   + np.einsum("bhsd,bhtd->bhst", ops.dq, ops.dk))
        # the page scales the product after it is summed (Q K^T, then times the scale): the unscaled
        # sum may overflow even where the scale brings it back (0 times an infinite product is NaN)
        unscaled = np.einsum("bhsd,bhtd->bhst", np.abs(ops.q), np.abs(ops.k))
        may_overflow = ~(unscaled * (1 + 2 * (ops.q.shape[-1] + 2) * bound_vars["eps"]) < bound_vars["max_out"])
    variables: dict[str, Any] = {**bound_vars, "K": np.float64(ops.q.shape[-1] + 2), "sum_abs": sum_abs,
                                 "sum_inputs": np.where(np.isfinite(factors), factors, 0.0),
                                 "N": np.float64(0), "arg": np.zeros_like(z), "exact": z}
    dz = _bound(family, "score", variables, z.shape) + np.where(np.isfinite(carried), carried, np.inf)
    dz = np.where(may_overflow, np.inf, dz)
    return z, np.where(np.isfinite(z) | may_overflow, dz, 0.0)  # a non-finite score is IEEE's, exactly (or the rules' to judge)


def _weights(family: FamilySpec, z: np.ndarray, dz: np.ndarray, bound_vars: dict[str, np.float64]
             ) -> tuple[np.ndarray, np.ndarray]:
    """The exact softmax weights and each one's error: the scores' errors propagated (a factor of
    exp(dz_t + D) at most), plus the softmax's own (`bounds.softmax`)."""
    p = _softmax(z)
    with np.errstate(all="ignore"):
        weight = np.where(np.isfinite(p), p, 0.0)
        up = np.log(np.sum(weight * np.exp(dz), axis=-1, keepdims=True))
        down = -np.log(np.sum(weight * np.exp(-dz), axis=-1, keepdims=True))
        spread = np.maximum(np.where(np.isnan(up), np.inf, up), np.where(np.isnan(down), np.inf, down))
        moved = np.minimum(weight * np.expm1(dz + spread), 1.0)
        top = np.max(z, axis=-1, keepdims=True)
        arg = np.where(np.isfinite(z - top), np.abs(z - top), 0.0)
    variables: dict[str, Any] = {**bound_vars, "K": np.float64(0), "sum_abs": np.zeros_like(z), "sum_inputs": np.zeros_like(z),
                                 "N": np.float64(z.shape[-1]), "arg": arg, "exact": weight}
    own = _bound(family, "softmax", variables, z.shape)
    return p, np.where(np.isnan(moved), 1.0, moved) + own


def _weighted_sum(family: FamilySpec, p: np.ndarray, dp: np.ndarray, ops: _Operands,
                  bound_vars: dict[str, np.float64]) -> tuple[np.ndarray, np.ndarray]:
    """sum_t p_t V_t [B, H, S, e] and its error (the weights' and V's errors carried, plus the
    spec's `weighted_sum` bound over the weights a device may hold)."""
    with np.errstate(all="ignore"):
        out = np.einsum("bhst,bhte->bhse", p, ops.v)
        av = np.abs(ops.v)
        held = p + dp
        sum_abs = np.einsum("bhst,bhte->bhse", held, av)
        sum_inputs = held.sum(axis=-1)[..., None] + av.sum(axis=-2)[:, :, None, :]
        carried = np.einsum("bhst,bhte->bhse", dp, av) + np.einsum("bhst,bhte->bhse", held, ops.dv)
    variables: dict[str, Any] = {**bound_vars, "K": np.float64(p.shape[-1]), "sum_abs": sum_abs, "sum_inputs": sum_inputs,
                                 "N": np.float64(0), "arg": np.zeros_like(out), "exact": out}
    err = _bound(family, "weighted_sum", variables, out.shape) + carried
    return out, np.where(np.isnan(err) | (np.abs(out) + err >= bound_vars["max_out"]), np.inf, err)


def _merge_heads(x: np.ndarray) -> np.ndarray:
    """[B, H, S, e] -> [B, S, H * e]."""
    b, h, s, e = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * e)


def _attend(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], flushes: bool = True) -> _Attention:
    """`flushes` False: the bounds without their fp32 flush terms (tiny 0), what the legal device
    keeps in reserve."""
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    heads = int(descriptor.attributes[str(family.params["heads"])])
    scale = float(np.float32(descriptor.attributes.get(str(family.params["scale"]), 0.0)))
    filter_value = float(np.float32(descriptor.attributes.get(str(family.params["mask_filter"]), 0.0)))
    kind = family.choice("mask_type", names)
    mask_set = family.expression("mask_set")
    set_reading = bool(mask_set.evaluate(names, facts)) if mask_set is not None else False
    out_desc = descriptor.tensors[str(family.params["output"])]
    assert out_desc is not None
    bound_vars = type_bound_variables(spec.catalog.dtype(out_desc.data_type).numpy)
    if not flushes:
        bound_vars["tiny"] = np.float64(0.0)
    kv_field = family.params.get("kv_heads")
    kv_heads = int(descriptor.attributes[str(kv_field)]) if kv_field is not None else None
    ops = _operands(spec, descriptor, inputs, heads, float(bound_vars["eps"]), float(bound_vars["tiny"]),
                    float(bound_vars["max_out"]), kv_heads)
    present_ops = ops
    ops = _grouped(ops, heads)
    b, h, s, _ = ops.q.shape
    shape = (b, h, s, ops.k.shape[2])
    position = family_input(spec, descriptor, inputs, "position_bias")
    position = np.broadcast_to(_last(position, 4), shape) if position is not None else None
    masked, value_open = _mask(kind, family_input(spec, descriptor, inputs, "mask"), shape)

    def run(set_masked: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        added = np.where(masked, filter_value, 0.0)
        z, dz = _scores(family, ops, scale, position, added, bound_vars)
        if set_masked:  # the masked scores are the filter value itself, exactly
            z, dz = np.where(masked, filter_value, z), np.where(masked, 0.0, dz)
        p, dp = _weights(family, z, dz, bound_vars)
        out, err = _weighted_sum(family, p, dp, ops, bound_vars)
        # a score that may overflow (an infinity or NaN on a device) may make its whole row NaN
        return z, p, out, np.where(np.isinf(dz).any(axis=-1, keepdims=True), np.inf, err)
    z, p, out, err = run(set_reading)
    _, _, other, other_err = run(not set_reading)
    del other_err  # any difference: a device's error around the other reading is its own
    with np.errstate(all="ignore"):
        differs = ~(other == out) & ~(np.isnan(other) & np.isnan(out))
    reading = masked.any(axis=-1, keepdims=True) & differs if kind != "none" else np.zeros(out.shape, dtype=bool)
    # a NaN or +inf score, a row of -inf scores only, or a non-finite q or k (a flushed denormal
    # factor times an infinity is NaN where the exact product is infinite)
    bad_row = ((np.isnan(z) | (z == np.inf)).any(axis=-1) | (z == -np.inf).all(axis=-1)
               | ~np.isfinite(ops.q).all(axis=-1) | ~np.isfinite(ops.k).all(axis=(2, 3))[:, :, None])  # [B, H, S]
    if position is not None:
        bad_row = bad_row | ~np.isfinite(position).all(axis=-1)
    bad_v = ~np.isfinite(ops.v).all(axis=2)  # [B, H, e]
    nonfinite = bad_row[..., None] | bad_v[:, :, None, :] | ~np.isfinite(out)
    del p
    return _Attention(_merge_heads(out), _merge_heads(err), _merge_heads(nonfinite.astype(np.int64)),
                      _merge_heads(np.broadcast_to(reading, out.shape).astype(np.int64)),
                      _merge_heads(np.broadcast_to(value_open.any(axis=-1, keepdims=True), out.shape).astype(np.int64)),
                      present_ops)


def _variables(spec: OperatorSpec, descriptor: Descriptor, values: dict[str, np.ndarray]) -> Any:
    """The context the spec's `unspecified` rules read: the family's element variables, the
    attributes and the enum members."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    return formula_context(spec, types, values, descriptor.attributes)


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    return _compute(spec, descriptor, inputs)


def _compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], flushes: bool = True) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    run = _attend(spec, descriptor, inputs, flushes)
    result = FamilyResult({})
    zeros = np.zeros(run.out.shape, dtype=np.int64)
    ops = run.operands
    lengths = family.params.get("past_sequence_lengths")
    given = int(lengths is not None and descriptor.tensors.get(str(lengths)) is not None)
    present = [("output", run.out, run.bound,
                {"nonfinite_in": run.nonfinite, "mask_reading": run.reading, "mask_value_open": run.value_open,
                 "biased": zeros, "past_lengths_given": np.full(run.out.shape, given, dtype=np.int64)}),
               ("present_key", ops.k, ops.dk, {"biased": ops.k_biased.astype(np.int64)}),
               ("present_value", ops.v, ops.dv, {"biased": ops.v_biased.astype(np.int64)})]
    for key, exact, bound, variables in present:
        name = family.params.get(key)
        desc = descriptor.tensors.get(str(name)) if name is not None else None
        if desc is None:
            continue
        exact = exact.reshape(desc.sizes)
        bound = bound.reshape(desc.sizes)
        values = {v: np.zeros(desc.sizes, dtype=np.int64)
                  for v in ("nonfinite_in", "mask_reading", "mask_value_open", "biased", "past_lengths_given")}
        values.update({v: np.asarray(a).reshape(desc.sizes) for v, a in variables.items()})
        if key != "output":
            values["nonfinite_in"] = (~np.isfinite(exact)).astype(np.int64)
        out_type = spec.catalog.dtype(desc.data_type)
        with np.errstate(all="ignore"):
            result.outputs[str(name)] = exact.astype(out_type.numpy)
        result.bounds[str(name)] = (exact, bound)
        if key != "output":  # a copy of the inputs: a device may read their fp32 denormals flushed
            flushed = flush_f32_denormals(result.outputs[str(name)])
            if flushed is not None:
                result.alternatives[str(name)] = [("fp32_input_flush", flushed)]
        ctx = _variables(spec, descriptor, values)
        result.unspecified[str(name)] = output_rule_masks(spec, str(name), out_type, ctx, tuple(desc.sizes))
        if key == "output":  # what an expectation's `when` reads: the attributes, enum members, element variables
            result.contexts[str(name)] = ctx
        result.summaries[f"{name}.bound"] = bound
    return result


def legal_device(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One legal device's outputs (the worst legal backend): every output moved from its exact
    value (over the inputs as the device reads them, fp32 denormals flushed) toward EDGE of its
    bound, all up or all down for the case (at random), less the bound's flush terms: the judge
    measures from the unflushed inputs, and the flushes' share of the bound is what they moved."""
    result = compute(spec, descriptor, inputs)
    unflushed = _compute(spec, descriptor, inputs, flushes=False)
    sign = 1.0 if rng.random() < 0.5 else -1.0
    outputs = dict(result.outputs)
    for name, (exact, atol) in result.bounds.items():
        with np.errstate(invalid="ignore"):  # inf - inf: no finite room to move in anyway
            reserve = np.maximum(np.nan_to_num(atol - unflushed.bounds[name][1], nan=0.0), 0.0)
        moved, usable = toward_the_bound(exact, atol, outputs[name].dtype, sign, reserve)
        outputs[name] = np.where(usable, moved, outputs[name]).astype(outputs[name].dtype)
    return outputs


PLUGIN = FamilyPlugin(DECLARATIONS["attention"], compute, legal_device)
