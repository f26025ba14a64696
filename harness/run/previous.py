"""Nothing previously recorded is lost: a new run sets the last run's files aside, and gives them
back when it never starts.

A run owns its reports directory: results/, cases/ and the Allure result files belong to one run.
It used to delete the last run's files as soon as pytest was configured, so a run that then died
before its first test (a collection error in a spec that lints clean, a malformed expectation file,
an interrupt during start-up) left the user with neither run. Now the controlling process moves
the last run's files into `reports/.previous-run/` once every check of its start-up has passed
(`set_aside`); when the session ends, a run that started for real (some test reported) drops them
(`drop`), and one that did not puts them back (`give_back`). A run killed outright (SIGKILL) leaves
`.previous-run/` on disk: the next run keeps that complete run there rather than the killed one's
partial files (`set_aside` sees no completion marker in place).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from harness.run.manifest import COMPLETE_FILE

ASIDE = ".previous-run"
RUN_DIRS = ("results", "cases")      # a run's directories under the reports directory
RUN_FILES = ("junit.xml", "results.csv.gz", "failures.csv")  # and its files there (history.jsonl spans runs: it stays)
ALLURE = "allure-results"            # the Allure result files, wherever --alluredir points


def _allure_files(alluredir: Path | None) -> list[Path]:
    if alluredir is None or not alluredir.is_dir():
        return []
    return [p for p in alluredir.iterdir() if p.is_file()]


def _remove_current(reports: Path, alluredir: Path | None) -> None:
    for name in RUN_DIRS:
        shutil.rmtree(reports / name, ignore_errors=True)
    for name in RUN_FILES:
        (reports / name).unlink(missing_ok=True)
    for path in _allure_files(alluredir):
        path.unlink(missing_ok=True)


def set_aside(reports: Path, alluredir: Path | None) -> None:
    """Move the last run's files into `reports/.previous-run/` (the reports directory is then free
    for the new run). Where `.previous-run/` already holds a run and the files in place are an
    unfinished run's (no completion marker: a run killed before its end), those are discarded and
    the complete one stays set aside."""
    aside = reports / ASIDE
    in_place = [reports / n for n in (*RUN_DIRS, *RUN_FILES) if (reports / n).exists()] or _allure_files(alluredir)
    if aside.exists() and not (reports / "results" / COMPLETE_FILE).is_file():
        _remove_current(reports, alluredir)
        return
    if not in_place:
        return
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir(parents=True)
    for name in (*RUN_DIRS, *RUN_FILES):
        if (reports / name).exists():
            shutil.move(str(reports / name), str(aside / name))
    files = _allure_files(alluredir)
    if files:
        (aside / ALLURE).mkdir()
        for path in files:
            shutil.move(str(path), str(aside / ALLURE / path.name))


def give_back(reports: Path, alluredir: Path | None) -> bool:
    """The new run never started: its files go, the set-aside run comes back. False when nothing
    was set aside (there was no previous run)."""
    aside = reports / ASIDE
    if not aside.is_dir():
        _remove_current(reports, alluredir)
        return False
    _remove_current(reports, alluredir)
    for name in (*RUN_DIRS, *RUN_FILES):
        if (aside / name).exists():
            shutil.move(str(aside / name), str(reports / name))
    if (aside / ALLURE).is_dir() and alluredir is not None:
        alluredir.mkdir(parents=True, exist_ok=True)
        for path in (aside / ALLURE).iterdir():
            shutil.move(str(path), str(alluredir / path.name))
    shutil.rmtree(aside, ignore_errors=True)
    return True


def drop(reports: Path) -> None:
    """The new run started for real: the set-aside run is no longer needed."""
    shutil.rmtree(reports / ASIDE, ignore_errors=True)
