"""The data movement family: outputs whose elements are input elements, bit for bit.

D3D requires that moving data alters nothing ("any I/O or data movement operation that does not
manipulate the data ... must not alter data at all (so a denorm remains denorm)"), so there is no
precision liberty: NaN payloads, signed zeros and fp32 denormals are copied as they are, and the
spec compares bitwise. Mode `strided_window`: per dimension the copy starts at the
window's offset, or at its last element where the stride is negative, and steps by the stride;
the output's Sizes say how many elements are taken (the validator has checked that they stay
within the window). Mode `pad`: the input placed after `start` elements per dimension; around
it, the padding rule whose spec expression holds (constant, edge, reflection, symmetric), applied
per dimension (the mirrors fold periodically over earlier padding, as the page's examples show).
Mode `join`: the present items of a tensor array, in order, concatenated along `axis` (the
validator has checked that their other sizes agree and the output's Sizes are their sum there).
Mode `split`: the inverse: the input cut along `axis` into the present items of an output tensor
array, each taking as many positions as its Sizes say there.
Mode `tile`: `repeats` copies of the input per dimension, so output[i] = input[i mod input size]
in each dimension. Modes `space_to_depth` and `depth_to_space` ({batch, channels, height, width}):
the blocks of `block_size` x `block_size` spatial elements move into channels, or back; `order`
says how a depth channel holds (block row, block column, channel): `depth_column_row` counts the
channel fastest (depth = (block row * b + block column) * channels + channel), `column_row_depth`
the block column fastest (depth = channel * b * b + block row * b + block column). The two are
inverses of each other for one order.
Mode `one_hot`: per sequence along `axis` of the output, the second element of `values` (row-major)
at the position `indices` names for it (a negative one counting from the sequence's end) and the
first everywhere else, so a position outside the sequence selects none: the whole sequence gets
the first value. Mode `reverse_prefix`: per sequence along `axis` of the input, its first
`lengths` elements reversed and the others copied, a length beyond the axis read as the axis'
size. Both read one value per sequence from a tensor of size 1 along `axis` (broadcast along
it), and give the spec's unspecified rules and expectations that value per output element
(`index` or `length`) with the sequences' size (`axis_size`): which values select what the page
leaves open is the spec's to say, not the plug-in's.
The formula's input variable (`x`) is bound per output element to the value copied there (an
input element, or the padding value), which is what expectation files' `when` reads.
Mode `coordinates_of_nonzero` writes positions rather than values: the `count` output gets the
number of non-zero input elements (a zero of either sign is zero, a NaN is not), the `coordinates`
output {1..., M, N} one row per non-zero element, ascending by element index, holding its
coordinates over the input's last N dims (the leading ones it drops are of size 1). The rows past
the count are whatever the spec's `unspecified` rule says (element variables `row` and `count`; the
reference writes 0 there). D3D may flush fp32 denormal inputs before the comparison with zero, so the
count and the rows over the flushed input are a legal alternative (fp32_input_flush), and `count` is
the fewer of the two, so that the rows one reading leaves unwritten are open under both.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names, constant_of_field, expression_scope
from harness.reference.families.result import FamilyPlugin, FamilyResult, flush_f32_denormals
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec

_INT64_MAX = np.iinfo(np.int64).max


def strided_window_index(out_shape: list[int], offsets: list[int], sizes: list[int],
                         strides: list[int]) -> list[np.ndarray]:
    """Per dimension, the input positions a strided window copies to output positions 0, 1, ...
    (its start, or its end where the stride is negative, stepped by the stride): the index map that
    the window's copy reads through, and that its adjoint (harness.reference.families.gradient)
    scatters back through."""
    index = []
    for dim, count in enumerate(out_shape):
        start = offsets[dim] + (sizes[dim] - 1 if strides[dim] < 0 else 0)
        index.append(start + strides[dim] * np.arange(count))
    return index


def _strided_window(x: np.ndarray, out_shape: list[int], offsets: list[int], sizes: list[int],
                    strides: list[int]) -> np.ndarray:
    return x[np.ix_(*strided_window_index(out_shape, offsets, sizes, strides))]


def _pad_index(count: int, start: int, n: int, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Per output position along one dimension: the input index it copies, and whether it is a
    padding position (for the constant rule, which writes the value there instead)."""
    p = np.arange(count) - start
    inside = (p >= 0) & (p < n)
    if rule == "edge" or n == 1:  # one element: every mirror and the edge coincide
        source = np.clip(p, 0, n - 1)
    elif rule == "reflection":  # ... 2 1 | 0 1 2 | 1 0 ...: period 2(n - 1)
        r = np.mod(p, 2 * (n - 1))
        source = np.where(r >= n, 2 * (n - 1) - r, r)
    elif rule == "symmetric":  # ... 1 0 | 0 1 2 | 2 1 ...: period 2n
        r = np.mod(p, 2 * n)
        source = np.where(r >= n, 2 * n - 1 - r, r)
    else:  # constant: any in-range index; the padding positions are overwritten
        source = np.clip(p, 0, n - 1)
    return source, ~inside


def _pad(spec: OperatorSpec, descriptor: Descriptor, x: np.ndarray, out_shape: list[int], out_numpy) -> np.ndarray:
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    rules = [r for r in ("constant", "edge", "reflection", "symmetric") if family.expression(r).evaluate(names, facts)]  # type: ignore[union-attr]
    rule = rules[0] if rules else "constant"  # no rule in force: the spec's unspecified rules say so
    start = list(names[family.params["start"]])
    index, padding = [], np.zeros(out_shape, dtype=bool)
    for dim, count in enumerate(out_shape):
        source, pad = _pad_index(count, start[dim], x.shape[dim], rule)
        index.append(source)
        shape = [1] * len(out_shape)
        shape[dim] = count
        padding |= pad.reshape(shape)
    result = x[np.ix_(*index)].astype(out_numpy, copy=True)
    if rule == "constant":
        value = family.params["value"]
        result[padding] = constant_of_field(spec, value, descriptor.attributes.get(value, 0), out_numpy)
    return result


def _tile(x: np.ndarray, repeats: list[int]) -> np.ndarray:
    """`repeats[d]` copies of the input along each dimension d: output position i of a dimension
    of input size n reads input position i mod n."""
    index = [np.arange(n * r) % n for n, r in zip(x.shape, repeats)]
    return x[np.ix_(*index)]


# Where the (block row, block column) pair and the channel sit in the depth dimension, per order:
# the depth dimension viewed as three axes, the slowest first (DML_DEPTH_SPACE_ORDER's "depth
# version" of the layout: [Batch, (BlockHeight, BlockWidth, Channels), H, W] and [Batch,
# (Channels, BlockHeight, BlockWidth), H, W]).
DEPTH_ORDERS = ("depth_column_row", "column_row_depth")


def _space_to_depth(x: np.ndarray, b: int, order: str) -> np.ndarray:
    """{N, C, H * b, W * b} -> {N, C * b * b, H, W}: the space side viewed as {N, C, H, bh, W, bw}
    (each spatial dimension is (position, position within the block)), its axes permuted into the
    order's depth layout and flattened."""
    n, c, hb, wb = x.shape
    h, w = hb // b, wb // b
    space = x.reshape(n, c, h, b, w, b)
    # depth_column_row: {N, bh, bw, C, H, W}; column_row_depth: {N, C, bh, bw, H, W}
    perm = (0, 3, 5, 1, 2, 4) if order == "depth_column_row" else (0, 1, 3, 5, 2, 4)
    return space.transpose(perm).reshape(n, c * b * b, h, w)


def _depth_to_space(x: np.ndarray, b: int, order: str) -> np.ndarray:
    """{N, C * b * b, H, W} -> {N, C, H * b, W * b}: the inverse of _space_to_depth for one order
    (the depth dimension split into the order's three axes, then interleaved into the spatial ones)."""
    n, cbb, h, w = x.shape
    c = cbb // (b * b)
    if order == "depth_column_row":
        depth = x.reshape(n, b, b, c, h, w)           # {N, bh, bw, C, H, W}
        perm = (0, 3, 4, 1, 5, 2)                     # -> {N, C, H, bh, W, bw}
    else:
        depth = x.reshape(n, c, b, b, h, w)           # {N, C, bh, bw, H, W}
        perm = (0, 1, 4, 2, 5, 3)
    return depth.transpose(perm).reshape(n, c, h * b, w * b)


def _depth_space(spec: OperatorSpec, names: dict, x: np.ndarray) -> np.ndarray:
    """Mode space_to_depth or depth_to_space with the spec's block size and order (the order
    parameter left out: depth_column_row, the layout of the operators without an Order field)."""
    family = spec.formula.family
    assert family is not None
    block = int(names[family.params["block_size"]])
    order = family.choice("order", names) if "order" in family.params else DEPTH_ORDERS[0]
    move = _space_to_depth if family.params["mode"] == "space_to_depth" else _depth_to_space
    return move(x, block, order)


def _per_sequence(spec: OperatorSpec, inputs: dict[str, np.ndarray], tensor: str, shape: tuple[int, ...]) -> np.ndarray:
    """The family's per-sequence tensor `tensor` (size 1 along the axis) as int64, broadcast to
    `shape`: an unsigned value beyond INT64's range is saturated, which keeps it beyond any axis."""
    var = next(v for v, t in spec.formula.inputs.items() if t == tensor)  # the inputs are keyed by variable
    raw = np.asarray(inputs[var])
    wide = np.minimum(raw, np.uint64(_INT64_MAX)).astype(np.int64) if raw.dtype == np.uint64 else raw.astype(np.int64)
    return np.broadcast_to(wide.reshape(raw.shape), shape)


def _along(axis: int, size: int, ndim: int) -> np.ndarray:
    """The positions 0 .. size - 1 along `axis`, shaped to broadcast against an ndim-D tensor."""
    return np.arange(size).reshape([size if d == axis else 1 for d in range(ndim)])


def _one_hot(spec: OperatorSpec, inputs: dict[str, np.ndarray], axis: int,
             out_shape: tuple[int, ...]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """values[1] where the position along `axis` is the sequence's index (a negative one counted
    from the end), values[0] elsewhere; with the per-element variables `index`, `axis_size` and `on`
    (which of the two values the element gets: what an expectation about either reads)."""
    family = spec.formula.family
    assert family is not None
    index = _per_sequence(spec, inputs, family.params["indices"], out_shape)
    size = out_shape[axis]
    values_var = next(v for v, t in spec.formula.inputs.items() if t == family.params["values"])
    values = np.asarray(inputs[values_var]).reshape(-1)
    position = _along(axis, size, len(out_shape))
    hot = np.where(index < 0, index + size, index) == position  # outside [-size, size): no position matches
    result = np.where(hot, values[1:2], values[0:1])  # arrays, not scalars: the bits are copied as they are
    return result, {"index": index, "axis_size": np.full(out_shape, size, dtype=np.int64), "on": hot.astype(np.int64)}


def _reverse_prefix(spec: OperatorSpec, x: np.ndarray, inputs: dict[str, np.ndarray],
                    axis: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each sequence's first min(length, size) elements along `axis` reversed, the rest copied;
    with the per-element variables `length` (as held) and `axis_size`."""
    family = spec.formula.family
    assert family is not None
    length = _per_sequence(spec, inputs, family.params["lengths"], x.shape)
    size = x.shape[axis]
    reversed_part = np.minimum(length, size)
    position = _along(axis, size, x.ndim)
    source = np.where(position < reversed_part, reversed_part - 1 - position, position)
    result = np.take_along_axis(x, np.broadcast_to(source, x.shape), axis=axis)
    return result, {"length": length, "axis_size": np.full(x.shape, size, dtype=np.int64)}


def _unspecified(spec: OperatorSpec, descriptor: Descriptor, var: str, result: np.ndarray,
                 element: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The spec's unspecified rules over the output's values (each output element is an input
    element or a constant), and the mode's element variables where it has them: a rule that reads
    only attributes covers the whole output."""
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: result, **(element or {})}, descriptor.attributes)
    out_type = types.get(spec.formula.output)
    masks = {}
    for rule in spec.unspecified:
        if out_type is not None and not rule.concerns(spec.formula.output, out_type):
            continue  # its applies_to names other types
        hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), result.shape)
        if hit.any():
            masks[rule.id] = hit
    return masks


def _join(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], axis: int) -> np.ndarray:
    """The present items of the family's tensor array, concatenated along `axis` (the plug-in's
    inputs are keyed by formula variable: each item's variable reads it)."""
    family = spec.formula.family
    assert family is not None
    by_tensor = {tensor: var for var, tensor in spec.formula.inputs.items()}
    items = [inputs[by_tensor[name]] for name in spec.tensor_arrays[family.params["items"]]
             if descriptor.tensors.get(name) is not None]
    return np.concatenate(items, axis=axis)


def _split(spec: OperatorSpec, descriptor: Descriptor, x: np.ndarray, axis: int) -> dict[str, np.ndarray]:
    """The input cut along `axis` into the present items of the family's output tensor array."""
    family = spec.formula.family
    assert family is not None
    out, start = {}, 0
    for name in spec.tensor_arrays[family.params["items"]]:
        desc = descriptor.tensors.get(name)
        if desc is None:
            break
        count = desc.sizes[axis]
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + count)
        out[name] = np.ascontiguousarray(x[tuple(index)]).astype(spec.catalog.dtype(desc.data_type).numpy, copy=False)
        start += count
    return out


def _nonzero_rows(x: np.ndarray, rows: int, width: int) -> tuple[int, np.ndarray]:
    """(count, {rows, width} coordinates): the non-zero elements' coordinates, ascending by element
    index, over the last `width` dims (zeros in front where width exceeds the rank); 0 past the count."""
    with np.errstate(invalid="ignore"):
        found = np.argwhere(x != 0)  # row-major, hence ascending element index; -0 == 0, NaN != 0
    out = np.zeros((rows, width), dtype=np.int64)
    kept = found[:, max(0, x.ndim - width):]
    out[:len(found), width - kept.shape[1]:] = kept
    return len(found), out


def _coordinates_of_nonzero(spec: OperatorSpec, descriptor: Descriptor, var: str, x: np.ndarray) -> FamilyResult:
    """Mode coordinates_of_nonzero: the count and the coordinates outputs, with the fp32 flush alternative."""
    family = spec.formula.family
    assert family is not None
    count_name, coords_name = family.params["count"], family.params["coordinates"]
    count_desc, coords_desc = descriptor.tensors[count_name], descriptor.tensors[coords_name]
    assert count_desc is not None and coords_desc is not None
    sizes = tuple(coords_desc.sizes)
    rows, width = (sizes[-2], sizes[-1]) if len(sizes) >= 2 else (1, sizes[-1])
    count_type = spec.catalog.dtype(count_desc.data_type).numpy
    coords_type = spec.catalog.dtype(coords_desc.data_type).numpy

    def outputs(values: np.ndarray) -> tuple[int, dict[str, np.ndarray]]:
        count, found = _nonzero_rows(values, rows, width)
        return count, {count_name: np.full(tuple(count_desc.sizes), count).astype(count_type),
                       coords_name: found.reshape(sizes).astype(coords_type)}

    count, exact = outputs(x)
    result = FamilyResult(exact)
    fewest = count
    flushed = flush_f32_denormals(x)
    if flushed is not None:
        flushed_count, alternative = outputs(flushed)
        fewest = min(count, flushed_count)
        result.alternatives = {name: [("fp32_input_flush", value)] for name, value in alternative.items()}
    row = np.broadcast_to(np.arange(rows).reshape(-1, 1), (rows, width)).reshape(sizes)
    element = {coords_name: {"row": row, "count": np.full(sizes, fewest, dtype=np.int64)},
               count_name: {"row": np.full(tuple(count_desc.sizes), -1, dtype=np.int64),  # no row: never past the count
                            "count": np.full(tuple(count_desc.sizes), fewest, dtype=np.int64)}}
    for name, values in exact.items():
        result.unspecified[name] = _unspecified(spec, descriptor, var, values, element[name])
    result.summaries.update(element[coords_name])
    return result


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    if family.params["mode"] == "coordinates_of_nonzero":  # two outputs of positions, not moved values
        var = next(iter(spec.formula.inputs))
        return _coordinates_of_nonzero(spec, descriptor, var, np.asarray(inputs[var]))
    names = attribute_names(spec, descriptor.attributes)
    var = next(iter(spec.formula.inputs))
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    x = inputs[var]
    out_type = spec.catalog.dtype(out_desc.data_type)
    element: dict[str, np.ndarray] = {}  # the mode's element variables, per output element
    if family.params["mode"] == "split":  # several outputs: each item's values (the formula's variable per item)
        parts = _split(spec, descriptor, x, int(names[family.params["axis"]]))
        split_result = FamilyResult(parts)
        for name, part in parts.items():
            split_result.unspecified[name] = _unspecified(spec, descriptor, var, part)
        return split_result  # no per-element variable: each item has its own shape (the values are the expected ones)
    if family.params["mode"] == "pad":
        result = _pad(spec, descriptor, x, list(out_desc.sizes), out_type.numpy)
    elif family.params["mode"] == "join":
        result = _join(spec, descriptor, inputs, int(names[family.params["axis"]]))
    elif family.params["mode"] == "tile":
        result = _tile(x, [int(r) for r in names[family.params["repeats"]]])
    elif family.params["mode"] in ("space_to_depth", "depth_to_space"):
        result = _depth_space(spec, names, x)
    elif family.params["mode"] == "one_hot":
        result, element = _one_hot(spec, inputs, int(names[family.params["axis"]]), tuple(out_desc.sizes))
    elif family.params["mode"] == "reverse_prefix":
        result, element = _reverse_prefix(spec, x, inputs, int(names[family.params["axis"]]))
    else:
        offsets, sizes, strides = (list(names[family.params[k]]) for k in ("offsets", "sizes", "strides"))
        result = _strided_window(x, list(out_desc.sizes), offsets, sizes, strides)
    result = np.ascontiguousarray(result).astype(out_type.numpy, copy=False)
    family_result = FamilyResult({out_name: result})
    # the formula's variable per output element (the input element copied there, or the padding
    # value): what failure reports show beside a difference and expectation files' `when` reads
    family_result.summaries[var] = result
    family_result.summaries.update(element)  # one_hot's index, reverse_prefix's length, and the axis' size
    family_result.unspecified[out_name] = _unspecified(spec, descriptor, var, result, element)
    return family_result


PLUGIN = FamilyPlugin(DECLARATIONS["data_movement"], compute)
