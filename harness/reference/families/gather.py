"""The gather family: each output element is an input element that an index selects, bit for bit
(a data movement: D3D forbids altering moved data, so NaN payloads, signed zeros and fp32
denormals are copied as they are and the spec compares bitwise).

The spec names the parameters (harness.spec.families) and picks one of three modes, each the
shape of one DirectML desc, so that no operator is named here:

- `take` (the default): the `axis` field and the `index_dimensions` field, the number of
  trailing dims of `indices` that index (its leading dims are 1, which the spec's shape rules
  require). The result before the output's Sizes is input.take(indices, axis): the input's sizes
  before the axis, the index sizes, the input's sizes after it; the output's Sizes (the validator
  has checked them) hold the same elements in the same order, right-aligned (only leading 1s
  cropped or added), so it is reshaped.
- `elements`: `indices` has the input's rank and the output's Sizes;
  output[p] = input[p with p[axis] replaced by indices[p]] (numpy's take_along_axis).
- `nd`: the last `input_dimensions` dims of the input and the last
  `index_dimensions` dims of `indices` matter (the others are leading 1s); the first
  `batch_dimensions` of each (absent: 0) are shared batches; the last dim of `indices` is a tuple
  of t coordinates that picks, within its batch, the sub-block input[batch, c0, ..., c(t-1), ...].
  The result is {batch, the index dims between batch and tuple, the input's dims after the
  tuple's}, right-aligned into the output's Sizes (leading 1s added), so it is reshaped.

- `scatter_elements` and `scatter_nd`: the inverse moves. The output is a copy of the input whose
  elements that `elements` (or `nd`, without batches) would read for each index (tuple) are
  overwritten by the `updates` element (slice) at the index's position: output[p with p[axis]
  = indices[p]] = updates[p], or output[tuple, ...] = updates[tuple's position, ...]. Two writes
  to one element ("no guarantee of which last write wins") are the spec's to leave open: the
  plug-in counts, per output element, the different values written there beyond the first
  (`conflicting_writes`), for the spec's `unspecified` rule.
- `scatter_flat`: the inverse of a pooling's flat indices. The output starts as zeros (an element
  no index names stays 0), and each `input` element is written at the position its index names in
  the output taken as one contiguous row-major array (batch and channel included), `indices`
  sharing the input's Sizes; the output's Sizes are the spec's. Element variables as in the other
  scatter modes, `axis_size` being the output's element count.

A negative index counts from the end of the dimension it indexes. Which indices are valid is the
spec's to say, not the plug-in's: it gives the spec's `unspecified` rules, per output element,
the index that selected it (`index`) and the size of the dimension it indexes (`axis_size`) (its
element variables; in mode nd those of the tuple's first coordinate outside its dimension, so that
one rule `(index < -axis_size) | (index >= axis_size)` reads the same in every mode), and
reads an index outside [-axis_size, axis_size) as 0, so that the reference still has a value there
for the rule to mark.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import attribute_names
from harness.reference.families.result import FamilyPlugin, FamilyResult
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS, FamilySpec
from harness.spec.model import OperatorSpec

_INT64_MAX = np.iinfo(np.int64).max

# the scalar parameters each mode reads; the others must be absent (the declaration cannot say so:
# `mode` is optional there so that a spec without it keeps meaning `take`)
_MODE_PARAMS: dict[str, tuple[str, ...]] = {
    "take": ("axis", "index_dimensions"),
    "elements": ("axis",),
    "nd": ("input_dimensions", "index_dimensions"),
    "scatter_elements": ("axis",),
    "scatter_nd": ("input_dimensions", "index_dimensions"),
    "scatter_flat": (),
}


def _variable(spec: OperatorSpec, tensor: str) -> str:
    """The formula input variable that reads `tensor` (the plug-in's inputs are keyed by variable)."""
    return next(v for v, t in spec.formula.inputs.items() if t == tensor)


def _indices_as_int64(indices: np.ndarray) -> np.ndarray:
    """The index values as int64: an unsigned value beyond INT64's range is saturated (it is out of
    range of any axis either way)."""
    if indices.dtype == np.uint64:
        return np.minimum(indices, np.uint64(_INT64_MAX)).astype(np.int64)
    return indices.astype(np.int64)


def check_mode(family: FamilySpec) -> str:
    """The family's mode, its scalar parameters checked: a mode reads exactly the ones
    `_MODE_PARAMS` lists (batch_dimensions is nd's optional extra). A spec that names a parameter
    its mode ignores would otherwise be silently misread, so it is an error, raised on the first
    case the reference computes (the spec's worked examples, in tests/harness/test_reference_vectors.py)."""
    mode = str(family.params.get("mode", "take"))
    needs = _MODE_PARAMS[mode]
    if mode in ("scatter_elements", "scatter_nd") and "updates" not in family.params:
        raise ValueError(f"gather family, mode {mode}: needs updates")
    missing = [k for k in needs if k not in family.params]
    extra = [k for k in ("axis", "index_dimensions", "input_dimensions", "batch_dimensions")
             if k in family.params and k not in needs and not (mode == "nd" and k == "batch_dimensions")]
    if missing or extra:
        raise ValueError(f"gather family, mode {mode}: "
                         + (f"needs {', '.join(missing)}" if missing else "")
                         + ("; " if missing and extra else "")
                         + (f"takes no {', '.join(extra)}" if extra else ""))
    return mode


def _normalised(index: np.ndarray, size: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """(the position each index reads, whether it is inside [-size, size)): a negative index counts
    from the end; one outside reads position 0 (its element is the spec's to leave open)."""
    valid = (index >= -size) & (index < size)
    return np.where(valid, np.where(index < 0, index + size, index), 0), valid


def _take(x: np.ndarray, indices: np.ndarray, axis: int, index_dims: int,
          out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mode take: (picked, reshaped to out_shape; index per output element; axis size)."""
    axis_size = x.shape[axis]
    index_shape = indices.shape[indices.ndim - index_dims:] if index_dims else ()
    index = indices.reshape(index_shape)  # the leading dims are 1 (the spec's shape rule)
    position, _ = _normalised(index, axis_size)
    picked = np.take(x, position, axis=axis)
    # the index per output element: the index dims sit between the input's dims before and after the axis
    spread = index.reshape((1,) * axis + index_shape + (1,) * (x.ndim - axis - 1))
    index_per_element = np.broadcast_to(spread, picked.shape).reshape(out_shape)
    return np.ascontiguousarray(picked).reshape(out_shape), index_per_element, np.asarray(np.int64(axis_size))


def _elements(x: np.ndarray, indices: np.ndarray, axis: int,
              out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mode elements: indices has the output's Sizes and the input's on every dim but `axis` (the
    spec's shape rules), so each output element reads the input at its own coordinates with the
    axis coordinate replaced by its index."""
    axis_size = x.shape[axis]
    position, _ = _normalised(indices, axis_size)
    picked = np.take_along_axis(x, position, axis=axis)
    return picked.reshape(out_shape), indices.reshape(out_shape), np.asarray(np.int64(axis_size))


def _nd(x: np.ndarray, indices: np.ndarray, input_dims: int, index_dims: int, batch_dims: int,
        out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mode nd: the meaningful dims (the leading ones are 1 by the spec's rules: element 0 of each
    is read), the batches flattened, each tuple's coordinates as advanced indices into its batch's
    block. Per output element the first coordinate of its tuple outside its dimension (else the
    first coordinate) and that dimension's size, spread over the trailing input dims it copies."""
    xm = x[(0,) * (x.ndim - input_dims)]
    im = indices[(0,) * (indices.ndim - index_dims)]
    tuple_size = im.shape[-1]
    if not (batch_dims < im.ndim and batch_dims + tuple_size <= xm.ndim):
        raise ValueError(f"gather nd: {tuple_size}-coordinate tuples after {batch_dims} batch dims do not fit an "
                         f"input of {xm.ndim} meaningful dims (the spec's rules should have refused this descriptor)")
    batches = int(np.prod(im.shape[:batch_dims], dtype=np.int64))
    block = xm.reshape((batches,) + xm.shape[batch_dims:])  # {batch, tuple dims..., trailing...}
    coords = im.reshape(batches, -1, tuple_size)  # {batch, tuples, t}
    sizes = np.asarray(block.shape[1:1 + tuple_size], dtype=np.int64)
    position, valid = _normalised(coords, sizes)
    picked = block[(np.arange(batches)[:, None],) + tuple(position[..., k] for k in range(tuple_size))]
    first = np.argmax(~valid, axis=-1)[..., None]  # the first offending coordinate, 0 where none is
    index = np.take_along_axis(coords, first, axis=-1)[..., 0]
    size = sizes[first[..., 0]]
    trailing = picked.ndim - 2
    spread = picked.shape  # {batch, tuples, trailing...}

    def per_element(values: np.ndarray) -> np.ndarray:
        return np.broadcast_to(values.reshape(values.shape + (1,) * trailing), spread).reshape(out_shape)
    return np.ascontiguousarray(picked).reshape(out_shape), per_element(index), per_element(size)


def _unsigned_bits(values: np.ndarray) -> np.ndarray:
    """Each value's bit pattern as an unsigned integer of its width (for telling values apart
    bit for bit: NaN payloads and signed zeros differ, as a bitwise comparison sees them)."""
    return values.view(np.dtype(f"u{values.dtype.itemsize}"))


def _write(target: np.ndarray, flat_positions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Write `values` into `target` (contiguous) at the flat `flat_positions`; return, per element
    of `target`, how many different bit patterns were written there less one (0 where none or
    one). Which of several different writes lands is not the reference's to say: the count is
    what lets the spec leave those elements open."""
    assert target.flags.c_contiguous, "a strided target would be written through a copy"
    flat_target = target.reshape(-1)
    positions, written = flat_positions.reshape(-1), values.reshape(-1)
    flat_target[positions] = written
    bits = _unsigned_bits(np.ascontiguousarray(written)).astype(np.uint64)
    order = np.lexsort((bits, positions))
    sorted_positions, sorted_bits = positions[order], bits[order]
    new = np.ones(sorted_positions.size, dtype=bool)
    new[1:] = (sorted_positions[1:] != sorted_positions[:-1]) | (sorted_bits[1:] != sorted_bits[:-1])
    distinct = np.bincount(sorted_positions[new], minlength=flat_target.size)
    return np.maximum(distinct - 1, 0).reshape(target.shape)


def _scatter_facts(out_shape: tuple[int, ...], written_index: np.ndarray, indices: np.ndarray,
                   sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(`index`, `axis_size`) per output element of a scatter: the index that wrote it (0 where
    none did) with its dimension's size; where any index lies outside [-size, size), that index
    and its size in every element, since a write that goes astray may land on any element."""
    bad = (indices < -sizes) | (indices >= sizes)
    if bad.any():
        where = tuple(np.argwhere(bad)[0])
        size = np.broadcast_to(sizes, indices.shape)[where]
        return np.full(out_shape, indices[where], dtype=np.int64), np.full(out_shape, size, dtype=np.int64)
    first_size = int(np.reshape(sizes, -1)[0]) if np.size(sizes) else 1  # the dimension `index` indexes
    return written_index, np.full(out_shape, first_size, dtype=np.int64)


def _scatter_elements(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int,
                      out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mode scatter_elements: indices and updates share Sizes, the input's on every dim but
    `axis` (the spec's shape rules); updates[p] is written at p with p[axis] replaced by
    indices[p]. Indices outside the axis write nothing here (the spec leaves the output open)."""
    axis_size = x.shape[axis]
    position, valid = _normalised(indices, axis_size)
    coords: list[np.ndarray] = list(np.indices(indices.shape, sparse=False))
    coords[axis] = position
    flat = np.asarray(np.ravel_multi_index(tuple(c[valid] for c in coords), x.shape))
    out = np.array(x, order="C", copy=True)  # C order: _write writes through a flat view
    conflicts = _write(out, flat, updates[valid])
    written_index = np.zeros(x.shape, dtype=np.int64)
    written_index.reshape(-1)[flat] = indices[valid]
    index, size = _scatter_facts(x.shape, written_index, indices, np.asarray(np.int64(axis_size)))
    return out.reshape(out_shape), index.reshape(out_shape), size.reshape(out_shape), conflicts.reshape(out_shape)


def _scatter_nd(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, input_dims: int, index_dims: int,
                out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mode scatter_nd: the meaningful dims (leading 1s dropped, as in nd); each tuple of t
    coordinates names a slice of the input's dims after its first t, and the updates hold one such
    slice per tuple, in the tuples' order. A tuple with a coordinate outside its dimension writes
    nothing here (the spec leaves the output open)."""
    xm = np.array(x[(0,) * (x.ndim - input_dims)], order="C", copy=True)  # C order: _write writes through a flat view
    im = indices[(0,) * (indices.ndim - index_dims)]
    tuple_size = im.shape[-1]
    if tuple_size > xm.ndim:
        raise ValueError(f"scatter nd: {tuple_size}-coordinate tuples do not fit an input of {xm.ndim} meaningful dims "
                         "(the spec's rules should have refused this descriptor)")
    coords = im.reshape(-1, tuple_size)
    sizes = np.asarray(xm.shape[:tuple_size], dtype=np.int64)
    position, valid = _normalised(coords, sizes)
    whole = valid.all(axis=-1)
    slice_len = int(np.prod(xm.shape[tuple_size:], dtype=np.int64))
    block = updates.reshape(coords.shape[0], slice_len)
    starts = np.asarray(np.ravel_multi_index(tuple(position[whole].T), xm.shape[:tuple_size]))  # a Size is >= 1: t >= 1
    flat = (starts[:, None] * slice_len + np.arange(slice_len)[None, :]).reshape(-1)
    conflicts = _write(xm, flat, block[whole])
    written_index = np.zeros(xm.shape, dtype=np.int64)
    written_index.reshape(-1)[flat] = np.repeat(coords[whole][:, 0], slice_len)  # each tuple's first coordinate
    index, size = _scatter_facts(xm.shape, written_index, coords, sizes)
    return xm.reshape(out_shape), index.reshape(out_shape), size.reshape(out_shape), conflicts.reshape(out_shape)


def _scatter_flat(x: np.ndarray, indices: np.ndarray,
                  out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mode scatter_flat: zeros of the output's shape, then x[p] written at the flat row-major
    position indices[p] (indices has x's Sizes). An index outside the output writes nothing here
    (the spec leaves the output open)."""
    total = int(np.prod(out_shape, dtype=np.int64))
    position, valid = _normalised(indices, total)
    out = np.zeros(out_shape, dtype=x.dtype)  # C order: _write writes through a flat view
    flat = position[valid]
    conflicts = _write(out, flat, x[valid])
    written_index = np.zeros(out_shape, dtype=np.int64)
    written_index.reshape(-1)[flat] = indices[valid]
    index, size = _scatter_facts(out_shape, written_index, indices, np.asarray(np.int64(total)))
    return out, index, size, conflicts


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    mode = check_mode(family)
    names = attribute_names(spec, descriptor.attributes)

    def scalar(key: str, default: int = 0) -> int:
        return int(names[family.params[key]]) if key in family.params else default
    x = np.asarray(inputs[_variable(spec, family.params["input"])])
    indices = _indices_as_int64(np.asarray(inputs[_variable(spec, family.params["indices"])]))
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    out_shape = tuple(out_desc.sizes)
    conflicts: np.ndarray | int = 0
    if mode == "scatter_flat":
        picked, index_per_element, axis_size, conflicts = _scatter_flat(x, indices, out_shape)
    elif mode.startswith("scatter_"):
        updates = np.asarray(inputs[_variable(spec, family.params["updates"])])
        if mode == "scatter_elements":
            picked, index_per_element, axis_size, conflicts = _scatter_elements(x, indices, updates, scalar("axis"), out_shape)
        else:
            picked, index_per_element, axis_size, conflicts = _scatter_nd(
                x, indices, updates, scalar("input_dimensions"), scalar("index_dimensions"), out_shape)
    elif mode == "take":
        picked, index_per_element, axis_size = _take(x, indices, scalar("axis"), scalar("index_dimensions"), out_shape)
    elif mode == "elements":
        picked, index_per_element, axis_size = _elements(x, indices, scalar("axis"), out_shape)
    else:
        picked, index_per_element, axis_size = _nd(x, indices, scalar("input_dimensions"), scalar("index_dimensions"),
                                                   scalar("batch_dimensions"), out_shape)
    result = picked.astype(spec.catalog.dtype(out_desc.data_type).numpy, copy=False)
    family_result = FamilyResult({out_name: result})
    var = _variable(spec, family.params["input"])
    family_result.summaries[var] = result  # the value copied there: what expectation files' `when` reads
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, {var: result, "index": index_per_element, "axis_size": axis_size,
                                        "conflicting_writes": np.asarray(conflicts)}, descriptor.attributes)
    masks = {}
    for rule in spec.unspecified:
        if not rule.concerns(out_name, out_desc.data_type):
            continue
        hit = np.broadcast_to(np.asarray(rule.when.evaluate(ctx), dtype=bool), out_shape)
        if hit.any():
            masks[rule.id] = hit
    family_result.unspecified[out_name] = masks
    return family_result


PLUGIN = FamilyPlugin(DECLARATIONS["gather"], compute)
