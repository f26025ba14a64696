"""Expectation files are read like specs: no file can crash or hang the harness. Each hostile file
below gives one clear `file:line: key.path: message` error, fast, from check_expectation_files
(the pre-flight API) and as an ExpectationError (a SpecError) from load_expectations; the shipped
files give none."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.judge.expectations import (Expectation, ExpectationError, ExpectationSet, _parse_descriptor_when,
                                        check_expectation_files, check_expectations_dir, descriptor_holds,
                                        expectation_files, expectation_files_by_backend, load_expectations)
from harness.spec.expr import parse_formula
from harness.spec.source import SpecError
from tests.helpers import SPECS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "backends" / "expectations"
FAST = 2.0  # seconds: every hostile file is refused well within this

SIGN_PROBE = "{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {InputTensor: [.nan, 1.0]}}"


def _entry(**keys: str | None) -> str:
    """One expectation entry (flow style, one line), a valid SIGN mismatch unless `keys` change it."""
    fields: dict[str, str | None] = {"id": "e", "operator": "ELEMENT_WISE_SIGN", "data_types": "[FLOAT32]", "when": "'isnan(x)'", "why": "w",
              "probe": SIGN_PROBE}
    fields.update(keys)
    return "  - {" + ", ".join(f"{k}: {v}" for k, v in fields.items() if v is not None) + "}\n"


def _file(*entries: str) -> str:
    return "backend: b\nexpectations:\n" + "".join(entries)


def _errors(tmp_path: Path, text: str | bytes, name: str = "b.yaml") -> tuple[Path, list[SpecError]]:
    """The problems check_expectation_files finds in one file, checked to come fast; and the same
    first problem from load_expectations, as an ExpectationError (never another exception)."""
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    start = time.perf_counter()
    errors = check_expectation_files([path], SPECS)
    assert time.perf_counter() - start < FAST
    start = time.perf_counter()
    with pytest.raises(ExpectationError) as raised:
        load_expectations("b", tmp_path, SPECS)
    assert time.perf_counter() - start < FAST
    assert errors and raised.value.errors[0].render() == errors[0].render()
    assert "\n" not in raised.value.render()
    return path, errors


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# (name, file text, the key path and message the one error has, the text on the error's line)
HOSTILE = [
    ("top-level-list", "- a\n- b\n", "an expectation file must be a mapping at the top level (backend: NAME, expectations: [...]), "
                                     "found a list", "- a"),
    ("top-level-string", "just some text\n", "found a single value ('just some text')", "just some text"),
    ("top-level-unknown-key", "backend: b\nexpectation: []\n",
     "expectation: Additional properties are not allowed ('expectation' was unexpected)", "expectation:"),
    ("expectations-not-a-list", "backend: b\nexpectations: {a: 1}\n", "expectations: {'a': 1} is not of type 'array'",
     "expectations:"),
    ("string-entry", _file("  - just a string\n"), "expectations[0]: 'just a string' is not of type 'object'", "just a string"),
    ("list-id", _file(_entry(id="[a, b]")), "expectations[0].id: ['a', 'b'] is not of type 'string'", "- {id: [a, b]"),
    ("id-with-plus", _file(_entry(id="a+b")), "expectations[0].id: 'a+b' does not have the expected form", "a+b"),
    ("unknown-key", _file(_entry(whne="x")), "expectations[0].whne: Additional properties are not allowed ('whne' was unexpected)",
     "whne"),
    ("mismatch-without-when", _file(_entry(when=None)), "expectations[0]: 'when' is a required property", "- {id: e"),
    ("unknown-status", _file(_entry(status="exploded")), "expectations[0].status: 'exploded' is not one of", "exploded"),
    ("unknown-operator", _file(_entry(operator="ELEMENT_WISE_SIGNN")),
     "expectations[0].operator: unknown operator 'ELEMENT_WISE_SIGNN': no spec of that name in", "ELEMENT_WISE_SIGNN"),
    ("unknown-data-type", _file(_entry(data_types="[FLOAT32, FLOAT33]")),
     "expectations[0].data_types[1]: unknown data type 'FLOAT33'; known: FLOAT32, FLOAT16", "FLOAT33"),
    ("when-syntax-error", _file(_entry(when="'isnan(x'")), "expectations[0].when: bad formula: not a valid expression", "isnan(x'"),
    ("when-unknown-name", _file(_entry(when="'isnan(y)'")),
     "expectations[0].when: names 'y', which ELEMENT_WISE_SIGN does not bind when a mismatch is explained; its names: x", "isnan(y)"),
    ("when-unknown-tensor", _file(_entry(when="'is_type(Foo, \"FLOAT32\")'")),
     "expectations[0].when: type function names 'Foo', not a tensor of ELEMENT_WISE_SIGN", "is_type(Foo"),
    ("when-unknown-type", _file(_entry(when="'is_type(InputTensor, \"FLOAT33\")'")),
     "expectations[0].when: is_type() names 'FLOAT33', not a data type", "FLOAT33"),
    ("when-generator", _file(_entry(when="'where((x > i for i in range(10**9)), 1, 0)'")),
     "expectations[0].when: bad formula: GeneratorExp '(x > i for i in range(10 ** 9))' is not allowed in a formula", "range(10**9)"),
    ("when-too-long", _file(_entry(when="'" + "+".join(["x"] * 600) + "'")),
     "expectations[0].when: bad formula: formula longer than 1000 characters", "x+x+x"),
    ("when-too-deep", _file(_entry(when="'" + "(" * 80 + "x" + ")" * 80 + "'")),
     "expectations[0].when: bad formula: formula nests 80 levels deep", "((("),
    ("descriptor-when-nested-huge-loops", _file(_entry(
        descriptor_when="'any(any(i == j for j in range(100000000)) for i in range(100000000))'")),
     "expectations[0].descriptor_when: bad shape expression: its loops may visit more than 131,072 items (nested loops multiply)",
     "range(100000000)"),
    ("descriptor-when-nested-unbounded-loops", _file(_entry(operator="ELEMENT_WISE_CLIP", when="'x > Max'", probe=None,
        descriptor_when="'any(any(i == j for j in range(InputTensor.DimensionCount * Min)) for i in range(Max))'")),
     "expectations[0].descriptor_when: bad shape expression: its loops may visit more than 131,072 items", "descriptor_when"),
    ("descriptor-when-huge-product", _file(_entry(operator="ELEMENT_WISE_CLIP", when="'x > Max'", probe=None,
        descriptor_when="'prod(range(1, Max)) > 0'")),
     "expectations[0].descriptor_when: bad shape expression: prod() of a list whose length the expression does not bound",
     "prod(range(1, Max))"),
    ("descriptor-when-unknown-name", _file(_entry(descriptor_when="'Nope == 1'")),
     "expectations[0].descriptor_when: bad shape expression: unknown name 'Nope'", "Nope == 1"),
    ("descriptor-when-syntax-error", _file(_entry(descriptor_when="'InputTensor.DimensionCount =='")),
     "expectations[0].descriptor_when: bad shape expression: not a valid expression", "descriptor_when"),
    ("status-with-when", _file(_entry(status="crashed", reason_contains="boom", data_types=None)),
     "expectations[0].when: when applies to mismatches only; a crashed expectation is matched by", "status: crashed"),
    ("mismatch-with-rule", _file(_entry(rule="tensor.data_type")),
     "expectations[0].rule: rule applies to status expectations only", "tensor.data_type"),
    ("unknown-rule", _file(_entry(status="rejected-valid", when=None, rule="constraint.nope")),
     "expectations[0].rule: 'constraint.nope' is not a rule of ELEMENT_WISE_SIGN", "constraint.nope"),
    ("unknown-attribute-present", _file(_entry(status="crashed", when=None, attributes_present="[Alpha]")),
     "expectations[0].attributes_present[0]: ELEMENT_WISE_SIGN has no attribute 'Alpha'", "[Alpha]"),
    ("empty-device", _file(_entry(devices="['']")), "expectations[0].devices[0]: '' should be non-empty", "devices"),
    ("backend-key-of-another-backend", "backend: other\nexpectations: []\n",
     "backend: 'other' is not the backend of", "backend: other"),
    ("probe-unknown-tensor", _file(_entry(probe="{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {Foo: [1.0]}}")),
     "expectations[0].probe.inputs.Foo: ELEMENT_WISE_SIGN has no tensor 'Foo'; its tensors: InputTensor, OutputTensor", "Foo"),
    ("probe-typed-unknown-tensor", _file(_entry(probe="{types: {Foo: FLOAT32}, inputs: {}}")),
     "expectations[0].probe.types.Foo: ELEMENT_WISE_SIGN has no tensor 'Foo'", "Foo"),
    ("probe-untyped-input", _file(_entry(probe="{types: {OutputTensor: FLOAT32}, inputs: {InputTensor: [1.0]}}")),
     "expectations[0].probe.inputs.InputTensor: InputTensor is not in the probe's types", "InputTensor"),
    ("probe-output-given", _file(_entry(probe="{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {OutputTensor: [1.0]}}")),
     "expectations[0].probe.inputs.OutputTensor: OutputTensor is an output of ELEMENT_WISE_SIGN", "OutputTensor"),
    ("probe-wrong-length", _file(_entry(operator="ELEMENT_WISE_ADD", when="'a > b'", probe=(
        "{types: {ATensor: FLOAT32, BTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {ATensor: [1.0, 2.0, 3.0], BTensor: [1.0, 2.0]}}"))),
     "expectations[0].probe.inputs.BTensor: 2 value(s), but ATensor has 3: without tensor_sizes every tensor has the first input's length",
     "BTensor"),
    ("probe-wrong-length-for-its-sizes", _file(_entry(probe=(
        "{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, tensor_sizes: {InputTensor: [2, 2], OutputTensor: [2, 2]}, "
        "inputs: {InputTensor: [1.0, 2.0, 3.0]}}"))),
     "expectations[0].probe.inputs.InputTensor: 3 value(s), but tensor_sizes.InputTensor [2, 2] hold 4", "InputTensor"),
    ("probe-sizes-missing", _file(_entry(probe=(
        "{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, tensor_sizes: {InputTensor: [2]}, inputs: {InputTensor: [1.0, 2.0]}}"))),
     "expectations[0].probe.tensor_sizes: no Sizes for OutputTensor", "tensor_sizes"),
    ("probe-huge-tensor", _file(_entry(probe=(
        "{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, tensor_sizes: {InputTensor: [1], OutputTensor: [65536, 65536, 65536]}, "
        "inputs: {InputTensor: [1.0]}}"))),
     "expectations[0].probe.tensor_sizes.OutputTensor: [65536, 65536, 65536] hold 281,474,976,710,656 elements", "65536"),
    ("probe-no-values", _file(_entry(probe="{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {InputTensor: []}}")),
     "expectations[0].probe.inputs.InputTensor: no values", "InputTensor"),
    ("probe-unknown-data-type", _file(_entry(probe="{types: {InputTensor: FLOAT33, OutputTensor: FLOAT32}, inputs: {InputTensor: [1.0]}}")),
     "expectations[0].probe.types.InputTensor: unknown data type 'FLOAT33'", "FLOAT33"),
    ("probe-unsupported-type", _file(_entry(probe="{types: {InputTensor: UINT4, OutputTensor: UINT4}, inputs: {InputTensor: [1]}}")),
     "expectations[0].probe.types.InputTensor: UINT4 is not a type of InputTensor in any support table of ELEMENT_WISE_SIGN", "UINT4"),
    ("probe-fraction-for-an-integer-type", _file(_entry(probe="{types: {InputTensor: INT32, OutputTensor: INT32}, inputs: {InputTensor: [1.5]}}")),
     "expectations[0].probe.inputs.InputTensor[0]: 1.5 is not an integer, but INT32 holds integers only", "1.5"),
    ("probe-value-beyond-its-type", _file(_entry(probe="{types: {InputTensor: FLOAT16, OutputTensor: FLOAT16}, inputs: {InputTensor: [1.0e+6]}}")),
     "expectations[0].probe.inputs.InputTensor[0]: 1000000.0 is outside the range of FLOAT16", "1.0e+6"),
    ("probe-bits-beyond-its-type", _file(_entry(probe="{types: {InputTensor: FLOAT16, OutputTensor: FLOAT16}, input_bits: {InputTensor: [0x10000]}}")),
     "expectations[0].probe.input_bits.InputTensor[0]: 0x10000 is not a 16-bit pattern of FLOAT16", "0x10000"),
    ("probe-unknown-attribute", _file(_entry(probe="{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {InputTensor: [1.0]}, attributes: {Alpha: 1.0}}")),
     "expectations[0].probe.attributes.Alpha: ELEMENT_WISE_SIGN has no attribute 'Alpha'", "Alpha"),
    ("probe-attribute-not-a-number", _file(_entry(operator="ELEMENT_WISE_CLIP", when="'x > Max'", probe=(
        "{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {InputTensor: [1.0]}, attributes: {Min: '1', Max: 2.0}}"))),
     "expectations[0].probe.attributes.Min: '1' is not of type 'number', 'array'", "Min: '1'"),
    ("probe-attribute-beyond-its-type", _file(_entry(operator="ELEMENT_WISE_CLIP", when="'x > Max'", probe=(
        "{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {InputTensor: [1.0]}, attributes: {Min: 1.0e+300, Max: 2.0}}"))),
     "expectations[0].probe.attributes.Min: the probe is not a well-formed case: 1e+300 overflows FLOAT", "1.0e+300"),
    ("probe-unknown-rule", _file(_entry(probe="{types: {InputTensor: FLOAT32, OutputTensor: FLOAT32}, inputs: {InputTensor: [1.0]}, rule: nope}")),
     "expectations[0].probe.rule: 'nope' is not a rule of ELEMENT_WISE_SIGN", "rule: nope"),
    ("duplicate-key", _file("  - {id: e, id: f, operator: ELEMENT_WISE_SIGN, data_types: [FLOAT32], when: 'isnan(x)', why: w}\n"),
     "invalid YAML: duplicate key 'id' (first at line 3)", "id: f"),
    ("alias-bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                   "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                   "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
     "e[7]: the document expands to more than 100,000 nodes", "e: &e"),
    ("deep-nesting", "backend: b\nexpectations: " + "[" * 200 + "]" * 200 + "\n", "collections nested more than 64 levels deep",
     "expectations: [[["),
    ("bad-yaml", "backend: b\nexpectations: [\n", "invalid YAML:", None),
]


@pytest.mark.parametrize("name,text,message,on_line", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_expectation_file_is_one_clear_error(tmp_path, name, text, message, on_line):
    path, errors = _errors(tmp_path, text)
    assert len(errors) == 1, [e.render() for e in errors]
    rendered = errors[0].render()
    line = _line_of(text, on_line) if on_line is not None else errors[0].line
    assert rendered.startswith(f"{path}:{line}: "), rendered
    assert message in rendered, rendered
    assert "\n" not in rendered and "Traceback" not in rendered


@pytest.mark.parametrize("content,message", [
    (b"\x00" * (2 * 1024 * 1024), "file larger than 131,072 bytes; refusing to load it"),
    (b"backend: b\nexpectations: [\xff\xfe]\n", "not UTF-8 text: invalid start byte"),
], ids=["2-megabytes", "not-utf8"])
def test_a_file_the_loader_refuses_to_read(tmp_path, content, message):
    path, errors = _errors(tmp_path, content)
    assert [e.render() for e in errors] == [f"{path}: {message}"]


def test_a_file_of_many_tiny_nodes_gives_its_first_problems(tmp_path):
    path, errors = _errors(tmp_path, "backend: b\nexpectations: [" + "0," * 10000 + "0]\n")
    assert [e.render() for e in errors] == [f"{path}:2: expectations[{i}]: 0 is not of type 'object'" for i in range(20)] + [
        f"{path}: more problems than the 20 shown; the file was not read further"]


def test_a_two_megabyte_file_of_tiny_nodes(tmp_path):
    path, errors = _errors(tmp_path, "backend: b\nexpectations: [" + "0," * (1024 * 1024) + "0]\n")
    assert [e.render() for e in errors] == [f"{path}: file larger than 131,072 bytes; refusing to load it"]


@pytest.mark.parametrize("kind", ["directory", "dev-zero", "fifo"])
def test_what_is_no_regular_file_is_not_opened(tmp_path, kind):
    """A directory, a link to /dev/zero (endless) or a named pipe (opening it blocks) is refused by
    its kind, before it is opened."""
    path = tmp_path / "b.yaml"
    if kind == "directory":
        path.mkdir()
        what = "a directory"
    elif kind == "dev-zero":
        if not Path("/dev/zero").exists():
            pytest.skip("no /dev/zero")
        path.symlink_to("/dev/zero")
        what = "a device"
    else:
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes")
        os.mkfifo(path)
        what = "a pipe"
    start = time.perf_counter()
    errors = check_expectation_files([path], SPECS)
    with pytest.raises(ExpectationError) as raised:
        load_expectations("b", tmp_path, SPECS)
    assert time.perf_counter() - start < FAST
    assert [e.render() for e in errors] == [f"{path}: not a regular file ({what}); an expectation file is a YAML file "
                                            "of at most 131,072 bytes"]
    assert raised.value.render() == errors[0].render()


def test_a_split_files_directory_entry_that_is_a_directory(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.yaml").mkdir()
    assert expectation_files("b", tmp_path) == [tmp_path / "b" / "x.yaml"]
    with pytest.raises(ExpectationError, match=r"b/x\.yaml: not a regular file \(a directory\)"):
        load_expectations("b", tmp_path, SPECS)


def test_an_id_used_twice_in_a_file_and_across_files(tmp_path):
    text = _file(_entry(id="dup"), _entry(id="dup"))
    path, errors = _errors(tmp_path, text)
    assert [e.render() for e in errors] == [f"{path}:4: expectations[1].id: expectation id 'dup' is also used at {path}:3: "
                                            "a report names expectations by id"]
    path.write_text(_file(_entry(id="dup")))
    (tmp_path / "b").mkdir()
    split = tmp_path / "b" / "family.yaml"
    split.write_text(_file(_entry(id="other"), _entry(id="dup")))
    with pytest.raises(ExpectationError) as raised:
        load_expectations("b", tmp_path, SPECS)
    assert raised.value.render() == f"{split}:4: expectations[1].id: expectation id 'dup' is also used at {path}:3: " \
                                    "a report names expectations by id"
    # an instance's expectations add to its backend's: their ids must differ too
    (tmp_path / "b@2.yaml").write_text("backend: b@2\nexpectations:\n" + _entry(id="other"))
    errors = check_expectations_dir(tmp_path, SPECS)
    assert [e.render() for e in errors] == [f"{split}:4: expectations[1].id: expectation id 'dup' is also used at {path}:3: "
                                            "a report names expectations by id",
                                            f"{tmp_path / 'b@2.yaml'}:3: expectations[0].id: expectation id 'other' is also used "
                                            f"at {split}:3: a report names expectations by id"]


def test_every_problem_is_collected_and_the_error_says_how_many(tmp_path):
    text = _file(_entry(id="[a]"), _entry(id="ok"), _entry(id="x", operator="NOPE"), _entry(id="y", when="'isnan(z)'"))
    path, errors = _errors(tmp_path, text)
    assert [(e.line, e.key_path) for e in errors] == [(3, ("expectations", 0, "id")), (5, ("expectations", 2, "operator")),
                                                      (6, ("expectations", 3, "when"))]
    with pytest.raises(ExpectationError) as raised:
        load_expectations("b", tmp_path, SPECS)
    assert raised.value.render().endswith("(and 2 more problem(s) in the expectation files)")
    assert isinstance(raised.value, SpecError) and len(raised.value.errors) == 3


def test_the_shipped_expectation_files_pass(tmp_path):
    """No false error: every shipped file, read by the checks, gives every entry it holds."""
    start = time.perf_counter()
    assert [e.render() for e in check_expectations_dir(SHIPPED, SPECS)] == []
    for backend, files in expectation_files_by_backend(SHIPPED).items():
        assert files and check_expectation_files(files, SPECS) == []
        ids = [entry["id"] for path in files for entry in yaml.safe_load(path.read_text())["expectations"]]
        assert [item.id for item in load_expectations(backend, SHIPPED, SPECS).items] == ids
        assert [item.id for item in load_expectations(backend, SHIPPED).items] == ids  # the shipped specs by default
    assert time.perf_counter() - start < 10


def test_a_when_that_cannot_be_read_on_a_case_explains_nothing():
    """A name some cases do not bind (a family's), or a value that does not broadcast: the
    expectation explains nothing there, and the judge goes on."""
    from harness.generate.cases import case_from_arrays
    from harness.judge.diff import judge
    from harness.model.backend import Outputs
    from harness.model.layout import pack_buffer
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.asarray([np.nan, 1.0], np.float32)})
    desc = case.descriptor.tensors["OutputTensor"]
    diff = judge(spec, case, Outputs({"OutputTensor": pack_buffer(np.asarray([np.nan, 1.0], np.float32), desc,
                                                                   SPECS.catalog.dtype("FLOAT32"))}), True)
    assert diff.status == "mismatch"
    unbound = Expectation("u", spec.name, ("FLOAT32",), parse_formula("sum_abs > 0"), "why")
    fits = Expectation("f", spec.name, ("FLOAT32",), parse_formula("isnan(x)"), "why")
    assert ExpectationSet("b", [unbound]).explain(spec.name, "FLOAT32", diff, "FLOAT32") is None
    assert ExpectationSet("b", [unbound, fits]).explain(spec.name, "FLOAT32", diff, "FLOAT32") is fits


def test_a_descriptor_when_beyond_its_bounds_at_run_time_does_not_hold_and_returns_fast():
    """A single loop over an attribute's value is allowed when the file is read; on a descriptor
    whose value is huge, the evaluation stops at the shape expressions' bounds and does not hold."""
    from harness.generate.cases import case_from_arrays
    spec = SPECS.operator("ELEMENT_WISE_CLIP")
    expr = _parse_descriptor_when("any(i < 0 for i in range(Max)) or len(range(Max * Max * Max * Max)) > 0", spec)
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.zeros(2, np.float32)}, attributes={"Min": 0.0, "Max": 3.0e9})
    start = time.perf_counter()
    assert descriptor_holds(expr, spec, case.descriptor) is False
    assert time.perf_counter() - start < FAST


def test_an_expectations_dir_of_hostile_files_is_one_line_from_the_cli(tmp_path, capsys):
    """`dmlconform replay` with --expectations-dir: the first problem as one line, the count of the
    others, and no traceback."""
    from harness.cli import main
    from harness.generate.cases import case_from_arrays
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.array([np.nan, 1.0], np.float32)})
    path = case.save(tmp_path / "case.yaml")
    directory = tmp_path / "expectations"
    directory.mkdir()
    (directory / "numpy.yaml").write_text("- a list\n")
    assert main(["--expectations-dir", str(directory), "replay", str(path), "--backend", "numpy"]) in (1, 2)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.endswith(f"{directory / 'numpy.yaml'}:1: an expectation file must be a mapping at the top level (backend: NAME, "
                        "expectations: [...]), found a list\n")
