"""Input data for a descriptor: values that favour the special ones (signed zeros, NaN payloads,
infinities, denormals, extremes) and the spec's favoured values, never a value the spec marks as
undefined behaviour; made in batches, one seed per data set.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from harness.model.blocks import spread_blocks
from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope, level_facts
from harness.spec.catalog import DataType
from harness.spec.context import formula_context
from harness.spec.expr import EvalContext
from harness.model.layout import pack_nibbles, packed_strides, total_bytes
from harness.spec.model import OperatorSpec
from harness.generate.values import random_values
from harness.generate.layouts import DEFAULT_CONFIG, GenConfig


def make_inputs(spec: OperatorSpec, descriptor: Descriptor, seed: int, config: GenConfig = DEFAULT_CONFIG,
                avoid_undefined: bool = True, level: str | None = None) -> dict[str, bytes]:
    """Whole input buffers for one case (see make_input_batch)."""
    return make_input_batch(spec, descriptor, seed, 1, config, avoid_undefined, level)[0]


def _allocate(spec: OperatorSpec, descriptor: Descriptor, count: int,
              rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Raw (count, TotalTensorSizeInBytes) blocks drawn from the value pools, and their logical views.

    A 4-bit type's block holds one element per byte (count, 2 * TotalTensorSizeInBytes), packed
    two per byte by `_buffers` once every value is written."""
    catalog = spec.catalog
    raw: dict[str, np.ndarray] = {}        # tensor -> (count, TotalTensorSizeInBytes) bytes
    views: dict[str, np.ndarray] = {}      # tensor -> (count, *Sizes) writeable logical view
    for f in spec.input_fields:
        desc = descriptor.tensors.get(f.name)
        if desc is None:
            continue
        dtype = catalog.dtype(desc.data_type)
        nbytes = total_bytes(desc, dtype)
        n = nbytes * 8 // dtype.bits
        width = dtype.size_bytes  # bytes per element in the block (one for a 4-bit type)
        block = np.zeros((count, n if dtype.bits < 8 else nbytes), dtype=np.uint8)
        elements = block[:, : n * width].view(dtype.numpy)
        elements[...] = random_values(dtype, count * n, rng).reshape(count, n)
        strides = (elements.strides[0],) + tuple(st_ * width for st_ in (desc.strides or packed_strides(desc.sizes)))
        raw[f.name] = block
        views[f.name] = np.lib.stride_tricks.as_strided(elements, shape=(count, *desc.sizes), strides=strides)
    return raw, views


def _buffers(spec: OperatorSpec, descriptor: Descriptor, raw: dict[str, np.ndarray], count: int) -> list[dict[str, bytes]]:
    """The `count` sets of whole input buffers: each block's rows, a 4-bit type's elements packed
    two per byte."""
    for name, block in raw.items():
        if spec.catalog.dtype(descriptor.tensors[name].data_type).bits < 8:  # type: ignore[union-attr]
            raw[name] = pack_nibbles(block)
    return [{name: block[i].tobytes() for name, block in raw.items()} for i in range(count)]


def _context(spec: OperatorSpec, descriptor: Descriptor, views: dict[str, np.ndarray]) -> EvalContext:
    """A formula context over the current logical values (absent inputs take their defaults)."""
    variables: dict[str, np.ndarray] = {}
    out = descriptor.tensors.get(spec.formula.output)
    for var, tensor in spec.formula.inputs.items():
        if tensor in views:
            with np.errstate(invalid="ignore"):
                variables[var] = views[tensor].astype(np.float64)
            if var in spec.formula.blocked and out is not None:  # one value per output element, batch axis kept
                variables[var] = spread_blocks(variables[var], (views[tensor].shape[0], *out.sizes))
        else:
            variables[var] = np.asarray(spec.formula.absent_inputs[var], dtype=np.float64)
    return formula_context(spec, {n: t.data_type for n, t in descriptor.tensors.items() if t}, variables,
                           descriptor.attributes, output_sizes=None if out is None else out.sizes)


def _write_favoured(spec: OperatorSpec, descriptor: Descriptor, views: dict[str, np.ndarray],
                    rng: np.random.Generator, config: GenConfig) -> None:
    """Write the spec's favoured values over a fraction of the logical elements, in place."""
    # One context for all favoured expressions (they read the other inputs, which they do not
    # change); each logical element of a favoured tensor gets at most one of them.
    ctx = _context(spec, descriptor, views)
    for tensor in sorted({f.tensor for f in spec.favour}):
        if tensor not in views or tensor in descriptor.aliases.values():
            continue
        dtype = spec.catalog.dtype(descriptor.tensors[tensor].data_type)  # type: ignore[union-attr]
        shape = views[tensor].shape
        rules = [f for f in spec.favour if f.tensor == tensor]
        with np.errstate(invalid="ignore"):
            merged = views[tensor].astype(np.float64)
        choice = np.where(rng.random(shape) < config.favour_fraction * 2, rng.integers(0, len(rules), shape), -1)
        for index, favour in enumerate(rules):
            pick = choice == index
            if not pick.any():
                continue
            ctx.variables["k"] = rng.integers(favour.k_range[0], favour.k_range[1], size=shape, endpoint=True).astype(np.float64)
            wanted = np.broadcast_to(np.asarray(favour.expression.evaluate(ctx), dtype=np.float64), shape)
            merged = np.where(pick, wanted, merged)
        with np.errstate(invalid="ignore", over="ignore"):
            if not dtype.is_float:
                merged = np.where(np.isfinite(merged), np.clip(np.rint(merged), dtype.min, dtype.max), 0)
            views[tensor][...] = merged.astype(dtype.numpy)


def _replace_undefined(spec: OperatorSpec, descriptor: Descriptor, views: dict[str, np.ndarray]) -> None:
    """Replace, in place, values the spec marks as undefined behaviour by a neutral 1."""
    tensor_of = spec.formula.inputs
    out = descriptor.tensors.get(spec.formula.output)
    for rule in spec.unspecified:
        if not rule.undefined_behaviour:
            continue
        if rule.applies_to is not None and (out is None or out.data_type not in rule.applies_to):
            continue  # evaluated only for these output types, like the reference does
        for var in sorted(rule.when.names):
            tensor = tensor_of.get(var)
            if tensor not in views or var in spec.formula.blocked:
                continue  # a blocked input's element stands for many: the rule's other inputs are made neutral
            mask = np.broadcast_to(np.asarray(rule.when.evaluate(_context(spec, descriptor, views)), dtype=bool),
                                   views[tensor].shape)
            if mask.any():
                current = views[tensor].copy()
                current[mask] = 1  # a neutral value: the case stays defined
                views[tensor][...] = current


def limited_values(values: np.ndarray, dtype: DataType, bits: int) -> np.ndarray:
    """`values` brought within a limit (generation.limits): integers to |x| <= 2^bits (values
    outside are folded in, modulo 2^(bits+1) + 1, so small values stay as they were); finite
    non-zero floats to |x| in [2^-bits, 2^bits) by clipping their binary exponent, sign and
    mantissa kept (bits 0: [0.5, 1)); zeros, infinities and NaN stay."""
    bits = max(int(bits), 0)
    if dtype.is_float:
        with np.errstate(invalid="ignore"):
            wide = values.astype(np.float64)
            mantissa, exponent = np.frexp(wide)  # wide = mantissa * 2^exponent, |mantissa| in [0.5, 1)
            clipped = np.ldexp(mantissa, np.minimum(np.maximum(exponent, 1 - bits), bits))
        keep = ~np.isfinite(wide) | (wide == 0)
        return np.where(keep, values, clipped.astype(dtype.numpy))
    width = dtype.bits - (1 if dtype.kind == "signed" else 0)
    if bits >= width:
        return values
    m = 1 << bits
    wide_int = values.astype(object)
    if dtype.kind == "signed":
        folded = np.array([v if -m <= v <= m else (v + m) % (2 * m + 1) - m for v in wide_int.reshape(-1)], dtype=object)
    else:
        folded = np.array([v if v <= m else v % (m + 1) for v in wide_int.reshape(-1)], dtype=object)
    return folded.reshape(values.shape).astype(dtype.numpy)


def _in_force(entries: Iterable[Any], descriptor: Descriptor, views: dict[str, np.ndarray], names: dict[str, Any],
              facts: dict) -> Iterator[tuple[Any, Any]]:
    """The generation entries (limits, data ranges) in force for `descriptor`, each with its
    tensor's descriptor: the tensor is there, of a type the entry applies to, and `when` holds."""
    for entry in entries:
        desc = descriptor.tensors.get(entry.tensor)
        if desc is None or entry.tensor not in views:
            continue
        if entry.applies_to is not None and desc.data_type not in entry.applies_to:
            continue
        if entry.when is not None and not entry.when.evaluate(names, facts):
            continue
        yield entry, desc


def _apply_limits(spec: OperatorSpec, descriptor: Descriptor, views: dict[str, np.ndarray]) -> None:
    """Bring the inputs within the spec's generation.limits, in place (logical elements only)."""
    names, facts = expression_scope(spec, descriptor)
    for limit, desc in _in_force(spec.limits, descriptor, views, names, facts):
        bits = limit.bits.evaluate(names, facts)
        if isinstance(bits, bool) or not isinstance(bits, int):
            continue  # the expression has no value for this descriptor
        dtype = spec.catalog.dtype(desc.data_type)
        views[limit.tensor][...] = limited_values(np.array(views[limit.tensor]), dtype, bits)


def ranged_values(values: np.ndarray, dtype: DataType, low: int, high: int) -> np.ndarray:
    """Integer `values` folded into [low, high] (generation.data_ranges): low + (v - low) mod
    (high - low + 1), so values already inside stay as they are; floats are clipped. The range is
    first narrowed to what the type holds."""
    if dtype.is_float:
        with np.errstate(invalid="ignore"):
            return np.clip(values, low, high).astype(values.dtype)
    assert dtype.min is not None and dtype.max is not None  # an integer type: the catalog requires its range
    low, high = max(low, int(dtype.min)), min(high, int(dtype.max))
    if low > high:
        return values
    span = high - low + 1
    wide = values.astype(object)
    folded = np.array([v if low <= v <= high else low + (v - low) % span for v in wide.reshape(-1)], dtype=object)
    return folded.reshape(values.shape).astype(values.dtype)


def just_outside(dtype: DataType, low: int, high: int) -> list[int]:
    """The values just outside [low, high] as the type holds them: high + 1 and low - 1, a value
    below an unsigned type's 0 as its bit pattern (-1 as the type's maximum, what a driver that
    casts -1 passes), a value beyond a type's end dropped."""
    out = []
    for v in (high + 1, low - 1):
        if not dtype.is_float and dtype.kind == "unsigned" and v < 0:
            v += 1 << dtype.bits
        if dtype.is_float:
            out.append(v)
            continue
        assert dtype.min is not None and dtype.max is not None  # an integer type: the catalog requires its range
        if int(dtype.min) <= v <= int(dtype.max):
            out.append(v)
    return out


def _usable_positions(low: int, high: int, modulo: int) -> np.ndarray:
    """The positions p in [0, modulo) that some value of [low, high] names: p itself or p - modulo
    (a negative index counting from the end)."""
    p = np.arange(max(int(modulo), 0), dtype=np.int64)
    return p[((p >= low) & (p <= high)) | ((p - modulo >= low) & (p - modulo <= high))]


def _spelled(positions: np.ndarray, low: int, high: int, modulo: np.ndarray | int,
             rng: np.random.Generator) -> np.ndarray:
    """Each position as a value of [low, high]: itself or position - modulo, at random where both
    are in range (so that negative indices still appear)."""
    plain_ok = (positions >= low) & (positions <= high)
    negative_ok = (positions - modulo >= low) & (positions - modulo <= high)
    negative = negative_ok & (~plain_ok | (rng.random(positions.shape) < 0.5))
    return np.where(negative, positions - modulo, positions)


def distinct_lines(values: np.ndarray, axis: int, low: int, high: int, modulo: int,
                   rng: np.random.Generator) -> np.ndarray:
    """`values` (a leading data-set axis, then the tensor's dims) with each line along the tensor's
    `axis` redrawn as different positions modulo `modulo`, within [low, high]. A line longer than
    the positions available keeps its values: repeats are unavoidable there (the spec's
    `unspecified` rules say what they leave open)."""
    usable = _usable_positions(low, high, modulo)
    out = np.array(values)
    moved = np.moveaxis(out, axis + 1, -1)
    length = moved.shape[-1]
    if length == 0 or length > usable.size or moved.size == 0:
        return out
    lines = moved.reshape(-1, length)
    picks = np.argsort(rng.random((lines.shape[0], usable.size)), axis=1)[:, :length]
    drawn = _spelled(usable[picks], low, high, modulo, rng)
    moved[...] = drawn.reshape(moved.shape).astype(out.dtype)
    return out


def _distinct_codes(count: int, space: int, rng: np.random.Generator) -> np.ndarray:
    """`count` different integers of [0, space), in random order."""
    if space <= 1 << 20:
        return rng.choice(space, size=count, replace=False)
    codes = np.unique(rng.integers(0, space, size=count))
    while codes.size < count:  # a repeat among a few draws from a large space: draw the missing ones again
        codes = np.unique(np.concatenate([codes, rng.integers(0, space, size=count - codes.size)]))
    return rng.permutation(codes)


def distinct_tuples(values: np.ndarray, axis: int, low: int, high: int, moduli: list[int],
                    rng: np.random.Generator) -> np.ndarray:
    """`values` (a leading data-set axis, then the tensor's dims) whose lines along the tensor's
    `axis` (index tuples, coordinate k modulo moduli[k]) are redrawn pairwise different within each
    data set, every coordinate within [low, high]. Where the tuples outnumber the positions
    available, the values are kept: repeats are unavoidable."""
    out = np.array(values)
    moved = np.moveaxis(out, axis + 1, -1)
    width = moved.shape[-1]
    if width != len(moduli) or moved.size == 0:
        return out
    usable = [_usable_positions(low, high, m) for m in moduli]
    lens = [u.size for u in usable]
    space = int(np.prod(lens, dtype=object))
    tuples = moved.reshape(out.shape[0], -1, width)
    if tuples.shape[1] > space:
        return out
    modulo = np.asarray(moduli, dtype=np.int64)
    for data_set in range(tuples.shape[0]):
        digits = np.unravel_index(_distinct_codes(tuples.shape[1], space, rng), lens)
        positions = np.stack([usable[k][digits[k]] for k in range(width)], axis=-1)
        tuples[data_set] = _spelled(positions, low, high, modulo, rng).astype(out.dtype)
    moved[...] = tuples.reshape(moved.shape)
    return out


def _apply_distinct(distinct: Any, values: np.ndarray, low: int, high: int, names: dict[str, Any], facts: dict,
                    rng: np.random.Generator) -> np.ndarray:
    """The range's `distinct` rule applied to the ranged values (skipped where its expressions
    have no value for the descriptor)."""
    axis, modulo = distinct.axis.evaluate(names, facts), distinct.modulo.evaluate(names, facts)
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < values.ndim - 1:
        return values
    if distinct.within == "lines" and isinstance(modulo, int) and not isinstance(modulo, bool):
        return distinct_lines(values, axis, low, high, modulo, rng)
    if distinct.within == "tensor" and isinstance(modulo, list) and all(isinstance(m, int) for m in modulo):
        return distinct_tuples(values, axis, low, high, modulo, rng)
    if distinct.within == "blocks" and isinstance(modulo, int) and not isinstance(modulo, bool):
        # each block of the dims from `axis` on is one line (flat indices into a whole tensor: axis 0)
        shape = values.shape
        blocks = values.reshape(shape[0], int(np.prod(shape[1:axis + 1], dtype=np.int64)), -1)
        return distinct_lines(blocks, 1, low, high, modulo, rng).reshape(shape)
    return values


def _apply_data_ranges(spec: OperatorSpec, descriptor: Descriptor, views: dict[str, np.ndarray],
                       rng: np.random.Generator, level: str | None) -> None:
    """Bring the inputs within the spec's generation.data_ranges, in place (logical elements only),
    then put a few values just outside the range in a share (`outside`) of the data sets: the page
    leaves their outputs open but says what must not happen (a failure), which a run checks."""
    names, facts = expression_scope(spec, descriptor)
    names = {**names, **level_facts(spec.catalog, level)}
    for entry, desc in _in_force(spec.data_ranges, descriptor, views, names, facts):
        low, high = entry.low.evaluate(names, facts), entry.high.evaluate(names, facts)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or low > high:
            continue  # the expressions have no value for this descriptor
        dtype = spec.catalog.dtype(desc.data_type)
        view = views[entry.tensor]
        current = ranged_values(np.array(view), dtype, low, high)
        if entry.distinct is not None and not dtype.is_float:
            current = _apply_distinct(entry.distinct, current, low, high, names, facts, rng)
        outside = just_outside(dtype, low, high)
        if entry.outside > 0 and outside and current[0].size:
            for index in np.flatnonzero(rng.random(current.shape[0]) < entry.outside):  # data sets
                flat = current[index].reshape(-1)
                for at in rng.choice(flat.size, size=min(flat.size, int(rng.integers(1, 4))), replace=False):
                    flat[at] = outside[int(rng.integers(0, len(outside)))]
                current[index] = flat.reshape(current[index].shape)
        view[...] = current


def make_input_batch(spec: OperatorSpec, descriptor: Descriptor, seed: int, count: int,
                     config: GenConfig = DEFAULT_CONFIG, avoid_undefined: bool = True,
                     level: str | None = None) -> list[dict[str, bytes]]:
    """`count` sets of whole input buffers for one descriptor: every physical element (padding
    included) drawn from the value pools, then the spec's favoured values written over a fraction
    of the logical elements, then the spec's limits and data ranges applied (a range may read
    `level`, the case's feature level; None: the newest), then values the spec marks as
    undefined behaviour replaced.

    All sets are made at once: every tensor gets a leading batch axis, and since every step is
    elementwise, a batch costs about as much as one set."""
    rng = np.random.default_rng(seed)
    raw, views = _allocate(spec, descriptor, count, rng)
    if spec.favour and spec.formula.operands == "value":
        _write_favoured(spec, descriptor, views, rng, config)
    if spec.limits:
        _apply_limits(spec, descriptor, views)
    if spec.data_ranges:
        _apply_data_ranges(spec, descriptor, views, rng, level)
    if avoid_undefined:
        _replace_undefined(spec, descriptor, views)
    return _buffers(spec, descriptor, raw, count)
