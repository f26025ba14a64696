"""The attention family: multi-head attention (harness/reference/families/attention.py).

The reference is checked against an independent formulation written here: a plain loop over
batch rows, heads and query positions with Python floats and math.exp, reading the page's
decomposition literally (bias, past concatenation, Scale * q . k, position bias, mask, softmax,
times V). Stacked layouts must give what the same values unstacked give; the element variables
that mark what the page leaves open are checked where a case is built to meet them."""
from __future__ import annotations

import math

import numpy as np
import pytest

from harness.generate.cases import case_from_arrays
from harness.model.descriptor import TensorDesc
from harness.reference.evaluate import family_inputs
from harness.reference.families import family_compute
from harness.reference.families.result import FamilyResult
from tests.helpers import SPECS

OP = "MULTIHEAD_ATTENTION"
NONE, KEY_SEQUENCE_LENGTH, KEY_SEQUENCE_END_START, KEY_QUERY, BOOLEAN = 0, 1, 2, 3, 4


def _run(inputs: dict[str, np.ndarray], attributes: dict, outputs: dict[str, list[int]], dtype: str = "FLOAT32") -> FamilyResult:
    spec = SPECS.operator(OP)
    types = {n: ("INT32" if n == "MaskTensor" else dtype) for n in [*inputs, *outputs]}
    sizes = {**{n: list(v.shape) for n, v in inputs.items()}, **outputs}
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    values = {n: np.asarray(v).astype(SPECS.catalog.dtype(types[n]).numpy) for n, v in inputs.items()}
    case = case_from_arrays(spec, "6.4", types, values, attributes=attributes, layouts=layouts)
    assert spec.formula.family is not None
    return family_compute(spec.formula.family.name)(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))


def _loop(q, k, v, heads, scale, bias=None, past_k=None, past_v=None, position=None, masked=None, filter_value=0.0):
    """The page's decomposition, one (batch, head, query) at a time, in Python floats.
    q [B, S, H*d], k [B, L, H*d], v [B, L, H*e]; past [B, H, P, d|e]; position [B, H, S, T];
    masked(b, h, s, t) -> bool: the filter value is added there."""
    b_count, s_count, hidden = q.shape
    d, e = hidden // heads, v.shape[2] // heads
    out = np.zeros((b_count, s_count, heads * e))
    for b in range(b_count):
        for h in range(heads):
            keys = [] if past_k is None else [list(map(float, past_k[b, h, p])) for p in range(past_k.shape[2])]
            vals = [] if past_v is None else [list(map(float, past_v[b, h, p])) for p in range(past_v.shape[2])]
            for t in range(k.shape[1]):
                keys.append([float(k[b, t, h * d + i]) + (float(bias[hidden + h * d + i]) if bias is not None else 0.0) for i in range(d)])
                vals.append([float(v[b, t, h * e + i]) + (float(bias[2 * hidden + h * e + i]) if bias is not None else 0.0) for i in range(e)])
            for s in range(s_count):
                query = [float(q[b, s, h * d + i]) + (float(bias[h * d + i]) if bias is not None else 0.0) for i in range(d)]
                scores = []
                for t, key in enumerate(keys):
                    z = scale * sum(a * c for a, c in zip(query, key))
                    z += float(position[b, h, s, t]) if position is not None else 0.0
                    z += filter_value if masked is not None and masked(b, h, s, t) else 0.0
                    scores.append(z)
                top = max(scores)
                weights = [math.exp(z - top) for z in scores]
                total = sum(weights)
                for i in range(e):
                    out[b, s, h * e + i] = sum(w / total * val[i] for w, val in zip(weights, vals))
    return out


def _random(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Small values that FLOAT32 holds exactly (quarters): the exact product sums stay exact in float64."""
    return (rng.integers(-8, 9, size=shape) / 4.0).astype(np.float32)


def _sizes(b: int, s: int, t: int, heads: int, d: int, e: int) -> dict[str, list[int]]:
    return {"OutputTensor": [b, s, heads * e], "OutputPresentKeyTensor": [b, heads, t, d],
            "OutputPresentValueTensor": [b, heads, t, e]}


def test_everything_at_once_matches_the_loop_per_head():
    """Two heads of unequal key and value sizes, a bias, a past, a position bias and a boolean mask."""
    rng = np.random.default_rng(1)
    b, s, kv, p, heads, d, e = 2, 3, 4, 2, 2, 2, 3
    q, k, v = _random(rng, b, s, heads * d), _random(rng, b, kv, heads * d), _random(rng, b, kv, heads * e)
    bias = _random(rng, 2 * heads * d + heads * e)
    past_k, past_v = _random(rng, b, heads, p, d), _random(rng, b, heads, p, e)
    position = _random(rng, b, heads, s, p + kv)
    mask = rng.integers(0, 2, size=(b, heads, s, p + kv)).astype(np.int32)
    mask[..., 0] = 1  # every row keeps a key
    result = _run({"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "BiasTensor": bias, "MaskTensor": mask,
                   "RelativePositionBiasTensor": position, "PastKeyTensor": past_k, "PastValueTensor": past_v},
                  {"Scale": 0.5, "MaskFilterValue": -3.0, "HeadCount": heads, "MaskType": BOOLEAN}, _sizes(b, s, p + kv, heads, d, e))
    want = _loop(q, k, v, heads, 0.5, bias, past_k, past_v, position, lambda bb, h, ss, t: mask[bb, h, ss, t] == 0, -3.0)
    got = result.bounds["OutputTensor"][0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.all(result.bounds["OutputTensor"][1] > 0) and np.all(np.isfinite(result.bounds["OutputTensor"][1]))
    # the present key: the past, then K plus its bias, per head
    key = result.outputs["OutputPresentKeyTensor"]
    assert key[1, 1, :p].tolist() == past_k[1, 1].tolist()
    assert key[1, 1, p + 2].tolist() == (k[1, 2, d:2 * d] + bias[heads * d + d:heads * d + 2 * d]).tolist()
    assert not any(m.any() for m in result.unspecified["OutputTensor"].values())


@pytest.mark.parametrize("mask_type, mask, masked", [
    (KEY_SEQUENCE_LENGTH, [[1, 3]], lambda b, t: t >= [1, 3][b]),
    (KEY_SEQUENCE_END_START, [[3, 2], [1, 0]], lambda b, t: not [1, 0][b] <= t < [3, 2][b]),
    (KEY_QUERY, [1, 3, 0, 1, 2, 0, 2, 4], lambda b, t: t >= [1, 3][b]),
])
def test_each_length_mask_type(mask_type, mask, masked):
    """The length and start/end mask types, MaskFilterValue -inf (a masked key weighs exactly 0)."""
    rng = np.random.default_rng(2)
    b, s, kv, heads, d = 2, 2, 4, 1, 2
    q, k, v = _random(rng, b, s, d), _random(rng, b, kv, d), _random(rng, b, kv, d)
    result = _run({"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "MaskTensor": np.asarray(mask, dtype=np.int32)},
                  {"Scale": 1.0, "MaskFilterValue": -math.inf, "HeadCount": heads, "MaskType": mask_type}, _sizes(b, s, kv, heads, d, d))
    want = _loop(q, k, v, heads, 1.0, masked=lambda bb, h, ss, t: masked(bb, t), filter_value=-math.inf)
    np.testing.assert_allclose(result.bounds["OutputTensor"][0], want, rtol=1e-12, atol=1e-12)
    rules = result.unspecified["OutputTensor"]
    # -inf added or written over gives the same weights; only KEY_QUERY_SEQUENCE_LENGTH_START_END's
    # starts and ends, which the page does not explain, leave the output open
    assert ("query_key_starts_ends" in rules) == (mask_type == KEY_QUERY)
    assert "mask_set_or_added" not in rules


def test_a_filter_value_that_is_not_very_negative_leaves_the_length_masks_open():
    """'set to MaskFilterValue' (the length types) against 'gets added': with a filter value of 2 the
    readings differ; a BOOLEAN mask's 0 adds it (the page says so for that type)."""
    q = np.asarray([[[1.0]]], dtype=np.float32)
    k = np.asarray([[[1.0], [3.0]]], dtype=np.float32)
    v = np.asarray([[[2.0], [10.0]]], dtype=np.float32)
    common = {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v}
    lengths = _run({**common, "MaskTensor": np.asarray([[1]], dtype=np.int32)},
                   {"Scale": 1.0, "MaskFilterValue": 2.0, "HeadCount": 1, "MaskType": KEY_SEQUENCE_LENGTH}, _sizes(1, 1, 2, 1, 1, 1))
    assert lengths.unspecified["OutputTensor"]["mask_set_or_added"].all()
    boolean = _run({**common, "MaskTensor": np.asarray([[[[1, 0]]]], dtype=np.int32)},
                   {"Scale": 1.0, "MaskFilterValue": 2.0, "HeadCount": 1, "MaskType": BOOLEAN}, _sizes(1, 1, 2, 1, 1, 1))
    assert "mask_set_or_added" not in boolean.unspecified["OutputTensor"]
    # added: scores 1 and 3 + 2 = 5
    want = (2.0 * math.exp(1 - 5) + 10.0) / (math.exp(1 - 5) + 1)
    assert boolean.bounds["OutputTensor"][0].item() == pytest.approx(want, rel=1e-14)


def test_mask_values_without_a_meaning_are_marked():
    """A BOOLEAN mask value of 2 and a key length beyond the key sequence."""
    q = np.ones((1, 1, 1), dtype=np.float32)
    k, v = np.ones((1, 2, 1), dtype=np.float32), np.ones((1, 2, 1), dtype=np.float32)
    common = {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v}
    boolean = _run({**common, "MaskTensor": np.asarray([[[[1, 2]]]], dtype=np.int32)},
                   {"Scale": 1.0, "MaskFilterValue": -1e4, "HeadCount": 1, "MaskType": BOOLEAN}, _sizes(1, 1, 2, 1, 1, 1))
    assert boolean.unspecified["OutputTensor"]["mask_value_meaning"].all()
    lengths = _run({**common, "MaskTensor": np.asarray([[3]], dtype=np.int32)},
                   {"Scale": 1.0, "MaskFilterValue": -1e4, "HeadCount": 1, "MaskType": KEY_SEQUENCE_LENGTH}, _sizes(1, 1, 2, 1, 1, 1))
    assert lengths.unspecified["OutputTensor"]["mask_value_meaning"].all()


def _stacked_case(layout: str):
    """The same Q, K, V (2 heads of size 2, sequence 3, so the key's is 3 too) in one of the four layouts."""
    rng = np.random.default_rng(3)
    b, s, heads, d = 2, 3, 2, 2
    q, k, v = (_random(rng, b, s, heads, d) for _ in range(3))
    flat = {name: x.reshape(b, s, heads * d) for name, x in (("q", q), ("k", k), ("v", v))}
    inputs = {"plain": {"QueryTensor": flat["q"], "KeyTensor": flat["k"], "ValueTensor": flat["v"]},
              "qk": {"StackedQueryKeyTensor": np.stack([q, k], axis=3), "ValueTensor": flat["v"]},
              "kv": {"QueryTensor": flat["q"], "StackedKeyValueTensor": np.stack([k, v], axis=3)},
              "qkv": {"StackedQueryKeyValueTensor": np.stack([q, k, v], axis=3)}}[layout]
    return _run(inputs, {"Scale": 0.70710677, "MaskFilterValue": -1e4, "HeadCount": heads, "MaskType": NONE},
                _sizes(b, s, s, heads, d, d))


@pytest.mark.parametrize("layout", ["qk", "kv", "qkv"])
def test_stacked_layouts_equal_unstacked(layout):
    plain, stacked = _stacked_case("plain"), _stacked_case(layout)
    for name in ("OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor"):
        assert np.array_equal(plain.outputs[name], stacked.outputs[name]), name
        assert np.array_equal(plain.bounds[name][1], stacked.bounds[name][1]), name


def test_past_concatenation_equals_a_longer_key():
    """Without a bias, a past key and value put before K and V give what K and V extended by them
    give as plain inputs."""
    rng = np.random.default_rng(4)
    b, s, kv, p, heads, d = 1, 2, 2, 3, 2, 1
    q, k, v = _random(rng, b, s, heads * d), _random(rng, b, kv, heads * d), _random(rng, b, kv, heads * d)
    past_k, past_v = _random(rng, b, heads, p, d), _random(rng, b, heads, p, d)
    attributes = {"Scale": 1.0, "MaskFilterValue": -1e4, "HeadCount": heads, "MaskType": NONE}
    with_past = _run({"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "PastKeyTensor": past_k, "PastValueTensor": past_v},
                     attributes, _sizes(b, s, p + kv, heads, d, d))

    def longer(past: np.ndarray, x: np.ndarray) -> np.ndarray:  # [B, H, P, d] before [B, L, H*d]
        return np.concatenate([past.transpose(0, 2, 1, 3).reshape(b, p, heads * d), x], axis=1)
    plain = _run({"QueryTensor": q, "KeyTensor": longer(past_k, k), "ValueTensor": longer(past_v, v)},
                 attributes, _sizes(b, s, p + kv, heads, d, d))
    for name in ("OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor"):
        assert np.array_equal(with_past.outputs[name], plain.outputs[name]), name


def test_non_finite_inputs_are_left_to_the_rule():
    """An infinite key element: every score of its head's rows may be NaN on a device that flushes a
    denormal query element (0 * inf)."""
    q = np.ones((1, 1, 2), dtype=np.float32)
    k = np.asarray([[[np.inf, 1.0], [1.0, 1.0]]], dtype=np.float32)
    v = np.ones((1, 2, 2), dtype=np.float32)
    result = _run({"QueryTensor": q, "KeyTensor": k, "ValueTensor": v},
                  {"Scale": 1.0, "MaskFilterValue": -1e4, "HeadCount": 2, "MaskType": NONE}, _sizes(1, 1, 2, 2, 1, 1))
    assert result.unspecified["OutputTensor"]["nonfinite_in"].tolist() == [[[True, False]]]


def test_grouped_query_heads_read_their_group_key_value_head():
    """MULTIHEAD_ATTENTION1's reading of QueryHeadCount and KeyValueHeadCount: 4 query heads over 2
    key/value heads, query head h reads key and value head h // 2 (not h % 2); the present outputs hold
    the 2 key/value heads."""
    spec = SPECS.operator("MULTIHEAD_ATTENTION1")
    rng = np.random.default_rng(5)
    b, s, kv, heads, kv_heads, d = 1, 2, 3, 4, 2, 1
    q, k, v = _random(rng, b, s, heads * d), _random(rng, b, kv, kv_heads * d), _random(rng, b, kv, kv_heads * d)
    sizes = {"QueryTensor": [b, s, heads * d], "KeyTensor": [b, kv, kv_heads * d], "ValueTensor": [b, kv, kv_heads * d],
             "OutputTensor": [b, s, heads * d], "OutputPresentKeyTensor": [b, kv_heads, kv, d], "OutputPresentValueTensor": [b, kv_heads, kv, d]}
    types = {n: "FLOAT32" for n in sizes}
    layouts = {n: TensorDesc(t, list(sizes[n])) for n, t in types.items()}
    case = case_from_arrays(spec, "6.4", types, {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v},
                            attributes={"Scale": 1.0, "MaskFilterValue": -1e4, "QueryHeadCount": heads,
                                        "KeyValueHeadCount": kv_heads, "MaskType": NONE}, layouts=layouts)
    assert spec.formula.family is not None
    result = family_compute(spec.formula.family.name)(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))

    def spread(x: np.ndarray, pick) -> np.ndarray:  # [B, L, kv_heads] -> [B, L, heads], head h from pick(h)
        return np.stack([x[:, :, pick(h)] for h in range(heads)], axis=2)
    want = _loop(q, spread(k, lambda h: h // 2), spread(v, lambda h: h // 2), heads, 1.0)
    np.testing.assert_allclose(result.bounds["OutputTensor"][0], want, rtol=1e-12, atol=1e-12)
    other = _loop(q, spread(k, lambda h: h % 2), spread(v, lambda h: h % 2), heads, 1.0)
    assert not np.allclose(want, other)  # the case tells the two groupings apart
    assert result.outputs["OutputPresentKeyTensor"].reshape(kv_heads, kv).tolist() == k[0].T.tolist()
