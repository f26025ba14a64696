"""Files a run reads again and again (a backend's expectations, ONNX Runtime's operator table, case
files) are read from memory once their bytes have been read: never a stale answer for a file that
changed, whatever its modification time, and the same values as reading it fresh."""
from __future__ import annotations

import os

import pytest
import yaml

from harness.judge.expectations import load_expectations
from harness.model.descriptor import CaseFormatError, case_mapping, case_yaml
from tests.helpers import SPECS

ENTRY = ("backend: b\nexpectations:\n"
         "  - {{id: {id}, operator: ELEMENT_WISE_SIGN, data_types: [FLOAT32], when: 'isnan(x)', why: w}}\n")


def _write_same_stat(path, text: str) -> None:
    """Rewrite `path` with `text` of the same length, its modification time put back: a cache
    keyed on (size, mtime) would answer with the old contents."""
    before = os.stat(path)
    path.write_text(text)
    assert os.stat(path).st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_rewritten_expectation_file_is_read_again(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text(ENTRY.format(id="aaa"))
    assert [i.id for i in load_expectations("b", tmp_path, SPECS).items] == ["aaa"]
    _write_same_stat(path, ENTRY.format(id="bbb"))
    assert [i.id for i in load_expectations("b", tmp_path, SPECS).items] == ["bbb"]


def test_expectations_read_twice_are_equal_and_not_shared(tmp_path):
    (tmp_path / "b.yaml").write_text(ENTRY.format(id="aaa"))
    first, second = load_expectations("b", tmp_path, SPECS), load_expectations("b", tmp_path, SPECS)
    assert first.items == second.items
    first.items.clear()  # a caller's list is its own
    assert [i.id for i in load_expectations("b", tmp_path, SPECS).items] == ["aaa"]


def test_expectations_are_checked_against_the_specs_given(tmp_path):
    """The same bytes read against another spec set are checked against that one: an operator it
    lacks is an error there, though the file was fine (and remembered) against the shipped specs."""
    from harness.judge.expectations import ExpectationError
    from harness.spec.load import load_specs
    from tests.helpers import copy_specs
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "b.yaml").write_text(ENTRY.format(id="aaa"))
    assert load_expectations("b", tmp_path / "exp", SPECS).items
    other = load_specs(copy_specs(tmp_path / "specs", "ELEMENT_WISE_ADD.yaml"))
    with pytest.raises(ExpectationError, match="ELEMENT_WISE_SIGN"):
        load_expectations("b", tmp_path / "exp", other)


def test_a_rewritten_onnxruntime_table_is_read_again(tmp_path):
    from backends.onnxruntime_backend import load_mapping
    path = tmp_path / "ops.yaml"
    path.write_text("ELEMENT_WISE_ABS: {builder: node, op: Abs, inputs: [InputTensor]}\n")
    assert load_mapping(path)["ELEMENT_WISE_ABS"]["op"] == "Abs"
    _write_same_stat(path, "ELEMENT_WISE_ABS: {builder: node, op: Neg, inputs: [InputTensor]}\n")
    assert load_mapping(path)["ELEMENT_WISE_ABS"]["op"] == "Neg"


def test_case_text_reads_back_as_pyyaml_reads_it():
    """case_yaml (libyaml's emitter where PyYAML has it) and case_mapping give what PyYAML's own
    pure-Python reader gives: the same mapping, whoever wrote or reads the file."""
    mapping = {"format": 1, "operator": "X", "values": [0.1, -0.0, 1e-45, float("inf"), 3], "text": "a: b\n# c",
               "nested": {"empty": [], "none": None, "yes": True, "big": 2 ** 63}}
    text = case_yaml(mapping)
    pure = yaml.load(text, Loader=yaml.SafeLoader)
    assert case_mapping(text.encode()) == pure
    assert repr(case_mapping(text.encode())) == repr(mapping)  # -0.0 and the types kept


def test_a_case_file_nested_too_deeply_is_refused_alike_everywhere():
    text = ("a: " + "[" * 65 + "]" * 65).encode()
    with pytest.raises(CaseFormatError, match="nested too deeply"):
        case_mapping(text)
    assert case_mapping(("a: " + "[" * 60 + "]" * 60).encode())["a"]  # a deep nest within the bound reads


def test_invalid_yaml_is_worded_by_pyyaml_itself():
    """A text libyaml refuses is read again by PyYAML's own parser: its words and position."""
    with pytest.raises(CaseFormatError) as caught:
        case_mapping(b"a: [1, 2\nb: 3\n")
    with pytest.raises(yaml.MarkedYAMLError) as pure:
        yaml.load("a: [1, 2\nb: 3\n", Loader=yaml.SafeLoader)
    assert str(pure.value.problem) in str(caught.value)
    assert f"line {pure.value.problem_mark.line + 1}" in str(caught.value)
