"""No input crashes the harness: hostile case files and matrix files are one clear line and exit 2.

Every hostile case file below goes through `dmlconform replay FILE --backend B` (the CLI's main,
in a few batch processes: tests/harness/cli_batch.py; a batch that dies runs again one process
per command line) for B = numpy, onnxruntime and (where `dmlconform backends` says it is available) directml; each
must exit 2 with exactly one line, `cannot use case file FILE: key: message`, no traceback and no
signal. Before these checks, short buffers and huge strides segfaulted every backend's read path
(exit 139), and malformed files gave KeyError/TypeError/yaml tracebacks.

Hostile case files per kind (each run on every backend):
  short buffer (every read path: packed, strided, declared total, fp16, quantize scale / zero point) 11
  value outside its C type (negative / 2^32 strides and sizes, Flags, DimensionCount, totals, ...)    16
  invalid YAML (syntax, indentation, not UTF-8, nested too deeply)                                     4
  empty file (nothing, a comment, an empty document, null)                                              4
  scalar top level                                                                                      3
  list top level                                                                                        2
  Python tags (!!python/object/apply:os.system and friends)                                             4
  unknown feature level                                                                                 2
  unknown operator                                                                                      2
  bad base64                                                                                            4
  wrong types                                                                                          11
  missing keys                                                                                          6
  format and consistency (format version, unknown key, bytes, operator)                                 4
  unreadable (no such file, a directory)                                                                2
  total                                                                                                75
Malformed matrix.json files for `dmlconform compare` (as BASE or NEW):                                 16
Result with this change: 75 x 3 backends replays and 16 compares give the clear error; tracebacks 0,
segfaults 0. The unit tests below cover check_case, the bounds-checked layout functions, the
backends' read paths reached directly, and every generated case passing check_case.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from backends.directml import DirectMLBackend
from harness.model import descriptor as descriptor_module
from harness.generate.cases import case_from_arrays
from harness.model.descriptor import Case, Descriptor, TensorDesc
from harness.model.layout import read_logical, span_elements, strided_view, write_logical
from harness.generate.strategies import valid_cases
from harness.run.case import run_case
from harness.model.wellformed import CaseFormatError, check_attribute, check_case
from tests.helpers import REFERENCE, SPECS, levels_where_tables_change, round_trip

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).parent / "dmlconform"
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "harness.cli"]
BACKENDS = ["numpy", "onnxruntime", "directml"]
PWNED = "dmlconform-hostile-pwned"  # a file the Python-tag payloads would create if ever executed


# --- building hostile case files -----------------------------------------------------------------

def _sign() -> dict:
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    return case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT32", "OutputTensor": "FLOAT32"},
                            {"InputTensor": np.arange(-3, 3, dtype=np.float32).reshape(2, 3)}).to_dict()


def _sigmoid() -> dict:
    spec = SPECS.operator("ACTIVATION_HARD_SIGMOID")
    return case_from_arrays(spec, "6.4", {"InputTensor": "FLOAT16", "OutputTensor": "FLOAT16"},
                            {"InputTensor": np.linspace(-2, 2, 8, dtype=np.float16).reshape(2, 4)}).to_dict()


def _quantize() -> dict:
    spec = SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")
    types = {"InputTensor": "FLOAT32", "ScaleTensor": "FLOAT32", "ZeroPointTensor": "UINT8", "OutputTensor": "UINT8"}
    sizes = [2, 4]
    return case_from_arrays(spec, "6.4", types, {"InputTensor": np.arange(8, dtype=np.float32).reshape(sizes),
                                                 "ScaleTensor": np.full(sizes, 0.5), "ZeroPointTensor": np.full(sizes, 3)}).to_dict()


BASES: dict[str, Callable[[], dict]] = {"sign": _sign, "sigmoid": _sigmoid, "quantize": _quantize}


def _tensor(d: dict, name: str = "InputTensor") -> dict:
    return d["descriptor"]["tensors"][name]


def _buffer(d: dict, name: str = "InputTensor") -> bytes:
    return base64.b64decode(d["inputs"][name]["base64"])


def _set_buffer(d: dict, data: bytes, name: str = "InputTensor") -> None:
    d["inputs"][name] = {"base64": base64.b64encode(data).decode(), "bytes": len(data)}


@dataclass(frozen=True)
class Hostile:
    """One hostile file: how to write it, and the key and message `replay` must name."""

    id: str
    kind: str
    key: str          # the error's key ('' for whole-file problems)
    message: str      # a fragment of the message
    base: str = "sign"
    mutate: Callable[[dict], Any] | None = None
    text: bytes | str | None = None  # the whole file instead (YAML-level kinds)
    special: str | None = None       # "missing" (no file), "directory"

    def write(self, directory: Path) -> Path:
        path = directory / f"{self.id}.yaml"
        if self.special == "missing":
            return path
        if self.special == "directory":
            path.mkdir()
            return path
        if self.text is not None:
            data = self.text if isinstance(self.text, bytes) else self.text.encode()
            path.write_bytes(data.replace(b"PWNED", str(directory / PWNED).encode()))
            return path
        d = BASES[self.base]()
        assert self.mutate is not None
        self.mutate(d)
        path.write_text(yaml.safe_dump(d, sort_keys=False, width=120))
        return path


def _do(*steps: Callable[[dict], Any]) -> Callable[[dict], None]:
    def run(d: dict) -> None:
        for step in steps:
            step(d)
    return run


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """Set a dotted path (`descriptor.tensors.InputTensor.Strides`) to `value`."""
    def run(d: dict) -> None:
        *parents, last = path.split(".")
        node = d
        for p in parents:
            node = node[p]
        node[last] = value
    return run


def _delete(path: str) -> Callable[[dict], None]:
    def run(d: dict) -> None:
        *parents, last = path.split(".")
        node = d
        for p in parents:
            node = node[p]
        del node[last]
    return run


IN = "descriptor.tensors.InputTensor"
IMPLIED = "the implied TotalTensorSizeInBytes"
C_RANGE = "value outside its C type"
HOSTILE: list[Hostile] = [
    # short buffers, one per read path
    Hostile("short-packed", "short buffer", "inputs.InputTensor", f"the buffer holds 20 bytes, but {IMPLIED}",
            mutate=lambda d: _set_buffer(d, _buffer(d)[:20])),
    Hostile("short-strided", "short buffer", "inputs.InputTensor", "the buffer holds 24 bytes, but the implied TotalTensorSizeInBytes "
            "(DMLCalcBufferTensorSize of Sizes and Strides) is 44", mutate=_set(f"{IN}.Strides", [8, 1])),
    Hostile("huge-stride", "short buffer", "inputs.InputTensor", f"{IMPLIED} (DMLCalcBufferTensorSize of Sizes and Strides) is 4294967308",
            mutate=_set(f"{IN}.Strides", [2**30, 1])),
    Hostile("short-declared-total", "short buffer", "inputs.InputTensor", "the buffer holds 24 bytes, but TotalTensorSizeInBytes is 64",
            mutate=_set(f"{IN}.TotalTensorSizeInBytes", 64)),
    Hostile("empty-buffer", "short buffer", "inputs.InputTensor", f"the buffer holds 0 bytes, but {IMPLIED}",
            mutate=lambda d: _set_buffer(d, b"")),
    Hostile("missing-buffer", "short buffer", "inputs.InputTensor", "missing: a case expected valid needs a buffer",
            mutate=_set("inputs", {})),
    Hostile("short-fp16", "short buffer", "inputs.InputTensor", f"the buffer holds 14 bytes, but {IMPLIED}", base="sigmoid",
            mutate=lambda d: _set_buffer(d, _buffer(d)[:14])),
    Hostile("short-scale", "short buffer", "inputs.ScaleTensor", f"the buffer holds 4 bytes, but {IMPLIED}", base="quantize",
            mutate=lambda d: _set_buffer(d, _buffer(d, "ScaleTensor")[:4], "ScaleTensor")),
    Hostile("short-zero-point", "short buffer", "inputs.ZeroPointTensor", f"the buffer holds 4 bytes, but {IMPLIED}", base="quantize",
            mutate=lambda d: _set_buffer(d, _buffer(d, "ZeroPointTensor")[:4], "ZeroPointTensor")),
    Hostile("buffer-for-output", "short buffer", "inputs.OutputTensor", "not a present input tensor of ELEMENT_WISE_SIGN",
            mutate=lambda d: _set_buffer(d, bytes(24), "OutputTensor")),
    Hostile("buffer-for-unknown", "short buffer", "inputs.Bogus", "not a present input tensor of ELEMENT_WISE_SIGN",
            mutate=lambda d: _set_buffer(d, bytes(4), "Bogus")),
    # values a DML_BUFFER_TENSOR_DESC (or the operator's desc struct) cannot hold
    Hostile("negative-stride", C_RANGE, f"{IN}.Strides[0]", "-3 is outside the range of UINT32", mutate=_set(f"{IN}.Strides", [-3, 1])),
    Hostile("stride-2^32", C_RANGE, f"{IN}.Strides[1]", "4294967296 is outside the range of UINT32", mutate=_set(f"{IN}.Strides", [3, 2**32])),
    Hostile("size-2^32", C_RANGE, f"{IN}.Sizes[0]", "4294967296 is outside the range of UINT32", mutate=_set(f"{IN}.Sizes", [2**32, 3])),
    Hostile("negative-size", C_RANGE, f"{IN}.Sizes[1]", "-1 is outside the range of UINT32", mutate=_set(f"{IN}.Sizes", [2, -1])),
    Hostile("flags-2^32", C_RANGE, f"{IN}.Flags", "4294967296 is outside the range of DML_TENSOR_FLAGS", mutate=_set(f"{IN}.Flags", 2**32)),
    Hostile("flags-negative", C_RANGE, f"{IN}.Flags", "-1 is outside the range of DML_TENSOR_FLAGS", mutate=_set(f"{IN}.Flags", -1)),
    Hostile("dimension-count-2^40", C_RANGE, f"{IN}.DimensionCount", "1099511627776 is outside the range of UINT",
            mutate=_set(f"{IN}.DimensionCount", 2**40)),
    Hostile("dimension-count-17", C_RANGE, f"{IN}.DimensionCount", "17 dimensions: more than 16",
            mutate=_set(f"{IN}.DimensionCount", 17)),
    Hostile("sizes-17-entries", C_RANGE, f"{IN}.Sizes", "17 entries: more than 16", mutate=_set(f"{IN}.Sizes", [1] * 15 + [2, 3])),
    Hostile("total-2^64", C_RANGE, f"{IN}.TotalTensorSizeInBytes", "18446744073709551616 is outside the range of UINT64",
            mutate=_set(f"{IN}.TotalTensorSizeInBytes", 2**64)),
    Hostile("total-negative", C_RANGE, f"{IN}.TotalTensorSizeInBytes", "-8 is outside the range of UINT64",
            mutate=_set(f"{IN}.TotalTensorSizeInBytes", -8)),
    Hostile("alignment-2^32", C_RANGE, f"{IN}.GuaranteedBaseOffsetAlignment", "4294967296 is outside the range of UINT",
            mutate=_set(f"{IN}.GuaranteedBaseOffsetAlignment", 2**32)),
    Hostile("unknown-data-type", C_RANGE, f"{IN}.DataType", "unknown data type 'FLOAT128'", mutate=_set(f"{IN}.DataType", "FLOAT128")),
    Hostile("attribute-overflows-float", C_RANGE, "descriptor.attributes.Alpha", "1e+39 overflows FLOAT", base="sigmoid",
            mutate=_set("descriptor.attributes.Alpha", 1e39)),
    Hostile("unknown-attribute", C_RANGE, "descriptor.attributes.Gamma", "has no attribute 'Gamma'", base="sigmoid",
            mutate=_set("descriptor.attributes.Gamma", 1.0)),
    Hostile("alias-to-unknown", C_RANGE, "descriptor.aliases.OutputTensor", "'Nowhere' is not an input tensor of ELEMENT_WISE_SIGN",
            mutate=_set("descriptor.aliases", {"OutputTensor": "Nowhere"})),
    # invalid YAML
    Hostile("yaml-unclosed", "invalid YAML", "line 3, column 1", "invalid YAML: expected ',' or ']', but got '<stream end>'",
            text="format: 1\nfeature_level: [6.4\n"),
    Hostile("yaml-indentation", "invalid YAML", "line 2, column 6", "invalid YAML: mapping values are not allowed here",
            text="format: 1\n  bad: indentation: here\n"),
    Hostile("yaml-not-utf8", "invalid YAML", "byte 11", "invalid YAML: unacceptable character #x0080: invalid start byte",
            text=b"operator: x\x80\x81\n"),
    Hostile("yaml-nested-too-deeply", "invalid YAML", "", "invalid YAML: nested too deeply", text="[" * 5000 + "]" * 5000),
    # empty
    Hostile("empty-file", "empty file", "", "empty: expected a mapping of case fields", text=""),
    Hostile("comment-only", "empty file", "", "empty: expected a mapping of case fields", text="# nothing here\n"),
    Hostile("empty-document", "empty file", "", "empty: expected a mapping of case fields", text="---\n...\n"),
    Hostile("null-document", "empty file", "", "empty: expected a mapping of case fields", text="~\n"),
    # scalars and lists
    Hostile("scalar-int", "scalar", "", "expected a mapping of case fields at the top level, found an integer", text="42\n"),
    Hostile("scalar-string", "scalar", "", "expected a mapping of case fields at the top level, found a string", text="hello\n"),
    Hostile("scalar-bool", "scalar", "", "expected a mapping of case fields at the top level, found a boolean", text="true\n"),
    Hostile("list", "list", "", "expected a mapping of case fields at the top level, found a list", text="- format\n- 1\n"),
    Hostile("empty-list", "list", "", "expected a mapping of case fields at the top level, found a list", text="[]\n"),
    # Python tags: safe_load refuses them, nothing runs
    Hostile("python-os-system", "Python tag", "line 1, column 1", "could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object/apply:os.system'", text="!!python/object/apply:os.system ['touch PWNED']\n"),
    Hostile("python-tag-in-field", "Python tag", "line 2, column 11", "could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object/apply:os.system'", text="format: 1\noperator: !!python/object/apply:os.system ['touch PWNED']\n"),
    Hostile("python-object", "Python tag", "line 1, column 1", "'tag:yaml.org,2002:python/object:harness.descriptor.Case'",
            text="!!python/object:harness.descriptor.Case {feature_level: '6.4'}\n"),
    Hostile("python-name", "Python tag", "line 1, column 9", "'tag:yaml.org,2002:python/name:os.system'",
            text="format: !!python/name:os.system ''\n"),
    # unknown level and operator
    Hostile("unknown-level", "unknown feature level", "feature_level", "unknown feature level '9.9'; known: ",
            mutate=_set("feature_level", "9.9")),
    Hostile("empty-level", "unknown feature level", "feature_level", "unknown feature level ''", mutate=_set("feature_level", "")),
    Hostile("unknown-operator", "unknown operator", "descriptor.operator", "unknown operator 'ELEMENT_WISE_FOO' (no spec in",
            mutate=_do(_set("operator", "ELEMENT_WISE_FOO"), _set("descriptor.operator", "ELEMENT_WISE_FOO"))),
    Hostile("operator-not-a-name", "unknown operator", "descriptor.operator", "unknown operator '../../etc/passwd'",
            mutate=_do(_delete("operator"), _set("descriptor.operator", "../../etc/passwd"))),
    # bad base64
    Hostile("base64-alphabet", "bad base64", "inputs.InputTensor.base64", "invalid base64",
            mutate=_set("inputs.InputTensor.base64", "!!!!not base64!!!!")),
    Hostile("base64-padding", "bad base64", "inputs.InputTensor.base64", "invalid base64: Incorrect padding",
            mutate=_set("inputs.InputTensor.base64", "QUJ")),
    Hostile("base64-non-ascii", "bad base64", "inputs.InputTensor.base64", "invalid base64",
            mutate=_set("inputs.InputTensor.base64", "QUJD\u00e9")),
    Hostile("base64-not-a-string", "bad base64", "inputs.InputTensor.base64", "expected a string, found a list",
            mutate=_set("inputs.InputTensor.base64", [1, 2])),
    # wrong types
    Hostile("sizes-string", "wrong types", f"{IN}.Sizes", "expected a list of integers, found a string", mutate=_set(f"{IN}.Sizes", "2,3")),
    Hostile("sizes-float", "wrong types", f"{IN}.Sizes[0]", "expected an integer, found a number 2.5", mutate=_set(f"{IN}.Sizes", [2.5, 3])),
    Hostile("sizes-bool", "wrong types", f"{IN}.Sizes[0]", "expected an integer, found a boolean True", mutate=_set(f"{IN}.Sizes", [True, 3])),
    Hostile("tensors-list", "wrong types", "descriptor.tensors", "expected a mapping, found a list", mutate=_set("descriptor.tensors", [1])),
    Hostile("descriptor-string", "wrong types", "descriptor", "expected a mapping, found a string", mutate=_set("descriptor", "SIGN")),
    Hostile("input-entry-string", "wrong types", "inputs.InputTensor", "expected a mapping, found a string",
            mutate=_set("inputs.InputTensor", "AAAA")),
    Hostile("tags-string", "wrong types", "tags", "expected a list of strings, found a string", mutate=_set("tags", "strided")),
    Hostile("expect-unknown", "wrong types", "expect", "expected 'valid' or 'invalid: RULE', found 'maybe'", mutate=_set("expect", "maybe")),
    Hostile("level-number", "wrong types", "feature_level", "expected a string, found a number 6.4", mutate=_set("feature_level", 6.4)),
    Hostile("attribute-string", "wrong types", "descriptor.attributes.Alpha", "expected a number, found a string 'big'", base="sigmoid",
            mutate=_set("descriptor.attributes.Alpha", "big")),
    Hostile("data-type-int", "wrong types", f"{IN}.DataType", "expected a string, found an integer 7", mutate=_set(f"{IN}.DataType", 7)),
    # missing keys
    Hostile("no-descriptor", "missing keys", "descriptor", "missing", mutate=_delete("descriptor")),
    Hostile("no-feature-level", "missing keys", "feature_level", "missing", mutate=_delete("feature_level")),
    Hostile("no-sizes", "missing keys", f"{IN}.Sizes", "missing", mutate=_delete(f"{IN}.Sizes")),
    Hostile("no-data-type", "missing keys", f"{IN}.DataType", "missing", mutate=_delete(f"{IN}.DataType")),
    Hostile("no-base64", "missing keys", "inputs.InputTensor.base64", "missing", mutate=_delete("inputs.InputTensor.base64")),
    Hostile("no-tensors", "missing keys", "descriptor.tensors", "missing", mutate=_delete("descriptor.tensors")),
    # format and consistency
    Hostile("format-2", "format and consistency", "format", "unknown case file format 2", mutate=_set("format", 2)),
    Hostile("misspelt-key", "format and consistency", f"{IN}.Stride", "unknown key (known: DataType, Flags",
            mutate=_set(f"{IN}.Stride", [3, 1])),
    Hostile("bytes-mismatch", "format and consistency", "inputs.InputTensor.bytes", "says 100, but the base64 holds 24 bytes",
            mutate=_set("inputs.InputTensor.bytes", 100)),
    Hostile("operator-mismatch", "format and consistency", "operator", "'ELEMENT_WISE_BIT_NOT' differs from descriptor.operator",
            mutate=_set("operator", "ELEMENT_WISE_BIT_NOT")),
    # unreadable
    Hostile("no-such-file", "unreadable", "", "cannot read: No such file or directory", special="missing"),
    Hostile("directory", "unreadable", "", "cannot read: Is a directory", special="directory"),
]
assert len({h.id for h in HOSTILE}) == len(HOSTILE)


# --- hostile matrix files ------------------------------------------------------------------------

GOOD_MATRIX = '{"format": 1, "cells": [{"backend": "numpy", "operator": "OP", "feature_level": "6.4", "data_type": "INT8", "state": "pass"}]}'
CELL = '{"backend": "numpy", "operator": "OP", "feature_level": "6.4", "data_type": "INT8", "state": "pass"}'


@dataclass(frozen=True)
class HostileMatrix:
    id: str
    message: str
    text: bytes | str | None  # None: no such file
    position: str = "base"    # which argument is the hostile one

    def write(self, directory: Path) -> tuple[Path, Path]:
        good = directory / "good-matrix.json"
        good.write_text(GOOD_MATRIX)
        bad = directory / f"{self.id}.json"
        if self.text is not None:
            bad.write_bytes(self.text if isinstance(self.text, bytes) else self.text.encode())
        return (bad, good) if self.position == "base" else (good, bad)


HOSTILE_MATRICES = [
    HostileMatrix("missing-file", "cannot read: No such file or directory", None),
    HostileMatrix("empty", "empty: expected a matrix.json", ""),
    HostileMatrix("invalid-json", "invalid JSON: Expecting ',' delimiter: line 1 column 14 (char 13)", '{"cells": [1 2]}'),
    HostileMatrix("not-utf8", "invalid JSON: not UTF-8 text", b'{"cells": "\xff\xfe\xfa"}'),
    HostileMatrix("list", "expected a JSON object with `cells`", "[1, 2]", position="new"),
    HostileMatrix("scalar", "expected a JSON object with `cells` (a matrix.json written by `dmlconform matrix`), found int", "42"),
    HostileMatrix("null", "found null", "null"),
    HostileMatrix("no-cells", "cells: missing", '{"format": 1}'),
    HostileMatrix("cells-object", "cells: expected an array of cells, found an object", '{"cells": {}}', position="new"),
    HostileMatrix("cell-not-object", "cells[0]: expected an object, found a string", '{"cells": ["pass"]}'),
    HostileMatrix("cell-missing-state", "cells[0].state: missing",
                  '{"cells": [{"backend": "b", "operator": "OP", "feature_level": "6.4", "data_type": "T"}]}'),
    HostileMatrix("cell-state-number", "cells[0].state: expected a string, found int",
                  '{"cells": [{"backend": "b", "operator": "OP", "feature_level": "6.4", "data_type": "T", "state": 3}]}'),
    HostileMatrix("duplicate-cell", "cells[1]: the same cell as cells[0] (numpy OP 6.4 INT8)", '{"cells": [%s, %s]}' % (CELL, CELL)),
    HostileMatrix("format-2", "format: unknown matrix format '2'", '{"format": 2, "cells": []}'),
    HostileMatrix("nested-too-deeply", "invalid JSON: nested too deeply", "[" * 100000 + "]" * 100000),
    HostileMatrix("directory", "cannot read: Is a directory", None, position="new"),
]


# --- running the CLI in subprocesses, all at once ----------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    """Run the command line. A spawn that fails before the command starts (EFAULT/EAGAIN seen from
    this sandbox under load, with several threads spawning) is retried: it says nothing about the CLI."""
    for attempt in range(3):
        try:
            return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
        except OSError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


def _batch(commands: list[list[str]], futures: list[Future]) -> None:
    """The command lines in one process (tests/harness/cli_batch.py); where that process does not
    answer (a segfault, an abort: what only a process boundary shows), each in its own process."""
    try:
        proc = subprocess.run([sys.executable, "-m", "tests.harness.cli_batch"], cwd=ROOT, input=json.dumps(commands),
                              capture_output=True, text=True, timeout=600)
        answers = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        answers = None
    for i, (argv, future) in enumerate(zip(commands, futures)):
        try:
            if answers is not None:
                a = answers[i]
                future.set_result(subprocess.CompletedProcess(argv, a["code"], a["stdout"], a["stderr"]))
            else:
                future.set_result(_cli(*argv))
        except BaseException as exc:  # noqa: BLE001 - the test that reads it fails with it
            future.set_exception(exc)


@pytest.fixture(scope="module")
def cli_results(hostile_dir) -> dict[tuple[str, str], Future]:
    """Every replay and compare of this module, run through the CLI's `main` in a few batch
    processes at once (a fresh interpreter per command line took most of this module's two
    minutes); `backends` in a process of its own, as a user runs it."""
    paths = {h.id: h.write(hostile_dir) for h in HOSTILE}
    matrix_dir = hostile_dir / "matrices"
    matrix_dir.mkdir()
    commands: dict[tuple[str, str], list[str]] = {}
    for h in HOSTILE:
        for backend in _backends_for(h):
            commands[(h.id, backend)] = ["replay", str(paths[h.id]), "--backend", backend]
    for m in HOSTILE_MATRICES:
        base, new = m.write(matrix_dir)
        if m.id == "directory":
            (new if m.position == "new" else base).mkdir()
        commands[("compare", m.id)] = ["compare", str(base), str(new)]
    pool = ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2)) + 1)
    results: dict[tuple[str, str], Future] = {("backends", ""): pool.submit(_cli, "backends")}
    results.update({key: Future() for key in commands})
    keys = list(commands)
    batches = max(2, os.cpu_count() or 2)
    for b in range(batches):
        chosen = keys[b::batches]
        if chosen:
            pool.submit(_batch, [commands[k] for k in chosen], [results[k] for k in chosen])
    yield results
    pool.shutdown(wait=True, cancel_futures=True)


def _directml_available(cli_results) -> tuple[bool, str]:
    listing = cli_results[("backends", "")].result().stdout
    line = next((l for l in listing.splitlines() if l.startswith("directml ")), "directml  not installed")
    return line.split()[1:2] == ["available"], line


def _assert_one_clean_line(proc: subprocess.CompletedProcess, expected_prefix: str, fragment: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode not in (-11, 139, -6, 134), f"killed by a signal: {proc.returncode}\n{out}"
    assert "Traceback" not in out, out
    assert proc.returncode == 2, out
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and not proc.stdout.strip(), out
    assert lines[0].startswith(expected_prefix), f"{lines[0]!r} does not start with {expected_prefix!r}"
    assert fragment in lines[0][len(expected_prefix):], f"{fragment!r} not in {lines[0]!r}"


def _backends_for(h: "Hostile") -> list[str]:
    """A file refused before any backend is chosen (bad YAML, tags, keys, types) is replayed on one
    backend; buffers and C ranges, which each backend would read its own way, on all of them."""
    return BACKENDS if h.kind in ("short buffer", C_RANGE) else BACKENDS[:1]


@pytest.mark.parametrize("hostile, backend", [(h, b) for h in HOSTILE for b in _backends_for(h)],
                         ids=[f"{h.kind.replace(' ', '_')}-{h.id}-{b}" for h in HOSTILE for b in _backends_for(h)])
def test_replay_refuses_hostile_case_file(hostile: Hostile, backend: str, cli_results, hostile_dir):
    if backend == "directml":
        ok, line = _directml_available(cli_results)
        if not ok:
            if os.environ.get("DMLCONFORM_REQUIRE_DIRECTML") == "1":
                pytest.fail(f"DirectML stack required but not available: {line}")
            pytest.skip(f"`dmlconform backends` says: {line}")
    proc = cli_results[(hostile.id, backend)].result()
    path = hostile_dir / f"{hostile.id}.yaml"
    prefix = f"cannot use case file {path}: " + (f"{hostile.key}: " if hostile.key else "")
    _assert_one_clean_line(proc, prefix, hostile.message)
    assert not (hostile_dir / PWNED).exists(), "a Python tag in a case file was executed"


@pytest.mark.parametrize("matrix", HOSTILE_MATRICES, ids=[m.id for m in HOSTILE_MATRICES])
def test_compare_refuses_hostile_matrix(matrix: HostileMatrix, cli_results, hostile_dir):
    proc = cli_results[("compare", matrix.id)].result()
    bad = hostile_dir / "matrices" / f"{matrix.id}.json"
    _assert_one_clean_line(proc, f"compare: cannot use matrix {bad}: ", matrix.message)


def test_a_well_formed_case_file_still_replays(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(_sign(), sort_keys=False))
    proc = _cli("replay", str(path), "--backend", "numpy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pass: 6 elements of OutputTensor (FLOAT32) match" in proc.stdout


# --- check_case ----------------------------------------------------------------------------------

def _case(base: str = "sign", mutate: Callable[[dict], Any] | None = None) -> Case:
    d = BASES[base]()
    if mutate is not None:
        mutate(d)
    return Case.from_dict(d)


def _key(case: Case, spec_name: str | None = None) -> str:
    with pytest.raises(CaseFormatError) as info:
        check_case(case, SPECS.operator(spec_name or case.operator))
    return info.value.key


def test_check_case_accepts_the_well_formed_bases():
    for base in BASES:
        case = _case(base)
        check_case(case, SPECS.operator(case.operator))


@pytest.mark.parametrize("hostile", [h for h in HOSTILE if h.kind in ("short buffer", C_RANGE, "unknown feature level")],
                         ids=lambda h: h.id)
def test_check_case_names_the_key(hostile: Hostile):
    """The file-level kinds fail in Case.load; these reach check_case, in process too."""
    assert _key(_case(hostile.base, hostile.mutate)) == hostile.key


def test_case_format_error_renders_file_key_message():
    error = CaseFormatError("inputs.InputTensor", "too short")
    assert str(error) == "inputs.InputTensor: too short"
    assert error.in_file("x.yaml").render() == "x.yaml: inputs.InputTensor: too short"
    assert CaseFormatError("", "empty", "x.yaml").render() == "x.yaml: empty"
    assert isinstance(error, ValueError)


def test_a_short_declared_total_is_well_formed_and_rejected():
    """tensor.total_size_too_small: the buffer has the declared (too small) length; the device
    must reject it, so it is a validator rule, not a format error; the reference rejects it unread."""
    d = _sign()
    _tensor(d)["TotalTensorSizeInBytes"] = 20
    _set_buffer(d, _buffer(d)[:20])
    d["expect"] = "invalid: tensor.total_size_too_small"
    case = Case.from_dict(d)
    spec = SPECS.operator(case.operator)
    check_case(case, spec)
    assert run_case(REFERENCE, spec, case, "invalid").status == "rejected-invalid"


def test_a_missing_buffer_only_in_a_case_no_level_accepts():
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    huge = _sign()
    for name in ("InputTensor", "OutputTensor"):
        _tensor(huge, name)["Sizes"] = [65536, 65536]  # tensor.too_many_elements: invalid at every level
    huge["inputs"] = {}
    huge["expect"] = "invalid: tensor.too_many_elements"
    check_case(Case.from_dict(huge), spec)
    # the same without a buffer, but invalid only at an old level (BIT_NOT arrives in FL 4.1):
    # a newer device must accept it and would read the missing input
    bit_not = SPECS.operator("ELEMENT_WISE_BIT_NOT")
    old = case_from_arrays(bit_not, "3.0", {"InputTensor": "UINT8", "OutputTensor": "UINT8"}, {"InputTensor": np.arange(4, dtype=np.uint8)})
    old.inputs, old.expect_valid, old.broken_rule = {}, False, "operator.unavailable"
    with pytest.raises(CaseFormatError, match="breaks only level-dependent rules") as info:
        check_case(old, bit_not)
    assert info.value.key == "inputs.InputTensor"


def test_a_buffer_of_another_length_than_the_declared_total_is_refused_in_invalid_cases_too():
    d = _sign()
    _tensor(d)["TotalTensorSizeInBytes"] = 20
    d["expect"] = "invalid: tensor.total_size_too_small"  # the buffer keeps its 24 bytes
    assert _key(Case.from_dict(d)) == "inputs.InputTensor"


def test_aliases_pair_a_present_output_with_a_present_input():
    spec = SPECS.operator("ELEMENT_WISE_SIGN")
    case = case_from_arrays(spec, "6.4", {"InputTensor": "INT8", "OutputTensor": "INT8"}, {"InputTensor": np.arange(4, dtype=np.int8)})
    case.descriptor.aliases = {"InputTensor": "OutputTensor"}
    with pytest.raises(CaseFormatError, match="'InputTensor' is not an output tensor"):
        check_case(case, spec)
    case.descriptor.aliases = {"OutputTensor": "InputTensor"}
    check_case(case, spec)  # the allowed pair
    case.descriptor.tensors["InputTensor"], case.inputs = None, {}
    with pytest.raises(CaseFormatError, match="but InputTensor is absent") as info:
        check_case(case, spec)
    assert info.value.key == "descriptor.aliases.OutputTensor"


@pytest.mark.parametrize("value,ok", [(0.2, True), (-0.0, True), (float("inf"), True), (float("nan"), True),
                                      (3.4028234663852886e38, True), (1e-45, True), (3.5e38, False), (-1e39, False),
                                      (float(np.nextafter(2.0**128 - 2.0**103, 0)), True), (2.0**128 - 2.0**103, False),
                                      (10**400, False)])
def test_float_attributes_are_float32_values_or_inf_nan(value, ok):
    """What a C compiler's float conversion (round to nearest) does: NumPy's float32 agrees."""
    if isinstance(value, float):
        with np.errstate(over="ignore"):
            assert ok == (not np.isfinite(value) or bool(np.isfinite(np.float32(value))))
    if ok:
        check_attribute("descriptor.attributes.Alpha", value, "FLOAT")
    else:
        with pytest.raises(CaseFormatError, match="overflows FLOAT"):
            check_attribute("descriptor.attributes.Alpha", value, "FLOAT")


@pytest.mark.parametrize("value,ok", [(0.0, True), (4294967295.0, True), (4294967296.0, False), (-1.0, False), (1.5, False),
                                      (float("nan"), False), (float("inf"), False)])
def test_uint_attributes_are_uint32(value, ok):
    if ok:
        check_attribute("descriptor.attributes.Axis", value, "UINT")
    else:
        with pytest.raises(CaseFormatError, match=r"is not an integer in 0\.\.4294967295"):
            check_attribute("descriptor.attributes.Axis", value, "UINT")


def test_run_case_refuses_a_malformed_case_before_the_backend():
    calls = []

    class Spy:
        name = "spy"

        def capabilities(self):
            calls.append("capabilities")
            raise AssertionError("reached the backend")

        def run(self, case):
            calls.append("run")
            raise AssertionError("reached the backend")
    case = _case(mutate=_set(f"{IN}.Strides", [-3, 1]))
    with pytest.raises(CaseFormatError, match=r"Strides\[0\]"):
        run_case(Spy(), SPECS.operator(case.operator), case, "valid")
    assert calls == []


def test_the_file_size_is_bounded(tmp_path, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(_sign()))
    monkeypatch.setattr(descriptor_module, "MAX_CASE_FILE_BYTES", 100)
    with pytest.raises(CaseFormatError, match="larger than 100 bytes, the most a case file may be") as info:
        Case.load(path)
    assert info.value.file == path


def test_case_files_round_trip(tmp_path):
    for base in BASES:
        case = _case(base)
        loaded = Case.load(case.save(tmp_path / f"{base}.yaml"))
        assert loaded.descriptor == case.descriptor and loaded.inputs == case.inputs and loaded.case_id == case.case_id


# --- every generated case is well-formed ---------------------------------------------------------

FEW = settings(max_examples=3, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("op", sorted(SPECS.operators))
def test_generated_cases_are_well_formed(op):
    """Valid cases at every level where the operator's tables change (between two such levels the
    same types and dimension counts are drawn) pass check_case as built and after a trip through
    the case file format. Invalid cases get the same check in test_generation, where each
    reachable rule's cases are drawn once for both checks (the mutation search is the suite's
    costliest generation)."""
    spec = SPECS.operator(op)
    checked = 0
    for level in levels_where_tables_change(spec):
        if not spec.has_table_at(level):
            continue

        @FEW
        @given(valid_cases(spec, level))
        def check(case):
            nonlocal checked
            check_case(case, spec)
            check_case(round_trip(case), spec)
            checked += 1
        check()
    assert checked >= 3


# --- the bounds-checked layout functions ---------------------------------------------------------

def test_span_elements_hand_checked():
    assert span_elements([2, 3], None) == 6
    assert span_elements([2, 3], [5, 1]) == 8           # 1*5 + 2*1 + 1
    assert span_elements([2, 3], [0, 1]) == 3           # broadcast rows
    assert span_elements([2, 0, 3], [100, 7, 1]) == 0   # no element
    assert span_elements([1, 1, 4], [9, 9, 2]) == 7
    for sizes, strides in (([2, 3], [-1, 1]), ([2, -3], None), ([2, 3], [1])):
        with pytest.raises(ValueError):
            span_elements(sizes, strides)


def test_read_logical_exact_size_reads_the_right_elements():
    data = np.arange(8, dtype=np.int16).tobytes()               # 16 bytes: elements 0..7
    desc = TensorDesc("INT16", [2, 3], [5, 1])                   # reaches element 7: exactly the buffer
    assert read_logical(data, desc, np.int16).tolist() == [[0, 1, 2], [5, 6, 7]]
    assert read_logical(data, TensorDesc("INT16", [3, 2], [1, 3]), np.int16).tolist() == [[0, 3], [1, 4], [2, 5]]
    assert read_logical(data, TensorDesc("INT16", [2, 2], [0, 7]), np.int16).tolist() == [[0, 7], [0, 7]]
    assert read_logical(b"", TensorDesc("INT16", [0, 3]), np.int16).shape == (0, 3)


@pytest.mark.parametrize("sizes,strides,length", [([2, 3], [5, 1], 14), ([2, 3], None, 10), ([4], [2**31], 16),
                                                  ([2, 3], [2**40, 1], 16), ([2, 3], [-1, 1], 64), ([3], [1], 0)])
def test_read_logical_never_reads_past_the_buffer(sizes, strides, length):
    with pytest.raises(ValueError, match="reaches byte|negative"):
        read_logical(bytes(length), TensorDesc("INT16", sizes, strides), np.int16)


def test_a_partial_trailing_element_is_not_usable():
    """15 bytes hold seven INT16 elements, not eight."""
    with pytest.raises(ValueError, match="of a buffer of 14 usable bytes"):
        read_logical(bytes(15), TensorDesc("INT16", [8]), np.int16)


def test_write_logical_is_bounds_checked_and_writes_nothing_when_short():
    buffer = bytearray(12)
    write_logical(buffer, TensorDesc("INT16", [2, 3], [3, 1]), np.arange(1, 7, dtype=np.int16).reshape(2, 3))
    assert np.frombuffer(bytes(buffer), np.int16).tolist() == [1, 2, 3, 4, 5, 6]
    short = bytearray(10)
    with pytest.raises(ValueError, match="reaches byte 12"):
        write_logical(short, TensorDesc("INT16", [2, 3], [3, 1]), np.ones((2, 3), np.int16))
    assert short == bytearray(10)


def test_strided_view_needs_a_flat_contiguous_buffer():
    with pytest.raises(ValueError, match="flat, contiguous"):
        strided_view(np.zeros(16, np.int16)[::2], TensorDesc("INT16", [4]), 2)


# --- the backends' read paths, reached directly (check_case bypassed) ---------------------------

def _short_case() -> Case:
    """Well-formed in every field but its buffer: 20 of 24 bytes (check_case refuses it)."""
    case = _case()
    case.inputs = {"InputTensor": case.inputs["InputTensor"][:20]}
    return case


def test_the_reference_raises_instead_of_reading_a_short_buffer():
    with pytest.raises(ValueError, match="reaches byte 24 of a buffer of 20"):
        REFERENCE.run(_short_case())


def test_onnxruntime_raises_instead_of_reading_a_short_buffer():
    from backends.onnxruntime_backend import OnnxRuntimeBackend
    backend = OnnxRuntimeBackend(SPECS)
    ok, reason = backend.available()
    if not ok:
        pytest.skip(reason)
    with pytest.raises(ValueError, match="reaches byte 24 of a buffer of 20"):
        backend.run(_short_case())


def test_directml_never_sends_a_malformed_case_to_the_runner():
    """Unsupported with the key, decided before the runner is started (nothing is truncated to UINT32)."""
    backend = DirectMLBackend(SPECS)
    try:
        negative = _case(mutate=_set(f"{IN}.Strides", [-3, 1]))
        result = backend.run(negative)
        assert result.kind == "unsupported" and "Strides[0]" in result.reason
        result = backend.run(_short_case())
        assert result.kind == "unsupported" and "inputs.InputTensor" in result.reason
        assert backend._process is None
    finally:
        backend.close()


def test_descriptor_from_dict_errors_carry_their_key():
    with pytest.raises(CaseFormatError) as info:
        Descriptor.from_dict({"operator": "X", "tensors": {"A": {"DataType": "INT8", "Sizes": [1, "2"]}}}, "descriptor")
    assert info.value.key == "descriptor.tensors.A.Sizes[1]"
    with pytest.raises(CaseFormatError) as info:
        TensorDesc.from_dict(copy.deepcopy({"DataType": "INT8"}))
    assert info.value.key == "Sizes"
