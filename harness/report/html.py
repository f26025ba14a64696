"""The HTML report: Allure 3's command line (npm package `allure`, pinned in package.json) turns
reports/allure-results into reports/allure-report, keeping history (history.jsonl) between runs
so trends show. No Java is needed."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from harness.report.allure import category_rules

ROOT = Path(__file__).resolve().parents[2]  # a checkout, where `npm ci` puts node_modules/


def allure_command() -> list[str]:
    """The pinned Allure 3 command line of the checkout (npm ci), else one on PATH."""
    local = ROOT / "node_modules" / ".bin" / "allure"
    if local.exists():
        return [str(local)]
    found = shutil.which("allure")
    if found:
        return [found]
    raise FileNotFoundError("the Allure command line is not installed: run `make setup` (npm ci installs it from package.json)")


def generate_report(results: Path, output: Path, history: Path, name: str = "dmlconform conformance") -> Path:
    """Generate the report; the history file accumulates one entry per run."""
    output.parent.mkdir(parents=True, exist_ok=True)
    config = output.parent / ".allurerc.json"
    config.write_text(json.dumps({
        "name": name, "output": str(output.resolve()), "historyPath": str(history.resolve()),
        # the tree: backend > operator > feature level > data type
        "plugins": {"awesome": {"options": {"groupBy": ["parentSuite", "epic", "feature", "story"]}}},
        "categories": {"rules": category_rules()},
    }))
    if output.exists():
        shutil.rmtree(output)
    proc = subprocess.run(allure_command() + ["generate", "--config", str(config), str(results.resolve())],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0 or not (output / "index.html").exists():
        raise RuntimeError(f"allure generate failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}")
    return output / "index.html"


def report_summary(output: Path) -> dict:
    """Allure's own summary of the generated report (test counts by status)."""
    path = output / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def render_in_browser(report_dir: Path, screenshot: Path, timeout: float = 90.0) -> str:
    """Open the report in headless Chromium (served on 127.0.0.1) and return its visible text;
    a screenshot is kept. Raises FileNotFoundError when Chromium is not installed."""
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
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--virtual-time-budget=15000", "--window-size=1400,900"]
    try:
        with tempfile.TemporaryDirectory() as profile:
            dom = subprocess.run([browser, *flags, f"--user-data-dir={profile}", "--dump-dom", url],
                                 capture_output=True, text=True, timeout=timeout).stdout
        with tempfile.TemporaryDirectory() as profile:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([browser, *flags, f"--user-data-dir={profile}", f"--screenshot={screenshot}", url],
                           capture_output=True, timeout=timeout)
    finally:
        server.shutdown()
    dom = re.sub(r"(?s)<(script|style).*?</\1>", " ", dom)
    text = re.sub(r"<[^>]+>", " ", dom)
    return re.sub(r"\s+", " ", text)
