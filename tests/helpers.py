"""Small helpers shared by the harness tests.

The harness tests read their operators from SPECS: the shipped specs/, or the directory named by
DMLCONFORM_TEST_SPECS_DIR (how tests/harness/test_operator_set.py runs them against a spec set with
one more operator). Hand-checked data per operator lives in tests/golden/OPERATOR.yaml (`golden`).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from backends.numpy_reference import NumpyReferenceBackend
from harness.generate.cases import case_from_arrays, output_values
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs

SPECS_DIR = Path(os.environ.get("DMLCONFORM_TEST_SPECS_DIR") or DEFAULT_SPECS_DIR)
SPECS = load_specs(SPECS_DIR)
REFERENCE = NumpyReferenceBackend(SPECS)
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"

_GOLDEN_KEYS = {"operator", "spec", "vectors"}
_SPEC_KEYS = {"source", "operator_type", "introduced", "in_place_allowed", "fields", "default_attributes", "tables",
              "variant_key"}
_SPEC_REQUIRED = _SPEC_KEYS - {"default_attributes", "variant_key"}
_VECTOR_KEYS = {"name", "checked", "types", "attributes", "sizes", "tensor_sizes", "feature_level", "inputs", "expected"}
_VECTOR_REQUIRED = {"name", "checked", "types", "inputs", "expected"}


def golden(op: str) -> dict:
    """The hand-checked data of one operator (tests/golden/OP.yaml), checked for form; a test of an
    operator without a file fails with exactly "no golden data for OP (add tests/golden/OP.yaml)"."""
    path = GOLDEN_DIR / f"{op}.yaml"
    if not path.is_file():
        pytest.fail(f"no golden data for {op} (add tests/golden/{op}.yaml)", pytrace=False)
    return load_golden(path)


def load_golden(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    where = f"{path.name}"
    assert isinstance(data, dict) and set(data) == _GOLDEN_KEYS, f"{where}: top-level keys must be {sorted(_GOLDEN_KEYS)}"
    assert data["operator"] == path.stem, f"{where}: operator {data['operator']!r} differs from the file name"
    spec = data["spec"]
    assert isinstance(spec, dict) and _SPEC_REQUIRED <= set(spec) <= _SPEC_KEYS, \
        f"{where}: spec needs {sorted(_SPEC_REQUIRED)} (and may have default_attributes), has {sorted(spec)}"
    for variant, level, tensors in golden_tables(spec):
        for tensor, cell in tensors.items():
            assert isinstance(cell, list) and len(cell) == 3, f"{where}: spec.tables.{level}.{tensor}: [kind, [min, max], types]"
    names = set()
    for i, vector in enumerate(data["vectors"]):
        at = f"{where}: vectors[{i}]"
        assert isinstance(vector, dict) and _VECTOR_REQUIRED <= set(vector) <= _VECTOR_KEYS, \
            f"{at}: needs {sorted(_VECTOR_REQUIRED)}, may have {sorted(_VECTOR_KEYS - _VECTOR_REQUIRED)}; has {sorted(vector)}"
        assert vector["name"] not in names, f"{at}: duplicate name {vector['name']!r}"
        names.add(vector["name"])
        assert isinstance(vector["checked"], str) and vector["checked"].strip(), f"{at}: say how it was hand-checked"
        for section in ("inputs", "expected"):
            for tensor, values in vector[section].items():
                _numbers(values["bits"] if isinstance(values, dict) and set(values) == {"bits"} else values,
                         f"{at} ({vector['name']}): {section}.{tensor}")
    return data


def golden_tables(spec: dict) -> list[tuple[tuple[str, ...] | None, str, dict]]:
    """(variant, level, {tensor: [kind, [min, max], types]}) for every table of a golden file:
    `tables` is {level: cells}, or, with a `variant_key`, a list of {variant: [members], tables:
    {level: cells}} (one item per group of the page's tables)."""
    if "variant_key" not in spec:
        return [(None, level, tensors) for level, tensors in spec["tables"].items()]
    out = []
    for group in spec["tables"]:
        assert set(group) == {"variant", "tables"}, f"a variant group is {{variant, tables}}, found {sorted(group)}"
        out += [(tuple(group["variant"]), level, tensors) for level, tensors in group["tables"].items()]
    return out


def _numbers(values, where: str) -> None:
    """Golden values are numbers (YAML reads 1e-40 without a dot as a string: write 1.0e-40)."""
    assert isinstance(values, list) and values, f"{where}: a non-empty list, or {{bits: [...]}}"
    for v in values:
        assert isinstance(v, (int, float)) and not isinstance(v, bool), f"{where}: {v!r} is not a number"


def golden_array(values, dtype) -> np.ndarray:
    """A golden list as an array of `dtype`: numbers, or {bits: [...]} holding the bit patterns."""
    if isinstance(values, dict):
        return from_bits(values["bits"], dtype)
    if np.dtype(dtype).kind == "f":  # through float64, the value YAML read
        return np.array(values, dtype=np.float64).astype(dtype)
    return np.array(values, dtype=dtype)


def run_reference(op: str, types: dict, values: dict, level: str = "6.4", **kw) -> np.ndarray:
    """Run the reference on packed tensors and return the output's logical values."""
    spec = SPECS.operator(op)
    case = case_from_arrays(spec, level, types, {k: np.asarray(v) for k, v in values.items()}, **kw)
    result = REFERENCE.run(case)
    assert result.kind == "outputs", result
    return output_values(spec, case, result.buffers)[spec.formula.output]


def bits(values, dtype) -> np.ndarray:
    arr = np.asarray(values, dtype=dtype)
    return arr.view(f"uint{arr.dtype.itemsize * 8}")


def from_bits(patterns, dtype) -> np.ndarray:
    width = np.dtype(dtype).itemsize * 8
    return np.asarray(patterns, dtype=f"uint{width}").view(dtype)


def directml_or_skip(**options):
    """A started DirectML backend, or a skip with the reason; a failure instead when the stack is
    required (DMLCONFORM_REQUIRE_DIRECTML=1, as in .ci/run)."""
    import os

    import pytest

    from backends.directml import DirectMLBackend
    backend = DirectMLBackend(SPECS, **options)
    ok, reason = backend.available()
    if not ok:
        backend.close()
        if os.environ.get("DMLCONFORM_REQUIRE_DIRECTML") == "1":
            pytest.fail(f"DirectML stack required but not available: {reason}")
        pytest.skip(f"DirectML stack not available: {reason}")
    return backend


LEVEL_NAMES = [lvl.name for lvl in SPECS.catalog.levels]


def levels_where_tables_change(spec) -> list[str]:
    """OperatorSpec.table_change_levels: the levels at which testing an operator says something new."""
    return list(spec.table_change_levels)


def round_trip(case):
    """A case through the case file format (the YAML text Case.save writes and Case.load reads) and back."""
    from harness.model.descriptor import Case, case_mapping, case_yaml
    return Case.from_dict(case_mapping(case_yaml(case.to_dict()).encode()))


def read_plan(path) -> dict:
    """A run's plan file as written (`plan-W.json.gz`) or plain, parsed."""
    import gzip
    import json
    from pathlib import Path
    data = Path(path).read_bytes()
    return json.loads(gzip.decompress(data) if str(path).endswith(".gz") else data)


def write_plan_file(path, plan: dict) -> None:
    """`plan` written back into `path` in that file's own form (gzip for `.gz`): a test's edited plan."""
    import gzip
    import json
    from pathlib import Path
    data = json.dumps(plan).encode()
    Path(path).write_bytes(gzip.compress(data, mtime=0) if str(path).endswith(".gz") else data)


def plan_file(results) -> "Path":
    """The one plan in a results directory (a run of one process or a shard)."""
    from harness.run.manifest import plan_files
    plans = plan_files(results)
    assert len(plans) == 1, plans
    return plans[0]


def copy_specs(dest: Path, *operator_files: str) -> Path:
    """A specs directory at `dest` with the shared files (_*.yaml) and only the named operator
    files: what a test that breaks one spec needs. Copying and loading all 177 specs cost a second
    or more per test, and the errors under test name one file."""
    dest.mkdir(parents=True)
    for path in [*DEFAULT_SPECS_DIR.glob("_*.yaml"), *(DEFAULT_SPECS_DIR / name for name in operator_files)]:
        (dest / path.name).write_bytes(path.read_bytes())
    return dest
