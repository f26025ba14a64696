"""`spec import` and `spec check-docs` on invented API pages (tests/fixtures/pages: written for
these tests in each layout and language; never copies of the real pages): the page reader,
cell for cell; the skeleton and lint's TODO report; the round trip import -> fill -> lint ->
check-docs with no drift; drift found, who says what, recorded drift, page defects, bad input."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.pages.parse import PageError, read_page
from harness.pages.page import Row
from harness.spec.lint import lint_specs
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs

PAGES = Path(__file__).resolve().parents[1] / "fixtures" / "pages"
TWIDDLE = ["ns-directml-dml_element_wise_twiddle_operator_desc.md", "twiddle-fr.txt", "twiddle-de.txt"]
TWIDDLE_TABLES = {  # hand-written from the fixture pages
    "5.0": (Row("InputTensor", "input", (1, 8), ("FLOAT32", "FLOAT16", "INT32")),
            Row("BiasTensor", "optional_input", (1, 8), ("FLOAT32", "FLOAT16", "INT32")),
            Row("OutputTensor", "output", (1, 8), ("FLOAT32", "FLOAT16", "INT32"))),
    "3.0": (Row("InputTensor", "input", (4, 4), ("FLOAT32",)), Row("BiasTensor", "optional_input", (4, 4), ("FLOAT32",)),
            Row("OutputTensor", "output", (4, 4), ("FLOAT32",))),
}


@pytest.mark.parametrize("name, layout, language", [(TWIDDLE[0], "markdown", "en"), (TWIDDLE[1], "text", "fr"),
                                                    (TWIDDLE[2], "text", "de")])
def test_every_layout_and_language_reads_the_same_facts(name, layout, language):
    page = read_page(PAGES / name)
    assert (page.layout, page.language, page.operator) == (layout, language, "ELEMENT_WISE_TWIDDLE")
    assert page.fields == [("InputTensor", "const DML_TENSOR_DESC*"), ("BiasTensor", "const DML_TENSOR_DESC*"),
                           ("OutputTensor", "const DML_TENSOR_DESC*"), ("Gain", "FLOAT")]
    assert (page.introduced, page.in_place, page.formula) == ("3.0", True, "f(x, b) = Gain * x + b")
    assert {t.level: t.rows for t in page.tables} == TWIDDLE_TABLES
    assert all(t.level_heading and not t.variant for t in page.tables)
    assert len(page.constraints) == 2 and "BiasTensor" in page.constraints[1]
    assert page.defects == []


def test_defaults_in_english_and_german_decimal_commas():
    assert read_page(PAGES / TWIDDLE[0]).defaults == {"Gain": "0.5"}
    assert read_page(PAGES / TWIDDLE[2]).defaults == {"Gain": "0.5"}  # "0,5"
    assert read_page(PAGES / TWIDDLE[1]).defaults == {}  # the French fixture states none


def test_syntax_block_layout_arrays_variants_and_a_dimensions_column():
    page = read_page(PAGES / "ns-directml-dml_stackup_operator_desc.md")
    assert [n for n, _ in page.fields] == ["Function", "InputCount", "InputTensors", "OutputTensor", "AxisCount", "Axes"]
    assert dict(page.fields)["Axes"] == "const UINT*" and dict(page.fields)["Function"] == "DML_REDUCE_FUNCTION"
    assert page.counts == {"InputTensors": "InputCount", "Axes": "AxisCount"}
    assert page.introduced == "4.0" and not page.in_place and len(page.examples) == 1
    groups = [(t.variant, t.level, t.level_heading) for t in page.tables]
    assert groups == [(("SUM", "MULTIPLY"), "5.0", True), (("SUM", "MULTIPLY"), "4.0", True),
                      (("MIN", "MAX", "AVERAGE"), "4.0", False)]  # no level heading: from the introducing level
    first = page.tables[0].rows[0]
    assert first == Row("InputTensors", "input", (2, 3), ("FLOAT32", "FLOAT16", "INT32"), True, "{ [D0], D1, D2 }")


def test_page_defects_are_found_and_not_parsed_as_facts():
    page = read_page(PAGES / "defects" / "ns-directml-dml_hollow_desc.md")
    assert page.operator == "HOLLOW" and page.introduced == "3.0"  # the highest of its two Availability sections
    assert len(page.defects) == 3
    assert any("without `_operator_`" in d for d in page.defects)
    assert any("second Availability" in d for d in page.defects)
    assert any("TBD" in d for d in page.defects)


def test_an_enum_page_naming_an_operator_is_no_operator_page():
    with pytest.raises(PageError, match="not an operator's API page"):
        read_page(PAGES / "defects" / "ne-directml-dml_twiddle_mode.md")


# --- import, lint, check-docs -----------------------------------------------------------------------

@pytest.fixture()
def specs_dir(tmp_path):
    """A specs directory with the shipped catalog files and no operator."""
    out = tmp_path / "specs"
    out.mkdir()
    for path in DEFAULT_SPECS_DIR.glob("_*.yaml"):
        shutil.copy(path, out / path.name)
    return out


def _import(capsys, specs_dir, *pages):
    rc = main(["--specs-dir", str(specs_dir), "spec", "import", *map(str, pages), "--out", str(specs_dir)])
    capsys.readouterr()
    assert rc == 0


def _fill_twiddle(path: Path) -> None:
    """What a person fills in the TWIDDLE skeleton: the values the page cannot give."""
    data = yaml.safe_load(path.read_text())
    data["operator_type"] = 9001
    data["in_place"]["pairs"] = [{"output": "OutputTensor", "input": "InputTensor"}]  # the German page names neither
    data["constraints"] = [
        {"id": "same_data_type", "rule": "same_data_type", "tensors": ["InputTensor", "BiasTensor", "OutputTensor"],
         "text": data["constraints"][0]["text"]},
        {"id": "same_shape", "rule": "same_shape", "tensors": ["InputTensor", "OutputTensor"], "text": "same Sizes"}]
    data["formula"].update({"expression": "Gain * x + b", "operands": "value", "inputs": {"x": "InputTensor", "b": "BiasTensor"},
                            "attributes": ["Gain"],
                            "absent_inputs": {"b": {"value": 0, "source": "an invented operator"}}})
    data["comparison"] = {"default": {"kind": "exact"}}
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def test_the_skeleton_transcribes_the_page_and_lint_names_every_todo(capsys, specs_dir):
    _import(capsys, specs_dir, PAGES / TWIDDLE[0])
    path = specs_dir / "ELEMENT_WISE_TWIDDLE.yaml"
    data = yaml.safe_load(path.read_text())
    assert [f["name"] for f in data["fields"]] == ["InputTensor", "BiasTensor", "OutputTensor", "Gain"]
    assert data["fields"][3]["default"] == 0.5 and data["introduced"] == "3.0"
    assert data["in_place"]["allowed"] is True and data["in_place"]["pairs"] == [{"output": "OutputTensor", "input": "InputTensor"}]
    assert data["support"][0]["tensors"]["BiasTensor"] == {"kind": "optional_input", "dims": [1, 8], "types": ["FLOAT32", "FLOAT16", "INT32"]}
    errors = lint_specs([path], specs_dir)
    assert len(errors) == 1
    message = errors[0].render()
    assert message.startswith(f"{path}:") and "operator_type: left to fill" in message
    for key in ("constraints.0.rule", "constraints.1.rule", "formula.expression", "comparison"):
        assert key in message


def test_arrays_and_variant_tables_import_with_their_count_fields(capsys, specs_dir):
    _import(capsys, specs_dir, PAGES / "ns-directml-dml_stackup_operator_desc.md")
    data = yaml.safe_load((specs_dir / "STACKUP.yaml").read_text())
    by_name = {f["name"]: f for f in data["fields"]}
    assert by_name["InputTensors"]["count"] == "InputCount" and by_name["InputCount"]["count_of"] == ["InputTensors"]
    assert by_name["Axes"]["count"] == "AxisCount"
    assert data["variant_key"].startswith("TODO(variant_key)") and "Function" in data["variant_key"]
    assert [t.get("variant") for t in data["support"]] == [["SUM", "MULTIPLY"], ["SUM", "MULTIPLY"], ["MIN", "MAX", "AVERAGE"]]


@pytest.mark.parametrize("page", TWIDDLE)
def test_round_trip_import_fill_lint_check_docs_has_no_drift(capsys, specs_dir, page):
    _import(capsys, specs_dir, PAGES / page)
    _fill_twiddle(specs_dir / "ELEMENT_WISE_TWIDDLE.yaml")
    assert lint_specs([specs_dir / "ELEMENT_WISE_TWIDDLE.yaml"], specs_dir) == []
    rc = main(["--specs-dir", str(specs_dir), "spec", "check-docs", *(str(PAGES / p) for p in TWIDDLE), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0, report
    assert report["summary"] == {"operators": 1, "pages": 3, "tables": 6, "cells": 54, "drift": 0, "recorded": 0, "page_defects": 0}


@pytest.fixture()
def twiddle_spec(capsys, specs_dir):
    _import(capsys, specs_dir, PAGES / TWIDDLE[0])
    _fill_twiddle(specs_dir / "ELEMENT_WISE_TWIDDLE.yaml")
    return specs_dir


def _edit(specs_dir: Path, change) -> None:
    path = specs_dir / "ELEMENT_WISE_TWIDDLE.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def test_drift_cell_by_cell_says_which_page_says_what(capsys, twiddle_spec, tmp_path):
    def change(data):  # the spec adds a type at FL 5.0, claims a 6.0 table the pages lack, forbids in-place
        data["support"][0]["tensors"]["OutputTensor"]["types"].append("UINT8")
        data["support"].insert(0, {"level": "6.0", "tensors": copy.deepcopy(data["support"][0]["tensors"])})
        data["in_place"] = {"allowed": False, "pairs": [], "source": "an invented disagreement"}
    _edit(twiddle_spec, change)
    german = tmp_path / "twiddle-de.txt"  # the German page lags: no INT32 at FL 5.0
    german.write_text((PAGES / "twiddle-de.txt").read_text().replace("OutputTensor Ausgabe 1 bis 8 FLOAT32, FLOAT16, INT32",
                                                                    "OutputTensor Ausgabe 1 bis 8 FLOAT32, FLOAT16"))
    rc = main(["--specs-dir", str(twiddle_spec), "spec", "check-docs", str(PAGES / TWIDDLE[0]), str(german),
               "--format", "json", "--json", str(tmp_path / "drift.json")])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert json.loads((tmp_path / "drift.json").read_text()) == report
    drift = {d["key"]: d for d in report["operators"][0]["drift"]}
    assert set(drift) == {"in_place", "table[FL 6.0]", "table[FL 5.0].OutputTensor.types"}
    assert drift["in_place"]["spec"] == "not allowed" and set(drift["in_place"]["pages"].values()) == {"allowed"}
    assert drift["table[FL 6.0]"]["spec"] == "present" and set(drift["table[FL 6.0]"]["pages"].values()) == {"absent"}
    types = drift["table[FL 5.0].OutputTensor.types"]
    assert types["spec"] == "FLOAT16, FLOAT32, INT32, UINT8"
    assert types["pages"] == {f"en:{TWIDDLE[0]}": "FLOAT16, FLOAT32, INT32", "de:twiddle-de.txt": "FLOAT16, FLOAT32"}
    markdown_rc = main(["--specs-dir", str(twiddle_spec), "spec", "check-docs", str(PAGES / TWIDDLE[0]), str(german)])
    text = capsys.readouterr().out
    assert markdown_rc == 1 and "| `table[FL 5.0].OutputTensor.types` |" in text and "de:twiddle-de.txt: FLOAT16, FLOAT32" in text


def test_a_difference_the_spec_records_is_not_drift(capsys, twiddle_spec):
    def change(data):
        data["fields"][3]["c_type"] = "FLOAT"
        data["support"][1]["tensors"]["InputTensor"]["dims"] = [4, 5]
        data["docs_drift"] = [{"key": "table[FL 3.0].InputTensor.dims", "pages": ["en", "fr"],
                               "resolution": "an invented reason: DirectML accepts 5 dimensions at FL 3.0"}]
    _edit(twiddle_spec, change)
    rc = main(["--specs-dir", str(twiddle_spec), "spec", "check-docs", str(PAGES / TWIDDLE[0]), str(PAGES / TWIDDLE[1]), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["summary"]["drift"] == 0 and report["summary"]["recorded"] == 1
    # a page the record does not name is still drift
    rc = main(["--specs-dir", str(twiddle_spec), "spec", "check-docs", str(PAGES / TWIDDLE[2]), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and [d["key"] for d in report["operators"][0]["drift"]] == ["table[FL 3.0].InputTensor.dims"]


def test_page_defects_are_reported_apart_from_drift(capsys, twiddle_spec):
    rc = main(["--specs-dir", str(twiddle_spec), "spec", "check-docs", str(PAGES / TWIDDLE[0]), str(PAGES / "defects"), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0, report  # defects are the page's, not drift
    assert report["summary"]["page_defects"] == 3 and all(d.startswith("en:ns-directml-dml_hollow_desc.md: ") for d in report["page_defects"])
    assert report["pages_without_spec"] == ["HOLLOW"] and len(report["skipped_files"]) == 1  # the enum page
    main(["--specs-dir", str(twiddle_spec), "spec", "check-docs", str(PAGES / "defects")])
    assert "## Page defects (not drift)" in capsys.readouterr().out


def test_a_skeleton_left_in_the_specs_directory_stops_check_docs_with_its_todo(capsys, specs_dir):
    _import(capsys, specs_dir, PAGES / TWIDDLE[0])
    assert main(["--specs-dir", str(specs_dir), "spec", "check-docs", str(PAGES / TWIDDLE[0])]) == 1
    assert "ELEMENT_WISE_TWIDDLE.yaml:" in capsys.readouterr().err


def test_bad_input_exits_2(capsys, specs_dir, tmp_path):
    assert main(["--specs-dir", str(specs_dir), "spec", "check-docs", str(tmp_path / "missing.md")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["--specs-dir", str(specs_dir), "spec", "check-docs", str(PAGES / "defects" / "ne-directml-dml_twiddle_mode.md")]) == 2
    assert "not an operator's API page" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["--specs-dir", str(specs_dir), "spec", "import", str(tmp_path / "empty"), "--out", str(tmp_path)]) == 2


def test_import_does_not_overwrite_without_force(capsys, specs_dir):
    _import(capsys, specs_dir, PAGES / TWIDDLE[0])
    path = specs_dir / "ELEMENT_WISE_TWIDDLE.yaml"
    path.write_text("# a person's work\n")
    assert main(["--specs-dir", str(specs_dir), "spec", "import", str(PAGES / TWIDDLE[0]), "--out", str(specs_dir)]) == 0
    assert "exists" in capsys.readouterr().err and path.read_text() == "# a person's work\n"
    assert main(["--specs-dir", str(specs_dir), "spec", "import", str(PAGES / TWIDDLE[0]), "--out", str(specs_dir), "--force"]) == 0
    assert path.read_text().startswith("# DML_ELEMENT_WISE_TWIDDLE_OPERATOR_DESC")


def test_the_shipped_specs_load_with_their_docs_drift_records():
    specs = load_specs(DEFAULT_SPECS_DIR)
    keys = {(s.name, d["key"]) for s in specs.operators.values() for d in s.docs_drift}
    assert ("SLICE1", "field.InputWindowStrides.c_type") in keys and ("PADDING1", "field.PaddingMode.c_type") in keys


def test_a_page_is_found_by_its_specs_desc_struct():
    # a spec named after its DML_OPERATOR_TYPE (SCATTER_ELEMENTS) keeps the struct its page documents
    # (DML_SCATTER_OPERATOR_DESC, the page's operator SCATTER): check-docs pairs them; a page whose
    # name is a spec's keeps it, and one of no spec stays under its own name
    from types import SimpleNamespace
    from harness.cli import _pages_by_spec
    operators = {"SCATTER_ELEMENTS": SimpleNamespace(desc_struct="DML_SCATTER_OPERATOR_DESC"),
                 "TOP_K": SimpleNamespace(desc_struct="DML_TOP_K_OPERATOR_DESC")}
    paired = _pages_by_spec({"SCATTER": ["scatter-page"], "TOP_K": ["top-k-page"], "RNN": ["rnn-page"]}, operators)
    assert paired == {"SCATTER_ELEMENTS": ["scatter-page"], "TOP_K": ["top-k-page"], "RNN": ["rnn-page"]}
