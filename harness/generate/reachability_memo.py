"""A disk memo of the breakers' reachability answers: which rules an invalid case can break alone,
at which level, for which members of a variant key.

Collecting the conformance suite asks it of every (operator, level, rule): a search of mutated
descriptors, 25 to 40 s of CPU for the catalogue, paid again by every pytest-xdist worker of every
run (16 at once on a GPU machine, where the whole catalogue then runs in about two minutes). The
answers depend only on the spec (with the catalog and the activations it may fuse) and on the
harness's code, so they are kept on disk, keyed by a digest of each, and a run with the same spec
and code reads them instead of searching again: per operator, so a specs directory with one more
operator (or one edited) searches only for that one.

Only specs exactly as load_specs read them from their files are memoised
(harness.spec.load.spec_digest): a spec a test builds or changes in memory is searched every
time. The directory is $DMLCONFORM_CACHE_DIR, else $XDG_CACHE_HOME/dmlconform, else
~/.cache/dmlconform; `DMLCONFORM_CACHE_DIR=off` turns the memo off. A file that cannot be read,
or a line that is not an answer, is ignored (the answer is searched for again): the memo can make
a run faster, never change what it finds."""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

CACHE_ENV = "DMLCONFORM_CACHE_DIR"
MAX_FILE_BYTES = 8 << 20  # a catalogue's answers are about 100 bytes each, a few thousand of them; a fuller file starts again
KEEP_FILES = 4  # memo files kept (the newest); older code leaves its behind

Answer = list[str | None]


def cache_dir() -> Path | None:
    """Where memo files live, or None when the memo is off."""
    raw = os.environ.get(CACHE_ENV)
    if raw is not None:
        return None if raw.strip().lower() in ("", "0", "off", "no", "none") else Path(raw)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dmlconform"


ANSWERING_PACKAGES = ("generate", "model", "spec")  # import only each other: the code an answer depends on


@lru_cache(maxsize=None)
def code_digest() -> str:
    """A digest of the Python source that finds the answers (the generation, model and spec
    packages, which import nothing else of the harness): answers found by other code are not
    reused, while a change to the reference, the judge, the run or the reports (most commits)
    keeps them; a whole-package digest made every such commit search the catalogue again."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.blake2b(digest_size=12)
    for path in sorted(p for package in ANSWERING_PACKAGES for p in (root / package).rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


Key = tuple[str, str, str, str]  # (spec digest, operator, level, rule)


class ReachabilityMemo:
    """The answers found by one version of the code: read once, appended to as new ones are found
    (one line per answer, written with one append), and read again from where it was left when an
    answer is missing and the file has grown: pytest-xdist workers find each other's answers
    during a run instead of each searching for all of them. Workers that append the same answer
    write the same line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answers: dict[Key, Answer] = {}
        self.offset = 0  # bytes of the file read so far (whole lines only)
        try:
            if self.path.stat().st_size > MAX_FILE_BYTES:
                self.path.unlink()  # answers of many old specs: start again
        except OSError:
            pass
        self._read_more()

    def _read_more(self) -> None:
        """Read the lines appended since the last read; a last line still being written is left for later."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read(MAX_FILE_BYTES)
        except OSError:
            return
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        try:
            text = chunk[:end].decode("utf-8")
        except UnicodeDecodeError:
            return
        for line in text.splitlines():
            try:
                row = json.loads(line)
                key = (row["spec"], row["operator"], row["level"], row["rule"])
                members = row["members"]
            except (ValueError, KeyError, TypeError):
                continue
            if (all(isinstance(k, str) for k in key) and isinstance(members, list)
                    and all(m is None or isinstance(m, str) for m in members)):
                self.answers[key] = members

    def get(self, spec: str, operator: str, level: str, rule: str) -> Answer | None:
        key = (spec, operator, level, rule)
        if key not in self.answers:
            try:
                grown = self.path.stat().st_size > self.offset
            except OSError:
                grown = False
            if grown:
                self._read_more()
        found = self.answers.get(key)
        return list(found) if found is not None else None

    def put(self, spec: str, operator: str, level: str, rule: str, members: Answer) -> None:
        self.answers[(spec, operator, level, rule)] = list(members)
        line = json.dumps({"spec": spec, "operator": operator, "level": level, "rule": rule, "members": list(members)}) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
        except OSError:
            pass  # a read-only or full disk: the answers stay in this process only


@lru_cache(maxsize=None)
def memo_for_code() -> ReachabilityMemo | None:
    """The memo of the running code, or None when off."""
    where = cache_dir()
    if where is None:
        return None
    path = where / f"reachable-{code_digest()}.jsonl"
    _prune(where, keep=path)
    return ReachabilityMemo(path)


def _prune(where: Path, keep: Path) -> None:
    """Remove all but the KEEP_FILES newest memo files (besides `keep`)."""
    try:
        files = sorted((p for p in where.glob("reachable-*.jsonl") if p != keep), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[KEEP_FILES - 1:]:
            old.unlink()
    except OSError:
        pass
