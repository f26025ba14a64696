"""The disk memo of reachability answers (harness.generate.reachability_memo): what it reads back
is what the search finds, only packaged specs as loaded use it, and a damaged file or an answer of
the wrong shape is searched for again, never trusted."""
from __future__ import annotations

import dataclasses
import json

import pytest

from harness.generate import breakers
from harness.generate.reachability_memo import MAX_FILE_BYTES, ReachabilityMemo, cache_dir, memo_for
from harness.spec.load import load_specs, packaged_digest
from tests.helpers import SPECS

RULES = [("CONVOLUTION", "constraint.bias_sizes"), ("CONVOLUTION", "tensor.dimension_count"),
         ("ELEMENT_WISE_ADD", "in_place.not_allowed"), ("GEMM", "constraint.c_same_sizes")]


@pytest.fixture
def memo_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DMLCONFORM_CACHE_DIR", str(tmp_path / "memo"))
    memo_for.cache_clear()
    breakers.reachable_members.cache_clear()
    yield tmp_path / "memo"
    memo_for.cache_clear()
    breakers.reachable_members.cache_clear()


def _fresh() -> None:
    memo_for.cache_clear()
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
    assert {k[:1] + k[2:]: v for k, v in memo.answers.items()} == {(op, rule): searched[op, rule] for op, rule in RULES}
    assert searched["CONVOLUTION", "constraint.bias_sizes"] == [None]  # reachable: a spec with no variant key


def test_an_answer_in_the_memo_is_the_answer_used(memo_dir):
    """The memo is read, not only written: a planted answer under the same digest comes back
    (which is why its key holds the digests of the specs and of the code)."""
    specs = load_specs()
    spec = specs.operator("CONVOLUTION")
    memo = memo_for(packaged_digest(spec))
    assert memo is not None
    memo.put("CONVOLUTION", "6.4", "constraint.bias_sizes", [])
    _fresh()
    assert breakers.reachable_members(spec, "6.4", "constraint.bias_sizes") == []


def test_specs_built_or_changed_in_memory_are_not_memoised(memo_dir):
    spec = load_specs().operator("CONVOLUTION")
    changed = dataclasses.replace(spec)  # a copy: another object, whatever it holds
    assert packaged_digest(spec) is not None and packaged_digest(changed) is None
    breakers.reachable_members(changed, "6.4", "constraint.bias_sizes")
    assert not memo_dir.exists() or not list(memo_dir.glob("*.jsonl"))


def test_damaged_lines_and_answers_of_the_wrong_shape_are_ignored(tmp_path):
    path = tmp_path / "reachable-x-y.jsonl"
    good = {"operator": "GEMM", "level": "6.4", "rule": "tensor.missing", "members": [None]}
    path.write_text("\n".join([json.dumps(good), "{not json", json.dumps({**good, "members": "all"}),
                               json.dumps({**good, "rule": 7}), json.dumps({**good, "members": [1]}),
                               json.dumps({"operator": "GEMM"}), "\x00\x01"]) + "\n")
    assert ReachabilityMemo(path).answers == {("GEMM", "6.4", "tensor.missing"): [None]}
    path.write_bytes(b"\xff\xfe not utf-8")
    assert ReachabilityMemo(path).answers == {}
    with path.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    assert ReachabilityMemo(path).answers == {}


def test_the_memo_can_be_turned_off(monkeypatch, tmp_path):
    for off in ("off", "0", ""):
        monkeypatch.setenv("DMLCONFORM_CACHE_DIR", off)
        assert cache_dir() is None
    monkeypatch.delenv("DMLCONFORM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "dmlconform"


def test_the_suite_specs_are_the_packaged_ones():
    """tests.helpers.SPECS is loaded from the packaged directory, so the conformance suite's
    collection uses the memo."""
    assert packaged_digest(SPECS.operator("GEMM")) is not None
