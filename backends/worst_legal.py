"""The worst legal device: a NumPy backend that takes every liberty D3D arithmetic allows.

Real GPUs flush fp32 denormals, divide through a reciprocal, fuse multiply-adds and convert to
FLOAT16 toward zero; lavapipe, the device CI has, does none of it. This backend does all of it, at
random and at the edges, so that CI proves the judge never fails legal behaviour: the gate must
pass it on every operator, level and type. It reads which liberties exist from the precision model
(`specs/_arithmetic.yaml`) but computes with its own point arithmetic (one value per element, every
rounding a coin toss between the representable neighbours), independently of the judge's interval
evaluator (`harness.reference.legal`), which must contain every value it returns.

Each case picks a behaviour from its id (reproducible): rounding always down, always up, or at
random; every fp32 denormal flushed, none, or at random; division direct, through the reciprocal,
or at random; FLOAT16 computed in FLOAT16 or FLOAT32; conversions toward zero or to nearest.

`beyond` names one liberty the model does NOT allow, for the deliberately broken devices the
harness's tests build from this class (each must then fail, for that reason):
  division_3ulp: the reciprocal 3 ULP off; add_2ulp: add, subtract and multiply 2 ULP off;
  fp16_denormal_flush: FLOAT16 denormals flushed; nan_dropped: NaN results returned as 0.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness import __version__
from harness.model.backend import Capabilities, Outputs, RunResult, Unsupported
from harness.model.descriptor import Case
from harness.model.blocks import spread_blocks
from harness.model.layout import output_buffers, read_tensor
from harness.model.validator import spec_for_case
from harness.spec.arithmetic import ArithmeticModel
from harness.spec.context import bind_items, element_coordinates, element_names_read, formula_context, item_data_type
from harness.spec.expr import F32_SMALLEST_NORMAL, FUNCTIONS
from harness.spec.functions import MATH_FUNCTIONS
from harness.spec.fused import with_fused_activations
from harness.spec.load import load_specs
from harness.spec.model import OperatorSpec, SpecSet, struct_variables

_NUMPY: dict[str, type[np.floating]] = {"FLOAT16": np.float16, "FLOAT32": np.float32, "FLOAT64": np.float64}
_WIDTH = {"FLOAT16": 0, "FLOAT32": 1, "FLOAT64": 2}
BEYOND = ("division_3ulp", "add_2ulp", "fp16_denormal_flush", "nan_dropped")


@dataclass(frozen=True)
class Behaviour:
    """The liberties one case takes (see the module docstring)."""

    rounding: str   # down | up | random | nearest
    flush: str      # all | none | random
    division: str   # direct | reciprocal | random
    compute: str    # the compute type
    convert: str    # toward_zero | nearest | random


def behaviour_for(case_id: str, choices: tuple[str, ...]) -> Behaviour:
    """A reproducible choice of liberties from the case id: the edges (always / never) and random."""
    h = hashlib.sha256(case_id.encode()).digest()
    pick = lambda i, options: options[h[i] % len(options)]  # noqa: E731
    return Behaviour(pick(0, ("down", "up", "random", "random", "nearest")), pick(1, ("all", "none", "random", "all")),
                     pick(2, ("direct", "reciprocal", "random", "reciprocal")), pick(3, choices),
                     pick(4, ("toward_zero", "nearest", "random")))


@dataclass
class _V:
    """A value: float64 array and whether it is a float (rounded) or an exact integer/truth value."""

    v: np.ndarray
    is_float: bool


class _Device:
    """Point arithmetic of one case under one behaviour."""

    def __init__(self, model: ArithmeticModel, behaviour: Behaviour, rng: np.random.Generator, ctx: Any,
                 operands: dict[str, tuple[np.ndarray, str, str | None]], n: int, beyond: str | None) -> None:
        self.model, self.b, self.rng, self.ctx, self.n, self.beyond = model, behaviour, rng, ctx, n, beyond
        self.rules = model.types[behaviour.compute]
        self.T = _NUMPY[behaviour.compute]
        self.operands = operands

    # coin tosses
    def _choose(self, mode: str) -> np.ndarray:
        """True where this element takes the liberty (rounds up, flushes, goes through the reciprocal)."""
        if mode in ("all", "up", "reciprocal"):
            return np.ones(self.n, dtype=bool)
        if mode in ("none", "down", "direct", "nearest"):
            return np.zeros(self.n, dtype=bool)
        return self.rng.random(self.n) < 0.5

    def _neighbours(self, exact: np.ndarray, err: np.ndarray | None, T: Any) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(all="ignore"):
            t = exact.astype(T).astype(np.float64)
            lower = np.where(t > exact, np.nextafter(exact.astype(T), T(-np.inf)).astype(np.float64), t)
            upper = np.where(t < exact, np.nextafter(exact.astype(T), T(np.inf)).astype(np.float64), t)
            if err is not None:
                on = t == exact
                lower = np.where(on & (err < 0), np.nextafter(exact.astype(T), T(-np.inf)).astype(np.float64), lower)
                upper = np.where(on & (err > 0), np.nextafter(exact.astype(T), T(np.inf)).astype(np.float64), upper)
        return lower, upper

    def _steps(self, values: np.ndarray, k: int, T: Any) -> np.ndarray:
        out = values.astype(T)
        with np.errstate(all="ignore"):
            for _ in range(abs(k)):
                out = np.nextafter(out, T(np.inf) if k > 0 else T(-np.inf))
        return out.astype(np.float64)

    def round(self, exact: np.ndarray, mode: str, T: Any = None, err: np.ndarray | None = None,
              how: str | None = None) -> np.ndarray:
        """`exact` rounded to T: nearest, or (faithful) down or up per this case's rounding choice."""
        T = T or self.T
        if mode == "nearest" or (how or self.b.rounding) == "nearest":
            with np.errstate(all="ignore"):
                return exact.astype(T).astype(np.float64)
        lower, upper = self._neighbours(exact, err, T)
        return np.where(self._choose(how or self.b.rounding), upper, lower)

    def flush(self, values: np.ndarray) -> np.ndarray:
        """fp32 denormals flushed to sign-preserved zero where this case's choice says so."""
        if not self.rules.flush_denormals:
            return values
        with np.errstate(invalid="ignore"):
            denormal = (np.abs(values) < F32_SMALLEST_NORMAL) & (values != 0)
        return np.where(denormal & self._choose(self.b.flush), np.copysign(0.0, values), values)

    def _fp16_flush(self, values: np.ndarray) -> np.ndarray:
        tiny16 = float(np.finfo(np.float16).tiny)
        with np.errstate(invalid="ignore"):
            return np.where((np.abs(values) < tiny16) & (values != 0), np.copysign(0.0, values), values)

    def finish(self, values: np.ndarray) -> np.ndarray:
        """After a float operation: the result flush (fp32), and the broken devices' extra liberty."""
        values = self.flush(values)
        if self.beyond == "fp16_denormal_flush" and self.T is np.float16:
            values = self._fp16_flush(values)
        return values

    # operations
    def variable(self, name: str) -> _V:
        values, source, data_type = self.operands[name]
        v = np.broadcast_to(np.asarray(values, dtype=np.float64), (self.n,)).copy()
        is_float = data_type in _NUMPY or (source == "constant" and np.asarray(values).dtype.kind == "f")
        may_flush = self.rules.flush_denormals or source == "attribute" or (source == "input" and self.rules.fp32_conversion_flush)
        if data_type == "FLOAT32" and source in ("input", "attribute") and may_flush:
            with np.errstate(invalid="ignore"):
                denormal = (np.abs(v) < F32_SMALLEST_NORMAL) & (v != 0)
            v = np.where(denormal & self._choose(self.b.flush), np.copysign(0.0, v), v)
        if is_float and data_type in _WIDTH and _WIDTH[data_type] > _WIDTH[self.b.compute]:
            v = self.round(v, self.model.conversion_to_compute, how=self._convert_how())
        if self.beyond == "fp16_denormal_flush" and data_type == "FLOAT16":
            v = self._fp16_flush(v)
        return _V(v, is_float)

    def _convert_how(self) -> str:
        return {"toward_zero": "down", "nearest": "nearest", "random": "random"}[self.b.convert]

    def to_float(self, x: _V) -> np.ndarray:
        return x.v if x.is_float else x.v.astype(self.T).astype(np.float64)

    def arith(self, op: type[ast.operator], a: _V, b: _V) -> _V:
        if not (a.is_float or b.is_float):
            with np.errstate(all="ignore"):
                return _V({ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply}[op](a.v, b.v), False)
        x, y = self.to_float(a), self.to_float(b)
        with np.errstate(all="ignore"):
            if op is ast.Mult:
                exact, err = x * y, None
            else:
                y = -y if op is ast.Sub else y
                exact = x + y
                bb = exact - x
                err = (x - (exact - bb)) + (y - bb)
                err = np.where(np.isfinite(err), err, 0.0)
        result = self.round(exact, self.rules.add_sub_mul, err=err)
        if self.beyond == "add_2ulp":
            result = np.where(np.isfinite(result) & (result != 0), self._steps(result, 2, self.T), result)
        return _V(self.finish(result), True)

    def divide(self, a: _V, b: _V) -> _V:
        x, y = self.to_float(a), self.to_float(b)
        with np.errstate(all="ignore"):
            direct = self.round(x / y, self.rules.division_direct)
        if self.rules.reciprocal is None:
            return _V(self.finish(direct), True)
        rcp_mode, mul_mode = self.rules.reciprocal
        with np.errstate(all="ignore"):
            rcp = self.round(1.0 / y, rcp_mode)
        if self.beyond == "division_3ulp":
            rcp = np.where(np.isfinite(rcp) & (rcp != 0), self._steps(rcp, -3 if self.rng.random() < 0.5 else 3, self.T), rcp)
        rcp = self.flush(rcp)
        with np.errstate(all="ignore"):
            through = self.round(x * rcp, mul_mode)
        use = self._choose(self.b.division) | (self.beyond == "division_3ulp")
        return _V(self.finish(np.where(use, through, direct)), True)

    def exp(self, a: _V) -> _V:
        """exp as HLSL computes it: exp2(x * log2(e)), log2(e) a constant of the compute type and
        the product rounded like any multiply (down, up or at random), exp2 off by the type's whole
        relative error (down, up or at random), then rounded; exp2(+-0) = 1 exactly (§22.10.6)."""
        if self.rules.exp is None:
            raise NotImplementedError(f"exp in {self.b.compute}")
        relative, _ = self.rules.exp
        x = self.to_float(a)
        log2e = self.round(np.full(self.n, np.log2(np.e)), "faithful")
        with np.errstate(all="ignore"):
            t = self.finish(self.round(x * log2e, self.rules.add_sub_mul))
            power = np.exp2(t)
        how = self.b.rounding
        if how == "nearest":
            scale = np.zeros(self.n)
        elif how in ("down", "up"):
            scale = np.full(self.n, -1.0 if how == "down" else 1.0)
        else:
            scale = self.rng.uniform(-1.0, 1.0, self.n)
        with np.errstate(all="ignore"):
            off = np.where(t == 0, power, power * (1.0 + scale * relative))
        return _V(self.finish(self.round(off, "faithful")), True)

    def min_max(self, a: _V, b: _V, which: str) -> _V:
        pick = np.fmin if which == "min" else np.fmax  # one NaN: the other operand (D3D)
        out = pick(a.v, b.v)
        zeros = (a.v == 0) & (b.v == 0)  # min(-0, +0): either zero
        out = np.where(zeros, np.where(self._choose("random"), a.v, b.v), out)
        if self.rules.min_max_nan != "other_operand":
            out = np.where(np.isnan(a.v) | np.isnan(b.v), np.nan, out)
        return _V(out, a.is_float or b.is_float)


_CMP = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
        ast.Eq: np.equal, ast.NotEq: np.not_equal}


def _walk(node: ast.AST, d: _Device) -> _V:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # a formula's constants are numbers (checked at load: harness.spec.expr)
        if isinstance(node.value, float):
            return _V(np.full(d.n, np.float64(d.T(node.value))), True)
        return _V(np.full(d.n, float(node.value)), False)
    if isinstance(node, ast.Name):
        return d.variable(node.id)
    if isinstance(node, ast.BinOp):
        a, b = _walk(node.left, d), _walk(node.right, d)
        if isinstance(node.op, ast.Div):
            return d.divide(a, b)
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            f = np.logical_and if isinstance(node.op, ast.BitAnd) else np.logical_or
            return _V(f(a.v != 0, b.v != 0).astype(np.float64), False)
        return d.arith(type(node.op), a, b)
    if isinstance(node, ast.UnaryOp):
        a = _walk(node.operand, d)
        if isinstance(node.op, ast.USub):
            return _V(-a.v, a.is_float)
        if isinstance(node.op, ast.UAdd):
            return a
        return _V((a.v == 0).astype(np.float64), False)
    if isinstance(node, ast.BoolOp):
        values = [_walk(v, d).v != 0 for v in node.values]
        f = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        out = values[0]
        for v in values[1:]:
            out = f(out, v)
        return _V(out.astype(np.float64), False)
    if isinstance(node, ast.Compare):
        a, b = _walk(node.left, d), _walk(node.comparators[0], d)
        with np.errstate(invalid="ignore"):
            return _V(_CMP[type(node.ops[0])](a.v, b.v).astype(np.float64), False)
    if isinstance(node, ast.Call):
        name = node.func.id  # type: ignore[attr-defined]
        if name in ("type_min", "type_max", "is_type"):
            literals = [a.id if isinstance(a, ast.Name) else a.value for a in node.args]  # type: ignore[attr-defined]
            return _V(np.full(d.n, float(FUNCTIONS[name][1](d.ctx, *literals))), False)
        args = [_walk(a, d) for a in node.args]
        if name == "where":
            c, a, b = args
            return _V(np.where(c.v != 0, a.v, b.v), a.is_float or b.is_float)
        if name in ("min", "max"):
            return d.min_max(args[0], args[1], name)
        if name == "exp":
            return d.exp(args[0])
        if name == "clamp":
            return d.min_max(d.min_max(args[0], args[1], "max"), args[2], "min")
        if name in ("fmod", "floor_mod") or name in MATH_FUNCTIONS:
            # exact remainders; a transcendental function's own value (legal, not its worst: the
            # model's bound around it is wide, and a point at its edge would need the function's
            # error direction per element, which no rule here states)
            with np.errstate(all="ignore"):
                value = FUNCTIONS[name][1](None, *[a.v for a in args])
            return _V(np.asarray(value, dtype=np.float64) if name in MATH_FUNCTIONS else np.asarray(value),
                      name in MATH_FUNCTIONS or any(a.is_float for a in args))
        v = args[0].v
        with np.errstate(invalid="ignore"):
            if name == "abs":
                return _V(np.abs(v), args[0].is_float)
            if name == "round_half_even":
                return _V(np.rint(v), True)
            if name == "trunc":
                return _V(np.trunc(v), True)
            if name in ("floor", "ceil"):  # exact, as trunc
                return _V(np.floor(v) if name == "floor" else np.ceil(v), True)
            if name == "round_half_away":
                return _V(np.copysign(np.floor(np.abs(v) + 0.5), v), True)
            if name == "isnan":
                return _V(np.isnan(v).astype(np.float64), False)
            if name == "isinf":
                return _V(np.isinf(v).astype(np.float64), False)
            if name == "is_negzero":
                return _V(((v == 0) & np.signbit(v)).astype(np.float64), False)
        raise NotImplementedError(name)
    raise NotImplementedError(type(node).__name__)


class WorstLegalBackend:
    """The worst legal D3D device (see the module docstring); `beyond` makes a broken one."""

    name = "worst-legal"
    expectations_dir = Path(__file__).resolve().parent / "expectations"
    beyond: str | None = None

    def __init__(self, specs: SpecSet | None = None, **_: object) -> None:
        if self.beyond is not None and self.beyond not in BEYOND:
            raise ValueError(f"beyond must be one of {', '.join(BEYOND)}, not {self.beyond!r}")
        self.specs = specs or load_specs()

    def version(self) -> str:
        extra = f", beyond the model: {self.beyond}" if self.beyond else ""
        return f"dmlconform worst legal device {__version__} (numpy {np.__version__}{extra})"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def capabilities(self) -> Capabilities:
        return Capabilities(validates_descriptors=True, notes=["every liberty of specs/_arithmetic.yaml, at random and at the edges"])

    def run(self, case: Case) -> RunResult:
        spec = spec_for_case(self.specs, case)
        if not isinstance(spec, OperatorSpec):
            return spec  # no spec, or an invalid descriptor: rejected as DirectML would
        spec = with_fused_activations(spec, case.descriptor)
        if spec.formula.family is not None:
            return self._family(spec, case)
        if spec.formula.operands == "raw_bits":
            return self._exact(spec, case)  # bit operations have no arithmetic liberty
        try:
            values = self._compute(spec, case)
            others = {name: self._compute(spec.for_output(name), case) for name in spec.formula.other_outputs}
        except NotImplementedError as exc:
            return Unsupported(f"the worst legal device has no point rule for {exc}")
        if values is None:
            return self._exact(spec, case)
        outputs = {spec.formula.output: values}
        for name, other in others.items():
            assert other is not None  # the descriptor has a float tensor (`values`): every output has a formula value
            outputs[name] = other
        return Outputs(output_buffers(spec, case, outputs if others else values))

    def _family(self, spec: OperatorSpec, case: Case) -> RunResult:
        """An index-space operator: its family's exact computation (harness.reference.families) on
        the inputs as this device sees them, fp32 denormals flushed to signed zeros (the one
        liberty a comparison-only family leaves: D3D may flush fp32 denormal inputs), except where
        the formula moves raw bits (data movement must not alter data)."""
        from harness.reference.evaluate import family_inputs
        from harness.reference.families import family_compute, family_device
        from harness.reference.families.result import flush_f32_denormals
        assert spec.formula.family is not None
        inputs = family_inputs(spec, case.descriptor, case.inputs)
        if spec.formula.operands != "raw_bits":  # a copy of raw bits takes no liberty
            for var, value in inputs.items():
                flushed = flush_f32_denormals(value)
                inputs[var] = value if flushed is None else flushed
        device = family_device(spec.formula.family.name)
        if device is not None:  # the family's own legal device: another order, another rounding
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(case.case_id.encode()).digest()[:8], "little"))
            return Outputs(output_buffers(spec, case, device(spec, case.descriptor, inputs, rng)))
        result = family_compute(spec.formula.family.name)(spec, case.descriptor, inputs)
        return Outputs(output_buffers(spec, case, result.outputs))

    def _exact(self, spec: OperatorSpec, case: Case) -> RunResult:
        from harness.reference.evaluate import compute_outputs, other_outputs
        result, _, _ = compute_outputs(spec, case.descriptor, case.inputs)
        others = other_outputs(spec, case.descriptor, case.inputs)
        return Outputs(output_buffers(spec, case, {spec.formula.output: result, **others} if others else result))

    def _compute(self, spec: OperatorSpec, case: Case) -> np.ndarray | None:
        """The formula's outputs under this case's behaviour, in the output type; None for an integer-only formula."""
        catalog, descriptor = self.specs.catalog, case.descriptor
        model = catalog.arithmetic
        tensor_types = {n: t.data_type for n, t in descriptor.tensors.items() if t is not None}
        floats = [t for t in tensor_types.values() if t in _WIDTH]
        if not floats:
            return None
        choices = model.compute_in.get(max(floats, key=_WIDTH.__getitem__))
        assert choices is not None  # the model names the compute types of every float type
        behaviour = behaviour_for(case.case_id + (self.beyond or ""), choices)
        out_desc = descriptor.tensors[spec.formula.output]
        assert out_desc is not None
        shape = tuple(out_desc.sizes)
        n = int(np.prod(shape)) if shape else 1
        operands: dict[str, tuple[np.ndarray, str, str | None]] = {}
        for var, tensor in spec.formula.inputs.items():
            desc = descriptor.tensors.get(tensor)
            if desc is None:
                operands[var] = (np.asarray(spec.formula.absent_inputs[var]), "constant", None)
                continue
            raw = read_tensor(case.inputs[tensor], desc, catalog.dtype(desc.data_type))
            if var in spec.formula.blocked:
                raw = spread_blocks(raw, shape)
            with np.errstate(invalid="ignore"):
                operands[var] = (np.broadcast_to(raw, shape).reshape(-1).astype(np.float64), "input", desc.data_type)
        ctx = formula_context(spec, tensor_types, {}, descriptor.attributes)
        coordinates = element_coordinates(shape, element_names_read(spec))
        for var, coordinate in coordinates.items():  # exact integers
            operands[var] = (coordinate.reshape(-1), "constant", None)
        for var, item in bind_items(spec, descriptor.attributes, coordinates).items():  # an array's item: a state
            operands[var] = (item.reshape(-1), "attribute", item_data_type(spec, var))
        for var in spec.formula.attributes:
            field = spec.field(var)
            if field.is_array:  # read through its items (above)
                continue
            if field.struct is not None:  # has_F and the members F_M (FLOAT states)
                for name, is_member in struct_variables([field]).items():
                    operands[name] = (np.asarray(ctx.variables[name]), "attribute" if is_member else "constant",
                                      "FLOAT32" if is_member else None)
                continue
            is_float_field = field.c_type == "FLOAT"
            operands[var] = (np.asarray(ctx.variables[var]), "attribute", "FLOAT32" if is_float_field else None)
        for var in spec.formula.constants:
            operands[var] = (np.asarray(ctx.variables[var]), "constant", None)
        for f in spec.attribute_fields:  # an enum attribute's members, by name
            for member, value in (f.enum or {}).items():
                operands[member] = (np.asarray(value), "constant", None)
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(case.case_id.encode()).digest()[:8], "little"))
        device = _Device(model, behaviour, rng, ctx, operands, n, self.beyond)
        result = _walk(spec.formula.expression.tree.body, device)
        values = result.v
        out_type = out_desc.data_type
        if out_type in _NUMPY:
            if not result.is_float:  # an integer value into a float output (CAST): itof's either neighbour
                values = device.round(values, model.types[out_type].convert_from_integer, _NUMPY[out_type], how=device._convert_how())
            elif _WIDTH[out_type] < _WIDTH[behaviour.compute]:
                values = device.round(values, model.types[out_type].convert_from_wider, _NUMPY[out_type], how=device._convert_how())
                if self.beyond == "fp16_denormal_flush" and out_type == "FLOAT16":
                    values = device._fp16_flush(values)
            if out_type == "FLOAT32" and device.rules.fp32_conversion_flush:  # dtof may flush fp32 denormals
                with np.errstate(invalid="ignore"):
                    denormal = (np.abs(values) < F32_SMALLEST_NORMAL) & (values != 0)
                values = np.where(denormal & device._choose(behaviour.flush), np.copysign(0.0, values), values)
            if self.beyond == "nan_dropped":
                values = np.where(np.isnan(values), 0.0, values)
            with np.errstate(all="ignore"):
                return values.astype(_NUMPY[out_type]).reshape(shape)
        # toward zero; NaN gives 0 and values beyond the type saturate, as ftoi/ftou give
        from harness.reference.rounding import float_to_integer
        return float_to_integer(values, catalog.dtype(out_type).numpy).reshape(shape)

    def close(self) -> None:
        pass
