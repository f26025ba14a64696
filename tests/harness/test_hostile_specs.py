"""Hostile spec files end in one clear error, fast and in bounded memory (issue 11).

What this module proves: for every kind of hostile input in HOSTILE (a "billion laughs" of YAML
aliases, recursive aliases, deep nesting, complex mapping keys, oversized files, values PyYAML
cannot construct, formulas too long or too deep, nested minus signs, integer literals beyond 64
bits, formula functions applied to the wrong kind of tensor, example values outside their data
type, example sizes that do not match the values, and top levels that are not a mapping):

- the library (`lint_specs` and `load_specs`) raises or returns exactly one SpecError that reads
  `file:line: key.path: message` with the expected line, key path and message, in under a second
  of CPU time beyond what the real specs take;
- the command line (`python -m harness.cli spec lint FILES...`, `spec lint` on a whole specs
  directory, and `spec show`, which loads every spec the way `make run` and `make test` do), run as
  a subprocess under a 2 GiB address-space limit and a 30 s timeout, prints the same one line per
  hostile file, exits with 1, prints no traceback and finishes within 3 s (and half again) of a clean lint of the real specs.

A blow-up (a hang, a RecursionError, gigabytes of memory) fails these tests instead of taking the
machine down. test_every_kind_tries_several_inputs counts the inputs tried per kind.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from harness.spec.expr import MAX_FORMULA_CHARS, MAX_FORMULA_DEPTH
from harness.spec.lint import lint_specs
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import MAX_DEPTH, MAX_FILE_BYTES, MAX_INT_CHARS, MAX_NODES, SpecError
from tests.helpers import copy_specs

ROOT = Path(__file__).resolve().parents[2]
SIGN = "ELEMENT_WISE_SIGN.yaml"
QUANT = "ELEMENT_WISE_QUANTIZE_LINEAR.yaml"
HSIG = "ACTIVATION_HARD_SIGMOID.yaml"
BITNOT = "ELEMENT_WISE_BIT_NOT.yaml"

CLI_TIMEOUT_S = 30
CLI_HOSTILE_EXTRA_S = 3.0      # a hostile CLI run may take this much longer than a clean one
LIBRARY_CPU_LIMIT_S = 1.0      # one hostile file through the library
ADDRESS_SPACE_LIMIT = 2 << 30  # 2 GiB: an expansion blow-up fails the test, not the machine

Edit = Callable[[str], str]


@dataclass(frozen=True)
class Hostile:
    """One hostile input: the spec file it replaces, how it is made, and the error it must give.

    `line` is a line number, a marker (the first line of the hostile text containing it), or None
    where the error has no line (the file is refused before it is parsed).
    """

    kind: str
    name: str
    file: str
    make: Edit
    line: int | str | None
    key: str
    message: str

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.name}"


def whole(text: str) -> Edit:
    """The hostile file is `text`, whatever the real spec said."""
    return lambda _original: text


def replace(old: str, new: str) -> Edit:
    """The real spec with one piece of text replaced (the piece must be there)."""
    def edit(original: str) -> str:
        assert old in original, f"test setup: {old!r} not found"
        return original.replace(old, new, 1)
    return edit


def edits(*steps: Edit) -> Edit:
    """Several edits, in order."""
    def edit(original: str) -> str:
        for step in steps:
            original = step(original)
        return original
    return edit


def set_expression(expression: str) -> Edit:
    """ELEMENT_WISE_SIGN with its formula expression replaced."""
    return replace('expression: "where(x < 0, -1, where(x > 0, 1, 0))"', f'expression: "{expression}"')


def laughs(levels: int, width: int, as_mapping: bool = False) -> str:
    """A "billion laughs": each level names the previous one `width` times (width**levels leaves)."""
    names = [f"l{i}" for i in range(levels)]

    def collection(items: list[str]) -> str:
        if as_mapping:
            return "{" + ", ".join(f"k{j}: {item}" for j, item in enumerate(items)) + "}"
        return "[" + ", ".join(items) + "]"

    lines = [f"{names[0]}: &{names[0]} {collection(['lol'] * width)}"]
    lines += [f"{names[i]}: &{names[i]} {collection([f'*{names[i - 1]}'] * width)}" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def nested_block(depth: int) -> str:
    """A block mapping nested `depth` levels by indentation."""
    return "".join(" " * i + f"k{i}:\n" for i in range(depth)) + " " * depth + "leaf\n"


def alias_chain(links: int, nesting: int) -> str:
    """Each anchor nests the previous one `nesting` brackets deeper: shallow text, deep data."""
    lines = []
    for i in range(links):
        inner = f"*a{i - 1}" if i else "1"
        lines.append(f"a{i}: &a{i} " + "[" * nesting + inner + "]" * nesting)
    return "\n".join(lines) + "\n"


EXPANDS = f"the document expands to more than {MAX_NODES:,} nodes"
NESTED = f"collections nested more than {MAX_DEPTH} levels deep"
COMPLEX = "a mapping key must be a plain value"
TOO_LONG = f"longer than {MAX_FORMULA_CHARS} characters"
NOT_MAPPING = "an operator spec must be a mapping at the top level"

HOSTILE: list[Hostile] = [
    # --- YAML aliases that expand to gigabytes: refused after MAX_NODES nodes, in milliseconds
    Hostile("billion_laughs", "lists_9x9", SIGN, whole(laughs(9, 9)), "l5: &l5", "l5[0]", EXPANDS),
    Hostile("billion_laughs", "mappings_9x9", SIGN, whole(laughs(9, 9, as_mapping=True)), "l4: &l4", "l4.k5", EXPANDS),
    Hostile("billion_laughs", "lists_30x2", SIGN, whole(laughs(30, 2)), "l14: &l14", "l14[1]", EXPANDS),
    Hostile("billion_laughs", "one_wide_alias", SIGN,
            whole("a: &a [" + ", ".join(["x"] * 1000) + "]\nb: [" + ", ".join(["*a"] * 200) + "]\n"), "b: [", "b[98]", EXPANDS),
    Hostile("billion_laughs", "inside_real_spec", SIGN, replace("sources:\n", laughs(9, 9) + "sources:\n"),
            "l5: &l5", "l5[0]", EXPANDS),
    # --- aliases that contain themselves: never end when walked
    Hostile("recursive_alias", "list_self", SIGN, whole("a: &a [*a]\n"), 1, "a[0]", "recursive alias *a"),
    Hostile("recursive_alias", "mapping_self", SIGN, whole("a: &a {b: *a}\n"), 1, "a.b", "recursive alias *a"),
    Hostile("recursive_alias", "deep_self", SIGN, whole("a: &a\n  b:\n    - 1\n    - c: *a\n"), 4, "a.b[1].c",
            "recursive alias *a"),
    Hostile("recursive_alias", "merge_self", SIGN, whole("a: &a {x: 1, <<: *a}\n"), 1, "a.<<", "recursive alias *a"),
    Hostile("recursive_alias", "inside_real_spec", SIGN,
            edits(replace("formula:\n", "formula: &f\n"), replace("  output: OutputTensor\n", "  output: OutputTensor\n  again: *f\n")),
            "again: *f", "formula.again", "recursive alias *f"),
    # --- nesting deeper than MAX_DEPTH: refused before PyYAML's composer recurses
    Hostile("deep_nesting", "brackets_10000", SIGN, whole("a: " + "[" * 10000 + "]" * 10000 + "\n"), 1,
            "a[0][0][0][0][0][0][0]", NESTED),
    Hostile("deep_nesting", "braces_5000", SIGN, whole("a: " + "{b: " * 5000 + "1" + "}" * 5000 + "\n"), 1,
            "a.b.b.b.b.b.b.b", NESTED),
    Hostile("deep_nesting", "block_indent_100", SIGN, whole(nested_block(100)), "k64:", "k0.k1.k2.k3.k4.k5.k6.k7", NESTED),
    Hostile("deep_nesting", "through_aliases", SIGN, whole(alias_chain(40, 30)), "a2: &a2",
            "a2[0][0][0][0][0][0][0]", "alias *a1 nests collections 91 levels deep"),
    Hostile("deep_nesting", "inside_real_spec", SIGN,
            replace("inputs: {x: InputTensor}", "inputs: {x: " + "[" * 10000 + "]" * 10000 + "}"),
            "inputs: {x: [[", "formula.inputs.x[0][0][0][0][0]", NESTED),
    # --- complex (non-scalar) mapping keys: unhashable in Python
    Hostile("complex_key", "explicit_sequence", SIGN, whole("? [a, b]\n: 1\n"), 1, "", COMPLEX + ", found a sequence"),
    Hostile("complex_key", "flow_sequence", SIGN, whole("x: {[1, 2]: x}\n"), 1, "x", COMPLEX + ", found a sequence"),
    Hostile("complex_key", "explicit_mapping", SIGN, whole("? {a: 1}\n: 2\n"), 1, "", COMPLEX + ", found a mapping"),
    Hostile("complex_key", "alias_to_sequence", SIGN, whole("a: &a [1]\nb: {*a : 1}\n"), 2, "b", COMPLEX),
    Hostile("complex_key", "inside_real_spec", SIGN,
            replace("  default: {kind: exact}\n", "  default: {kind: exact}\n  ? [FLOAT32, FLOAT16]\n  : {kind: exact}\n"),
            "? [FLOAT32", "comparison", COMPLEX + ", found a sequence"),
    # --- files over MAX_FILE_BYTES: refused before reading further
    Hostile("oversized_file", "comments", SIGN, whole("#" * (MAX_FILE_BYTES + 1)), None, "",
            f"file larger than {MAX_FILE_BYTES:,} bytes"),
    Hostile("oversized_file", "long_summary", SIGN,
            replace("summary: The sign", "summary: The sign" + " and" * (MAX_FILE_BYTES // 4)), None, "", "file larger than"),
    Hostile("oversized_file", "flat_list_6MiB", SIGN, lambda _: "a: [" + "0, " * (2 << 20) + "0]\n", None, "", "file larger than"),
    Hostile("oversized_file", "16MiB_blank", SIGN, lambda _: " " * (16 << 20), None, "", "file larger than"),
    # --- values PyYAML's constructors raise plain Python errors on
    Hostile("unconstructible_value", "empty_int", SIGN, replace("operator_type: 79", 'operator_type: !!int ""'),
            "operator_type: !!int", "", "invalid YAML: bad !!int value ''"),
    Hostile("unconstructible_value", "bad_date", SIGN, replace('introduced: "2.0"', "introduced: 2024-13-45"),
            "introduced: 2024", "", "invalid YAML: bad !!timestamp value '2024-13-45': month must be in 1..12"),
    Hostile("unconstructible_value", "bad_bool", SIGN, replace("  allowed: true", "  allowed: !!bool maybe"),
            "allowed: !!bool", "", "invalid YAML: bad !!bool value 'maybe'"),
    Hostile("unconstructible_value", "bad_float", SIGN, replace("operator_type: 79", "operator_type: !!float abc"),
            "operator_type: !!float", "", "invalid YAML: bad !!float value 'abc'"),
    Hostile("unconstructible_value", "nul_character", SIGN, replace("summary: The sign", "summary: The\x00sign"),
            "summary: The", "", "invalid YAML: character U+0000 is not allowed"),
    # --- formulas that are long chains: refused by length, then by syntax tree depth
    Hostile("formula_chain", "x_plus_2000_chars", SIGN, set_expression("+".join(["x"] * 1000)), "expression: ",
            "formula.expression", f"bad formula: formula {TOO_LONG} (1999)"),
    Hostile("formula_chain", "x_plus_500_terms", SIGN, set_expression("+".join(["x"] * 500)), "expression: ",
            "formula.expression", f"bad formula: formula is 500 levels deep; at most {MAX_FORMULA_DEPTH} are allowed"),
    Hostile("formula_chain", "x_times_in_unspecified", HSIG,
            replace('when: "isnan(Alpha * x + Beta)"', 'when: "' + "*".join(["x"] * 120) + ' > 0"'),
            'when: "x*x', "unspecified[0].when", "bad formula: formula is 121 levels deep"),
    Hostile("formula_chain", "chain_in_atol", HSIG, replace('default: {kind: exact}', 'default: {kind: ulp, max_ulp: 1, atol: "' + "-".join(["x"] * 300) + '"}'),
            "default: {kind: ulp, max_ulp: 1, atol:", "comparison.default.atol", "bad formula: formula is 300 levels deep"),
    Hostile("formula_chain", "nested_calls", SIGN, set_expression("abs(" * 60 + "x" + ")" * 60), "expression: ",
            "formula.expression", "bad formula: formula nests 60 levels deep"),
    Hostile("formula_chain", "chain_in_constant", QUANT, replace('Min: "type_min(OutputTensor)"', 'Min: "' + "+".join(["1"] * 400) + '"'),
            'Min: "1+1', "formula.constants.Min", "bad formula: formula is 400 levels deep"),
    # --- nested minus signs (and other prefix operators)
    Hostile("nested_minus", "minus_parens_2000", SIGN, set_expression("-(" * 2000 + "x" + ")" * 2000), "expression: ",
            "formula.expression", f"bad formula: formula {TOO_LONG}"),
    Hostile("nested_minus", "minus_parens_330", SIGN, set_expression("-(" * 330 + "x" + ")" * 330), "expression: ",
            "formula.expression", "bad formula: formula nests 330 levels deep"),
    Hostile("nested_minus", "minus_run_2000", SIGN, set_expression("-" * 2000 + "x"), "expression: ",
            "formula.expression", f"bad formula: formula {TOO_LONG}"),
    Hostile("nested_minus", "minus_run_999", SIGN, set_expression("-" * 999 + "x"), "expression: ",
            "formula.expression", "bad formula: formula nests 999 levels deep"),
    Hostile("nested_minus", "not_run", SIGN, set_expression("not " * 200 + "x"), "expression: ",
            "formula.expression", "bad formula: formula nests 200 levels deep"),
    Hostile("nested_minus", "invert_run", SIGN, set_expression("~" * 500 + "x"), "expression: ",
            "formula.expression", "bad formula: formula nests 500 levels deep"),
    # --- integer literals beyond 64 bits, in formulas and in YAML numbers
    Hostile("huge_integer", "formula_301_digits", SIGN, set_expression("x + 1" + "0" * 300), "expression: ",
            "formula.expression", "bad formula: integer literal of 301 digits is out of range"),
    Hostile("huge_integer", "formula_2_pow_64", SIGN, set_expression("x * 18446744073709551616"), "expression: ",
            "formula.expression", "bad formula: integer literal 18446744073709551616 is out of range"),
    Hostile("huge_integer", "operator_type_300_digits", SIGN, replace("operator_type: 79", "operator_type: " + "9" * 300),
            "operator_type: 999", "operator_type", f"integer literal of 300 characters; at most {MAX_INT_CHARS}"),
    Hostile("huge_integer", "operator_type_2_pow_64", SIGN, replace("operator_type: 79", "operator_type: 18446744073709551616"),
            "operator_type: 1844", "operator_type", "integer 18446744073709551616 does not fit in 64 bits"),
    Hostile("huge_integer", "example_value_2_pow_70", BITNOT, replace("[0, 128, 42, 255]", f"[0, 128, 42, {2 ** 70}]"),
            "InputTensor: [0, 128, 42, 1180", "examples[0].inputs.InputTensor[3]", f"integer {2 ** 70} does not fit in 64 bits"),
    Hostile("huge_integer", "hex_dims", SIGN,
            replace("dims: [1, 8], types: [FLOAT32, FLOAT16, INT64", "dims: [1, 0x" + "f" * 40 + "], types: [FLOAT32, FLOAT16, INT64"),
            "dims: [1, 0xfff", "support[0].tensors.InputTensor.dims[1]", "integer literal of 42 characters"),
    Hostile("huge_integer", "sexagesimal_10000", SIGN, replace("operator_type: 79", "operator_type: " + ":".join(["59"] * 10000)),
            "operator_type: 59", "operator_type", "integer literal of 29999 characters"),
    # --- formula functions applied to the wrong kind of tensor
    Hostile("wrong_kind_function", "type_min_of_float_tensor", SIGN, set_expression("where(x < 0, type_min(InputTensor), 1)"),
            "expression: ", "formula.expression",
            "bad formula: type_min(InputTensor) is meaningful for integer tensors only (float types have no range), "
            "but the support tables allow InputTensor FLOAT32, FLOAT16"),
    Hostile("wrong_kind_function", "type_max_in_constant", QUANT, replace('Max: "type_max(OutputTensor)"', 'Max: "type_max(ScaleTensor)"'),
            'Max: "type_max(ScaleTensor)"', "formula.constants.Max",
            "bad formula: type_max(ScaleTensor) is meaningful for integer tensors only"),
    Hostile("wrong_kind_function", "bitnot_of_float_values", SIGN, set_expression("bitnot(x)"), "expression: ",
            "formula.expression", "bad formula: bitnot() needs an integer argument, but 'x' can be a float value "
                                  "(x reads InputTensor: FLOAT32, FLOAT16"),
    Hostile("wrong_kind_function", "isnan_of_raw_bits", BITNOT,
            replace("unspecified: []", 'unspecified:\n  - {id: nan, when: "isnan(x)", why: "never"}'), 'when: "isnan(x)"',
            "unspecified[0].when", "bad formula: isnan() is meaningful for float values only, but 'x' is never a float "
                                   "(x is the raw bits of InputTensor), so it is always false"),
    Hostile("wrong_kind_function", "is_type_never_allowed", SIGN, set_expression("where(is_type(InputTensor, 'FLOAT64'), 0, x)"),
            "expression: ", "formula.expression", "bad formula: is_type(InputTensor, 'FLOAT64') is always false"),
    Hostile("wrong_kind_function", "bitnot_in_favour", QUANT, replace('expression: "(k + 0.5) * scale"', 'expression: "bitnot(k) * scale"'),
            'expression: "bitnot(k)', "generation.favour[0].expression",
            "bad formula: bitnot() needs an integer argument, but 'k' can be a float value (the generator draws k as float64)"),
    Hostile("wrong_kind_function", "negated_comparison", SIGN, set_expression("-(x < 0)"), "expression: ",
            "formula.expression", "bad formula: '-' cannot negate a truth value"),
    # --- worked examples whose values are not values of their data type
    Hostile("example_value_type", "uint8_300", BITNOT, replace("[0, 128, 42, 255]", "[0, 128, 42, 300]"),
            "InputTensor: [0, 128, 42, 300]", "examples[0].inputs.InputTensor[3]", "300 is outside the range of UINT8 (0 .. 255)"),
    Hostile("example_value_type", "int8_minus_129", SIGN, replace("[-128, -1, 0, 1, 127]", "[-129, -1, 0, 1, 127]"),
            "[-129,", "examples[1].inputs.InputTensor[0]", "-129 is outside the range of INT8 (-128 .. 127)"),
    Hostile("example_value_type", "non_integer_for_int8", SIGN, replace("[-128, -1, 0, 1, 127]", "[-128, -1, 0.5, 1, 127]"),
            "[-128, -1, 0.5", "examples[1].inputs.InputTensor[2]", "0.5 is not an integer, but INT8 holds integers only"),
    Hostile("example_value_type", "nan_for_uint8", SIGN, replace("[0, 1, 128, 255]", "[0, 1, .nan, 255]"),
            "[0, 1, .nan", "examples[2].inputs.InputTensor[2]", "nan is not an integer, but UINT8 holds integers only"),
    Hostile("example_value_type", "expected_out_of_range", BITNOT, replace("[255, 127, 213, 0]", "[256, 127, 213, 0]"),
            "[256, 127", "examples[0].expected.OutputTensor[0]", "256 is outside the range of UINT8"),
    Hostile("example_value_type", "float32_overflow", SIGN, replace("[-3.0, -0.0, 0.0, 2.5", "[-3.5e+38, -0.0, 0.0, 2.5"),
            "[-3.5e+38", "examples[0].inputs.InputTensor[0]", "-3.5e+38 is outside the range of FLOAT32"),
    # --- worked examples whose sizes do not hold their values
    Hostile("example_sizes", "2x2_with_3_values", BITNOT,
            edits(replace("[0, 128, 42, 255]", "[0, 128, 42]"), replace("[255, 127, 213, 0]", "[255, 127, 213]")),
            "sizes: [2, 2]", "examples[0].sizes", "sizes [2, 2] hold 4 element(s), but each tensor lists 3 value(s)"),
    Hostile("example_sizes", "3x3_with_4_values", BITNOT, replace("sizes: [2, 2]", "sizes: [3, 3]"),
            "sizes: [3, 3]", "examples[0].sizes", "sizes [3, 3] hold 9 element(s), but each tensor lists 4 value(s)"),
    Hostile("example_sizes", "nine_dimensions", BITNOT, replace("sizes: [2, 2]", "sizes: [1, 1, 1, 1, 1, 1, 1, 2, 2]"),
            "sizes: [1, 1", "examples[0].sizes", "sizes has 9 dimension(s); expected 1 to 8"),
    Hostile("example_sizes", "no_dimensions", BITNOT, replace("sizes: [2, 2]", "sizes: []"),
            "sizes: []", "examples[0].sizes", "sizes has 0 dimension(s)"),
    Hostile("example_sizes", "sizes_on_five_values", SIGN,
            replace("    types: {InputTensor: INT8, OutputTensor: INT8}\n",
                    "    types: {InputTensor: INT8, OutputTensor: INT8}\n    sizes: [2, 2]\n"),
            "sizes: [2, 2]", "examples[1].sizes", "sizes [2, 2] hold 4 element(s), but each tensor lists 5 value(s)"),
    Hostile("example_sizes", "no_values", SIGN,
            edits(replace("[-128, -1, 0, 1, 127]", "[]"), replace("{OutputTensor: [-1, -1, 0, 1, 1]}", "{OutputTensor: []}")),
            "inputs: {InputTensor: []}", "examples[1].inputs", "an example needs at least one value per tensor"),
    # --- top levels that are not a mapping
    Hostile("not_a_mapping", "list", SIGN, whole("- operator: ELEMENT_WISE_SIGN\n"), 1, "", NOT_MAPPING + ", found a list"),
    Hostile("not_a_mapping", "string", SIGN, whole("ELEMENT_WISE_SIGN\n"), 1, "",
            NOT_MAPPING + ", found a single value ('ELEMENT_WISE_SIGN')"),
    Hostile("not_a_mapping", "number", SIGN, whole("79\n"), 1, "", NOT_MAPPING + ", found a single value (79)"),
    Hostile("not_a_mapping", "empty_file", SIGN, whole(""), 1, "", NOT_MAPPING + ", found an empty file"),
    Hostile("not_a_mapping", "comments_only", SIGN, whole("# nothing here\n"), 1, "", NOT_MAPPING + ", found an empty file"),
    Hostile("not_a_mapping", "null", SIGN, whole("null\n"), 1, "", NOT_MAPPING + ", found an empty file"),
    Hostile("not_a_mapping", "two_documents", SIGN, lambda t: t + "---\n- more\n", "---", "",
            "invalid YAML: expected a single document in the stream, but found another document"),
]
KINDS = sorted({h.kind for h in HOSTILE})
HOSTILE_FILES = sorted({h.file for h in HOSTILE})


def write_hostile(specs: Path, hostile: Hostile) -> tuple[Path, str]:
    """Copy the shared spec files and the operators the hostile inputs break (HOSTILE_FILES) into
    `specs` and replace one file by the hostile one; (its path, its text)."""
    copy_specs(specs, *HOSTILE_FILES)
    target = specs / hostile.file
    text = hostile.make(target.read_text(encoding="utf-8"))
    target.write_text(text, encoding="utf-8")
    return target, text


def expected_line(hostile: Hostile, text: str) -> int | None:
    """The line the error must name: given, or the first line holding the marker."""
    if hostile.line is None or isinstance(hostile.line, int):
        return hostile.line
    return next(number for number, line in enumerate(text.splitlines(), 1) if hostile.line in line)


def assert_clear_error(rendered: str, target: Path, hostile: Hostile, text: str) -> None:
    """`file:line: key.path: message`, with exactly the expected file, line, key path and message."""
    line = expected_line(hostile, text)
    prefix = f"{target}:{line}: " if line is not None else f"{target}: "
    if hostile.key:
        prefix += f"{hostile.key}: "
    assert rendered.startswith(prefix), (rendered[:300], prefix)
    assert hostile.message in rendered, (rendered[:300], hostile.message)
    assert "\n" not in rendered


@pytest.fixture(scope="module")
def clean_cpu_s(tmp_path_factory: pytest.TempPathFactory) -> float:
    """CPU seconds that lint and load take on the real specs, unaltered: what a hostile file's own
    cost is measured above (the real specs grow with every operator added; a blow-up does not
    scale with them)."""
    specs = copy_specs(tmp_path_factory.mktemp("clean") / "specs", *HOSTILE_FILES)
    started = time.process_time()
    lint_specs(sorted(specs.glob("[A-Z]*.yaml")), specs)
    load_specs(specs)
    return time.process_time() - started


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.id for h in HOSTILE])
def test_library_reports_one_clear_error(tmp_path: Path, hostile: Hostile, clean_cpu_s: float) -> None:
    specs = tmp_path / "specs"
    target, text = write_hostile(specs, hostile)

    started = time.process_time()
    errors = lint_specs([target], specs)
    with pytest.raises(SpecError) as loaded:
        load_specs(specs)
    cpu = time.process_time() - started

    assert len(errors) == 1, [e.render() for e in errors]
    assert_clear_error(errors[0].render(), target, hostile, text)
    assert loaded.value.render() == errors[0].render()
    # the hostile file's own cost, above a clean lint and load (with slack for a busy machine)
    assert cpu < 1.5 * clean_cpu_s + 2 * LIBRARY_CPU_LIMIT_S, f"lint and load took {cpu:.2f} s of CPU (clean specs: {clean_cpu_s:.2f} s)"


def _limit_address_space() -> None:
    """Runs in the child before exec: a blow-up becomes a MemoryError there, not a dead machine."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_cli(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m harness.cli ARGS` under the address-space limit and the timeout; (result, seconds)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, preexec_fn=_limit_address_space, timeout=CLI_TIMEOUT_S)
    return proc, time.monotonic() - started


_CLEAN_CLI_S: list[float] = []


def clean_cli_seconds() -> float:
    """Wall seconds of `spec lint` on the real specs (interpreter start included), measured once:
    a hostile run's bound is relative to it, as the specs grow with every operator."""
    if not _CLEAN_CLI_S:
        proc, seconds = run_cli("spec", "lint")
        assert proc.returncode == 0, proc.stderr[-3000:]
        _CLEAN_CLI_S.append(seconds)
    return _CLEAN_CLI_S[0]


def assert_cli_failed_cleanly(proc: subprocess.CompletedProcess, seconds: float) -> list[str]:
    """Exit code 1, no traceback, little more time than a clean lint; the error lines."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    clean = clean_cli_seconds()
    assert seconds < 1.5 * clean + CLI_HOSTILE_EXTRA_S, f"took {seconds:.1f} s (a clean lint: {clean:.1f} s)"
    return proc.stderr.splitlines()


@pytest.mark.parametrize("kind", KINDS)
def test_cli_lint_reports_one_line_per_hostile_file(tmp_path: Path, kind: str) -> None:
    """Every input of a kind in one `spec lint FILES...` run: one line each, in order."""
    cases = [h for h in HOSTILE if h.kind == kind]
    written = [write_hostile(tmp_path / f"input{i}" / "specs", h) for i, h in enumerate(cases)]

    proc, seconds = run_cli("--specs-dir", str(DEFAULT_SPECS_DIR), "spec", "lint", *(str(target) for target, _ in written))

    lines = assert_cli_failed_cleanly(proc, seconds)
    assert len(lines) == len(cases), lines
    for line, hostile, (target, text) in zip(lines, cases, written):
        assert_clear_error(line, target, hostile, text)
    assert f"0 of {len(cases)} spec file(s) OK" in proc.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_cli_on_a_hostile_specs_directory(tmp_path: Path, kind: str) -> None:
    """`spec lint` of a whole directory (what `make run` starts with) and `spec show`, which loads
    every spec as the suite does, each end in the one error line."""
    hostile = next(h for h in HOSTILE if h.kind == kind)
    specs = tmp_path / "specs"
    target, text = write_hostile(specs, hostile)
    for args in (["spec", "lint"], ["spec", "show", "ELEMENT_WISE_SIGN"]):
        proc, seconds = run_cli("--specs-dir", str(specs), *args)
        lines = assert_cli_failed_cleanly(proc, seconds)
        assert len(lines) == 1, lines
        assert_clear_error(lines[0], target, hostile, text)


def test_every_kind_tries_several_inputs() -> None:
    counts = Counter(h.kind for h in HOSTILE)
    print("hostile inputs per kind:", dict(sorted(counts.items())))
    assert len(counts) == 13
    assert min(counts.values()) >= 4, counts


def test_real_specs_still_lint_clean() -> None:
    assert lint_specs(sorted(DEFAULT_SPECS_DIR.glob("[!_]*.yaml")), DEFAULT_SPECS_DIR) == []
