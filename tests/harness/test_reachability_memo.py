"""The disk memo of reachability answers (harness.generate.reachability_memo): what it reads back
is what the search finds, only specs as loaded from their files use it, per operator, and a damaged file or an answer of
the wrong shape is searched for again, never trusted."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.generate import breakers
from harness.generate.reachability_memo import MAX_FILE_BYTES, ReachabilityMemo, cache_dir, memo_for_code
from harness.spec.load import load_specs, spec_digest
from tests.helpers import SPECS

RULES = [("CONVOLUTION", "constraint.bias_sizes"), ("CONVOLUTION", "tensor.dimension_count"),
         ("ELEMENT_WISE_ADD", "in_place.not_allowed"), ("GEMM", "constraint.c_same_sizes")]


@pytest.fixture
def memo_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DMLCONFORM_CACHE_DIR", str(tmp_path / "memo"))
    memo_for_code.cache_clear()
    breakers.reachable_members.cache_clear()
    yield tmp_path / "memo"
    memo_for_code.cache_clear()
    breakers.reachable_members.cache_clear()


def _fresh() -> None:
    memo_for_code.cache_clear()
    breakers.reachable_members.cache_clear()


def test_the_memo_reads_back_what_the_search_found(memo_dir):
    specs = load_specs()
    searched = {(op, rule): breakers._search_members(specs.operator(op), "6.4", rule) for op, rule in RULES}
    for op, rule in RULES:
        assert breakers.reachable_members(specs.operator(op), "6.4", rule) == searched[op, rule]
    files = list(memo_dir.glob("reachable-*.jsonl"))
    assert len(files) == 1 and len(files[0].read_text().splitlines()) == len(RULES)
    _fresh()
    memo = ReachabilityMemo(files[0])
    assert {(k[1], k[3]): v for k, v in memo.answers.items()} == {(op, rule): searched[op, rule] for op, rule in RULES}
    assert searched["CONVOLUTION", "constraint.bias_sizes"] == [None]  # reachable: a spec with no variant key


def test_an_answer_in_the_memo_is_the_answer_used(memo_dir):
    """The memo is read, not only written: a planted answer under the same digest comes back
    (which is why its key holds the digests of the spec and of the code)."""
    specs = load_specs()
    spec = specs.operator("CONVOLUTION")
    memo, digest = memo_for_code(), spec_digest(spec)
    assert memo is not None and digest is not None
    memo.put(digest, "CONVOLUTION", "6.4", "constraint.bias_sizes", [])
    _fresh()
    assert breakers.reachable_members(spec, "6.4", "constraint.bias_sizes") == []


def test_specs_built_or_changed_in_memory_are_not_memoised(memo_dir):
    spec = load_specs().operator("CONVOLUTION")
    changed = dataclasses.replace(spec)  # a copy: another object, whatever it holds
    assert spec_digest(spec) is not None and spec_digest(changed) is None
    breakers.reachable_members(changed, "6.4", "constraint.bias_sizes")
    assert not memo_dir.exists() or not list(memo_dir.glob("*.jsonl"))


def test_damaged_lines_and_answers_of_the_wrong_shape_are_ignored(tmp_path):
    path = tmp_path / "reachable-x-y.jsonl"
    good = {"spec": "d", "operator": "GEMM", "level": "6.4", "rule": "tensor.missing", "members": [None]}
    path.write_text("\n".join([json.dumps(good), "{not json", json.dumps({**good, "members": "all"}),
                               json.dumps({**good, "rule": 7}), json.dumps({**good, "members": [1]}),
                               json.dumps({"operator": "GEMM"}), "\x00\x01"]) + "\n")
    assert ReachabilityMemo(path).answers == {("d", "GEMM", "6.4", "tensor.missing"): [None]}
    path.write_bytes(b"\xff\xfe not utf-8")
    assert ReachabilityMemo(path).answers == {}
    with path.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    assert ReachabilityMemo(path).answers == {} and not path.exists()  # too full: started again


def test_the_memo_can_be_turned_off(monkeypatch, tmp_path):
    for off in ("off", "0", ""):
        monkeypatch.setenv("DMLCONFORM_CACHE_DIR", off)
        assert cache_dir() is None
    monkeypatch.delenv("DMLCONFORM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "dmlconform"


def test_the_suite_specs_are_memoised():
    """tests.helpers.SPECS is loaded from files, so the conformance suite's collection uses the memo."""
    assert spec_digest(SPECS.operator("GEMM")) is not None


def test_a_copy_of_the_specs_with_one_more_operator_keeps_the_others_digests(tmp_path):
    """The memo is per operator: a directory with one operator more (as the operator-set proof
    builds) or one spec edited reuses what was found about the others; the edited one, and those
    that may fuse an edited activation, are searched again."""
    import shutil
    copy = tmp_path / "specs"
    shutil.copytree(SPECS.directory, copy)
    (copy / "ELEMENT_WISE_SIGN_COPY.yaml").write_text((copy / "ELEMENT_WISE_SIGN.yaml").read_text()
                                                       .replace("operator: ELEMENT_WISE_SIGN\n", "operator: ELEMENT_WISE_SIGN_COPY\n")
                                                       .replace("operator_type: 79\n", "operator_type: 100079\n"))
    relu = copy / "ACTIVATION_ELU.yaml"
    relu.write_text(relu.read_text() + "\n# edited\n")
    original, copied = load_specs(), load_specs(copy)
    changed = {name for name in original.operators
               if spec_digest(original.operator(name)) != spec_digest(copied.operator(name))}
    fusing = {name for name, spec in original.operators.items()
              if any("ACTIVATION_ELU" in {o.name for o in allowed.values()} for allowed in spec.activations.values())}
    assert fusing and changed == {"ACTIVATION_ELU"} | fusing
    assert spec_digest(copied.operator("ELEMENT_WISE_SIGN_COPY")) != spec_digest(original.operator("ELEMENT_WISE_SIGN"))


def test_a_worker_reads_the_answers_another_appended_since(tmp_path):
    """Two pytest-xdist workers share one file: an answer one of them appends after the other read
    the file is found by the other on its next miss; a line still being written waits."""
    path = tmp_path / "reachable-x.jsonl"
    first, second = ReachabilityMemo(path), ReachabilityMemo(path)
    first.put("d", "GEMM", "6.4", "tensor.missing", [None])
    assert second.get("d", "GEMM", "6.4", "tensor.missing") == [None]
    with path.open("a") as f:  # half a line: another worker's write seen midway
        f.write('{"spec": "d", "operator": "GEMM", "level": "6.4", "rule": "tensor.data_type", ')
    assert second.get("d", "GEMM", "6.4", "tensor.data_type") is None
    with path.open("a") as f:
        f.write('"members": []}\n')
    assert second.get("d", "GEMM", "6.4", "tensor.data_type") == []


def test_the_memo_key_covers_all_the_code_an_answer_depends_on():
    """The memo file is keyed by the source of the generation, model and spec packages only: that
    holds while they import nothing else of the harness (an import of another package would let
    its changes go unnoticed by the memo)."""
    import ast

    from harness.generate.reachability_memo import ANSWERING_PACKAGES
    root = Path(__file__).resolve().parents[2] / "harness"
    outside = []
    for package in ANSWERING_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
                for name in names:
                    parts = name.split(".")
                    if parts[0] == "harness" and (len(parts) < 2 or parts[1] not in ANSWERING_PACKAGES):
                        outside.append(f"{path.relative_to(root)}: {name}")
    assert not outside, outside
