"""The HTML report: Allure 3's command line (npm package `allure`, pinned in package.json) turns
reports/allure-results into reports/allure-report, keeping history (history.jsonl) between runs
so trends show. No Java is needed.

What it leaves is sized for CI to upload (docs/reports.md):

- one self-contained file, allure-report/index.html (Allure's `singleFile`: data, attachments and
  the app embedded, so it opens from disk with no server), instead of one file per test and per
  attachment;
- by default (`failures`) the tests a reader opens the report for: failures and divergences
  (expected, on unspecified elements, flaky, crashed). Passing, rejected-invalid and unsupported
  cells are in matrix.html and every case in results.csv.gz; `full` puts every test in the report;
- a test the suite judged reports its message without the traceback of pytest.fail/xfail inside
  the suite (the harness's source, 3 to 13 KB a test, repeated in the report and its history);
- history.jsonl keeps the last HISTORY_LIMIT runs (Allure's historyLimit; without it the file
  grows by one line every run), each test's status and duration without its message;
- the Allure result files (one per test, and per attachment) packed into allure-results.zip once
  the report is built: the layout of `allure results pack`, so `npx allure results unpack
  reports/allure-results.zip` or `dmlconform report` (which reads the archive when the folder is
  gone) gives them back.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness.judge.status import Status, is_failure
from harness.report.allure import STATUS_LABEL, category_rules

ROOT = Path(__file__).resolve().parents[2]  # a checkout, where `npm ci` puts node_modules/
HISTORY_LIMIT = 20  # runs history.jsonl keeps (Allure 3 historyLimit)
from harness.run.options import REPORT_DETAILS  # what the report holds (`dmlconform run/report --report-detail`)
ALLURE_RESULTS_ZIP = "allure-results.zip"
ENVIRONMENT = "environment.properties"
DETAIL_KEY = "report.detail"  # the run's --report-detail, in its environment.properties
KEPT_KEY = "results.kept"  # in a packed archive's environment.properties: which tests it holds (pack_allure_results)
_DIVERGENCES = {Status.EXPECTED_DIVERGENCE.value, Status.UNSPECIFIED.value}


def allure_command() -> list[str]:
    """The pinned Allure 3 command line of the checkout (npm ci), else one on PATH."""
    local = ROOT / "node_modules" / ".bin" / "allure"
    if local.exists():
        return [str(local)]
    found = shutil.which("allure")
    if found:
        return [found]
    raise FileNotFoundError("the Allure command line is not installed: run `make setup` (npm ci installs it from package.json)")


def _config(output: Path, history: Path, name: str, single_file: bool) -> dict:
    """The Allure 3 configuration of the report (written next to it for the run of `allure generate`)."""
    return {
        "name": name, "output": str(output.resolve()), "historyPath": str(history.resolve()), "historyLimit": HISTORY_LIMIT,
        # the tree: backend > operator > feature level > data type
        "plugins": {"awesome": {"options": {"groupBy": ["parentSuite", "epic", "feature", "story"], "singleFile": single_file}}},
        "categories": {"rules": category_rules()},
    }


def generate_report(results: Path, output: Path, history: Path, name: str = "dmlconform conformance", *,
                    detail: str = "full", single_file: bool = True) -> Path:
    """Generate the report from the Allure result files in `results` (prepared by select_results:
    with `detail` `failures` only the tests reported_result keeps); the history file gains one
    entry per run, the last HISTORY_LIMIT kept, without messages (slim_history)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=".allure-") as scratch:
        source = select_results(results, Path(scratch) / "results", everything=detail == "full")
        config = Path(scratch) / "allurerc.json"
        config.write_text(json.dumps(_config(output, history, name, single_file)))
        if output.exists():
            shutil.rmtree(output)
        proc = subprocess.run(allure_command() + ["generate", "--config", str(config), str(source.resolve())],
                              capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0 or not (output / "index.html").exists():
        raise RuntimeError(f"allure generate failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}")
    slim_history(history)
    return output / "index.html"


def slim_history(history: Path) -> None:
    """history.jsonl without each test's message and traceback: what the report's history and
    trends show of earlier runs is their status and duration, and a failing test's message (a
    few KB to 30 KB with its mismatch tables) is in that run's own report. Without this, a run
    of a thousand divergences added 10 MB to the file, twenty times over."""
    try:
        lines = history.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return
    slim = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            slim.append(line)  # not ours to judge: Allure reads it (or says what is wrong)
            continue
        for result in (entry.get("testResults") or {}).values() if isinstance(entry, dict) else ():
            if isinstance(result, dict):
                result.pop("message", None)
                result.pop("trace", None)
        slim.append(json.dumps(entry, separators=(",", ":")))
    partial = history.with_name(history.name + ".tmp")
    partial.write_text("".join(line + "\n" for line in slim), encoding="utf-8")
    os.replace(partial, history)


def _read_result(path: Path) -> dict | None:
    """An Allure result file, or None when it is not JSON (Allure decides what to do with it)."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def reported_result(result: dict) -> bool:
    """Whether a test belongs in the `failures` report: its worst case failed the gate or diverged
    (the status label the suite sets), or Allure has it failed or broken (a test that errored
    before it could label itself)."""
    labels = {label.get("name"): label.get("value") for label in result.get("labels", []) if isinstance(label, dict)}
    status = labels.get(STATUS_LABEL)
    if isinstance(status, str) and (is_failure(status) or status in _DIVERGENCES):
        return True
    return result.get("status") in ("failed", "broken")


def _sources(value: object) -> Iterator[str]:
    """The attachment files a result (its steps too) names."""
    if isinstance(value, dict):
        for attachment in value.get("attachments") or []:
            if isinstance(attachment, dict) and isinstance(attachment.get("source"), str):
                yield attachment["source"]
        for step in value.get("steps") or []:
            yield from _sources(step)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _without_traceback(result: dict) -> bool:
    """Drop the traceback of a test the suite judged (its status label set, not broken): that of
    pytest.fail or pytest.xfail inside the suite (3 to 13 KB of harness source), or the message
    once more; the message says it all. A broken test (an error in the harness) keeps its own.
    Returns whether the result changed."""
    details = result.get("statusDetails")
    labelled = any(isinstance(label, dict) and label.get("name") == STATUS_LABEL for label in result.get("labels", []))
    if not labelled or result.get("status") == "broken" or not isinstance(details, dict) or not details.get("trace"):
        return False
    del details["trace"]
    return True


def select_results(results: Path, target: Path, everything: bool = False) -> Path:
    """The result files of the tests reported_result keeps (`everything`: all), with their
    attachments and the run's files (environment.properties, which then says what the report
    leaves out, categories.json), linked into `target` (a result whose traceback goes, written)."""
    target.mkdir(parents=True)
    kept, total = 0, 0
    for path in sorted(results.glob("*-result.json")):
        result = _read_result(path)
        total += 1
        if result is not None and not everything and not reported_result(result):
            continue
        kept += 1
        if result is not None and _without_traceback(result):
            (target / path.name).write_text(json.dumps(result), encoding="utf-8")
        else:
            _link_or_copy(path, target / path.name)
        for name in set(_sources(result)):
            attachment = results / Path(name).name
            if attachment.is_file() and not (target / attachment.name).exists():
                _link_or_copy(attachment, target / attachment.name)
    for path in results.glob("*-container.json"):
        if not _unread_container(path):
            _link_or_copy(path, target / path.name)
    if (results / "categories.json").is_file():
        _link_or_copy(results / "categories.json", target / "categories.json")
    note = ("full: every test" if everything else
            f"failures: {kept} of {total} tests, those with failures or divergences; every cell is in matrix.html, "
            f"every case in results.csv.gz; `dmlconform report --report-detail full` reports every test")
    lines = [line for line in _environment_lines(results) if not line.startswith(f"{DETAIL_KEY}=")]
    (target / ENVIRONMENT).write_text("\n".join([*lines, f"{DETAIL_KEY}={note}"]) + "\n", encoding="utf-8")
    return target


def _environment_lines(results: Path) -> list[str]:
    path = results / ENVIRONMENT
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
    except OSError:
        return []


def run_detail(results: Path) -> str | None:
    """The --report-detail the run asked for (its environment.properties), or None."""
    for line in _environment_lines(results):
        key, _, value = line.partition("=")
        if key == DETAIL_KEY and value in REPORT_DETAILS:
            return value
    return None


@contextmanager
def allure_results(reports: Path) -> Iterator[Path | None]:
    """The run's Allure result files as a folder: reports/allure-results, else allure-results.zip
    unpacked into a temporary folder (removed afterwards); None when there are neither."""
    folder, archive = reports / "allure-results", reports / ALLURE_RESULTS_ZIP
    if folder.is_dir():
        yield folder
        return
    if not archive.is_file():
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="dmlconform-allure-results-") as scratch:  # the reports may be read-only
        with zipfile.ZipFile(archive) as packed:
            for member in packed.infolist():
                name = Path(member.filename).name  # flat, as `allure results pack` writes it: no path escapes
                if member.is_dir() or not name or name != member.filename:
                    continue
                with packed.open(member) as src, (Path(scratch) / name).open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        yield Path(scratch)


def _unread_container(path: Path) -> bool:
    """A fixture container no test refers to (allure-pytest writes one per test for the parametrized
    cell, with no children): no reader shows it."""
    if not path.name.endswith("-container.json"):
        return False
    value = _read_result(path)
    return value is not None and not value.get("children")


def pack_allure_results(reports: Path, everything: bool = True) -> Path | None:
    """reports/allure-results packed into reports/allure-results.zip (flat, as `allure results
    pack` writes it; containers no test refers to left out), then the folder removed: tens of
    thousands of small files become one. The archive is written under a temporary name first.

    Without `everything` (a run and report of `--report-detail failures`, the default) only the
    tests the report shows are packed (reported_result: failures and divergences), with their
    attachments: the passing, rejected-invalid and unsupported tests' result files were 18 of the
    28 MB `make run` packed, each cell's outcome is in matrix.html and each case's in
    results.csv.gz, and a run with `--report-detail full` packs every test. The archive's
    environment.properties says which it holds (KEPT_KEY)."""
    folder = reports / "allure-results"
    if not folder.is_dir():
        return None
    keep: set[str] | None = None
    kept = total = 0
    if not everything:
        keep = set()
        for path in folder.glob("*-result.json"):
            result = _read_result(path)
            total += 1
            if result is None or reported_result(result):
                kept += 1
                keep.add(path.name)
                keep.update(Path(name).name for name in _sources(result))
    archive = reports / ALLURE_RESULTS_ZIP
    partial = archive.with_name(archive.name + ".tmp")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as packed:
        for path in sorted(folder.iterdir()):
            if not path.is_file() or path.is_symlink() or _unread_container(path):
                continue
            if keep is not None and path.name not in keep and (path.name.endswith("-result.json") or "-attachment" in path.name):
                continue
            if keep is not None and path.name == ENVIRONMENT:
                lines = [line for line in _environment_lines(folder) if not line.startswith(f"{KEPT_KEY}=")]
                packed.writestr(ENVIRONMENT, "\n".join([*lines, f"{KEPT_KEY}=failures: {kept} of {total} tests, those the "
                                                          "report shows; every test: a run with --report-detail full"]) + "\n")
                continue
            packed.write(path, arcname=path.name)
    os.replace(partial, archive)
    shutil.rmtree(folder)
    return archive


def kept_tests(results: Path) -> str | None:
    """What a packed archive's environment says it kept (KEPT_KEY), or None: every test."""
    for line in _environment_lines(results):
        key, _, value = line.partition("=")
        if key == KEPT_KEY:
            return value
    return None


def report_summary(output: Path) -> dict:
    """Allure's own summary of the generated report (test counts by status)."""
    path = output / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def render_in_browser(report_dir: Path, screenshot: Path, timeout: float = 90.0, wait_for: str = "") -> str:
    """Open the report in headless Chromium (served on 127.0.0.1) and return its visible text;
    a screenshot is kept. Raises FileNotFoundError when Chromium is not installed.

    The report draws its summary from data it fetches after the page loads. On a loaded machine
    (make test's workers beside it) Chromium's virtual-time budget can run out before that, and the
    page comes back with only its header. So when `wait_for` is given and absent from the text, the
    page is read again with twice the budget, up to three times; the text returned is the last read,
    so a report that never shows it still fails its caller."""
    import functools
    import http.server
    import re
    import tempfile
    import threading

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(report_dir))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"

    def flags(budget_ms: int) -> list[str]:
        return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--virtual-time-budget={budget_ms}", "--window-size=1400,900"]

    text = ""
    try:
        budget_ms = 15000
        for _ in range(3):
            with tempfile.TemporaryDirectory() as profile:
                dom = subprocess.run([browser, *flags(budget_ms), f"--user-data-dir={profile}", "--dump-dom", url],
                                     capture_output=True, text=True, timeout=timeout).stdout
            dom = re.sub(r"(?s)<(script|style).*?</\1>", " ", dom)
            text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))
            if not wait_for or wait_for in text:
                break
            budget_ms *= 2
        with tempfile.TemporaryDirectory() as profile:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([browser, *flags(budget_ms), f"--user-data-dir={profile}", f"--screenshot={screenshot}", url],
                           capture_output=True, timeout=timeout)
    finally:
        server.shutdown()
    return text
