"""What a run leaves for CI to upload (docs/reports.md): a budget of files and bytes per cell,
Allure attachments for failures and divergences only (all of them with --report-detail full),
gzip-compressed records read back as the plain ones were, and deqp-runner style results.csv and
failures.csv.

The tiny runs: ACTIVATION_HARD_SIGMOID FLOAT32 (valid cells and worked examples) on the reference,
a deliberately broken backend (its outputs 4 ULP off: mismatches) and the worst legal device
(passes that take precision-model liberties), in process-less pytest (--workers 0)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.judge.status import is_failure
from harness.report import html
from harness.report.csv_results import (by_name, case_name, failure_lines, read_lines, results_lines, slowest,
                                        write_csv_results)
from harness.run.record_schema import RunFileError
from harness.run.results import CaseRecord, ResultWriter, compress_records, read_records, record_files
from tests.helpers import plan_file, read_plan

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "broken-negzero=tests.plugins.broken_backend:FlushNegZeroBackend"
RUN = ["--backend", "numpy", "--backend", "broken-negzero", "--backend", "worst-legal", "--operator", "ACTIVATION_HARD_SIGMOID",
       "--dtype", "FLOAT32", "--max-examples", "3", "--workers", "0", "-k", "test_valid or test_example"]
LIBERTIES = "liberties taken (D3D precision model)"

# The budget, per kind (docs/reports.md, "What a run leaves"). Measured on the tiny run and on three
# samples of the full run (docs/performance.md); each figure has about 50% to spare.
FIXED_FILES = 20             # junit.xml, matrix.{html,md,json}, results.csv, failures.csv, history.jsonl,
                             # allure-results.zip, allure-report/ (index.html, summary.json, test-results.json),
                             # results/ (plan, cells, complete.json, durations.json, one records file per process)
FIXED_BYTES = 5_500_000      # the single-file report's application (3.7 MB) and the matrix of one operator (0.5 MB)
BYTES_PER_CELL = 4_000       # records (gzip), results.csv, plan, cells, durations, junit, history, its Allure result
BYTES_PER_ATTACHED = 120_000  # an attached failure (case file, result, table, descriptor, ULP plot: 25 KB),
                              # in allure-results.zip and again, base64, in the report


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, DMLCONFORM_EXTRA_BACKENDS=BROKEN, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


def _run_and_report(reports: Path, *extra: str) -> subprocess.CompletedProcess:
    run = _cli("run", *RUN, "--reports-dir", str(reports), *extra)
    assert run.returncode == 1 and "failed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]  # the broken backend fails
    # what the run wrote, before `report` packs the reported tests alone
    run.unpacked = [json.loads(p.read_bytes()) for p in (reports / "allure-results").glob("*-result.json")]  # type: ignore[attr-defined]
    report = _cli("report", "--reports-dir", str(reports))
    if report.returncode != 0 and "not installed" in report.stderr:
        pytest.skip(f"Allure CLI not installed: {report.stderr.strip()}")
    assert report.returncode == 0, report.stdout + report.stderr
    return run


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    reports = tmp_path_factory.mktemp("failures") / "reports"
    return reports, _run_and_report(reports)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> Path:
    reports = tmp_path_factory.mktemp("full") / "reports"
    _run_and_report(reports, "--report-detail", "full")
    return reports


def _allure_results(reports: Path) -> list[dict]:
    """The Allure result files, from allure-results.zip (report packed them)."""
    with zipfile.ZipFile(reports / html.ALLURE_RESULTS_ZIP) as packed:
        return [json.loads(packed.read(name)) for name in packed.namelist() if name.endswith("-result.json")]


def _backend(result: dict) -> str:
    return next(label["value"] for label in result["labels"] if label["name"] == "parentSuite")


def _attachment_names(result: dict) -> list[str]:
    return [a["name"] for a in result.get("attachments", [])]


def _files(reports: Path) -> list[Path]:
    return [p for p in reports.rglob("*") if p.is_file()]


# --- the budget ------------------------------------------------------------------------------------

def test_the_reports_directory_stays_within_its_budget(tiny_run):
    reports, _ = tiny_run
    plan = read_plan(plan_file(reports / "results"))
    cells = len(plan["cells"])
    results = _allure_results(reports)
    attached = sum(_attachment_names(r).count("result") for r in results)
    files = _files(reports)
    cases = [p for p in files if p.parent == reports / "cases"]
    others = [p for p in files if p.parent != reports / "cases"]
    case_files = {r.case_file for r in read_records(reports / "results") if r.case_file}
    assert len(cases) == len(case_files)  # one replayable file per failure or divergence, nothing else
    assert len(others) <= FIXED_FILES, sorted(str(p.relative_to(reports)) for p in others)
    size = sum(p.stat().st_size for p in others)
    budget = FIXED_BYTES + BYTES_PER_CELL * cells + BYTES_PER_ATTACHED * attached
    assert size <= budget, (size, budget, cells, attached)
    # per kind: one archive of Allure results, one report file, compressed records
    assert not (reports / "allure-results").exists()
    assert [p.name for p in (reports / "allure-report").iterdir() if p.name == "index.html"] == ["index.html"]
    assert len(list((reports / "allure-report").iterdir())) <= 3
    assert record_files(reports / "results") and all(p.name.endswith(".jsonl.gz") for p in record_files(reports / "results"))
    with zipfile.ZipFile(reports / html.ALLURE_RESULTS_ZIP) as packed:
        assert not [n for n in packed.namelist() if n.endswith("-container.json")]  # containers no test refers to


def test_attachments_for_failures_only_by_default(tiny_run):
    reports, run = tiny_run
    written = run.unpacked
    failed = [r for r in written if r["status"] == "failed"]
    passed = [r for r in written if r["status"] == "passed"]
    assert failed and passed and {_backend(r) for r in failed} == {"broken-negzero"}
    for r in failed:
        names = _attachment_names(r)
        assert {"case file (replay)", "result", "mismatch table", "descriptor"} <= set(names)
        assert names.count("result") <= 5  # MAX_ATTACHED per test
    assert all(not r.get("attachments") for r in passed), [(r["name"], _attachment_names(r)) for r in passed]
    assert any(_backend(r) == "worst-legal" for r in passed)  # the passes that took liberties: no attachment
    summary = html.report_summary(reports / "allure-report")
    reported = [r for r in written if html.reported_result(r)]
    assert summary["stats"]["total"] == len(reported) == len(failed)  # the report: failures and divergences only
    # the archive keeps the reported tests alone, and says so
    packed = _allure_results(reports)
    assert sorted(r["name"] for r in packed) == sorted(r["name"] for r in reported)
    with zipfile.ZipFile(reports / html.ALLURE_RESULTS_ZIP) as archive:
        environment = archive.read(html.ENVIRONMENT).decode()
    assert f"{html.KEPT_KEY}=failures: {len(reported)} of {len(written)} tests" in environment


def test_report_detail_full_brings_back_passing_attachments_and_tests(full_run):
    results = _allure_results(full_run)
    liberal = [r for r in results if r["status"] == "passed" and _backend(r) == "worst-legal"]
    assert liberal and all(LIBERTIES in _attachment_names(r) for r in liberal if r["name"].startswith("test_valid"))
    summary = html.report_summary(full_run / "allure-report")
    assert summary["stats"]["total"] == len(results)  # `report` followed the run's --report-detail full


def test_report_reads_the_packed_results_again(tiny_run, tmp_path):
    reports, _ = tiny_run
    copy = tmp_path / "reports"
    shutil.copytree(reports, copy)
    proc = _cli("report", "--reports-dir", str(copy), "--report-detail", "full")
    assert proc.returncode == 0, proc.stderr
    assert html.report_summary(copy / "allure-report")["stats"]["total"] == len(_allure_results(copy))
    assert "hold only the tests of the run's report" in proc.stdout  # what --report-detail full cannot bring back
    assert len((copy / "history.jsonl").read_text().splitlines()) == 2


def _result(uuid: str, status: str, label: str | None, trace: str = "Traceback: the suite's own source") -> dict:
    labels = [{"name": "dmlconform.status", "value": label}] if label else []
    return {"uuid": uuid, "historyId": uuid, "name": f"test_{uuid}", "fullName": f"t#{uuid}", "status": status,
            "start": 1, "stop": 2, "labels": labels, "statusDetails": {"message": f"[{label}] what differs", "trace": trace}}


def test_history_keeps_the_last_runs_without_messages(tmp_path, monkeypatch):
    results = tmp_path / "allure-results"
    results.mkdir()
    (results / "a-result.json").write_text(json.dumps(_result("a", "failed", "mismatch")))
    monkeypatch.setattr(html, "HISTORY_LIMIT", 2)
    for _ in range(3):
        try:
            html.generate_report(results, tmp_path / "allure-report", tmp_path / "history.jsonl")
        except FileNotFoundError as exc:
            pytest.skip(f"Allure CLI not installed: {exc}")
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert len(lines) == 2
    entries = [entry for line in lines for entry in json.loads(line)["testResults"].values()]
    assert entries and all(e["status"] == "failed" and "message" not in e and "trace" not in e for e in entries)
    assert sorted(p.name for p in (tmp_path / "allure-report").iterdir()) == ["index.html", "summary.json", "test-results.json"]


def test_the_report_keeps_what_readers_read(tmp_path):
    """failures: failed, broken and diverging tests; the suite's own traceback dropped, a broken
    test's kept; attachments of the tests kept, and nothing else."""
    results = tmp_path / "allure-results"
    results.mkdir()
    cases = {"f": ("failed", "mismatch"), "x": ("skipped", "expected-divergence"), "u": ("passed", "diverges-on-unspecified"),
             "b": ("broken", None), "p": ("passed", "pass"), "s": ("skipped", "unsupported"), "r": ("passed", "rejected-invalid")}
    for uuid, (status, label) in cases.items():
        result = _result(uuid, status, label)
        result["attachments"] = [{"name": "result", "source": f"{uuid}-attachment.txt", "type": "text/plain"}]
        (results / f"{uuid}-attachment.txt").write_text(uuid)
        (results / f"{uuid}-result.json").write_text(json.dumps(result))
    (results / "c-container.json").write_text(json.dumps({"uuid": "c", "children": [], "befores": []}))
    (results / "environment.properties").write_text("backend.numpy=1\nreport.detail=failures\n")
    chosen = html.select_results(results, tmp_path / "chosen")
    names = sorted(p.name for p in chosen.iterdir())
    assert names == sorted([f"{u}-result.json" for u in "fxub"] + [f"{u}-attachment.txt" for u in "fxub"]
                           + ["environment.properties"]), names
    kept = {u: json.loads((chosen / f"{u}-result.json").read_text())["statusDetails"] for u in "fxub"}
    assert "trace" in kept["b"] and not any("trace" in kept[u] for u in "fxu")
    assert all(kept[u]["message"].endswith("what differs") for u in "fxub")
    environment = (chosen / "environment.properties").read_text()
    assert "backend.numpy=1" in environment and "report.detail=failures: 4 of 7 tests" in environment
    everything = html.select_results(results, tmp_path / "all", everything=True)
    assert len(list(everything.glob("*-result.json"))) == 7
    rules = html.category_rules()
    assert all(rule["groupByMessage"] is False and rule["groupBy"] == [{"label": "parentSuite"}, {"label": "epic"}]
               for rule in rules)


# --- records, compressed -----------------------------------------------------------------------------

def _records(n: int) -> list[CaseRecord]:
    return [CaseRecord("numpy", "ELEMENT_WISE_ADD", "6.4", "FLOAT32", "valid", "pass" if i % 3 else "mismatch", f"case{i}",
                       f"summary {i}", test_id=f"harness/run/conformance.py::test_valid[ADD-{i % 2}]", tags=["strided"],
                       liberties={"rounding": i}, duration_s=i / 1000, stages={"compile": i / 4000})
            for i in range(n)]


def _write(directory: Path, records: list[CaseRecord], worker: str = "main") -> Path:
    writer = ResultWriter(directory, worker, run_id="run-1")
    for r in records:
        writer.write(r)
    writer.close()
    return directory / f"results-{worker}.jsonl"


def test_compressed_records_read_back_equal(tmp_path):
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    _write(plain, _records(40), "gw0")
    _write(plain, _records(7), "gw1")
    shutil.copytree(plain, packed)
    done = compress_records(packed)
    assert sorted(p.name for p in done) == ["results-gw0.jsonl.gz", "results-gw1.jsonl.gz"]
    assert sorted(p.name for p in packed.iterdir()) == ["results-gw0.jsonl.gz", "results-gw1.jsonl.gz"]
    assert list(read_records(packed)) == list(read_records(plain))
    assert [r.source.rsplit(":", 1)[1] for r in read_records(packed)][:2] == ["1", "2"]
    assert next(read_records(packed)).source == f"{packed / 'results-gw0.jsonl.gz'}:1"
    assert compress_records(packed) == []  # nothing left to compress


def test_a_torn_file_is_left_uncompressed_and_a_torn_gz_line_skipped(tmp_path):
    path = _write(tmp_path, _records(3))
    with path.open("a") as f:
        f.write('{"backend": "numpy", "oper')  # an interrupted write
    assert compress_records(tmp_path) == [] and path.exists()  # the gate still names the torn file
    gz = tmp_path / "other" / "results-main.jsonl.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert [r.case_id for r in read_records(gz.parent)] == ["case0", "case1", "case2"]


def test_both_forms_of_one_file_are_read_once(tmp_path):
    """A compression cut short between its rename and its unlink leaves both: the .jsonl is read."""
    path = _write(tmp_path, _records(4))
    (tmp_path / "results-main.jsonl.gz").write_bytes(gzip.compress(path.read_bytes()))
    assert len(list(read_records(tmp_path))) == 4


def test_a_bad_line_in_a_gz_file_names_file_and_line(tmp_path):
    path = _write(tmp_path, _records(5))
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"status": "pass"', '"status": 7')
    path.unlink()
    gz = tmp_path / "results-main.jsonl.gz"
    gz.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(RunFileError) as info:
        list(read_records(tmp_path))
    assert info.value.render() == f"{gz}:3: status: expected a string, found int"


def test_a_damaged_gz_file_is_an_error_naming_file_and_line(tmp_path):
    path = _write(tmp_path, _records(2000))
    compress_records(tmp_path)
    gz = tmp_path / "results-main.jsonl.gz"
    data = bytearray(gz.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)  # a damaged stretch of the deflate stream
    gz.write_bytes(bytes(data))
    with pytest.raises(RunFileError) as info:
        list(read_records(tmp_path))
    where, _, message = info.value.render().partition(": ")
    file, _, line = where.rpartition(":")
    assert file == str(gz) and int(line) > 1
    assert message.startswith("cannot decompress") or message.startswith("invalid JSON") or "expected" in message, message
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "results-main.jsonl.gz").write_bytes(gz.read_bytes()[:middle // 2])  # cut short: no end of stream
    with pytest.raises(RunFileError, match=r"results-main\.jsonl\.gz:\d+: cannot decompress"):
        list(read_records(cut))
    assert not path.exists()


def test_the_gate_reports_a_damaged_gz_file_in_one_line(tmp_path):
    from tests.harness.run_files import write_run
    write_run(tmp_path, _records(30))
    compress_records(tmp_path / "results")
    gz = tmp_path / "results" / "results-main.jsonl.gz"
    gz.write_bytes(gz.read_bytes()[:-12])
    proc = _cli("gate", "--reports-dir", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().startswith(f"dmlconform gate: {gz}:") and "cannot decompress" in proc.stderr, proc.stderr


# --- results.csv and failures.csv ------------------------------------------------------------------

def test_csv_lines_by_hand(tmp_path):
    records = [
        CaseRecord("directml", "ELEMENT_WISE_ADD", "6.4", "FLOAT32", "valid", "mismatch", "c2", "s",
                   test_id="harness/run/conformance.py::test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]", duration_s=0.25),
        CaseRecord("directml", "ELEMENT_WISE_ADD", "6.4", "FLOAT32", "valid", "pass", "c1", "s",
                   test_id="tests/conformance/test_conformance.py::test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]",
                   duration_s=1.5, stages={"create": 0.5, "compile": 1.0}),
        # the same case twice in one test: one line, its worst outcome
        CaseRecord("directml", "ELEMENT_WISE_ADD", "6.4", "FLOAT32", "valid", "crashed", "c1", "s",
                   test_id="harness/run/conformance.py::test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]", duration_s=60.0),
        CaseRecord("numpy", "CONVOLUTION", "6.4", "FLOAT16", "invalid", "rejected-invalid", "c3", "s",
                   test_id="harness/run/conformance.py::test_invalid[CONVOLUTION-FL6.4-rule,with,commas-numpy]"),
        CaseRecord("directml", "GATHER", "6.4", "INT32", "valid", "expected-divergence", "c4", "s", test_id="", duration_s=0.125),
        CaseRecord("onnxruntime", "GATHER", "6.4", "INT32", "valid", "some-future-status", "c5", "s",
                   test_id="harness/run/conformance.py::test_valid[GATHER-FL6.4-INT32-onnxruntime]"),
    ]
    results, failures = write_csv_results(tmp_path, records)
    assert results.name == "results.csv.gz" and failures.name == "failures.csv"
    assert gzip.decompress(results.read_bytes()).decode() == (
        "test_invalid[CONVOLUTION-FL6.4-rule;with;commas-numpy]::c3,rejected-invalid,0.000000\n"
        "test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]::c1,crashed,60.000000\n"
        "test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]::c2,mismatch,0.250000\n"
        "test_valid[GATHER-FL6.4-INT32-onnxruntime]::c5,some-future-status,0.000000\n"
        "valid[GATHER-FL6.4-INT32-directml]::c4,expected-divergence,0.125000\n")
    # deqp-runner's failures.csv: `test,status`, the cases that fail the gate (an unknown status does)
    assert failures.read_text() == (
        "test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]::c1,crashed\n"
        "test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]::c2,mismatch\n"
        "test_valid[GATHER-FL6.4-INT32-onnxruntime]::c5,some-future-status\n")
    top = slowest(records, 2)
    assert [(c.name, c.duration_s) for c in top] == [("test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]::c1", 60.0),
                                                      ("test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-directml]::c1", 1.5)]
    assert top[1].line().endswith("::c1  [create 0.500, compile 1.000]")


def test_csv_files_of_a_tiny_run(tiny_run):
    reports, run = tiny_run
    records = list(read_records(reports / "results"))
    chosen = by_name(records)
    results = read_lines(reports / "results.csv.gz")
    failures = (reports / "failures.csv").read_text().splitlines()
    assert gzip.decompress((reports / "results.csv.gz").read_bytes()).decode().splitlines() == results
    assert results == results_lines(chosen) and failures == failure_lines(chosen)
    assert len(results) == len({case_name(r) for r in records}) and results == sorted(results)
    for line in results:
        name, status, duration = line.split(",")
        assert "::" in name and not name.startswith("harness/") and float(duration) >= 0
    failing = sorted(f"{case_name(r)},{r.status}" for r in records if is_failure(r.status))
    assert failures == failing and failures and all(line.endswith(",mismatch") for line in failures)
    assert all(line.startswith("test_valid[ACTIVATION_HARD_SIGMOID-FL6.4-FLOAT32-broken-negzero]::")
               or line.startswith("test_example[ACTIVATION_HARD_SIGMOID-") for line in failures)
    # the terminal summary ends with the slowest cases, slowest first
    section = run.stdout[run.stdout.index("slowest cases"):].splitlines()[2:]
    listed = [line for line in section[:section.index(next(l for l in section if l.startswith("=")))]]
    assert len(listed) == min(10, len(records))
    seconds = [float(line.split(" s  ")[0]) for line in listed]
    assert seconds == sorted(seconds, reverse=True) and all(" ACTIVATION_HARD_SIGMOID " in line for line in listed)


def test_a_cells_later_divergences_are_told_without_their_tables():
    """The first divergence of a cell is shown whole; the next ones by their first line, the known
    divergence, the case file and the replay command (the case file holds the table)."""
    from harness.run.conformance import _headline
    message = ("POW on directml at FL 6.4 (valid, FLOAT32): mismatch: 2 of 8 elements of OutputTensor differ\n"
               "index   inputs        expected      got\n"
               "[0]     1.0, 2.0      1.0           0.99999994\n"
               "known divergence dml-pow-example\n"
               "case file: reports/cases/directml-POW-abc.yaml\n"
               "replay:    dmlconform replay reports/cases/directml-POW-abc.yaml --backend directml")
    assert _headline(message).splitlines() == [
        "POW on directml at FL 6.4 (valid, FLOAT32): mismatch: 2 of 8 elements of OutputTensor differ",
        "known divergence dml-pow-example",
        "case file: reports/cases/directml-POW-abc.yaml",
        "replay:    dmlconform replay reports/cases/directml-POW-abc.yaml --backend directml"]
