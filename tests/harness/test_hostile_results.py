"""Hostile results folders: the gate, matrix and compare judge them right, in one clear line.

One real small run (numpy, ELEMENT_WISE_ADD, 2 examples, in process) is made once per module;
each test copies its results folder and breaks one thing. Two kinds of answer:

- a folder that is well formed but not one honest, finished run (a plan claiming fewer cells,
  records, plans or cell lines of another run, a record of an unplanned cell, a planned cell
  missing, no completion marker, an older dmlconform's results): `GATE: FAIL`, exit 1, with the
  line naming the first foreign `file:line`;
- a malformed file (a null or list status, a null backend, invalid UTF-8, 100,000 nested brackets,
  1e999 or negative counts, a 2 MB line, ...): one line `file:line: key: message` on stderr, nothing
  on stdout, no traceback, exit 2 (harness.run.record_schema.RunFileError).

And the other way round: an honest run passes, in process and with two xdist workers.
"""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.report.matrix import STATES
from harness.run.record_schema import MAX_LINE_BYTES, MAX_PLAN_BYTES, RECORD_OPTIONAL, RECORD_REQUIRED
from harness.run.manifest import plan_files
from tests.helpers import read_plan, write_plan_file

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = ROOT / ".venv" / "bin" / "dmlconform"
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "harness.cli"]
RUN = ["run", "--backend", "numpy", "--operator", "ELEMENT_WISE_ADD", "--max-examples", "2"]
MALFORMED = 2  # harness/cli.py turns a RunFileError into one line and exit 2
VALID_ID = "harness/run/conformance.py::test_valid[ELEMENT_WISE_ADD-FL6.4-FLOAT32-numpy]"
OTHER_RUN = "0123456789abcdef0123456789abcdef"


def _run(reports: Path, workers: int) -> subprocess.CompletedProcess:
    proc = subprocess.run([*CLI, *RUN, "--workers", str(workers), "--reports-dir", str(reports)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    """The reports folder of a real small run, and its matrix.json (never modified: tests copy it)."""
    reports = tmp_path_factory.mktemp("honest")
    _run(reports, 0)
    assert main(["matrix", "--reports-dir", str(reports)]) == 0
    for packed in (reports / "results").glob("*.jsonl.gz"):  # records and cell markers, gzip-compressed at the run's end: the tests
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))  # break the records line by line,
        packed.unlink()  # as a run writes them while it goes (both forms are read alike: test_report_size)
    return reports


@pytest.fixture
def reports(honest, tmp_path) -> Path:
    """A copy of the honest run's results folder to break."""
    copy = tmp_path / "reports"
    shutil.copytree(honest / "results", copy / "results")
    return copy


def _results(reports: Path) -> Path:
    return reports / "results" / "results-main.jsonl"


def _cells(reports: Path) -> Path:
    return reports / "results" / "cells-main.jsonl"


def _plan(reports: Path) -> Path:
    return reports / "results" / "plan-main.json.gz"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))


def _run_id(reports: Path) -> str:
    return read_plan(_plan(reports))["run_id"]


def _gate(reports: Path, capsys) -> tuple[int, list[str]]:
    code = main(["gate", "--reports-dir", str(reports)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return code, out.splitlines()


def _failed(reports: Path, capsys, *expected: str) -> list[str]:
    """The gate fails (exit 1) and prints each expected line exactly."""
    code, lines = _gate(reports, capsys)
    assert code == 1 and lines[-1] == "GATE: FAIL", "\n".join(lines)
    for line in expected:
        assert line in lines, f"{line!r} not in:\n" + "\n".join(lines)
    return lines


def _refused(capsys, args: list[str], where: str, message: str) -> None:
    """One line `where: message` on stderr (with the command's name once the CLI catches
    RunFileError), nothing on stdout, no traceback, the malformed-input exit code."""
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    expected = f"{where}: {message}"
    assert err.strip().splitlines() in ([expected], [f"dmlconform {args[0]}: {expected}"]), err
    assert not out.strip(), out
    assert code == MALFORMED, (code, err)


def _replace_line(path: Path, number: int, raw: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[number - 1] = raw + b"\n"
    path.write_bytes(b"".join(lines))


# --- an honest run passes ---------------------------------------------------------------------------

def test_honest_run_passes(honest, capsys):
    code, lines = _gate(honest, capsys)
    assert code == 0 and lines[-1] == "GATE: PASS", "\n".join(lines)
    assert "numpy: 28 of 28 cells finished; 193 case(s) recorded of at most 193 planned" in lines
    run_id = _run_id(honest)
    assert len(run_id) == 32 and json.loads((honest / "results" / "complete.json").read_text())["run_id"] == run_id
    assert {r["run_id"] for r in _lines(_results(honest))} == {run_id}
    assert {c["run_id"] for c in _lines(_cells(honest))} == {run_id}


def test_honest_run_with_two_xdist_workers_passes(tmp_path, capsys):
    _run(tmp_path, 2)
    code, lines = _gate(tmp_path, capsys)
    assert code == 0 and lines[-1] == "GATE: PASS", "\n".join(lines)
    results = tmp_path / "results"
    plans = {read_plan(p)["run_id"] for p in plan_files(results)}
    assert len(plans) == 1 and len(list(results.glob("plan-gw*.json.gz"))) == 2
    stamped = {json.loads(line)["run_id"] for pattern in ("results-*.jsonl.gz", "cells-*.jsonl.gz") for p in results.glob(pattern)
               for line in gzip.decompress(p.read_bytes()).decode().splitlines()}
    assert stamped == plans == {json.loads((results / "complete.json").read_text())["run_id"]}


def test_honest_matrices_compare_clean(honest, capsys):
    assert main(["compare", str(honest / "matrix.json"), str(honest / "matrix.json")]) == 0
    assert "new failures: 0" in capsys.readouterr().out


# --- well formed, but not one honest finished run: GATE: FAIL, exit 1 --------------------------------

def test_plan_claiming_fewer_cells(reports, capsys):
    plan = read_plan(_plan(reports))
    plan["cells"] = [c for c in plan["cells"] if c["test_id"] != VALID_ID]
    write_plan_file(_plan(reports), plan)
    run_id = plan["run_id"]
    _failed(reports, capsys,
            f"foreign results: {_cells(reports)}:1 finishes a cell the plan does not have ({VALID_ID})",
            f"foreign results: {_results(reports)}:1 is a record of a cell the run did not plan "
            f"(test id {VALID_ID}, backend numpy); 16 such records in all",
            "numpy: 27 of 27 cells finished; 177 case(s) recorded of at most 177 planned")
    assert run_id == _run_id(reports)


def test_records_of_another_run_mixed_in(reports, capsys):
    other = [dict(r, run_id=OTHER_RUN) for r in _lines(_results(reports))[:3]]
    _write_lines(reports / "results" / "results-gw9.jsonl", other)
    _failed(reports, capsys,
            f"foreign results: {reports / 'results' / 'results-gw9.jsonl'}:1 is a record of another run "
            f"(run id {OTHER_RUN}; this run is {_run_id(reports)}); 3 such records in all")


def test_one_record_of_another_run_inside_a_results_file(reports, capsys):
    records = _lines(_results(reports))
    records[41]["run_id"] = OTHER_RUN
    _write_lines(_results(reports), records)
    _failed(reports, capsys,
            f"foreign results: {_results(reports)}:42 is a record of another run (run id {OTHER_RUN}; this run is {_run_id(reports)})")


def test_plan_and_cells_of_another_run_mixed_in(reports, capsys):
    plan = read_plan(_plan(reports))
    (reports / "results" / "plan-gw9.json").write_text(json.dumps(dict(plan, run_id=OTHER_RUN)))
    _write_lines(reports / "results" / "cells-gw9.jsonl", [dict(c, run_id=OTHER_RUN) for c in _lines(_cells(reports))[:2]])
    _failed(reports, capsys,
            f"foreign results: {reports / 'results' / 'plan-gw9.json'}:1 is the plan of another run "
            f"(run id {OTHER_RUN}; this run is {plan['run_id']})",
            f"foreign results: {reports / 'results' / 'cells-gw9.jsonl'}:1 is a finished cell of another run "
            f"(run id {OTHER_RUN}; this run is {plan['run_id']}); 2 such lines in all")


def test_extra_record_for_an_unplanned_cell(reports, capsys):
    records = _lines(_results(reports))
    unplanned = "harness/run/conformance.py::test_valid[ELEMENT_WISE_ADD-FL6.4-BOOL-numpy]"
    _write_lines(_results(reports), records + [dict(records[0], test_id=unplanned, case_id="f" * 16)])
    _failed(reports, capsys,
            f"foreign results: {_results(reports)}:{len(records) + 1} is a record of a cell the run did not plan "
            f"(test id {unplanned}, backend numpy)")


def test_record_of_another_backend_in_a_planned_cell(reports, capsys):
    records = _lines(_results(reports))
    _write_lines(_results(reports), records + [dict(records[0], backend="onnxruntime")])
    _failed(reports, capsys,
            f"foreign results: {_results(reports)}:{len(records) + 1} is a record of a cell the run did not plan "
            f"(test id {VALID_ID}: a valid case of onnxruntime ELEMENT_WISE_ADD; the plan has a valid cell of numpy ELEMENT_WISE_ADD)")


def test_duplicate_record_beyond_what_the_cell_ran(reports, capsys):
    records = _lines(_results(reports))
    _write_lines(_results(reports), records + [records[0]])
    _failed(reports, capsys, "extra records: 1 finished cell(s) have more records than the cases they ran",
            f"  {VALID_ID}: ran 16, recorded 17")


def test_cell_that_ran_more_cases_than_its_exact_plan(reports, capsys):
    records = _lines(_results(reports))
    example = next(r for r in records if r["kind"] == "example")
    _write_lines(_results(reports), records + [dict(example, case_id="e" * 16)])
    _write_lines(_cells(reports), [dict(c, cases=2) if c["test_id"] == example["test_id"] else c for c in _lines(_cells(reports))])
    _failed(reports, capsys, "outside the plan: 1 cell(s) ran another number of cases than their plan allows",
            f"  {example['test_id']}: ran 2, planned exactly 1")


def test_many_foreign_records_are_counted_not_listed(reports, capsys):
    record = _lines(_results(reports))[0]
    with (reports / "results" / "results-gw7.jsonl").open("w") as out:
        for i in range(5000):
            out.write(json.dumps(dict(record, run_id=OTHER_RUN, case_id=f"{i:016x}")) + "\n")
    lines = _failed(reports, capsys,
                    f"foreign results: {reports / 'results' / 'results-gw7.jsonl'}:1 is a record of another run "
                    f"(run id {OTHER_RUN}; this run is {_run_id(reports)}); 5000 such records in all")
    assert len(lines) < 15


def test_planned_cell_missing(reports, capsys):
    _write_lines(_results(reports), [r for r in _lines(_results(reports)) if r["test_id"] != VALID_ID])
    _write_lines(_cells(reports), [c for c in _lines(_cells(reports)) if c["test_id"] != VALID_ID])
    _failed(reports, capsys,
            "incomplete run: 27 of 28 cells have results; their tests ended without finishing (a worker died or a test errored)",
            f"  unfinished: {VALID_ID}")


def test_finished_cell_whose_records_are_gone(reports, capsys):
    _write_lines(_results(reports), [r for r in _lines(_results(reports)) if r["test_id"] != VALID_ID])
    _failed(reports, capsys, f"  {VALID_ID}: ran 16, recorded 0")


def test_missing_completion_marker(reports, capsys):
    (reports / "results" / "complete.json").unlink()
    _failed(reports, capsys, "incomplete run: no completion marker (the session did not end normally)")


def test_cell_finished_twice(reports, capsys):
    cells = _lines(_cells(reports))
    _write_lines(_cells(reports), cells + [cells[0]])
    _failed(reports, capsys, f"foreign results: {_cells(reports)}:{len(cells) + 1} finishes a cell a second time ({VALID_ID})")


def test_results_of_an_older_dmlconform(reports, capsys):
    """Records and cell lines without a run id: an older dmlconform's run, which fails (rerun it)."""
    for path in (_results(reports), _cells(reports)):
        _write_lines(path, [{k: v for k, v in line.items() if k != "run_id"} for line in _lines(path)])
    _failed(reports, capsys,
            f"results from an older dmlconform (no run id): {_results(reports)}:1 is a record without one; 193 such records in all",
            f"results from an older dmlconform (no run id): {_cells(reports)}:1 is a finished-cell line without one; 28 such lines in all")


def test_torn_last_line_after_a_finished_run(reports, capsys):
    """A cut write always leaves its cell unfinished; after a run whose every cell finished it is foreign."""
    with _results(reports).open("a") as out:
        out.write('{"backend": "numpy", "oper')
    _failed(reports, capsys, f"interrupted write: {_results(reports)} ends inside a line (its last line was cut short)")


# --- malformed: one line, exit 2 ------------------------------------------------------------------

def _record_line(reports: Path, number: int, **changes) -> bytes:
    record = _lines(_results(reports))[number - 1]
    record.update(changes)
    return json.dumps(record, sort_keys=True).encode()


HOSTILE_RECORDS = [  # (id, line 5 of results-main.jsonl from the honest one, the message)
    ("null-status", lambda r: _record_line(r, 5, status=None), "status: expected a string, found null"),
    ("list-status", lambda r: _record_line(r, 5, status=["pass"]), "status: expected a string, found an array"),
    ("object-status", lambda r: _record_line(r, 5, status={"pass": 1}), "status: expected a string, found an object"),
    ("null-backend", lambda r: _record_line(r, 5, backend=None), "backend: expected a string, found null"),
    ("path-backend", lambda r: _record_line(r, 5, backend="../../etc/x"),
     "backend: '../../etc/x' is not a backend name (letters, digits, _ . + -, one @variant)"),
    ("null-kind", lambda r: _record_line(r, 5, kind=None), "kind: expected a string, found null"),
    ("unknown-kind", lambda r: _record_line(r, 5, kind="bogus"), "kind: unknown kind 'bogus' (one of valid, invalid, example, sweep, probe)"),
    ("tag-number", lambda r: _record_line(r, 5, tags=["packed", 3]), "tags[1]: expected a string, found int"),
    ("missing-case-id", lambda r: json.dumps({k: v for k, v in json.loads(_record_line(r, 5)).items() if k != "case_id"}).encode(),
     "case_id: missing"),
    ("unknown-field", lambda r: _record_line(r, 5, colour="red"),
     f"colour: unknown field (allowed: {', '.join(sorted(RECORD_REQUIRED | RECORD_OPTIONAL))})"),
    ("not-an-object", lambda r: b"42", "expected a JSON object, found int"),
    ("array", lambda r: b'["numpy", "pass"]', "expected a JSON object, found an array"),
    ("infinite-count", lambda r: _record_line(r, 5).replace(b'"elements": 1,', b'"elements": 1e999,'),
     "invalid JSON: non-finite number 1e999 (counts are whole numbers)"),
    ("nan-count", lambda r: _record_line(r, 5).replace(b'"mismatches": 0,', b'"mismatches": NaN,'),
     "invalid JSON: non-finite number NaN (counts are whole numbers)"),
    ("negative-count", lambda r: _record_line(r, 5, elements=-1), "elements: expected a non-negative integer, found -1"),
    ("huge-count", lambda r: _record_line(r, 5, elements=2**64), "elements: expected a non-negative integer, found 18446744073709551616"),
    ("5000-digit-count", lambda r: _record_line(r, 5).replace(b'"elements": 1,', b'"elements": ' + b"9" * 5000 + b","),
     "invalid JSON: a number too long to read (counts are at most 19 digits)"),
    ("fraction-count", lambda r: _record_line(r, 5, unspecified=1.5), "unspecified: expected a non-negative integer, found a number with a fraction"),
    ("bool-count", lambda r: _record_line(r, 5, elements=True), "elements: expected a non-negative integer, found a boolean"),
    ("liberty-inf", lambda r: _record_line(r, 5).replace(b'"liberties": {}', b'"liberties": {"rounding": 1e999}'),
     "invalid JSON: non-finite number 1e999 (counts are whole numbers)"),
    ("liberties-list", lambda r: _record_line(r, 5, liberties=[1]), "liberties: expected a JSON object, found an array"),
    ("invalid-utf8", lambda r: _record_line(r, 5).replace(b'"summary": "', b'"summary": "\xff\xfe'), None),
    ("lone-surrogate", lambda r: _record_line(r, 5).replace(b'"summary": "', b'"summary": "\\ud800'),
     "invalid JSON: a string holds a lone UTF-16 surrogate (not text)"),
    ("nested-100000", lambda r: b"[" * 100000 + b"]" * 100000, "invalid JSON: nested too deeply (more than 16 levels)"),
    ("nested-objects", lambda r: b'{"a":' * 100000 + b"1" + b"}" * 100000, "invalid JSON: nested too deeply (more than 16 levels)"),
    ("2MB-line", lambda r: _record_line(r, 5, summary="x" * (2 << 20)), f"line longer than {MAX_LINE_BYTES} bytes"),
    ("empty-line", lambda r: b"", "empty line"),
    ("cut-in-the-middle", lambda r: b'{"backend": ', "invalid JSON: Expecting value: line 1 column 13 (char 12)"),
]


@pytest.mark.parametrize("make, message", [h[1:] for h in HOSTILE_RECORDS], ids=[h[0] for h in HOSTILE_RECORDS])
def test_malformed_record_is_one_line(reports, capsys, make, message):
    raw = make(reports)
    _replace_line(_results(reports), 5, raw)
    if message is None:  # invalid UTF-8: the byte offset within the line
        offset = raw.index(bytes([0xFF]))
        message = f"invalid JSON: not UTF-8 text (invalid start byte at byte {offset})"
    for command in ("gate", "matrix"):
        _refused(capsys, [command, "--reports-dir", str(reports)], f"{_results(reports)}:5", message)


HOSTILE_CELLS = [
    ("infinite-cases", b'{"test_id": "t", "cases": 1e999}', "invalid JSON: non-finite number 1e999 (counts are whole numbers)"),
    ("null-cases", b'{"test_id": "t", "cases": null}', "cases: expected a non-negative integer, found null"),
    ("negative-cases", b'{"test_id": "t", "cases": -4}', "cases: expected a non-negative integer, found -4"),
    ("list-test-id", b'{"test_id": ["t"], "cases": 1}', "test_id: expected a string, found an array"),
    ("nested", b"[" * 100000, "invalid JSON: nested too deeply (more than 16 levels)"),
    ("invalid-utf8", b'{"test_id": "\xc3\x28", "cases": 1}', "invalid JSON: not UTF-8 text (invalid continuation byte at byte 13)"),
    ("run-id-number", b'{"test_id": "t", "cases": 1, "run_id": 7}', "run_id: expected a string, found int"),
]


@pytest.mark.parametrize("raw, message", [h[1:] for h in HOSTILE_CELLS], ids=[h[0] for h in HOSTILE_CELLS])
def test_malformed_cell_line_is_one_line(reports, capsys, raw, message):
    _replace_line(_cells(reports), 3, raw)
    _refused(capsys, ["gate", "--reports-dir", str(reports)], f"{_cells(reports)}:3", message)


def _plan_with(reports: Path, change) -> bytes:
    plan = read_plan(_plan(reports))
    change(plan)
    return json.dumps(plan).encode()


HOSTILE_PLANS = [
    ("nested", lambda r: b"[" * 100000 + b"]" * 100000, "invalid JSON: nested too deeply (more than 16 levels)"),
    ("list", lambda r: b"[]", "expected a JSON object, found an array"),
    ("infinite-budget", lambda r: _plan_with(r, lambda p: p["cells"][0].update(planned_cases=0)).replace(
        b'"planned_cases": 0', b'"planned_cases": 1e999'), "invalid JSON: non-finite number 1e999 (counts are whole numbers)"),
    ("null-exact", lambda r: _plan_with(r, lambda p: p["cells"][3].update(exact=None)), "cells[3].exact: expected true or false, found null"),
    ("null-backend", lambda r: _plan_with(r, lambda p: p["cells"][2].update(backend=None)), "cells[2].backend: expected a string, found null"),
    ("cell-twice", lambda r: _plan_with(r, lambda p: p["cells"].append(p["cells"][0])),
     f"cells[28]: test id {VALID_ID} planned twice (also cells[0])"),
    ("version-2", lambda r: _plan_with(r, lambda p: p.update(version=2)), "version: unknown plan version '2' (this harness reads 1)"),
    ("no-run-id", lambda r: _plan_with(r, lambda p: p.pop("run_id")), "run_id: missing"),
    ("invalid-utf8", lambda r: b'{"version": 1, "run_id": "\xff"}', "invalid JSON: not UTF-8 text (invalid start byte at byte 26)"),
]


@pytest.mark.parametrize("make, message", [h[1:] for h in HOSTILE_PLANS], ids=[h[0] for h in HOSTILE_PLANS])
def test_malformed_plan_is_one_line(reports, capsys, make, message):
    _plan(reports).write_bytes(gzip.compress(make(reports), mtime=0))  # plans are written gzip-compressed
    _refused(capsys, ["gate", "--reports-dir", str(reports)], f"{_plan(reports)}:1", message)


@pytest.mark.parametrize("make, message", [
    (lambda plan: plan[: len(plan) // 2], "cannot decompress (a damaged gzip file): Compressed file ended before the "
                                          "end-of-stream marker was reached"),
    (lambda plan: b'{"version": 1}', "cannot decompress (a damaged gzip file): Not a gzipped file (b'{\"')"),
    # 65 MiB of zeros packs into 65 KB: read back no further than the limit, never inflated whole
    (lambda plan: gzip.compress(b"0" * (MAX_PLAN_BYTES + (1 << 20)), mtime=0), f"larger than {MAX_PLAN_BYTES} bytes"),
], ids=["cut-short", "not-gzip", "inflates-past-the-limit"])
def test_a_damaged_or_inflating_gzip_plan_is_one_line(reports, capsys, make, message):
    _plan(reports).write_bytes(make(_plan(reports).read_bytes()))
    _refused(capsys, ["gate", "--reports-dir", str(reports)], str(_plan(reports)), message)


@pytest.mark.parametrize("raw, message", [
    (b"[1, 2]", "expected a JSON object, found an array"),
    (b'{"run_id": null, "exitstatus": 0}', "run_id: expected a string, found null"),
    (b'{"run_id": "x", "exitstatus": 1e999}', "invalid JSON: non-finite number 1e999 (counts are whole numbers)"),
    (b'{"a":' * 10000, "invalid JSON: nested too deeply (more than 16 levels)"),
    (b"{" * 100000, None),
], ids=["list", "null-run-id", "infinite-exitstatus", "nested", "nested-100000"])
def test_malformed_completion_marker_is_one_line(reports, capsys, raw, message):
    marker = reports / "results" / "complete.json"
    marker.write_bytes(raw)
    if message is None:  # read no further than a completion marker may be long
        _refused(capsys, ["gate", "--reports-dir", str(reports)], str(marker), "larger than 65536 bytes")
    else:
        _refused(capsys, ["gate", "--reports-dir", str(reports)], f"{marker}:1", message)


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="POSIX: FIFOs and /dev/zero")
@pytest.mark.parametrize("name", ["results-zero.jsonl", "cells-fifo.jsonl", "plan-fifo.json"])
def test_results_file_that_is_no_regular_file(reports, capsys, name):
    """A FIFO would block the gate for ever, /dev/zero fill its memory: neither is read."""
    import os
    path = reports / "results" / name
    if "zero" in name:
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    _refused(capsys, ["gate", "--reports-dir", str(reports)], str(path), "cannot read: not a regular file")


def test_malformed_record_through_the_real_command_line(reports):
    """The installed command, end to end: one line on stderr, no traceback."""
    _replace_line(_results(reports), 5, _record_line(reports, 5, status=None))
    proc = subprocess.run([*CLI, "gate", "--reports-dir", str(reports)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(f"{_results(reports)}:5: status: expected a string, found null")
    assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout.strip()
    assert proc.returncode == MALFORMED


def test_malformed_input_exits_2(reports, capsys):
    _replace_line(_results(reports), 5, _record_line(reports, 5, backend=None))
    assert main(["gate", "--reports-dir", str(reports)]) == 2
    assert capsys.readouterr().err.startswith("dmlconform gate: ")


# --- compare -----------------------------------------------------------------------------------------

def _matrix(honest: Path, tmp_path: Path, name: str, change=None) -> Path:
    """The honest matrix.json, its ELEMENT_WISE_ADD cells (FLOAT32 first, `pass` with 17 cases), changed."""
    data = json.loads((honest / "matrix.json").read_text())
    data["cells"] = [c for c in data["cells"] if c["operator"] == "ELEMENT_WISE_ADD"]
    if change is not None:
        change(data)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def _cell(data: dict, data_type: str) -> dict:
    return next(c for c in data["cells"] if c["data_type"] == data_type)


def _compare(capsys, base: Path, new: Path) -> tuple[int, list[str]]:
    code = main(["compare", str(base), str(new)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out.splitlines()


@pytest.mark.parametrize("state", ["FAIL", "mismatch", "", "pass "])
def test_compare_unknown_state_in_new_fails(honest, tmp_path, capsys, state):
    base = _matrix(honest, tmp_path, "base")
    new = _matrix(honest, tmp_path, "new", lambda d: _cell(d, "FLOAT32").update(state=state))
    code, lines = _compare(capsys, base, new)
    assert code == 1
    assert "new failures: 1" in lines
    assert (f"  numpy ELEMENT_WISE_ADD FL6.4 FLOAT32: the new matrix has unknown state {state!r} "
            f"(known states: {', '.join(STATES)}): counted as a failure") in lines


def test_compare_unknown_state_in_base_fails(honest, tmp_path, capsys):
    base = _matrix(honest, tmp_path, "base", lambda d: _cell(d, "INT8").update(state="green"))
    code, lines = _compare(capsys, base, _matrix(honest, tmp_path, "new"))
    assert code == 1
    assert (f"  numpy ELEMENT_WISE_ADD FL6.4 INT8: the base matrix has unknown state 'green' "
            f"(known states: {', '.join(STATES)}): counted as a failure") in lines


def test_compare_new_failing_cell_absent_from_base(honest, tmp_path, capsys):
    extra = {"backend": "numpy", "operator": "ELEMENT_WISE_ADD", "feature_level": "6.4", "data_type": "BOOL",
             "state": "fail", "counts": {"mismatch": 3}}
    base = _matrix(honest, tmp_path, "base")
    new = _matrix(honest, tmp_path, "new", lambda d: d["cells"].append(extra))
    code, lines = _compare(capsys, base, new)
    assert code == 1
    assert "new failures: 1" in lines and "  numpy ELEMENT_WISE_ADD FL6.4 BOOL: absent -> fail" in lines
    assert "appeared: 0" in lines


def test_compare_pass_to_fail_and_fixed(honest, tmp_path, capsys):
    base = _matrix(honest, tmp_path, "base", lambda d: _cell(d, "INT8").update(state="fail"))
    new = _matrix(honest, tmp_path, "new", lambda d: _cell(d, "FLOAT32").update(state="fail"))
    code, lines = _compare(capsys, base, new)
    assert code == 1
    assert "  numpy ELEMENT_WISE_ADD FL6.4 FLOAT32: pass -> fail" in lines
    assert "  numpy ELEMENT_WISE_ADD FL6.4 INT8: fail -> pass" in lines


@pytest.mark.parametrize("change, message", [
    (lambda text: text.replace('"pass": 17', '"pass": 1e999', 1), "invalid JSON: non-finite number 1e999 (counts are whole numbers)"),
    (lambda text: text.replace('"pass": 17', '"pass": -17', 1), "cells[0].counts.pass: expected a non-negative integer, found -17"),
    (lambda text: text.replace('"pass": 17', '"pass": Infinity', 1), "invalid JSON: non-finite number Infinity (counts are whole numbers)"),
    (lambda text: text.replace('"state": "pass"', '"state": null', 1), "cells[0].state: expected a string, found null"),
    (lambda text: "[" * 100000 + "]" * 100000, "invalid JSON: nested too deeply (more than 16 levels)"),
], ids=["infinite-count", "negative-count", "Infinity", "null-state", "nested"])
def test_compare_refuses_malformed_matrix(honest, tmp_path, capsys, change, message):
    base = _matrix(honest, tmp_path, "base")
    bad = tmp_path / "bad.json"
    bad.write_text(change(base.read_text()))
    assert main(["compare", str(base), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [f"compare: cannot use matrix {bad}: {message}"] and not out
