"""The matmul family: each output element is an element-wise epilogue of one dot product.

Per output element {batch..., m, n} the plug-in computes `ab`, the dot product of row m of op(a)
and column n of op(b) over the shared dimension K, where op() transposes the last two dims when
the spec's `transpose_a` / `transpose_b` expression holds; leading (batch) dims pair up one to one
(the spec's constraints make them equal). Where the spec names zero point inputs (`a_zero_point`,
`b_zero_point`: a quantized product), they are subtracted from a and b before the product, exactly
(integers). The spec's expression then gives the output from `ab`,
its other inputs and the attributes (for example `Alpha * ab + Beta * c`); a fused activation is
composed over that expression by harness.spec.fused exactly as for an element-wise operator, so
nothing operator-specific lives here.

Exactness. Every product of two FLOAT32 (or FLOAT16) values is exact in float64 (48 significant
bits at most), so the float64 dot product is within K * 2^-53 * sum|a_k b_k| of the exact one: far
inside any bound a spec can state for FLOAT32 or FLOAT16 outputs. IEEE cases stay IEEE (a NaN, or
inf * 0, gives NaN; an infinity an infinity).

Precision model. A conforming device may add the K products in any order and round each step
within D3D's bounds (and flush fp32 denormal factors, products and partial sums); the spec states
how far from the exact `ab` that can take it (`bounds.ab`, a formula over the family's bound variables, the
reduce family's mechanism: harness.reference.families.evaluate_bound). The judge then evaluates
the spec's expression under the element-wise precision model with `ab` anywhere within that bound
(FamilyResult.epilogue): Alpha, Beta, C and the activation are rounded, flushed and computed in
FLOAT32 for FLOAT16 by the same rules as every element-wise operator's formula.
"""
from __future__ import annotations

import numpy as np

from harness.model.descriptor import Descriptor
from harness.model.facts import expression_scope
from harness.reference.families.result import (FamilyPlugin, FamilyResult, evaluate_bound, flush_f32_denormals, output_rule_masks,
                                               type_bound_variables)
from harness.reference.rounding import TRANSCENDENTAL_WINDOW, round_formula_near_midpoints
from harness.spec.context import formula_context
from harness.spec.families import DECLARATIONS
from harness.spec.model import OperatorSpec


def _operand(spec: OperatorSpec, inputs: dict[str, np.ndarray], tensor: str) -> np.ndarray:
    """The formula input variable that reads `tensor`, as float64 (the family reads a and b by field)."""
    var = next(v for v, t in spec.formula.inputs.items() if t == tensor)
    with np.errstate(invalid="ignore"):
        return np.asarray(inputs[var]).astype(np.float64)


def _matrices(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray],
              flush: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """op(a) as {batch..., M, K} and op(b) as {batch..., K, N}, float64 (`flush`: fp32 denormals
    read as zeros of their sign, as a D3D device may read them)."""
    family = spec.formula.family
    assert family is not None
    names, facts = expression_scope(spec, descriptor)
    if flush:
        inputs = {var: _flushed(value) for var, value in inputs.items()}
    a = _less_zero_point(_operand(spec, inputs, family.params["a"]), spec, inputs, family.params.get("a_zero_point"))
    b = _less_zero_point(_operand(spec, inputs, family.params["b"]), spec, inputs, family.params.get("b_zero_point"))
    if family.expression("transpose_a").evaluate(names, facts):  # type: ignore[union-attr]
        a = np.swapaxes(a, -1, -2)
    if family.expression("transpose_b").evaluate(names, facts):  # type: ignore[union-attr]
        b = np.swapaxes(b, -1, -2)
    return a, b


def _less_zero_point(x: np.ndarray, spec: OperatorSpec, inputs: dict[str, np.ndarray], tensor: object) -> np.ndarray:
    """x less its zero point (the family's `a_zero_point` / `b_zero_point` input field, None: none), before any
    transpose: a quantized product subtracts the zero points from the integers before accumulating. The zero
    point broadcasts against x as stored, right-aligned (a per-row {1, 1, M, 1} or per-column {1, 1, 1, N}
    against {batch..., M, K} or {batch..., K, N}); size-1 leading dims beyond x's are dropped, so a
    4-D zero point serves a 2-D operand. An absent zero point tensor is the spec's absent value (a scalar)."""
    if tensor is None:
        return x
    zp = _to_rank(_operand(spec, inputs, str(tensor)), x.ndim)
    with np.errstate(invalid="ignore"):
        return x - zp


def _to_rank(x: np.ndarray, rank: int) -> np.ndarray:
    """`x` less the size-1 leading dims beyond `rank`: a broadcast operand (a quantized product's
    scale or zero point) may hold more dims than what it meets, all of them leading 1s."""
    while x.ndim > rank and x.shape[0] == 1:
        x = x[0]
    return x


def _flushed(x: np.ndarray) -> np.ndarray:
    flushed = flush_f32_denormals(np.asarray(x))
    return x if flushed is None else flushed


def _dot_products(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ab, sum|a_k b_k| over finite factors, sum |a_k| + |b_k| over finite factors) per {batch..., m, n}."""
    with np.errstate(all="ignore"):
        exact = np.matmul(a, b)
        fa, fb = np.where(np.isfinite(a), np.abs(a), 0.0), np.where(np.isfinite(b), np.abs(b), 0.0)
        sum_abs = np.matmul(fa, fb)
        sum_inputs = fa.sum(axis=-1)[..., :, None] + fb.sum(axis=-2)[..., None, :]
    return exact, sum_abs, sum_inputs


def compute(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray]) -> FamilyResult:
    family = spec.formula.family
    assert family is not None
    a, b = _matrices(spec, descriptor, inputs)
    exact, sum_abs, sum_inputs = _dot_products(a, b)
    # fp32 denormal factors flushed to zero (D3D may read any fp32 input so): the dot product over
    # the flushed factors is a legal alternative of `ab` (see dot_epilogue)
    fa, fb = _matrices(spec, descriptor, inputs, flush=True)
    flushed = None
    if not (np.array_equal(fa, a, equal_nan=True) and np.array_equal(fb, b, equal_nan=True)):
        with np.errstate(all="ignore"):
            flushed = np.matmul(fa, fb)
    operands = tuple(family.params[p] for p in ("a", "b", "a_zero_point", "b_zero_point") if p in family.params)
    with np.errstate(invalid="ignore"):  # the largest finite |factor| of each row of op(a) and column of op(b)
        max_a = np.where(np.isfinite(a), np.abs(a), 0.0).max(axis=-1, initial=0.0)[..., :, None]
        max_b = np.where(np.isfinite(b), np.abs(b), 0.0).max(axis=-2, initial=0.0)[..., None, :]
    facts = {"sum_abs": sum_abs, "max_abs_a": max_a, "max_abs_b": max_b}
    return dot_epilogue(spec, descriptor, inputs, "ab", operands,
                        exact, sum_abs, sum_inputs, a.shape[-1], flushed, facts)


def dot_epilogue(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, np.ndarray], variable: str,
                 operands: tuple[str, ...], exact: np.ndarray, sum_abs: np.ndarray, sum_inputs: np.ndarray,
                 terms: int, flushed: np.ndarray | None, facts: dict[str, np.ndarray] | None = None) -> FamilyResult:
    """The FamilyResult of a family whose output element is the spec's expression over one exact dot
    product per output element, `variable` (matmul's `ab`, the window family's `xw`), shared so that
    every such family is judged alike: `exact`, `sum_abs` (sum |a_k b_k|) and `sum_inputs` (sum
    |a_k| + |b_k|) broadcast to the output's Sizes; `terms` is the bound's K; `flushed` the dot
    product over fp32-flushed factors where it differs (None: no denormal factor). `operands` are
    the tensors read through the dot product only; `facts` the family's element variables
    (the family's element_variables (harness.spec.families)) for the spec's unspecified rules, per output element."""
    family = spec.formula.family
    assert family is not None
    out_name = spec.formula.output
    out_desc = descriptor.tensors[out_name]
    assert out_desc is not None
    out_type = spec.catalog.dtype(out_desc.data_type)
    shape = tuple(out_desc.sizes)
    exact = np.broadcast_to(exact, shape)

    # the expression's other inputs (C, a bias: broadcast to the output's Sizes, or their absent value)
    variables: dict[str, object] = {}
    for var, tensor in spec.formula.inputs.items():
        if tensor in operands:
            continue  # read through the dot product only
        variables[var] = np.broadcast_to(_to_rank(np.asarray(inputs[var]), len(shape)), shape) if np.ndim(inputs[var]) else inputs[var]
    variables[variable] = exact
    variables.update({name: np.broadcast_to(value, shape) for name, value in (facts or {}).items()})
    types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
    ctx = formula_context(spec, types, variables, descriptor.attributes)
    with np.errstate(all="ignore"):
        value = np.broadcast_to(np.asarray(spec.formula.expression.evaluate(ctx), dtype=np.float64), shape)
        output = value.astype(out_type.numpy)
    if spec.formula.expression.transcendental:  # a fused activation's exp: the same bits on every CPU
        round_formula_near_midpoints(spec.formula.expression, ctx.variables, value, output, TRANSCENDENTAL_WINDOW)

    result = FamilyResult({out_name: output})
    # fp32 denormal factors flushed to zero (D3D may read any fp32 input so): the dot product over
    # the flushed factors is a legal alternative, judged through the epilogue like the dot product
    # itself (the expression's other terms, the fused activation and the unspecified rules after
    # it). The bound's `tiny * sum_inputs` covers what a flush moves a finite product; this covers
    # an infinite factor met by a flushed denormal (inf * 1e-39 is inf, inf * 0 is NaN, which a
    # fused HARD_SIGMOID's min/max then meets: seen on an NVIDIA H100).
    if flushed is not None:
        result.epilogue_alternatives[out_name] = [("fp32_input_flush", {variable: np.broadcast_to(flushed, shape)})]
    result.summaries[variable] = exact
    bound = family.bound(variable)
    spread = None
    if bound is not None and out_type.is_float:
        bound_variables: dict[str, object] = {**type_bound_variables(out_type.numpy), "K": np.float64(terms), "exact": exact,
                                              "sum_abs": np.broadcast_to(sum_abs, shape),
                                              "sum_inputs": np.broadcast_to(sum_inputs, shape)}
        spread = evaluate_bound(bound.atol, bound_variables, shape, np.isnan(exact))
        result.summaries["bound"] = spread
    result.epilogue[out_name] = {variable: (exact, spread)}
    result.contexts[out_name] = ctx

    # element-wise over the output's elements, with the family's variables and the inputs
    result.unspecified[out_name] = output_rule_masks(spec, out_name, out_type, ctx, shape)
    return result


PLUGIN = FamilyPlugin(DECLARATIONS["matmul"], compute)
