"""Specs that read well but fail when generation evaluates them end in one clear lint error, fast.

What this module proves: for each kind of hostile expression in HOSTILE (a division or modulo by
zero, a generator or range of 2^62 items, a loop that never ends in time, divisors() of a huge
number or of a large prime again and again, sorted(range(10^9)), an integer of thousands of bits,
a shape rule that derives a 2^40-element tensor, a `one_of` that is empty on every descriptor, an
array `length` beyond what a case file holds, generation limits and data ranges outside their
tensor's data type, min above max), written into a copy of a small shipped spec beside the shared
`_*.yaml` files:

- `lint_specs` returns exactly one SpecError reading `file:line: key.path: message`, with the
  expected line, key path and message, within LINT_S seconds (the evaluation bounds of
  harness.spec.shape_expr and the probes of harness.spec.lint: no hang, no traceback);
- the command line (`python -m harness.cli spec lint FILES...`) prints one such line per hostile
  file, exits 1, prints no traceback, within CLI_S seconds;
- the evaluator itself refuses each hostile value with a FormulaError saying 'beyond the
  evaluation bound' (or 'division by zero') within EVALUATE_S seconds;
- the shipped specs still lint clean, probes included, and probing them all is cheap.

A run over such a spec (lint bypassed) is not needed here: generation evaluates the same
expressions under the same bounds, so it stops with the same FormulaError instead of hanging.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.spec.catalog import load_catalog
from harness.spec.expr import FormulaError
from harness.spec.lint import lint_specs
from harness.spec.lint_probes import MAX_GENERATED_ELEMENTS, PROBE_STEPS, probe_spec
from harness.spec.load import DEFAULT_SPECS_DIR, build_file, operator_files
from harness.spec.shape_expr import BEYOND, MAX_DIVISORS_OF, MAX_INT_BITS, MAX_LIST, MAX_STEPS, TensorFacts, parse_shape_expr

ROOT = Path(__file__).resolve().parents[2]
LINT_S = 5.0       # one hostile file through lint_specs, wall clock (a hang would take forever)
CLI_S = 15.0       # every hostile file in one `spec lint` subprocess, interpreter start included
EVALUATE_S = 2.0   # one hostile expression through the evaluator

GATHER, SHIFT, POW, REDUCE, PADDING = ("GATHER.yaml", "ELEMENT_WISE_BIT_SHIFT_LEFT.yaml", "ELEMENT_WISE_POW.yaml",
                                       "REDUCE.yaml", "PADDING1.yaml")
# the pieces of GATHER.yaml the hostile inputs replace
OUTPUT_SIZES = ('sizes: "[1 if j + IndexDimensions < 1 else (InputTensor.Sizes[j + IndexDimensions - 1] if j + IndexDimensions '
                '<= Axis else (IndicesTensor.Sizes[j + InputTensor.DimensionCount - 1 - Axis] if j <= Axis else InputTensor.Sizes[j])) '
                'for j in range(InputTensor.DimensionCount)]"')
INDICES_RULE = 'expression: "IndicesTensor.DimensionCount == InputTensor.DimensionCount"'
AXIS_ONE_OF = 'one_of: "range(InputTensor.DimensionCount - 1, -1, -1)"'
INDEX_ONE_OF = ('one_of: "[d for d in range(InputTensor.DimensionCount, -1, -1) if all(InputTensor.Sizes[k] == 1 '
                'for k in range(min(Axis, d - 1)))]"')
SIGNED_RANGE = 'min: "-InputTensor.Sizes[Axis]", max: "InputTensor.Sizes[Axis] - 1"'
UINT8_RANGE = 'applies_to: [UINT8], min: "0", max: "7"'
POW_BITS = 'bits: "3",'
MULTIPLY_BITS = 'bits: "30 // prod([InputTensor.Sizes[a] for a in Axes])"'
PAD_LENGTH = 'length: "InputTensor.DimensionCount"'
PAD_EACH = 'each: "range(0, 3) if PaddingMode != REFLECTION or InputTensor.Sizes[i] > 1 else [0]"'
A_PRIME = 1099511627689  # the largest prime below 2^40: divisors() walks 2^20 candidates for it
RANGE_2_62 = f"range of {2 ** 62} elements is {BEYOND} ({MAX_LIST} elements)"
STEPS = f"more than {MAX_STEPS:,} evaluation steps: {BEYOND}"
ALL_PROBES = f"takes more than {PROBE_STEPS:,} steps in all: {BEYOND}"


@dataclass(frozen=True)
class Hostile:
    """One hostile spec: the shipped file it is made from, the text replaced and its replacement,
    and the error lint must give: at the first line holding `marker`, key path `key`."""

    kind: str
    name: str
    file: str
    old: str
    new: str
    marker: str
    key: str
    message: str

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.name}"


def at(new: str) -> str:
    """The marker of a replacement that is on one line: the replacement's first 40 characters."""
    return new[:40]


def sized(expression: str) -> str:
    return f'sizes: "{expression}"'


def expr(expression: str) -> str:
    return f'expression: "{expression}"'


def one_of(expression: str) -> str:
    return f'one_of: "{expression}"'


HOSTILE: list[Hostile] = [
    # --- division and modulo by zero, on the descriptors generation draws
    Hostile("division_by_zero", "shape_rule", GATHER, OUTPUT_SIZES,
            sized("[InputTensor.Sizes[j] // (Axis - Axis) for j in range(InputTensor.DimensionCount)]"), "sizes: \"[InputTensor.Sizes[j] //",
            "constraints[7].sizes", "division by zero: 'InputTensor.Sizes[j] // (Axis - Axis)' with a divisor of 0"),
    Hostile("division_by_zero", "modulo_in_rule", GATHER, INDICES_RULE,
            expr("IndicesTensor.DimensionCount % (IndexDimensions * 0) == 0"), "IndexDimensions * 0",
            "constraints[1].expression", "division by zero: 'IndicesTensor.DimensionCount % (IndexDimensions * 0)' with a divisor of 0"),
    Hostile("division_by_zero", "by_a_drawn_axis_in_one_of", GATHER, INDEX_ONE_OF, one_of("[d // Axis for d in range(3)]"),
            "d // Axis", "attribute_values.IndexDimensions.one_of", "division by zero: 'd // Axis' with a divisor of 0"),
    Hostile("division_by_zero", "in_a_limit", REDUCE, MULTIPLY_BITS,
            'bits: "30 // (prod([InputTensor.Sizes[a] for a in Axes]) - prod([InputTensor.Sizes[a] for a in Axes]))"',
            'bits: "30 // (prod', "generation.limits[4].bits", "division by zero"),
    Hostile("division_by_zero", "constant_range_end", SHIFT, UINT8_RANGE, 'applies_to: [UINT8], min: "0", max: "7 // 0"',
            'max: "7 // 0"', "generation.data_ranges[0].max", "division by zero: '7 // 0' with a divisor of 0"),
    # --- generators and ranges of 2^62 items: refused by length before anything is made
    Hostile("huge_generator", "range_in_one_of", GATHER, AXIS_ONE_OF, one_of(f"range({2 ** 62})"), at(one_of(f"range({2 ** 62})")),
            "attribute_values.Axis.one_of", RANGE_2_62),
    Hostile("huge_generator", "comprehension_in_shape_rule", GATHER, OUTPUT_SIZES, sized(f"[1 for i in range({2 ** 62})]"),
            "sizes: \"[1 for i", "constraints[7].sizes", RANGE_2_62),
    Hostile("huge_generator", "generator_in_rule", GATHER, INDICES_RULE, expr(f"all(i >= 0 for i in range({2 ** 62}))"),
            "all(i >= 0", "constraints[1].expression", RANGE_2_62),
    Hostile("huge_generator", "sorted_range_1e9", GATHER, AXIS_ONE_OF, one_of("sorted(range(1000000000))"), "sorted(range(",
            "attribute_values.Axis.one_of", f"range of 1000000000 elements is {BEYOND}"),
    # --- loops that each stay within a list's bound but never end in time: the step bound
    Hostile("endless_loop", "nested_generators", GATHER, INDICES_RULE,
            expr("all(all(j >= 0 for j in range(100000)) for i in range(100000))"), "all(all(", "constraints[1].expression", STEPS),
    Hostile("endless_loop", "membership_in_a_loop", GATHER, INDICES_RULE,
            expr("all(i in range(100000) for i in range(100000))"), "all(i in range", "constraints[1].expression", STEPS),
    Hostile("endless_loop", "sum_in_a_loop", GATHER, AXIS_ONE_OF, one_of("[sum(range(100000)) for i in range(100000)]"),
            "[sum(range(", "attribute_values.Axis.one_of", STEPS),
    Hostile("endless_loop", "costly_on_every_draw", GATHER, INDICES_RULE, expr("all(i >= 0 for i in range(131072))"),
            "range(131072)", "constraints[1].expression", ALL_PROBES),
    # --- divisors(): beyond its bound, or a large prime on every descriptor
    Hostile("divisors", "beyond_2_40", GATHER, INDICES_RULE,
            expr("len(divisors(InputTensor.Sizes[0] * 4611686018427387903)) > 0"), "len(divisors(",
            "constraints[1].expression", f"divisors of 4611686018427387903: {BEYOND} (2^40)"),
    Hostile("divisors", "large_prime_each_draw", GATHER, INDICES_RULE, expr(f"len(divisors({A_PRIME})) == 2"), "len(divisors(",
            "constraints[1].expression", ALL_PROBES),
    Hostile("divisors", "many_large_numbers", GATHER, AXIS_ONE_OF, one_of(f"[len(divisors({A_PRIME} - 2 * i)) for i in range(100)]"),
            "[len(divisors(", "attribute_values.Axis.one_of", STEPS),
    # --- integers of thousands of bits
    Hostile("huge_integer", "product_of_a_range", GATHER, INDICES_RULE, expr("prod(range(1, 100000)) > 0"), "prod(range(1",
            "constraints[1].expression", f"an integer of 4102 bits is {BEYOND} ({MAX_INT_BITS} bits)"),
    Hostile("huge_integer", "product_in_a_loop", GATHER, AXIS_ONE_OF, one_of("[prod([4294967296 for k in range(200)]) for i in range(3)]"),
            "[prod([", "attribute_values.Axis.one_of", f"is {BEYOND} ({MAX_INT_BITS} bits)"),
    # --- derived tensors beyond the element limit (a 2^40-element output)
    Hostile("huge_output", "two_to_the_40", GATHER, OUTPUT_SIZES,
            sized("[1048576 if j < 2 else 1 for j in range(InputTensor.DimensionCount)]"), "sizes: \"[1048576 if",
            "constraints[7].sizes", f"gives OutputTensor 1,099,511,627,776 elements (Sizes [1048576, 1048576, 1, 1, 1, 1, 1, 1]): "
                                    f"beyond the element limit of a generated tensor ({MAX_GENERATED_ELEMENTS:,}"),
    Hostile("huge_output", "scaled_input", GATHER, OUTPUT_SIZES,
            sized("[1048576 * InputTensor.Sizes[j] for j in range(InputTensor.DimensionCount)]"), "sizes: \"[1048576 *",
            "constraints[7].sizes", "elements (Sizes [2097152, 3145728, 2097152, 3145728, 1048576"),
    Hostile("huge_output", "too_many_dimensions", GATHER, OUTPUT_SIZES, sized("[1 for j in range(100000)]"), "sizes: \"[1 for j",
            "constraints[7].sizes", "gives OutputTensor 100000 dimension(s); its support table allows 1 to 8"),
    Hostile("huge_output", "no_sizes", GATHER, OUTPUT_SIZES, sized("InputTensor.DimensionCount - 9"), "sizes: \"InputTensor.Dim",
            "constraints[7].sizes", "gives -8 for OutputTensor: generation needs a list of sizes"),
    # --- a one_of that never has a value: generation would draw again forever
    Hostile("empty_one_of", "filtered_to_nothing", GATHER, INDEX_ONE_OF, one_of("[d for d in range(InputTensor.DimensionCount) if d > 8]"),
            "if d > 8", "attribute_values.IndexDimensions.one_of", "one_of gives no value on any of the"),
    Hostile("empty_one_of", "empty_list", GATHER, AXIS_ONE_OF, one_of("[]"), 'one_of: "[]"', "attribute_values.Axis.one_of",
            "one_of gives no value on any of the"),
    Hostile("empty_one_of", "not_a_list_of_numbers", GATHER, AXIS_ONE_OF, one_of("[[0]]"), 'one_of: "[[0]]"',
            "attribute_values.Axis.one_of", "one_of gives [[0]], not a list of numbers"),
    # --- an array length generation would fill item by item
    Hostile("array_length", "two_to_the_40", PADDING, PAD_LENGTH, 'length: "1099511627776"', 'length: "1099511627776"',
            "attribute_values.StartPadding.length", "length gives 1099511627776: an array's length is a whole number from 0 to 64"),
    Hostile("array_length", "negative", PADDING, PAD_LENGTH, 'length: "-InputTensor.DimensionCount"', 'length: "-Input',
            "attribute_values.StartPadding.length", "length gives -1: an array's length is a whole number from 0 to 64"),
    Hostile("array_length", "each_not_a_list", PADDING, PAD_EACH, 'each: "InputTensor.Sizes[i]"', 'each: "InputTensor.Sizes[i]"',
            "attribute_values.StartPadding.each", "each gives 1 at i = 0, not a list"),
    # --- data ranges outside their data type, or empty (meaning errors: at load for constants, probed otherwise)
    Hostile("data_range", "above_uint8", SHIFT, UINT8_RANGE, 'applies_to: [UINT8], min: "0", max: "300"', 'max: "300"',
            "generation.data_ranges[0].max", "300 is outside the range of UINT8 (0 .. 255)"),
    Hostile("data_range", "below_unsigned", SHIFT, UINT8_RANGE, 'applies_to: [UINT8], min: "-1", max: "7"', 'min: "-1"',
            "generation.data_ranges[0].min", "-1 is outside the range of UINT8 (0 .. 255)"),
    Hostile("data_range", "min_above_max", SHIFT, UINT8_RANGE, 'applies_to: [UINT8], min: "7", max: "3"', 'min: "7", max: "3"',
            "generation.data_ranges[0]", "min 7 is above max 3: the range is empty"),
    Hostile("data_range", "beyond_int32_when_drawn", GATHER, SIGNED_RANGE,
            'min: "-InputTensor.Sizes[Axis]", max: "InputTensor.Sizes[Axis] * 4294967296"', "* 4294967296",
            "generation.data_ranges[0].max", "4294967296 is outside the range of INT32 (-2147483648 .. 2147483647)"),
    # --- generation limits' bit widths outside the type
    Hostile("bit_width", "above_int32", POW, POW_BITS, 'bits: "40",', 'bits: "40"', "generation.limits[0].bits",
            "bits 40 is outside 0 .. 32 for INT32"),
    Hostile("bit_width", "negative", POW, POW_BITS, 'bits: "-1",', 'bits: "-1"', "generation.limits[0].bits",
            "bits -1 is outside 0 .. 32 for INT32"),
    Hostile("bit_width", "drawn_beyond_width", REDUCE, MULTIPLY_BITS, 'bits: "30 * prod([InputTensor.Sizes[a] for a in Axes])"',
            'bits: "30 * prod', "generation.limits[4].bits", "is outside 0 .. 32 for INT32"),
]
KINDS = sorted({h.kind for h in HOSTILE})


def write_hostile(specs: Path, hostile: Hostile) -> tuple[Path, str]:
    """A directory of the shared `_*.yaml` files and the one hostile spec; (its path, its text)."""
    specs.mkdir(parents=True)
    for shared in DEFAULT_SPECS_DIR.glob("_*.yaml"):
        shutil.copy(shared, specs / shared.name)
    original = (DEFAULT_SPECS_DIR / hostile.file).read_text(encoding="utf-8")
    assert original.count(hostile.old) >= 1, f"test setup: {hostile.old!r} not in {hostile.file}"
    text = original.replace(hostile.old, hostile.new, 1)
    target = specs / hostile.file
    target.write_text(text, encoding="utf-8")
    return target, text


def expected_prefix(target: Path, hostile: Hostile, text: str) -> str:
    line = next(number for number, line in enumerate(text.splitlines(), 1) if hostile.marker in line)
    return f"{target}:{line}: {hostile.key}: "


def test_every_kind_tries_several_inputs():
    counts = {kind: sum(h.kind == kind for h in HOSTILE) for kind in KINDS}
    assert all(n >= 2 for n in counts.values()), counts
    assert len({h.id for h in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.id for h in HOSTILE])
def test_lint_reports_one_clear_error_fast(tmp_path: Path, hostile: Hostile) -> None:
    specs = tmp_path / "specs"
    target, text = write_hostile(specs, hostile)
    started = time.monotonic()
    errors = lint_specs([target], specs)
    seconds = time.monotonic() - started
    assert len(errors) == 1, [e.render() for e in errors]
    rendered = errors[0].render()
    assert rendered.startswith(expected_prefix(target, hostile, text)), (rendered[:400], expected_prefix(target, hostile, text))
    assert hostile.message in rendered, (rendered[:600], hostile.message)
    assert "\n" not in rendered and len(rendered) < 1200
    assert seconds < LINT_S, f"lint took {seconds:.1f} s"


def test_cli_prints_one_line_per_hostile_file_without_traceback(tmp_path: Path) -> None:
    """Every hostile spec in one `spec lint FILES...` run: exit 1, one line each, in order."""
    shared = tmp_path / "shared"
    shared.mkdir()
    for path in DEFAULT_SPECS_DIR.glob("_*.yaml"):
        shutil.copy(path, shared / path.name)
    written = [write_hostile(tmp_path / f"input{i}" / "specs", h) for i, h in enumerate(HOSTILE)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "--specs-dir", str(shared), "spec", "lint",
                           *(str(target) for target, _ in written)], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=CLI_S * 4)
    seconds = time.monotonic() - started
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.splitlines()
    assert len(lines) == len(HOSTILE), lines
    for line, hostile, (target, text) in zip(lines, HOSTILE, written):
        assert line.startswith(expected_prefix(target, hostile, text)), (line[:400], hostile.id)
        assert hostile.message in line, (line[:600], hostile.id)
    assert f"0 of {len(HOSTILE)} spec file(s) OK" in proc.stdout
    assert seconds < CLI_S, f"took {seconds:.1f} s"


# --- the evaluator: the bounds generation and lint share -------------------------------------------

NAMES = {"Axis", "Axes"}
TENSORS = {"InputTensor"}


def evaluate(text: str) -> object:
    return parse_shape_expr(text, NAMES, TENSORS).evaluate({"Axis": 0, "Axes": [0, 1]}, {"InputTensor": TensorFacts((2, 3, 4))})


@pytest.mark.parametrize("text, message", [
    ("InputTensor.Sizes[0] // Axis", "division by zero: 'InputTensor.Sizes[0] // Axis' with a divisor of 0"),
    ("InputTensor.Sizes[1] % (Axis * 7)", "division by zero: 'InputTensor.Sizes[1] % (Axis * 7)' with a divisor of 0"),
    (f"sum(range({2 ** 62}))", f"range of {2 ** 62} elements is {BEYOND}"),
    ("sorted(range(1000000000))", f"range of 1000000000 elements is {BEYOND}"),
    ("[sum(range(100000)) for i in range(100000)]", STEPS),
    ("[[j for j in range(100000)] for i in range(100000)]", STEPS),
    ("[i in range(100000) for i in range(100000)]", STEPS),
    (f"[len(divisors({A_PRIME} - 2 * i)) for i in range(100)]", STEPS),
    (f"divisors({MAX_DIVISORS_OF + 1})", f"divisors of {MAX_DIVISORS_OF + 1}: {BEYOND}"),
    ("prod(range(1, 100000))", f"{BEYOND} ({MAX_INT_BITS} bits)"),
    ("prod([4294967296 for i in range(1000)])", f"{BEYOND} ({MAX_INT_BITS} bits)"),
    (f"[i for i in range({MAX_LIST})] + [i for i in range({MAX_LIST})]", f"a list of {2 * MAX_LIST} elements is {BEYOND}"),
])
def test_the_evaluator_refuses_hostile_values_fast(text: str, message: str) -> None:
    started = time.monotonic()
    with pytest.raises(FormulaError) as raised:
        evaluate(text)
    assert message in str(raised.value), str(raised.value)
    assert time.monotonic() - started < EVALUATE_S


def test_the_bounds_leave_what_specs_need() -> None:
    """A 2^32 size's divisors (the validator reads case files of any size), a range of MAX_LIST
    values, a product of eight 2^32 sizes."""
    assert len(evaluate("divisors(4294967296)")) == 33  # type: ignore[arg-type]
    assert evaluate(f"len(range({MAX_LIST}))") == MAX_LIST
    assert evaluate("prod([4294967295 for i in range(8)]) > 0") is True
    assert evaluate(f"len(divisors({A_PRIME}))") == 2  # once: within one evaluation's bound


# --- the shipped specs ------------------------------------------------------------------------------

def test_the_shipped_specs_lint_clean_with_their_probes() -> None:
    catalog = load_catalog(DEFAULT_SPECS_DIR)
    files = operator_files(DEFAULT_SPECS_DIR)
    assert len(files) >= 107
    started = time.process_time()
    for path in files:
        probe_spec(build_file(path, catalog))  # raises the first problem
    assert time.process_time() - started < 5.0
    assert lint_specs(files, DEFAULT_SPECS_DIR) == []

