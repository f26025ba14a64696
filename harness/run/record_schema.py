"""The one schema of a run's files, and the one bounded JSON reader every reader goes through.

A run writes, under `reports/results/` (harness.run.results, harness.run.manifest):

- `results-<worker>.jsonl`: one case record per line;
- `plan-<worker>.json.gz`: the cells the process collected (gzip; a plain `.json` is read too);
- `cells-<worker>.jsonl`: one finished cell per line;
- `complete.json`: the controller's completion marker;

and `dmlconform matrix` writes `matrix.json` (harness.report.matrix). Whatever those files hold is
read as untrusted input: each document or line is parsed with bounds (size, nesting depth, strict
UTF-8, finite numbers, no lone surrogate) and checked field by field
(types, allowed keys, non-negative counts). Anything else is one `RunFileError`, rendered
`file:line: key: message`; the CLI prints it on one line and exits 2, never a traceback. Whether
the files belong together (one run id, records of planned cells) is the gate's question
(harness.run.manifest.check_completeness), not this module's.
"""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import stat
import zlib
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from harness.spec.source import SpecError

MAX_LINE_BYTES = 1 << 20          # one record or cell line (a real one is under 2 KiB)
GZIP_SUFFIX = ".gz"  # a compressed run file: a finished run's records (compress_records), every plan (write_plan)
MAX_PLAN_BYTES = 64 << 20         # one plan file (10,000 cells are about 3 MiB)
MAX_COMPLETE_BYTES = 64 << 10     # complete.json (under 100 bytes)
MAX_MATRIX_BYTES = 256 << 20      # matrix.json (10,000 cells are about 2 MiB)
MAX_DEPTH = 16                    # nesting of arrays and objects (the deepest real file has 4)
MAX_COUNT = 2**63 - 1             # the largest count a file may hold
RECORD_KINDS = ("valid", "invalid", "example", "sweep", "probe")
RUN_ID_ENV = "DMLCONFORM_RUN_ID"
# a backend or instance name (`directml@1.10.1`): the gate looks up its expectation files by it
BACKEND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*(?:@[A-Za-z0-9][A-Za-z0-9_.+-]*)?\Z")


class RunFileError(SpecError, ValueError):
    """A malformed run file: `file:line: message` (no file: the message alone, as `dmlconform
    compare` names the matrix itself). A SpecError, so that a CLI which only knows spec errors
    still prints it as one line; a ValueError, so that `compare` keeps refusing a matrix with exit 2."""

    def __init__(self, file: str | Path | None, line: int | None, message: str) -> None:
        super().__init__("" if file is None else str(file), line, (), message)

    def render(self) -> str:
        if not self.file:
            return self.message
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


class _Bad(ValueError):
    """A problem inside one document, before its file and line are known."""


# --- bounded JSON --------------------------------------------------------------------------------

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _reject_constant(name: str) -> Any:
    raise _Bad(f"invalid JSON: non-finite number {name} (counts are whole numbers)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Bad(f"invalid JSON: non-finite number {text[:40]} (counts are whole numbers)")
    return value


# one decoder for every document (json.loads with hooks would build one per call); an integer
# longer than Python's int_max_str_digits (4300) is refused by int() itself, others by _count
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _too_deep(text: str, limit: int) -> bool:
    """Whether arrays and objects nest deeper than `limit`, brackets inside strings aside."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    return False


def decode_json(data: bytes, *, max_depth: int = MAX_DEPTH) -> object:
    """One JSON document from bytes: strict UTF-8, nesting at most `max_depth`, finite numbers, no
    lone surrogate. ValueError (`invalid JSON: ...`) otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad(f"invalid JSON: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise _Bad("invalid JSON: starts with a byte order mark")
    if _too_deep(text, max_depth):
        raise _Bad(f"invalid JSON: nested too deeply (more than {max_depth} levels)")
    try:
        value = _DECODER.decode(text)
    except _Bad:
        raise
    except json.JSONDecodeError as exc:
        raise _Bad(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise _Bad("invalid JSON: nested too deeply") from None
    except ValueError:  # int() refusing a number of more digits than sys.get_int_max_str_digits()
        raise _Bad("invalid JSON: a number too long to read (counts are at most 19 digits)") from None
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(value):
        raise _Bad("invalid JSON: a string holds a lone UTF-16 surrogate (not text)")
    return value


def _open(path: Path) -> IO[bytes]:
    """`path` opened for reading if it is a regular file (never a FIFO, which would block, or a
    device such as /dev/zero); OSError otherwise."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "Is a directory")
    if not stat.S_ISREG(mode):
        raise OSError(0, "not a regular file")
    return Path(path).open("rb")


def _read_bounded(path: Path, limit: int, named: Path | None, what: str = "") -> bytes:
    """A regular file's bytes, at most `limit` (decompressed, for a name ending in `.gz`, so that a
    small file cannot inflate into memory without bound); RunFileError (naming `named`) otherwise."""
    try:
        with _open(path) as handle:
            if Path(path).name.endswith(GZIP_SUFFIX):
                with gzip.GzipFile(fileobj=handle, mode="rb") as unpacked:
                    data = unpacked.read(limit + 1)
            else:
                data = handle.read(limit + 1)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise RunFileError(named, None, f"cannot decompress (a damaged gzip file): {exc}") from None
    except OSError as exc:
        raise RunFileError(named, None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise RunFileError(named, None, f"larger than {limit} bytes{what}")
    return data


def read_document(path: Path, limit: int) -> object:
    """A whole JSON file, at most `limit` bytes; RunFileError `path: message` otherwise."""
    data = _read_bounded(path, limit, path)
    try:
        return decode_json(data)
    except _Bad as exc:
        raise RunFileError(path, 1, str(exc)) from None


_GZIP_ERRORS = (OSError, EOFError, zlib.error)  # gzip.BadGzipFile is an OSError; a cut stream an EOFError


def _lines(handle: IO[bytes], compressed: bool) -> IO[bytes] | gzip.GzipFile:
    """The line source of an opened file: the file itself, or its gzip stream (read lazily, so a
    line is still bounded by MAX_LINE_BYTES however much the file would decompress to)."""
    return gzip.GzipFile(fileobj=handle, mode="rb") if compressed else handle


def _next_line(source: IO[bytes] | gzip.GzipFile, path: Path, number: int) -> bytes:
    """One raw line (at most MAX_LINE_BYTES + 1 bytes); a gzip stream that cannot be decompressed
    (corrupted, cut short) is a RunFileError at the line it stopped at."""
    try:
        return source.readline(MAX_LINE_BYTES + 1)
    except _GZIP_ERRORS as exc:
        raise RunFileError(path, number, f"cannot decompress (a damaged gzip file): {exc}") from None


def read_lines(path: Path, check: Callable[[object], Any]) -> Iterator[tuple[int, Any]]:
    """(line number, check(parsed line)) for each line of a JSON-lines file, plain or gzip-compressed
    (a name ending in `.gz`: the same lines, the same checks, line numbers of the decompressed
    text). A line over MAX_LINE_BYTES, an empty line, invalid JSON, a value `check` refuses or a
    damaged gzip stream is a RunFileError `path:line: message`. The one exception is a last line
    with no newline that is not JSON: a write cut short by an interrupted run, skipped (the
    manifest notes it, and the gate fails)."""
    try:
        handle = _open(path)
    except OSError as exc:
        raise RunFileError(path, None, f"cannot read: {exc.strerror or exc}") from None
    with handle, _lines(handle, path.name.endswith(GZIP_SUFFIX)) as source:
        number = 0
        while True:
            raw = _next_line(source, path, number + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise RunFileError(path, number, f"line longer than {MAX_LINE_BYTES} bytes")
            torn = not raw.endswith(b"\n")
            body = raw.rstrip(b"\r\n")
            if not body.strip():
                if torn:
                    return
                raise RunFileError(path, number, "empty line")
            try:
                value = decode_json(body)
            except _Bad as exc:
                if torn:
                    return  # the last write of an interrupted run
                raise RunFileError(path, number, str(exc)) from None
            try:
                yield number, check(value)
            except _Bad as exc:
                raise RunFileError(path, number, str(exc)) from None


def torn_tail(path: Path) -> bool:
    """Whether a JSON-lines file ends inside a line (an interrupted write)."""
    try:
        with _open(path) as handle:
            handle.seek(0, 2)
            if handle.tell() == 0:
                return False
            handle.seek(-1, 2)
            return handle.read(1) != b"\n"
    except OSError:
        return False


# --- field checks --------------------------------------------------------------------------------

def kind_of(value: object) -> str:
    """How a JSON value is named in a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number with a fraction" if math.isfinite(value) else "a non-finite number"
    names: dict[type, str] = {dict: "an object", list: "an array", str: "a string", int: "int"}
    return names.get(type(value), type(value).__name__)


def _text(key: str, value: object, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{key}: expected a string, found {kind_of(value)}")
    if not empty and not value:
        raise _Bad(f"{key}: empty")
    return value


_NAMES_SEEN: set[str] = set()  # names that matched BACKEND_NAME (a run has a handful; 400,000 records one each)


def _backend(key: str, value: object) -> str:
    name = _text(key, value, empty=False)
    if name not in _NAMES_SEEN:
        if not BACKEND_NAME.match(name):
            raise _Bad(f"{key}: {name[:80]!r} is not a backend name (letters, digits, _ . + -, one @variant)")
        if len(_NAMES_SEEN) < 1024:
            _NAMES_SEEN.add(name)
    return name


def _optional_text(key: str, value: object) -> str | None:
    return None if value is None else _text(key, value)


def _count(key: str, value: object) -> int:
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    if type(value) is not int:
        raise _Bad(f"{key}: expected a non-negative integer, found {kind_of(value)}")
    if not 0 <= value <= MAX_COUNT:
        raise _Bad(f"{key}: expected a non-negative integer, found {value}")
    return value


MAX_SECONDS = 1e7  # about 116 days: more is not a duration this harness measured
MAX_MEASURE = 1.8e308  # an error (max_abs) or a share of a bound: any finite double


def _seconds(key: str, value: object) -> float:
    """A duration in seconds: a finite, non-negative JSON number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_SECONDS:
        return float(value)
    raise _Bad(f"{key}: expected a duration in seconds (0 to {MAX_SECONDS:g}), found {value!r:.40}")


def _share(key: str, value: object) -> float:
    """An error or a share of a bound: a finite, non-negative JSON number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_MEASURE:
        return float(value)
    raise _Bad(f"{key}: expected a finite number from 0 to {MAX_MEASURE:g}, found {value!r:.40}")


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"{key}: expected true or false, found {kind_of(value)}")
    return value


def _object(key: str, value: object) -> dict:
    if not isinstance(value, dict):
        raise _Bad(f"{key + ': ' if key else ''}expected a JSON object, found {kind_of(value)}")
    return value


def _keys(key: str, value: dict, required: set[str], optional: set[str]) -> None:
    prefix = f"{key}." if key else ""
    unknown = sorted(set(value) - required - optional)
    if unknown:
        raise _Bad(f"{prefix}{unknown[0][:80]}: unknown field (allowed: {', '.join(sorted(required | optional))})")
    missing = sorted(required - set(value))
    if missing:
        raise _Bad(f"{prefix}{missing[0]}: missing")


def _run_id(value: object) -> str | None:
    """The run id of a line (None: absent or null, an older dmlconform's file)."""
    return None if value is None else _text("run_id", value, empty=False)


def _counts(key: str, value: object) -> dict[str, int]:
    return {_text(f"{key} key", k): _count(f"{key}.{k[:80]}", n) for k, n in _object(key, value).items()}


# --- records ---------------------------------------------------------------------------------------

RECORD_REQUIRED = {"backend", "operator", "feature_level", "data_type", "kind", "status", "case_id", "summary"}
RECORD_OPTIONAL = {"test_id", "rule", "tags", "case_file", "expectation", "elements", "mismatches", "unspecified",
                   "liberties", "run_id", "duration_s", "stages", "max_ulps", "max_abs", "bound_use"}
_RECORD_KEYS = frozenset(RECORD_REQUIRED | RECORD_OPTIONAL)
_RECORD_DEFAULTS: dict[str, Any] = {"test_id": "", "rule": None, "case_file": None, "expectation": None, "elements": 0,
                                    "mismatches": 0, "unspecified": 0, "run_id": None,
                                    "duration_s": 0.0, "max_ulps": None, "max_abs": None, "bound_use": None}
_TEXT_FIELDS = ("operator", "feature_level", "data_type", "summary", "test_id")
_OPTIONAL_TEXT_FIELDS = ("rule", "case_file", "expectation")
_COUNT_FIELDS = ("elements", "mismatches", "unspecified")


def check_record(value: object) -> dict[str, Any]:
    """The fields of a CaseRecord from one results line (keyword arguments for CaseRecord)."""
    raw = _object("", value)
    if not raw.keys() <= _RECORD_KEYS or not raw.keys() >= RECORD_REQUIRED:
        _keys("", raw, RECORD_REQUIRED, RECORD_OPTIONAL)
    out = dict(_RECORD_DEFAULTS)
    out.update(raw)
    out["backend"] = _backend("backend", out["backend"])
    out["status"] = _text("status", out["status"], empty=False)
    out["case_id"] = _text("case_id", out["case_id"], empty=False)
    kind = _text("kind", out["kind"])
    if kind not in RECORD_KINDS:
        raise _Bad(f"kind: unknown kind {kind[:40]!r} (one of {', '.join(RECORD_KINDS)})")
    for name in _TEXT_FIELDS:
        if type(out[name]) is not str:
            _text(name, out[name])
    for name in _OPTIONAL_TEXT_FIELDS:
        if out[name] is not None and type(out[name]) is not str:
            _text(name, out[name])
    for name in _COUNT_FIELDS:
        _count(name, out[name])
    tags = out.get("tags", [])
    if type(tags) is not list:
        raise _Bad(f"tags: expected an array of strings, found {kind_of(tags)}")
    for i, tag in enumerate(tags):
        if type(tag) is not str:
            _text(f"tags[{i}]", tag)
    out["tags"] = list(tags)
    out["liberties"] = _counts("liberties", out.get("liberties", {}))
    out["run_id"] = _run_id(out["run_id"])
    out["duration_s"] = _seconds("duration_s", out["duration_s"])
    out["stages"] = {_text("stages key", k): _seconds(f"stages.{k[:80]}", v)
                     for k, v in _object("stages", out.get("stages", {})).items()}
    if out["max_ulps"] is not None:
        out["max_ulps"] = _count("max_ulps", out["max_ulps"])
    for measure in ("max_abs", "bound_use"):
        if out[measure] is not None:
            out[measure] = _share(measure, out[measure])
    return out


# --- the manifest: plans, finished cells, completion marker ----------------------------------------

PLAN_KEYS = {"version", "run_id", "backends", "cells"}
PLAN_OPTIONAL = {"host", "shard", "merged"}  # sharded runs (harness.run.shard) and merged ones (harness.run.merge)
PLANNED_CELL_REQUIRED = {"test_id", "backend", "operator", "level", "subject", "kind", "planned_cases", "exact"}
BACKEND_KEYS = {"available", "requested", "reason"}
BACKEND_OPTIONAL = {"version"}  # backend.version(): device, driver and DLL for DirectML
SHARD_KEYS = {"index", "total", "cells", "digest", "source", "options", "durations"}
MERGED_SHARD_KEYS = {"index", "total", "run_id", "host", "directory", "backends"}
MANIFEST_VERSIONS = (1,)


def _shard_numbers(key: str, raw: dict) -> tuple[int, int]:
    """A shard's index (1-based) and total, within each other."""
    index, total = _count(f"{key}.index", raw["index"]), _count(f"{key}.total", raw["total"])
    if not 1 <= index <= total:
        raise _Bad(f"{key}.index: shard {index} of {total} (shards are 1 to the total)")
    return index, total


def _strings(key: str, value: object) -> list[str]:
    if not isinstance(value, list):
        raise _Bad(f"{key}: expected an array of strings, found {kind_of(value)}")
    return [_text(f"{key}[{i}]", v, empty=False) for i, v in enumerate(value)]


def _text_map(key: str, value: object) -> dict[str, str]:
    return {_text(f"{key} key", k): _text(f"{key}.{k[:80]}", v) for k, v in _object(key, value).items()}


def check_shard(value: object) -> dict[str, Any] | None:
    """A sharded run's `shard` block: which shard (index, total), the test ids of the full
    (unsharded) plan, digests of the full plan's cells and of the code, specs and expectation
    files it ran, its options, and the digest of the durations file that split it."""
    if value is None:
        return None
    raw = _object("shard", value)
    _keys("shard", raw, SHARD_KEYS, set())
    index, total = _shard_numbers("shard", raw)
    return {"index": index, "total": total, "cells": _strings("shard.cells", raw["cells"]),
            "digest": _text("shard.digest", raw["digest"], empty=False), "source": _text("shard.source", raw["source"]),
            "options": _text_map("shard.options", raw["options"]), "durations": _text("shard.durations", raw["durations"])}


def check_merged(value: object) -> list[dict[str, Any]]:
    """A merged run's `merged` list: the shards it was made of."""
    if not isinstance(value, list):
        raise _Bad(f"merged: expected an array of shards, found {kind_of(value)}")
    out = []
    for i, entry in enumerate(value):
        key = f"merged[{i}]"
        raw = _object(key, entry)
        _keys(key, raw, MERGED_SHARD_KEYS, set())
        index, total = _shard_numbers(key, raw)
        out.append({"index": index, "total": total, "run_id": _text(f"{key}.run_id", raw["run_id"], empty=False),
                    "host": _text(f"{key}.host", raw["host"]), "directory": _text(f"{key}.directory", raw["directory"]),
                    "backends": _text_map(f"{key}.backends", raw["backends"])})
    return out


def check_plan(value: object) -> dict[str, Any]:
    """A plan file: {version, run_id, backends, cells} and, optionally, host, shard and merged; each
    cell's fields (PlannedCell's), no test id twice. Returns {run_id, backends, cells: [PlannedCell
    keyword arguments], host, shard, merged}."""
    raw = _object("", value)
    _keys("", raw, PLAN_KEYS, PLAN_OPTIONAL)
    if type(raw["version"]) is not int or raw["version"] not in MANIFEST_VERSIONS:
        raise _Bad(f"version: unknown plan version {str(raw['version'])[:40]!r} (this harness reads {MANIFEST_VERSIONS[-1]})")
    run_id = _text("run_id", raw["run_id"], empty=False)
    backends: dict[str, dict[str, Any]] = {}
    for name, info in _object("backends", raw["backends"]).items():
        key = f"backends.{name[:80]}"
        _keys(key, _object(key, info), BACKEND_KEYS, BACKEND_OPTIONAL)
        backends[_backend("backends key", name)] = {
            "available": _flag(f"{key}.available", info["available"]),
            "requested": _flag(f"{key}.requested", info["requested"]),
            "reason": _text(f"{key}.reason", info["reason"]),
            **({"version": _text(f"{key}.version", info["version"])} if "version" in info else {})}
    if not isinstance(raw["cells"], list):
        raise _Bad(f"cells: expected an array of cells, found {kind_of(raw['cells'])}")
    cells: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, cell in enumerate(raw["cells"]):
        key = f"cells[{index}]"
        _keys(key, _object(key, cell), PLANNED_CELL_REQUIRED, {"skip"})
        kind = _text(f"{key}.kind", cell["kind"])
        if kind not in RECORD_KINDS:
            raise _Bad(f"{key}.kind: unknown kind {kind[:40]!r} (one of {', '.join(RECORD_KINDS)})")
        test_id = _text(f"{key}.test_id", cell["test_id"], empty=False)
        if test_id in seen:
            raise _Bad(f"{key}: test id {test_id[:200]} planned twice (also cells[{seen[test_id]}])")
        seen[test_id] = index
        cells.append({"test_id": test_id, "backend": _backend(f"{key}.backend", cell["backend"]),
                      "operator": _text(f"{key}.operator", cell["operator"]), "level": _text(f"{key}.level", cell["level"]),
                      "subject": _text(f"{key}.subject", cell["subject"]), "kind": kind,
                      "planned_cases": _count(f"{key}.planned_cases", cell["planned_cases"]),
                      "exact": _flag(f"{key}.exact", cell["exact"]), "skip": _optional_text(f"{key}.skip", cell.get("skip"))})
    host = _optional_text("host", raw.get("host"))
    merged = check_merged(raw["merged"]) if raw.get("merged") is not None else []
    return {"run_id": run_id, "backends": backends, "cells": cells, "host": host, "shard": check_shard(raw.get("shard")),
            "merged": merged}


def check_finished(value: object) -> dict[str, Any]:
    """A line of a cells file: {test_id, cases, run_id}."""
    raw = _object("", value)
    _keys("", raw, {"test_id", "cases"}, {"run_id"})
    return {"test_id": _text("test_id", raw["test_id"], empty=False), "cases": _count("cases", raw["cases"]),
            "run_id": _run_id(raw.get("run_id"))}


def check_complete(value: object) -> dict[str, Any]:
    """complete.json: {version, run_id, exitstatus}."""
    raw = _object("", value)
    _keys("", raw, {"run_id", "exitstatus"}, {"version"})
    if "version" in raw and (type(raw["version"]) is not int or raw["version"] not in MANIFEST_VERSIONS):
        raise _Bad(f"version: unknown completion marker version {str(raw['version'])[:40]!r}")
    return {"run_id": _text("run_id", raw["run_id"], empty=False), "exitstatus": _count("exitstatus", raw["exitstatus"])}


def read_checked(path: Path, limit: int, check: Callable[[object], Any]) -> Any:
    """A whole JSON file read with `limit` and checked by `check`; RunFileError `path:1: message`."""
    value = read_document(path, limit)
    try:
        return check(value)
    except _Bad as exc:
        raise RunFileError(path, 1, str(exc)) from None


# --- matrix.json ---------------------------------------------------------------------------------

MATRIX_CELL_FIELDS = ("backend", "operator", "feature_level", "data_type", "state")


def check_matrix(raw: object) -> None:
    """The structure of a matrix.json: an object whose `cells` is a list of objects, each with
    string backend, operator, feature_level, data_type and state and (if given) counts of
    non-negative integers, no cell twice; `format` 1, `totals` and `liberties` well formed if given.
    ValueError with the reason (`dmlconform compare` names the file). Whether each state is one the
    matrix knows is compare's question (an unknown state fails the comparison, exit 1)."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object with `cells` (a matrix.json written by `dmlconform matrix`), found {kind_of(raw)}")
    if "format" in raw and (type(raw["format"]) is not int or raw["format"] != 1):
        raise ValueError(f"format: unknown matrix format {str(raw['format'])[:40]!r} (this harness reads format 1)")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise ValueError("cells: missing" if "cells" not in raw else f"cells: expected an array of cells, found {kind_of(cells)}")
    try:
        if "totals" in raw:
            _counts("totals", raw["totals"])
        if "liberties" in raw:
            for backend, taken in _object("liberties", raw["liberties"]).items():
                for liberty, numbers in _object(f"liberties.{backend[:80]}", taken).items():
                    _counts(f"liberties.{backend[:80]}.{liberty[:80]}", numbers)
    except _Bad as exc:
        raise ValueError(str(exc)) from None
    seen: dict[tuple, int] = {}
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise ValueError(f"cells[{index}]: expected an object, found {kind_of(cell)}")
        for name in MATRIX_CELL_FIELDS:
            if name not in cell:
                raise ValueError(f"cells[{index}].{name}: missing")
            if not isinstance(cell[name], str):
                raise ValueError(f"cells[{index}].{name}: expected a string, found {kind_of(cell[name])}")
        if "counts" in cell:
            try:
                _counts(f"cells[{index}].counts", cell["counts"])
            except _Bad as exc:
                raise ValueError(str(exc)) from None
        key = tuple(cell[name] for name in MATRIX_CELL_FIELDS[:4])
        if key in seen:
            raise ValueError(f"cells[{index}]: the same cell as cells[{seen[key]}] ({' '.join(key)})")
        seen[key] = index


def load_matrix(path: Path) -> dict:
    """A matrix.json for compare_matrices, read with a size bound and checked by check_matrix;
    RunFileError (a ValueError) whose text is the reason alone: `compare: cannot use matrix FILE: reason`."""
    data = _read_bounded(path, MAX_MATRIX_BYTES, None, ", the most a matrix.json may be")
    if not data.strip():
        raise RunFileError(None, None, "empty: expected a matrix.json written by `dmlconform matrix`")
    try:
        raw = decode_json(data)
        check_matrix(raw)
    except ValueError as exc:
        raise RunFileError(None, None, str(exc)) from None
    assert isinstance(raw, dict)
    return raw
