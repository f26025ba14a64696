"""The precision model (`specs/_arithmetic.yaml`): what D3D hardware may legally compute.

Read once with the catalog. The reference's model evaluator (`harness.reference.legal`) takes its
rounding rules, denormal flushes and NaN rules from here; nothing about D3D arithmetic is
hard-coded elsewhere. Liberties are the deviations from the exact, correctly rounded result that
the model permits; each has a fixed id (a bit in the evaluator's tags) and the name reports give it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.spec.source import SourcedYaml, load_yaml

ARITHMETIC_FILE = "_arithmetic.yaml"

# The liberty ids, in the order they are tried when naming what a result needed (bit = position).
LIBERTY_IDS = ("rounding", "fp16_in_fp32", "attribute_narrowed", "reciprocal_division", "fp32_input_flush",
               "fp32_attribute_flush", "fp32_result_flush", "min_max_nan", "exp_error", "function_error")


def liberty_bit(liberty: str) -> int:
    """The tag bit of a liberty id."""
    return 1 << LIBERTY_IDS.index(liberty)


@dataclass(frozen=True)
class TypeRules:
    """The arithmetic rules of one float compute type."""

    name: str
    add_sub_mul: str                 # nearest | faithful
    division_direct: str
    reciprocal: tuple[str, str] | None   # (rcp rounding, multiply rounding) when division may go through rcp
    flush_denormals: bool
    min_max_nan: str                 # other_operand | nan
    convert_from_wider: str
    source: str
    convert_from_integer: str = "nearest"    # an integer value converted to this type (a conversion)
    fp32_conversion_flush: bool = False      # conversions between this type and FLOAT32 may flush fp32 denormals
    # exp(x): within exp(x) * e^(+-argument * |x|) * (1 +- relative), rounded outward; None: no rule
    exp: tuple[float, float] | None = None   # (relative, argument)
    # the other transcendental functions (log, sin, ..., pow): name -> their error bound
    functions: dict[str, "FunctionBound"] = field(default_factory=dict)


@dataclass(frozen=True)
class FunctionBound:
    """How far a transcendental function's result may lie from the exact value f: within
    absolute + relative * |f| + quadratic * f^2 + ulp * (the type's spacing at f) (the quadratic
    term: tan = sin / cos, whose absolute errors grow as f^2 near the poles), and a factor
    2^(+-log2_times_exponent * |y| * max(1, |log2 x|)) for pow(x, y) (HLSL's exp2(y * log2(x)):
    log2's error, absolute near 1 and relative elsewhere, scaled by the exponent)."""

    absolute: float = 0.0
    relative: float = 0.0
    ulp: float = 0.0
    log2_times_exponent: float = 0.0
    source: str = ""
    quadratic: float = 0.0


@dataclass(frozen=True)
class ArithmeticModel:
    """The whole precision model."""

    compute_in: dict[str, tuple[str, ...]]
    types: dict[str, TypeRules]
    conversion_to_compute: str
    liberty_names: dict[str, str]

    def names(self, tags: int) -> list[str]:
        """The report names of the liberties set in `tags`, in LIBERTY_IDS order."""
        return [self.liberty_names[lib] for i, lib in enumerate(LIBERTY_IDS) if tags & (1 << i)]


def load_arithmetic(specs_dir: Path, schema_check: Callable[[SourcedYaml, dict], None]) -> ArithmeticModel:
    """Read and check `_arithmetic.yaml`; raise SpecError naming file, line and key on a problem."""
    src: SourcedYaml = load_yaml(Path(specs_dir) / ARITHMETIC_FILE)
    from harness.spec.schema import ARITHMETIC_SCHEMA
    schema_check(src, ARITHMETIC_SCHEMA)
    data = src.data
    types: dict[str, TypeRules] = {}
    for name, raw in data["types"].items():
        division = raw["division"]
        reciprocal = division.get("reciprocal")
        exp = raw.get("exp")
        types[name] = TypeRules(name, raw["add_sub_mul"], division["direct"],
                                (reciprocal["rcp"], reciprocal["multiply"]) if reciprocal else None,
                                raw["flush_denormals"], raw["min_max_nan"], raw["convert_from_wider"], raw["source"],
                                raw["convert_from_integer"], bool(raw.get("fp32_conversion_flush", False)),
                                (float(exp["relative"]), float(exp["argument"])) if exp else None,
                                {fname: FunctionBound(float(b.get("absolute", 0)), float(b.get("relative", 0)), float(b.get("ulp", 0)),
                                                      float(b.get("log2_times_exponent", 0)), str(b["source"]),
                                                      float(b.get("quadratic", 0)))
                                 for fname, b in (raw.get("functions") or {}).items()})
    compute_in = {name: tuple(choices) for name, choices in data["compute_in"].items()}
    for tensor_type, choices in compute_in.items():
        for index, choice in enumerate(choices):
            if choice not in types:
                raise src.error(("compute_in", tensor_type, index), f"{choice} has no rules under 'types'")
    return ArithmeticModel(compute_in, types, data["conversion_to_compute"], dict(data["liberties"]))
