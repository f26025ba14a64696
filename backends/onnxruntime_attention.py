"""The attention family on ONNX Runtime: com.microsoft MultiHeadAttention (its CPU kernel).

Why a second implementation at all: the numpy reference of MULTIHEAD_ATTENTION is the harness's
own reading of the page; ONNX Runtime's kernel is written independently, so where the two agree
within the bound the reading is not only the harness's. The builder only moves data into the
node's forms; the arithmetic (bias, Q K^T, scale, position bias, mask, softmax, the weighted sum,
the present key and value) is the kernel's.

What it expresses, from the spec family's roles (`formula.family` of the operator's spec):
- the query, key and value apart, or stacked ({batch, sequence, heads, 2 or 3, headSize}: the
  kernel has no packed forms on CPU, so a stacked tensor is split into its parts here, which is
  only a view of the same elements);
- the bias ({hidden + hidden + valueHidden}, the node's own layout), the relative position bias
  ({batch, heads, sequence, total sequence}), the past key and value (both or neither);
- the mask types the table entry's `mask_types` maps to the node's key_padding_mask forms:
  `lengths` ({batch}: one key length per batch) or `raw` ({batch, sequence, total sequence} of
  0 masked / 1 kept, from a mask whose head dimension is 1: the node's mask has none).
Everything else is unsupported with the reason: another mask type, a head dimension in a boolean
mask, a past key without a past value, a past value of another head size than the key's, and Scale 0 (the node reads a scale of 0 as its default,
1/sqrt(headSize)).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from harness.model.descriptor import Descriptor
from harness.spec.model import OperatorSpec

# The node's inputs in its order (com.microsoft MultiHeadAttention), as the family's roles; the
# mapping entry may name its own order (`inputs`).
NODE_INPUTS = ("query", "key", "value", "bias", "mask", "position_bias", "past_key", "past_value")
NODE_OUTPUTS = ("output", "present_key", "present_value")


class AttentionUnsupported(Exception):
    """What the node cannot express for this descriptor (the reason is the message)."""


def _last(value: np.ndarray, dims: int) -> np.ndarray:
    """A tensor less DirectML's leading 1s: its last `dims` sizes (a 4-D query {1, B, S, D} is {B, S, D})."""
    shape = value.shape[len(value.shape) - dims:] if value.ndim >= dims else (1,) * (dims - value.ndim) + value.shape
    return value.reshape(shape)


def _split(stacked: np.ndarray, parts: int) -> list[np.ndarray]:
    """A stacked {B, S, heads, parts, headSize} tensor as its `parts` tensors of {B, S, heads * headSize}."""
    x = _last(stacked, 5)
    if x.shape[3] != parts:
        raise AttentionUnsupported(f"a stacked tensor of {x.shape[3]} parts where {parts} are expected")
    b, s, n, _, h = x.shape
    return [np.ascontiguousarray(x[:, :, :, p, :]).reshape(b, s, n * h) for p in range(parts)]


def family_roles(spec: OperatorSpec) -> dict[str, str]:
    """The attention family's roles (query, mask, scale, ...) -> the spec's field names."""
    family = spec.formula.family
    assert family is not None and family.name == "attention"
    return {k: str(v) for k, v in family.params.items() if isinstance(v, str)}


def node_operands(spec: OperatorSpec, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The node's inputs by role (absent ones left out) and its attributes (num_heads, scale,
    mask_filter_value), from the descriptor and its logical input values; AttentionUnsupported
    where the node cannot say the same thing."""
    role = family_roles(spec)
    have = lambda r: r in role and d.tensors.get(role[r]) is not None  # noqa: E731
    get = lambda r: np.asarray(inputs[role[r]])  # noqa: E731
    fed: dict[str, np.ndarray] = {}
    if have("stacked_query_key_value"):
        fed["query"], fed["key"], fed["value"] = _split(get("stacked_query_key_value"), 3)
    elif have("stacked_query_key"):
        fed["query"], fed["key"] = _split(get("stacked_query_key"), 2)
        fed["value"] = _last(get("value"), 3)
    else:
        fed["query"] = _last(get("query"), 3)
        if have("stacked_key_value"):
            fed["key"], fed["value"] = _split(get("stacked_key_value"), 2)
        else:
            fed["key"], fed["value"] = _last(get("key"), 3), _last(get("value"), 3)
    if have("bias"):
        fed["bias"] = get("bias").reshape(-1)
    if have("position_bias"):
        fed["position_bias"] = _last(get("position_bias"), 4)
    if have("past_key") != have("past_value"):
        raise AttentionUnsupported("ONNX Runtime's MultiHeadAttention takes a past key and a past value together, not one alone")
    if have("past_key"):
        fed["past_key"], fed["past_value"] = _last(get("past_key"), 4), _last(get("past_value"), 4)
        if fed["past_value"].shape[-1] != fed["past_key"].shape[-1]:
            raise AttentionUnsupported("a past value whose head size is not the key's: ONNX Runtime's MultiHeadAttention "
                                       "checks 'past_value dimension 3 should be same as head_size'")
    mask_field = spec.field(role["mask_type"])
    assert mask_field.enum is not None  # the family's mask type is an enum field
    member = next((m for m, v in mask_field.enum.items() if v == int(d.attributes[mask_field.name])), None)
    form = entry.get("mask_types", {}).get(member)
    if form is None:
        raise AttentionUnsupported(f"MaskType {member}: ONNX Runtime's MultiHeadAttention has no such mask "
                                   f"(mapped: {', '.join(sorted(entry.get('mask_types', {})))})")
    if form == "lengths" and have("mask"):
        fed["mask"] = get("mask").reshape(-1).astype(np.int32)
    elif form == "raw" and have("mask"):
        mask = _last(get("mask"), 4)
        if mask.shape[1] != 1:
            raise AttentionUnsupported("a mask with a head dimension of more than 1: ONNX Runtime's key_padding_mask has none")
        fed["mask"] = mask.reshape(mask.shape[0], mask.shape[2], mask.shape[3]).astype(np.int32)
    scale = float(np.float32(d.attributes[role["scale"]]))
    if scale == 0:
        raise AttentionUnsupported("Scale 0: ONNX Runtime's MultiHeadAttention reads a scale of 0 as its default, 1/sqrt(headSize)")
    attributes = {"num_heads": int(d.attributes[role["heads"]]), "scale": scale,
                  "mask_filter_value": float(np.float32(d.attributes[role["mask_filter"]]))}
    return fed, attributes


def run_attention(spec: OperatorSpec, entry: dict, d: Descriptor, inputs: dict[str, np.ndarray],
                  session: Callable[[tuple, Callable[[], Any]], Any], onnx_types: dict[str, int],
                  opset: int, ir_version: int) -> dict[str, np.ndarray]:
    """The node, run: the output and the present key and value the descriptor binds, by field name.
    `session(key, build)` is the backend's session cache."""
    role = family_roles(spec)
    fed, attributes = node_operands(spec, entry, d, inputs)
    data_type = d.tensors[role["output"]].data_type  # type: ignore[union-attr]  # the output is never null
    types = {r: ("INT32" if r == "mask" else data_type) for r in fed}
    order = list(entry.get("inputs", NODE_INPUTS))
    slots = [r if r in fed else "" for r in order]
    while slots and not slots[-1]:
        slots.pop()
    outputs = [r for r in NODE_OUTPUTS if d.tensors.get(role[r]) is not None]
    results = [r if r in outputs else "" for r in NODE_OUTPUTS]
    while results and not results[-1]:
        results.pop()
    key = ("attention", entry["op"], entry.get("domain", ""), tuple(sorted(attributes.items())), tuple(slots), tuple(results),
           tuple((r, v.shape, types[r]) for r, v in fed.items()))

    def build() -> Any:
        from onnx import helper
        node = helper.make_node(entry["op"], slots, results, domain=entry.get("domain", ""), **attributes)
        graph = helper.make_graph([node], entry["op"],
                                  [helper.make_tensor_value_info(r, onnx_types[types[r]], list(fed[r].shape)) for r in fed],
                                  [helper.make_tensor_value_info(r, onnx_types[data_type], None) for r in results if r])
        opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(entry["domain"], 1)] if entry.get("domain") else [])
        return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)
    values = session(key, build).run(None, {r: np.ascontiguousarray(v) for r, v in fed.items()})
    named = dict(zip([r for r in results if r], values))
    return {role[r]: np.asarray(named[r]) for r in outputs}
