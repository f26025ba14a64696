"""The generator family: outputs that depend on a state input only, not on data (pseudo-random bits).

Mode `philox4x32_10`: Philox-4x32 with 10 rounds (Salmon, Moraes, Dror and Shaw, "Parallel random
numbers: as easy as 1, 2, 3", SC11; the Random123 library's philox4x32), written from its
definition: a block is 4 words (c0, c1, c2, c3) under a key (k0, k1); each round multiplies
c0 by 0xD2511F53 and c2 by 0xCD9E8D57 (32 x 32 -> 64 bits) and gives
(hi(c2 * M1) ^ c1 ^ k0, lo(c2 * M1), hi(c0 * M0) ^ c3 ^ k1, lo(c0 * M0)); the key is bumped by the
Weyl constants (0x9E3779B9, 0xBB67AE85), modulo 2^32, between rounds. tests/harness checks it against
Random123's published known-answer vectors.

The state is 6 words: the 128-bit counter in words 0 to 3 (word 0 the least significant) and the
64-bit key in words 4 and 5. Output element i (row-major) is word i mod 4 of the block of counter
+ i // 4; the next state is the counter advanced by the blocks used, ceil(elements / 4), modulo
2^128, with the key unchanged. Integer arithmetic throughout: exact, no precision liberty. Where a
counter passes 2^128 - 1 the element variable `wrapped` is 1, for the spec's unspecified rules.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.reference.families import data_movement
from harness.reference.families.result import FamilyPlugin, FamilyResult
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)  # M0 (for c0), M1 (for c2)
WEYL = (0x9E3779B9, 0xBB67AE85)         # the key's bump per round
ROUNDS = 10
_WORD = np.uint64(0xFFFFFFFF)
_COUNTER_SPAN = 1 << 128


def philox4x32(counters: np.ndarray, key: tuple[int, int], rounds: int = ROUNDS) -> np.ndarray:
    """The Philox-4x32 blocks of counters {n, 4} (words, least significant first) under `key`: {n, 4}
    uint32 words."""
    c = [counters[:, w].astype(np.uint64) for w in range(4)]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    m0, m1 = np.uint64(MULTIPLIERS[0]), np.uint64(MULTIPLIERS[1])
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + np.uint64(WEYL[0])) & _WORD, (k1 + np.uint64(WEYL[1])) & _WORD
        p0, p1 = m0 * c[0], m1 * c[2]  # below 2^64: exact in uint64
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _WORD, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & _WORD]
    return np.stack(c, axis=1).astype(np.uint32)


def _words(value: int) -> list[int]:
    return [(value >> (32 * w)) & 0xFFFFFFFF for w in range(4)]


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    p = family.params
    var = next(v for v, t in spec.formula.inputs.items() if t == p["state"])
    state = [int(v) & 0xFFFFFFFF for v in np.asarray(inputs[var]).reshape(-1)[:6]]
    counter = sum(w << (32 * i) for i, w in enumerate(state[:4]))
    key = (state[4], state[5])
    values_desc, next_desc = descriptor.tensors[p["values"]], descriptor.tensors[p["next_state"]]
    assert values_desc is not None
    count = int(np.prod(values_desc.sizes))
    blocks = -(-count // 4)
    counters = np.array([_words((counter + j) % _COUNTER_SPAN) for j in range(blocks)], dtype=np.uint64).reshape(-1, 4)
    words = philox4x32(counters, key).reshape(-1)[:count]
    values_type = spec.catalog.dtype(values_desc.data_type).numpy
    outputs = {p["values"]: words.reshape(tuple(values_desc.sizes)).astype(values_type)}
    wrapped = {p["values"]: (counter + np.arange(count, dtype=object) // 4 >= _COUNTER_SPAN).astype(np.int64)
               .reshape(tuple(values_desc.sizes))}
    if next_desc is not None:  # the counter advanced by the blocks used, modulo 2^128; the key kept
        advanced = counter + blocks
        next_words = np.array(_words(advanced % _COUNTER_SPAN) + list(key), dtype=np.uint64)
        outputs[p["next_state"]] = next_words.reshape(tuple(next_desc.sizes)).astype(spec.catalog.dtype(next_desc.data_type).numpy)
        wrapped[p["next_state"]] = np.full(tuple(next_desc.sizes), int(advanced >= _COUNTER_SPAN), dtype=np.int64)
    result = FamilyResult(outputs)
    for name, values in outputs.items():
        result.unspecified[name] = data_movement._unspecified(spec, descriptor, var, values, {"wrapped": wrapped[name]})
    result.summaries["wrapped"] = wrapped[p["values"]]
    return result


PLUGIN = FamilyPlugin(DECLARATIONS["generator"], compute)
