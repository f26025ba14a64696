"""Reports: Allure result contents, the HTML report in a browser, the matrix, spec diff, run
comparison and the gate's exit codes."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.report.gate import evaluate_gate
from harness.report.matrix import build_matrix, compare_matrices, matrix_html, matrix_json, matrix_markdown
from harness.run.results import CaseRecord, read_records
from harness.spec.load import DEFAULT_SPECS_DIR
from harness.spec.compare import diff_sources
from tests.harness.run_files import write_run
from tests.helpers import SPECS

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "broken-negzero=tests.plugins.broken_backend:FlushNegZeroBackend"


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A small real run: the reference and a deliberately broken backend on SIGN FLOAT32."""
    out = tmp_path_factory.mktemp("run")
    env = dict(os.environ, DMLCONFORM_EXTRA_BACKENDS=BROKEN)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", str(ROOT / "tests" / "conformance"),
           "--backend", "numpy", "--backend", "broken-negzero", "--operator", "ELEMENT_WISE_SIGN", "--dtype", "FLOAT32",
           "--max-examples", "5", f"--alluredir={out / 'allure-results'}", f"--reports-dir={out}", "-k", "test_valid or test_example"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert "failed" in proc.stdout, proc.stdout[-2000:]  # the broken backend must fail
    return out


def _results(alluredir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]


def test_allure_results_have_labels_parameters_and_attachments(small_run):
    results = _results(small_run / "allure-results")
    failed = [r for r in results if r["status"] == "failed"]
    assert failed, "the broken backend's tests are failed results"
    r = failed[0]
    labels = {(l["name"], l["value"]) for l in r["labels"]}
    assert ("parentSuite", "broken-negzero") in labels and ("epic", "ELEMENT_WISE_SIGN") in labels
    assert ("feature", "FL 6.4") in labels and ("story", "FLOAT32") in labels
    assert any(name == "tag" for name, _ in labels)
    assert {"backend", "operator", "feature level"} <= {p["name"] for p in r["parameters"]}
    assert any("ELEMENT_WISE_SIGN.yaml" in link["url"] for link in r["links"])
    names = {a["name"] for a in r["attachments"]}
    assert {"case file (replay)", "mismatch table", "descriptor", "ULP error distribution"} <= names
    png = next(a for a in r["attachments"] if a["name"] == "ULP error distribution")
    assert (small_run / "allure-results" / png["source"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    env = (small_run / "allure-results" / "environment.properties").read_text()
    assert "backend.numpy=" in env and "hypothesis.seed=" in env and "backend.broken-negzero=" in env
    categories = {c["name"] for c in json.loads((small_run / "allure-results" / "categories.json").read_text())}
    assert {"mismatch", "rejected-valid", "accepted-invalid", "diverges-on-unspecified", "crashed"} <= categories
    assert "): mismatch: " in r["statusDetails"]["message"]
    assert r["statusDetails"]["message"].startswith("Failed: [mismatch] ")
    assert ("dmlconform.status", "mismatch") in labels  # the label Allure 3's categories match on
    passed = [x for x in results if x["status"] == "passed"]
    assert passed and all(("dmlconform.status", "pass") in {(l["name"], l["value"]) for l in x["labels"]}
                          for x in passed if any(l["name"] == "dmlconform.status" for l in x["labels"]))


def test_category_regexes_are_valid_javascript(tmp_path):
    """Allure 3 is JavaScript: a Python-only regex (`(?s)...`) is an invalid category there."""
    import shutil
    from harness.report.allure import _compat_categories, category_rules
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the Allure command line needs it too)")
    patterns = [c["messageRegex"] for c in _compat_categories()]
    patterns += [p for rule in category_rules() for p in rule["matchers"]["labels"].values()]
    script = "for (const p of JSON.parse(process.argv[1])) new RegExp(p); console.log('ok')"
    proc = subprocess.run([node, "-e", script, json.dumps(patterns)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    js = "const m = JSON.parse(process.argv[1]); console.log(new RegExp(m).test(process.argv[2]))"
    tag = next(c["messageRegex"] for c in _compat_categories() if c["name"] == "crashed")
    assert subprocess.run([node, "-e", js, json.dumps(tag), "Failed: [crashed] 1 of 3 case(s) failed\nmore"],
                          capture_output=True, text=True, timeout=60).stdout.strip() == "true"


def test_html_report_renders_in_a_browser(small_run):
    from harness.report.html import generate_report, render_in_browser, report_summary
    try:
        index = generate_report(small_run / "allure-results", small_run / "allure-report", small_run / "history.jsonl")
    except FileNotFoundError as exc:
        pytest.skip(f"Allure CLI not installed: {exc}")
    total = report_summary(small_run / "allure-report")["stats"]["total"]
    assert total == len(_results(small_run / "allure-results"))
    screenshot = ROOT / "reports" / "report-screenshot.png"
    try:
        text = render_in_browser(index.parent, screenshot, wait_for=f"Total {total}")
    except FileNotFoundError as exc:
        pytest.skip(f"Chromium cannot be installed here: {exc}")
    assert f"Total {total}" in text, text[:500]
    assert screenshot.exists() and screenshot.stat().st_size > 10_000
    # history is kept between runs
    generate_report(small_run / "allure-results", small_run / "allure-report", small_run / "history.jsonl")
    assert len((small_run / "history.jsonl").read_text().splitlines()) >= 2


def _record(backend="numpy", op="ELEMENT_WISE_SIGN", level="6.4", t="FLOAT32", kind="valid", status="pass", case="c1", **kw):
    return CaseRecord(backend, op, level, t, kind, status, case, "summary", **kw)


def test_matrix_cells_and_formats():
    records = [_record(case="a"), _record(case="b", status="mismatch"), _record(t="INT8", case="c"),
               _record(t="INT64", case="d", status="unsupported"), _record(kind="invalid", t="FLOAT64", status="rejected-invalid", case="e")]
    cells = build_matrix(records, SPECS)
    state = {(c.operator, c.data_type): c.state for c in cells if c.level == "6.4"}
    assert state[("ELEMENT_WISE_SIGN", "FLOAT32")] == "fail"
    assert state[("ELEMENT_WISE_SIGN", "INT8")] == "pass"
    assert state[("ELEMENT_WISE_SIGN", "INT64")] == "unsupported"
    assert state[("ELEMENT_WISE_SIGN", "UINT16")] == "not run"
    assert state[("ELEMENT_WISE_SIGN", "invalid descriptors")] == "pass"
    assert state[("ACTIVATION_HARD_SIGMOID", "FLOAT16")] == "not run"
    md, page, data = matrix_markdown(cells), matrix_html(cells), matrix_json(cells)
    assert "| ELEMENT_WISE_SIGN |" in md and "FAIL (2)" in md
    assert "<table>" in page and "http" not in page.replace("http-equiv", "")
    assert data["totals"]["fail"] == 1


def test_run_comparison():
    base = {"cells": [{"backend": "b", "operator": "OP", "feature_level": "6.4", "data_type": t, "state": s}
                      for t, s in [("FLOAT32", "pass"), ("INT8", "fail"), ("UINT8", "pass")]]}
    new = {"cells": [{"backend": "b", "operator": "OP", "feature_level": "6.4", "data_type": t, "state": s}
                     for t, s in [("FLOAT32", "fail"), ("INT8", "pass"), ("INT16", "pass")]]}
    changes = compare_matrices(base, new)
    assert changes["new failures"] == ["b OP FL6.4 FLOAT32: pass -> fail"]
    assert changes["fixed"] == ["b OP FL6.4 INT8: fail -> pass"]
    assert changes["disappeared"] == ["b OP FL6.4 UINT8 (was pass)"]
    assert changes["appeared"] == ["b OP FL6.4 INT16 (pass)"]


def test_compare_command_exit_codes(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"cells": [{"backend": "x", "operator": "OP", "feature_level": "1.0", "data_type": "T", "state": "pass"}]}))
    b.write_text(json.dumps({"cells": [{"backend": "x", "operator": "OP", "feature_level": "1.0", "data_type": "T", "state": "fail"}]}))
    assert main(["compare", str(a), str(a)]) == 0
    assert main(["compare", str(a), str(b)]) == 1
    assert "new failures: 1" in capsys.readouterr().out


def test_spec_diff_added_type_removed_level_changed_formula(tmp_path):
    new = tmp_path / "new"
    shutil.copytree(DEFAULT_SPECS_DIR, new)
    sign = new / "ELEMENT_WISE_SIGN.yaml"
    text = sign.read_text()
    text = text.replace("InputTensor: {kind: input, dims: [4, 4], types: [FLOAT32, FLOAT16]}",
                        "InputTensor: {kind: input, dims: [4, 4], types: [FLOAT32, FLOAT16, INT8]}")      # added type at 2.0
    text = text.replace('expression: "where(x < 0, -1, where(x > 0, 1, 0))"', 'expression: "where(x < 0, -1, 1)"')
    sign.write_text(text)
    hs = new / "ACTIVATION_HARD_SIGMOID.yaml"
    t = hs.read_text()
    start = t.index('  - level: "2.0"')
    end = t.index('  - level: "1.0"')
    hs.write_text(t[:start] + t[end:])                                                                    # removed level 2.0
    q = new / "ELEMENT_WISE_QUANTIZE_LINEAR.yaml"
    q.write_text(q.read_text().replace("kind: exact\n    ties:", "kind: ulp\n    max_ulp: 1\n    ties:"))
    changes = diff_sources(str(DEFAULT_SPECS_DIR), str(new))
    assert "FL 2.0 InputTensor: data types added INT8" in changes["ELEMENT_WISE_SIGN"]
    assert any(c.startswith("formula changed: where(x < 0, -1, where(x > 0, 1, 0)) -> where(x < 0, -1, 1)") for c in changes["ELEMENT_WISE_SIGN"])
    assert "FL 2.0: table removed" in changes["ACTIVATION_HARD_SIGMOID"]
    assert any(c.startswith("tolerance default: exact") for c in changes["ELEMENT_WISE_QUANTIZE_LINEAR"])
    assert "ELEMENT_WISE_BIT_NOT" not in changes


def test_spec_diff_git_revisions(capsys):
    assert main(["spec", "diff", "HEAD", str(DEFAULT_SPECS_DIR)]) == 0
    assert main(["spec", "diff", "no-such-revision", "HEAD"]) == 2
    assert "neither a directory nor a git revision" in capsys.readouterr().err


def _write(tmp_path, records):
    write_run(tmp_path, records)  # a complete run: plan, cell markers, completion marker


def test_gate_all_pass(tmp_path, capsys):
    _write(tmp_path, [_record(case="a"), _record(case="b", kind="invalid", status="rejected-invalid"),
                      _record(case="c", status="diverges-on-unspecified")])
    assert main(["gate", "--reports-dir", str(tmp_path)]) == 0
    assert "GATE: PASS" in capsys.readouterr().out


def test_gate_new_failure(tmp_path, capsys):
    _write(tmp_path, [_record(case="a"), _record(case="b", status="mismatch", case_file="/x/case.yaml")])
    assert main(["gate", "--reports-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "1 unexpected failure(s)" in out and "mismatch: numpy ELEMENT_WISE_SIGN FL 6.4 FLOAT32" in out and "GATE: FAIL" in out


def test_gate_stale_expectation(tmp_path, capsys):
    _write(tmp_path, [_record(backend="onnxruntime", case="a"),
                      _record(backend="onnxruntime", case="p", kind="probe", status="stale-expectation",
                              expectation="ort-sign-nan-propagates")])
    assert main(["gate", "--reports-dir", str(tmp_path)]) == 1
    assert "stale expectation" in capsys.readouterr().out


def test_gate_without_results_fails(tmp_path):
    assert not evaluate_gate([], None).passed


def test_interrupted_run_keeps_finished_records(tmp_path):
    _write(tmp_path, [_record(case="a")])
    with (tmp_path / "results" / "results-main.jsonl").open("a") as f:
        f.write('{"backend": "numpy", "oper')  # a write cut short
    assert [r.case_id for r in read_records(tmp_path / "results")] == ["a"]
