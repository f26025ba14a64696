"""The reference semantics of an operator: its spec formula evaluated with NumPy.

`compute_outputs` gives the correctly rounded value of the formula for the output type: the
formula is evaluated in float64 (integers in int64/uint64), and elements whose float64 result lies
exactly on a rounding midpoint of the output type are re-evaluated with exact fractions.
`expected_for` adds what the diff needs: where the docs leave the result unspecified, the rounding
ties, the absolute slack of the comparison, and the results a conforming D3D device may return
(the precision model, `harness.reference.legal`).
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace

import numpy as np

from harness.spec.catalog import DataType
from harness.model.descriptor import Case, Descriptor
from harness.spec.context import attribute_values, formula_context, item_data_type
from harness.spec.expr import EvalContext
from harness.model.blocks import spread_blocks
from harness.model.layout import read_tensor
from harness.reference.facts import ElementFacts
from harness.reference.rounding import TRANSCENDENTAL_WINDOW, canonical_nans, float_to_integer, round_formula_near_midpoints
from harness.spec.fused import with_fused_activations
from harness.spec.model import OperatorSpec, struct_variables



LEGAL_BLOCK = 1 << 20  # elements per evaluation of the precision model


class Expected:
    """The reference result of one case, with what the comparison needs computed on demand.

    The outputs are computed at once; the unspecified masks, tie masks, absolute slack and the
    precision model's legal results are computed only when a backend's output differs from the
    reference bit for bit (the common passing case never pays for them), and then only for the
    elements that differ (`flat_index`).
    """

    def __init__(self, spec: OperatorSpec, case: Case, outputs: dict[str, np.ndarray],
                 variables: Mapping[str, np.ndarray | int], ctx: EvalContext) -> None:
        self.spec, self.case = spec, case
        self.outputs = outputs
        self.variables = variables
        self._ctx = ctx
        self.unspecified_reasons: dict[str, list[str]] = {}

    def _shape(self, name: str) -> tuple[int, ...]:
        return self.outputs[name].shape

    @property
    def context(self) -> EvalContext:
        """The context the formula was evaluated in (inputs, attributes, enum members, constants):
        what expectation files' `when` expressions see."""
        return self._ctx

    def _out_type(self, name: str) -> str:
        desc = self.case.descriptor.tensors[name]
        assert desc is not None
        return desc.data_type

    def _subset_context(self, name: str, flat_index: np.ndarray | None) -> EvalContext:
        """The evaluation context restricted to the elements at `flat_index` (all when None).

        Every formula is elementwise, so a comparison expression evaluated on the gathered
        operands gives the same values as evaluating it everywhere and then indexing; the diff
        asks only about the elements that differ bit for bit, usually few of 2^20.
        """
        if flat_index is None:
            return self._ctx
        shape = self._shape(name)
        coords = np.unravel_index(flat_index, shape)
        gathered = {}
        for var, value in self._ctx.variables.items():
            arr = np.asarray(value)
            gathered[var] = np.broadcast_to(arr, shape)[coords] if arr.ndim else value
        return replace(self._ctx, variables=gathered)

    def _mask(self, name: str, formula, dtype, flat_index: np.ndarray | None) -> np.ndarray:
        length = self._shape(name) if flat_index is None else flat_index.shape
        return np.broadcast_to(np.asarray(formula.evaluate(self._subset_context(name, flat_index)), dtype=dtype), length)

    def unspecified(self, name: str, flat_index: np.ndarray | None = None) -> np.ndarray:
        """Where the docs leave the result open: over the logical shape, or over `flat_index`
        (the rules met are kept in `unspecified_reasons[name]`, for a reader of this case)."""
        mask, reasons = self.unspecified_rules(name, flat_index)
        self.unspecified_reasons[name] = reasons
        return mask

    def unspecified_rules(self, name: str, flat_index: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
        """Where the docs leave the result open, and the rules met there (changes nothing)."""
        out_type = self._out_type(name)
        length = self._shape(name) if flat_index is None else flat_index.shape
        mask = np.zeros(length, dtype=bool)
        reasons: list[str] = []
        for rule in self.spec.unspecified:
            if rule.handled_by == "comparison" or not rule.concerns(name, out_type):
                continue
            hit = self._mask(name, rule.when, bool, flat_index)
            if hit.any():
                reasons.append(rule.id)
                mask = mask | hit
        return mask, reasons

    def element_facts(self, name: str, index: np.ndarray, actual: np.ndarray) -> ElementFacts:
        """Everything the judge needs of the reference about output `name` at the flat elements
        `index`, where the backend returned `actual`: one call, plain data (harness.reference.facts)."""
        notes: list[str] = []
        judged = self.legal(name, index, actual, notes)
        legal = judged[0] if judged is not None else np.zeros(index.shape, dtype=bool)
        tags = judged[1] if judged is not None else np.zeros(index.shape, dtype=np.uint16)
        unspecified, reasons = self.unspecified_rules(name, index)
        reachable: list[tuple[str, np.ndarray]] = []
        rest = np.flatnonzero(~legal & ~unspecified)
        if rest.size:
            hits: list[tuple[str, np.ndarray]] = []
            self.legal_unspecified(name, index[rest], hits)
            for reason, hit in hits:
                over_index = np.zeros(index.shape, dtype=bool)
                over_index[rest[hit]] = True
                reachable.append((reason, over_index))
        return ElementFacts(index=index, atol=self.atol(name, index), legal=legal, legal_tags=tags,
                            model_applies=judged is not None, legal_note=notes[0] if notes else None,
                            ties=self.ties(name, index), unspecified=unspecified, unspecified_reasons=tuple(reasons),
                            reachable=tuple(reachable), bound_share=self._bound_share(name, index, actual))

    def _bound_share(self, name: str, index: np.ndarray, actual: np.ndarray) -> np.ndarray | None:
        """|actual - exact| / bound at `index` where the family states an error bound for `name`."""
        family = getattr(self, "family", None)
        if family is None or name not in family.bounds:
            return None
        exact, bound = (np.asarray(a).reshape(-1)[index].astype(np.float64) for a in family.bounds[name])
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            got = np.asarray(actual).astype(np.float64)
            usable = np.isfinite(bound) & (bound > 0) & np.isfinite(exact) & np.isfinite(got)
            return np.where(usable, np.abs(got - exact) / np.where(usable, bound, 1.0), np.nan)

    def _comparison_array(self, name: str, which: str, dtype, flat_index: np.ndarray | None) -> np.ndarray | None:
        """The comparison's `ties` or `atol` expression over the output's elements (or a subset)."""
        formula = getattr(self.spec.comparison_for(self._out_type(name)), which)
        if formula is None:
            return None
        return self._mask(name, formula, dtype, flat_index)

    def ties(self, name: str, flat_index: np.ndarray | None = None) -> np.ndarray | None:
        return self._comparison_array(name, "ties", bool, flat_index)

    def atol(self, name: str, flat_index: np.ndarray | None = None) -> np.ndarray | None:
        return self._comparison_array(name, "atol", np.float64, flat_index)

    # --- the precision model (harness.reference.legal) -------------------------------------------
    def _legal_inputs(self, name: str, flat_index: np.ndarray):
        """Operands, context and tensor types for the model evaluator, at `flat_index`; None when the
        formula works on raw bits or reads no float tensor (then exact is the only legal result)."""
        from harness.reference.legal import Operand, compute_types
        spec, descriptor = self.spec, self.case.descriptor
        if spec.formula.operands == "raw_bits":
            return None
        tensor_types = [t.data_type for t in descriptor.tensors.values() if t is not None]
        if not compute_types(spec.catalog.arithmetic, tensor_types):
            return None
        ctx = self._subset_context(name, flat_index)
        members = struct_variables([f for f in spec.attribute_fields if f.name in spec.formula.attributes])
        operands: dict[str, Operand] = {}
        for var, value in ctx.variables.items():
            tensor = spec.formula.inputs.get(var)
            if tensor is not None and (tensor_desc := descriptor.tensors.get(tensor)) is not None:
                operands[var] = Operand(np.asarray(value), "input", tensor_desc.data_type)
            elif members.get(var):  # a struct member: a FLOAT state, like a FLOAT attribute
                operands[var] = Operand(np.asarray(value), "attribute", "FLOAT32")
            elif var in spec.formula.items:  # an array attribute's item: a state too
                operands[var] = Operand(np.asarray(value), "attribute", item_data_type(spec, var))
            elif var in spec.formula.attributes:
                is_float_field = spec.field(var).c_type == "FLOAT"
                operands[var] = Operand(np.asarray(value), "attribute", "FLOAT32" if is_float_field else None)
            else:
                operands[var] = Operand(np.asarray(value), "constant", None)
        return operands, ctx, tensor_types

    def legal(self, name: str, flat_index: np.ndarray, actual: np.ndarray,
              notes: list[str] | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Which of the backend's values at `flat_index` a conforming device may return, and the
        liberty tags each needed; None where the model does not apply (see `_legal_inputs`) or
        has no rule for the formula (`notes` then gets why). Evaluated in blocks of
        LEGAL_BLOCK elements, so that a sweep whose every element differs (a GPU flushing all 2^23
        fp32 denormals of a chunk) stays within a few hundred MB."""
        if flat_index.size > LEGAL_BLOCK:
            blocks = [self.legal(name, flat_index[i:i + LEGAL_BLOCK], np.asarray(actual)[i:i + LEGAL_BLOCK], notes)
                      for i in range(0, flat_index.size, LEGAL_BLOCK)]
            if any(b is None for b in blocks):
                return None
            found = [b for b in blocks if b is not None]  # every block
            return np.concatenate([b[0] for b in found]), np.concatenate([b[1] for b in found])
        from harness.reference.legal import ModelUnsupported, contains, contains_integers, legal_values
        inputs = self._legal_inputs(name, flat_index)
        if inputs is None:
            return None
        operands, ctx, tensor_types = inputs
        try:
            parts = legal_values(self.spec.catalog.arithmetic, self.spec.for_output(name).formula.expression, operands,
                                 int(flat_index.size), ctx, self._out_type(name), tensor_types)
        except ModelUnsupported as exc:
            if notes is not None:
                notes.append(str(exc))
            return None
        out_dtype = self.spec.catalog.dtype(self._out_type(name))
        if not out_dtype.is_float:
            return contains_integers(parts, np.asarray(actual).astype(out_dtype.numpy), out_dtype.numpy)
        with np.errstate(invalid="ignore"):
            actual64 = np.asarray(actual).astype(np.float64)
        return contains(parts, actual64)

    def legal_unspecified(self, name: str, flat_index: np.ndarray,
                          hits: list[tuple[str, np.ndarray]] | None = None) -> tuple[np.ndarray, list[str]]:
        """Where an `unspecified` rule may hold on some legal evaluation (a liberty can turn a defined
        element into an unspecified one: a flushed denormal times INF is NaN), with the reasons
        (and, into `hits`, each reason with the elements it holds for)."""
        mask = np.zeros(flat_index.shape, dtype=bool)
        reasons: list[str] = []
        inputs = self._legal_inputs(name, flat_index)
        if inputs is None:
            return mask, reasons
        operands, ctx, tensor_types = inputs
        unspecified_under_model(self.spec, self._out_type(name), operands, ctx, tensor_types, int(flat_index.size), mask, reasons,
                                output=name, hits=hits)
        return mask, reasons


def unspecified_under_model(spec: OperatorSpec, out_type: str, operands: dict, ctx: EvalContext, tensor_types: list[str],
                            n: int, mask: np.ndarray, reasons: list[str], liberty: str | None = None,
                            output: str | None = None, hits: list[tuple[str, np.ndarray]] | None = None) -> None:
    """Mark in `mask` (in place) the elements where some `unspecified` rule of `spec` may hold on a
    legal evaluation of its condition over `operands`, adding each rule's id to `reasons` with the
    liberties it needs (and `liberty`, the alternative the operands stand for)."""
    from harness.reference.legal import ModelUnsupported, legal_values, may_be_true
    model = spec.catalog.arithmetic
    for rule in spec.unspecified:
        if rule.handled_by == "comparison" or not rule.concerns(output or spec.formula.output, out_type):
            continue
        try:
            parts = legal_values(model, rule.when, operands, n, ctx, out_type, tensor_types, convert_output=False)
        except ModelUnsupported:
            continue
        hit, tags = may_be_true(parts)
        if hit.any():
            needed = sorted({name for t in np.unique(tags[hit]) for name in model.names(int(t))} | ({liberty} if liberty else set()))
            reasons.append(rule.id + (f" (under the precision model: {', '.join(needed)})" if needed else ""))
            if hits is not None:
                hits.append((reasons[-1], np.array(hit, dtype=bool)))
            mask |= hit


def _value_array(raw: np.ndarray, dtype: DataType, native: bool = False) -> np.ndarray:
    if native:
        return raw
    if dtype.is_float:
        with np.errstate(invalid="ignore"):  # signalling NaNs are quieted, as any float conversion does
            return raw.astype(np.float64)
    return raw.astype(np.uint64 if dtype.kind == "unsigned" and dtype.bits == 64 else np.int64)


def bind_inputs(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, bytes]) -> dict[str, np.ndarray | int]:
    """The formula's input variables as arrays (raw bits or values), absent inputs as their stated constant."""
    catalog = spec.catalog
    variables: dict[str, np.ndarray | int] = {}
    for var, tensor in spec.formula.inputs.items():
        desc = descriptor.tensors.get(tensor)
        if desc is None:
            absent = spec.formula.absent_inputs[var]
            variables[var] = absent if isinstance(absent, int) else np.asarray(absent)  # an int keeps UINT64 exact
            continue
        dtype = catalog.dtype(desc.data_type)
        if spec.formula.operands == "raw_bits":
            bits = read_tensor(inputs[tensor], desc, dtype).view(dtype.bits_numpy)
            value = bits & 0x0F if dtype.bits < 8 else bits  # a 4-bit type's bits are its nibble: 0..15
        else:
            native = spec.formula.expression.exact_in_any_precision
            value = _value_array(read_tensor(inputs[tensor], desc, dtype), dtype, native)
        if var in spec.formula.blocked:
            value = spread_blocks(value, tuple(descriptor.tensors[spec.formula.output].sizes))  # type: ignore[union-attr]
        variables[var] = value
    variables.update(attribute_values(spec, descriptor.attributes))
    return variables


def _context(spec: OperatorSpec, descriptor: Descriptor, variables: dict[str, np.ndarray | int]) -> EvalContext:
    catalog = spec.catalog
    out_desc = descriptor.tensors[spec.formula.output]
    assert out_desc is not None
    return formula_context(spec, {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}, variables,
                           descriptor.attributes, catalog.dtype(out_desc.data_type).numpy, out_desc.sizes)


def compute_outputs(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, bytes]) -> tuple[np.ndarray, dict[str, np.ndarray | int], EvalContext]:
    """The formula's result in the output data type (logical shape), the bound variables, and the context."""
    catalog = spec.catalog
    out_desc = descriptor.tensors[spec.formula.output]
    assert out_desc is not None
    out_type = catalog.dtype(out_desc.data_type)
    variables = bind_inputs(spec, descriptor, inputs)
    ctx = _context(spec, descriptor, variables)
    formula_ctx = ctx
    if spec.formula.expression.exact_in_any_precision:
        # operands are native (bind_inputs): selected literals may take the output's own type
        literal = out_type.bits_numpy if spec.formula.operands == "raw_bits" else out_type.numpy
        formula_ctx = replace(ctx, literal_dtype=literal)
    raw = np.asarray(spec.formula.expression.evaluate(formula_ctx))
    shape = tuple(out_desc.sizes)

    if raw.shape != shape:
        raw = np.ascontiguousarray(np.broadcast_to(raw, shape))
    if spec.formula.operands == "raw_bits":
        return raw.astype(out_type.bits_numpy, copy=False).view(out_type.numpy), variables, ctx
    if out_type.is_float:
        with np.errstate(all="ignore"):
            result = raw.astype(out_type.numpy)
        if not spec.formula.expression.exact_in_any_precision and raw.dtype == np.float64:
            window = TRANSCENDENTAL_WINDOW if spec.formula.expression.transcendental else 0
            round_formula_near_midpoints(spec.formula.expression, ctx.variables, raw, result, window)
        if not keeps_nan_payloads(spec, out_type.name):
            result = canonical_nans(result)
        return result, variables, ctx
    if raw.dtype.kind == "f":
        return float_to_integer(raw, out_type.numpy), variables, ctx
    with np.errstate(all="ignore"):
        return raw.astype(out_type.numpy), variables, ctx


def keeps_nan_payloads(spec: OperatorSpec, data_type: str) -> bool:
    """Whether the spec compares `data_type` outputs bit for bit (data movement: a NaN's payload is
    part of the result); otherwise a NaN in the reference is a computed one, written canonical."""
    return spec.comparison_for(data_type).kind == "bitwise"


def _compute_expected(spec: OperatorSpec, case: Case) -> Expected:
    spec = with_fused_activations(spec, case.descriptor)
    if spec.formula.family is not None:
        return FamilyExpected(spec, case)
    result, variables, ctx = compute_outputs(spec, case.descriptor, case.inputs)
    return Expected(spec, case, {spec.formula.output: result, **other_outputs(spec, case.descriptor, case.inputs)}, variables, ctx)


def other_outputs(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, bytes]) -> dict[str, np.ndarray]:
    """The formula's `other_outputs` (an optimizer's moments: the same names, another expression),
    each computed as compute_outputs computes the primary one; {} for a one-output formula."""
    return {name: compute_outputs(spec.for_output(name), descriptor, inputs)[0] for name in spec.formula.other_outputs}


def family_inputs(spec: OperatorSpec, descriptor: Descriptor, inputs: dict[str, bytes]) -> dict[str, np.ndarray]:
    """The formula's input variables as logical arrays in their own NumPy types (a family plug-in
    compares and indexes; it converts where its arithmetic needs to)."""
    out = {}
    for var, tensor in spec.formula.inputs.items():
        desc = descriptor.tensors.get(tensor)
        if desc is None:
            out[var] = np.asarray(spec.formula.absent_inputs[var])
        else:
            out[var] = _left_aligned(spec, descriptor, tensor, read_tensor(inputs[tensor], desc, spec.catalog.dtype(desc.data_type)))
    return out


def _left_aligned(spec: OperatorSpec, descriptor: Descriptor, tensor: str, value: np.ndarray) -> np.ndarray:
    """`value` at its shape rule's dimension count where the rule aligns left (a per-channel operand
    {1, C, 1, ...} read from its first dimension on, whatever its own count): trailing 1s dropped or
    added, so that a plug-in broadcasts it as NumPy does (right-aligned) against the tensors the
    rule measures it by. Any other value as it is."""
    rule = next((c for c in spec.shape_rules if c.tensors[0] == tensor and c.align == "left" and c.sizes is not None), None)
    if rule is None:
        return value
    from harness.model.facts import expression_scope
    want = rule.sizes.evaluate(*expression_scope(spec, descriptor))  # type: ignore[union-attr]
    if not isinstance(want, list):
        return value
    shape = list(value.shape)
    while len(shape) > len(want) and shape[-1] == 1:
        shape.pop()
    return value.reshape(shape + [1] * (len(want) - len(shape)))


class FamilyExpected(Expected):
    """The reference of an index-space operator, from its family plug-in
    (harness.reference.families): outputs, unspecified output elements and the legal alternatives
    under the precision model, all computed at once (they cost one more pass over the input)."""

    def __init__(self, spec: OperatorSpec, case: Case) -> None:
        from harness.reference.families import family_compute
        assert spec.formula.family is not None
        result = family_compute(spec.formula.family.name)(spec, case.descriptor, family_inputs(spec, case.descriptor, case.inputs))
        for name, values in result.outputs.items():  # a computed NaN is canonical; data movement keeps payloads
            desc = case.descriptor.tensors.get(name)
            if desc is not None and not keeps_nan_payloads(spec, desc.data_type):
                result.outputs[name] = canonical_nans(values)
        super().__init__(spec, case, result.outputs, result.summaries, EvalContext(variables=dict(result.summaries)))
        self.family = result
        # the context of each output's epilogue (its expression's variables per output element)
        self.family_context: dict[str, EvalContext] = dict(result.contexts)
        if spec.formula.output in self.family_context:  # expectation files' `when` read the epilogue's variables too
            ctx = self.family_context[spec.formula.output]
            self._ctx = replace(ctx, variables={**ctx.variables, **result.summaries})

    def _subset_context(self, name: str, flat_index: np.ndarray | None) -> EvalContext:
        raise NotImplementedError("a family operator's comparisons are given by its plug-in")

    def unspecified_rules(self, name: str, flat_index: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
        masks = self.family.unspecified.get(name, {})
        shape = self._shape(name)
        out = np.zeros(shape if flat_index is None else flat_index.shape, dtype=bool)
        reasons = []
        for rule, mask in masks.items():
            hit = mask if flat_index is None else mask.reshape(-1)[flat_index]
            if hit.any():
                reasons.append(rule)
                out = out | hit
        return out, reasons

    def ties(self, name: str, flat_index: np.ndarray | None = None) -> np.ndarray | None:
        return None

    def atol(self, name: str, flat_index: np.ndarray | None = None) -> np.ndarray | None:
        return None

    def legal(self, name: str, flat_index: np.ndarray, actual: np.ndarray,
              notes: list[str] | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """The plug-in's legal alternatives (equal values), then its error bound: a float result
        within the bound of the exact value, or anything where the bound is infinite (liberty
        `rounding`: the order and the rounding of the steps)."""
        from harness.spec.arithmetic import liberty_bit
        accepted = np.zeros(flat_index.shape, dtype=bool)
        tags = np.zeros(flat_index.shape, dtype=np.uint16)
        for liberty, values in self.family.alternatives.get(name, []):
            alternative, got = values.reshape(-1)[flat_index], np.asarray(actual)
            with np.errstate(invalid="ignore"):  # a NaN alternative (inf times a flushed denormal) admits NaN
                same = (alternative == got) | (np.isnan(alternative.astype(np.float64)) & np.isnan(got.astype(np.float64)))
            hit = ~accepted & same
            accepted |= hit
            tags[hit] |= liberty_bit(liberty)
        if name in self.family.epilogue:
            hit, hit_tags = self._epilogue_legal(name, flat_index, actual, notes)
            hit &= ~accepted
            accepted |= hit
            tags[hit] |= hit_tags[hit]
        if name in self.family.bounds:
            exact, bound = (a.reshape(-1)[flat_index] for a in self.family.bounds[name])
            with np.errstate(invalid="ignore", over="ignore"):
                got = np.asarray(actual).astype(np.float64)
                within = np.isinf(bound) | (np.isfinite(exact) & np.isfinite(got) & (np.abs(got - exact) <= bound))
            hit = ~accepted & within
            accepted |= hit
            tags[hit] |= liberty_bit("rounding")
        return accepted, tags

    def _epilogue_variants(self, name: str) -> list[tuple[str | None, dict[str, np.ndarray]]]:
        """The plug-in's computed values as they are (no liberty), then each legal alternative of
        them (FamilyResult.epilogue_alternatives: the dot product over fp32-flushed factors)."""
        return [(None, {})] + list(self.family.epilogue_alternatives.get(name, []))

    def _epilogue_operands(self, name: str, flat_index: np.ndarray, override: dict[str, np.ndarray] | None = None):
        """The precision model's operands of the output's epilogue at `flat_index`: the values the
        plug-in computed (FamilyResult.epilogue, or `override`'s alternative values) each widened by
        its bound, the inputs, attributes and constants as for an element-wise formula; with the
        context and the tensor types."""
        from harness.reference.legal import Operand
        spec, descriptor = self.spec, self.case.descriptor
        members = struct_variables([f for f in spec.attribute_fields if f.name in spec.formula.attributes])
        ctx = self.family_context[name]
        operands: dict[str, Operand] = {}
        for var, value in ctx.variables.items():
            arr = np.asarray((override or {}).get(var, value))
            picked = arr.reshape(-1)[flat_index] if arr.ndim else arr
            tensor = spec.formula.inputs.get(var)
            if var in self.family.epilogue[name]:
                spread = self.family.epilogue[name][var][1]
                operands[var] = Operand(picked, "constant", None, None if spread is None else spread.reshape(-1)[flat_index])
            elif tensor is not None and (tensor_desc := descriptor.tensors.get(tensor)) is not None:
                operands[var] = Operand(picked, "input", tensor_desc.data_type)
            elif members.get(var):
                operands[var] = Operand(picked, "attribute", "FLOAT32")
            elif var in spec.formula.attributes:
                operands[var] = Operand(picked, "attribute", "FLOAT32" if spec.field(var).c_type == "FLOAT" else None)
            else:
                operands[var] = Operand(picked, "constant", None)
        tensor_types = [t.data_type for t in descriptor.tensors.values() if t is not None]
        return operands, replace(ctx, variables={k: o.values for k, o in operands.items()}), tensor_types

    def _epilogue_legal(self, name: str, flat_index: np.ndarray, actual: np.ndarray,
                        notes: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The spec's expression under the precision model over the values the plug-in computed per
        output element, each anywhere within its bound (FamilyResult.epilogue): the element-wise
        model's rules for Alpha, Beta, C and a fused activation, as for any element-wise operator."""
        from harness.reference.legal import ModelUnsupported, contains, legal_values
        from harness.spec.arithmetic import liberty_bit
        accepted = np.zeros(flat_index.shape, dtype=bool)
        tags = np.zeros(flat_index.shape, dtype=np.uint16)
        for liberty, override in self._epilogue_variants(name):
            operands, ctx, tensor_types = self._epilogue_operands(name, flat_index, override)
            try:
                parts = legal_values(self.spec.catalog.arithmetic, self.spec.formula.expression, operands, int(flat_index.size),
                                     ctx, self._out_type(name), tensor_types)
            except ModelUnsupported as exc:
                if notes is not None:
                    notes.append(str(exc))
                continue
            with np.errstate(invalid="ignore"):
                hit, hit_tags = contains(parts, np.asarray(actual).astype(np.float64))
            hit &= ~accepted
            accepted |= hit
            tags[hit] |= hit_tags[hit] | (np.uint16(liberty_bit(liberty)) if liberty else np.uint16(0))
        return accepted, tags

    def legal_unspecified(self, name: str, flat_index: np.ndarray,
                          hits: list[tuple[str, np.ndarray]] | None = None) -> tuple[np.ndarray, list[str]]:
        """Where an `unspecified` rule of the epilogue may hold on some legal evaluation (the dot
        product anywhere within its bound, the precision model's liberties after it: an overflowed
        ab times a zero Alpha is NaN, which a fused activation's min/max may meet)."""
        mask = np.zeros(flat_index.shape, dtype=bool)
        reasons: list[str] = []
        if name not in self.family.epilogue:
            return mask, reasons
        for liberty, override in self._epilogue_variants(name):
            operands, ctx, tensor_types = self._epilogue_operands(name, flat_index, override)
            unspecified_under_model(self.spec, self._out_type(name), operands, ctx, tensor_types, int(flat_index.size),
                                    mask, reasons, liberty, output=name, hits=hits)
        return mask, reasons


class ReferenceMemo:
    """The reference results of the last few cases, so each case's reference is computed once.

    Several parties ask for the same case's reference: the diff of every backend that runs it, the
    NumPy backend (which is the reference), and the prefetch thread that starts it while a backend
    runs (`harness.reference.prefetch`). An entry is a Future, so a second asker waits for the first one's
    computation instead of repeating it. Keys are object identities checked through a weak
    reference; cases are treated as immutable once built (replacing a case's descriptor or inputs
    makes a new key).
    """

    def __init__(self, size: int = 2) -> None:  # small: an fp32 sweep chunk's Expected is ~300 MB
        self._size = size
        self._entries: OrderedDict[tuple, tuple[weakref.ref, Future]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, spec: OperatorSpec, case: Case) -> Expected:
        key = (id(spec), id(case), id(case.descriptor), id(case.inputs), case.feature_level)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is case:
                self._entries.move_to_end(key)
                future, owner = entry[1], False
            else:
                future, owner = Future(), True
                self._entries[key] = (weakref.ref(case), future)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        if owner:
            try:
                future.set_result(_compute_expected(spec, case))
            except BaseException as exc:
                future.set_exception(exc)
                with self._lock:
                    if self._entries.get(key, (None, None))[1] is future:
                        del self._entries[key]
        return future.result()


_MEMO = ReferenceMemo()


def expected_for(spec: OperatorSpec, case: Case) -> Expected:
    """Reference outputs, with the masks and slack of the comparison available on demand
    (computed once per case, see ReferenceMemo)."""
    return _MEMO.get(spec, case)
