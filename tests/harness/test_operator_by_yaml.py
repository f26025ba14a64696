"""Adding an operator of a covered family is adding a YAML file: a throw-away spec of the
element-wise family (ACTIVATION_LINEAR, tests/fixtures/precision/) in a temporary specs directory
runs end to end, with no Python change, on the reference, the worst legal device and the real
DirectML.dll (whose runner marshals the desc struct from the spec's fields); ONNX Runtime, which
maps operators by its table (backends/onnxruntime_ops.yaml), reports it unsupported, never a pass."""
import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.spec.load import DEFAULT_SPECS_DIR
from harness.run.results import record_dicts
from tests.helpers import directml_or_skip

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "precision" / "ACTIVATION_LINEAR.yaml"


def test_a_new_element_wise_operator_runs_from_its_yaml_alone(tmp_path):
    directml_or_skip().close()  # the DirectML part is required where the stack is (CI)
    specs = tmp_path / "specs"
    specs.mkdir()
    for path in DEFAULT_SPECS_DIR.glob("*.yaml"):
        shutil.copy(path, specs / path.name)
    shutil.copy(FIXTURE, specs / FIXTURE.name)
    reports = tmp_path / "reports"
    cli = [sys.executable, "-m", "harness.cli", "--specs-dir", str(specs)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run(cli + ["run", "--operator", "ACTIVATION_LINEAR", "--backend", "numpy", "--backend", "worst-legal",
                                "--backend", "directml", "--backend", "onnxruntime", "--workers", "0",
                                "--max-examples", "10", "--reports-dir", str(reports)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    gate = subprocess.run(cli + ["gate", "--reports-dir", str(reports)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert gate.returncode == 0, gate.stdout[-2000:] + run.stdout[-2000:]
    statuses = collections.defaultdict(collections.Counter)
    reasons = set()
    for record in record_dicts(reports / "results"):  # results-*.jsonl, gzip-compressed at the run's end
        assert record["operator"] == "ACTIVATION_LINEAR"
        statuses[record["backend"]][record["status"]] += 1
        if record["backend"] == "onnxruntime":
            reasons.add(record["summary"])
    for backend in ("numpy", "worst-legal", "directml"):
        assert statuses[backend]["pass"] > 0 and statuses[backend]["rejected-invalid"] > 0, (backend, statuses[backend])
    assert set(statuses["onnxruntime"]) == {"unsupported"} and reasons == {"no ONNX mapping for ACTIVATION_LINEAR"}


def test_the_onnx_mapping_table_names_what_is_wrong(tmp_path):
    import pytest

    from backends.onnxruntime_backend import MAPPING_FILE, load_mapping
    from harness.spec.source import SpecError
    table = load_mapping(MAPPING_FILE)
    assert table["ELEMENT_WISE_ADD"] == {"builder": "node", "op": "Add", "inputs": ["ATensor", "BTensor"]}
    bad = tmp_path / "ops.yaml"
    bad.write_text("ELEMENT_WISE_SIGN: {builder: node, op: Sign, inputs: [InputTensor]}\nELEMENT_WISE_ADD: {builder: tree}\n")
    with pytest.raises(SpecError) as raised:
        load_mapping(bad)
    assert "ops.yaml:2" in str(raised.value) and "ELEMENT_WISE_ADD" in str(raised.value) and "builder must be one of" in str(raised.value)


def test_a_new_reduce_family_operator_runs_from_its_yaml_alone(tmp_path):
    """The same for an index-space family: a specs directory without ARGMIN does not know the
    operator; adding specs/ARGMIN.yaml (family reduce, an array field with its count, shape and
    expression constraints) makes it run end to end on the reference and the real DirectML.dll,
    with valid cases passing and every constraint's invalid cases rejected."""
    directml_or_skip().close()
    specs = tmp_path / "specs"
    specs.mkdir()
    for path in DEFAULT_SPECS_DIR.glob("*.yaml"):
        if path.name != "ARGMIN.yaml":
            shutil.copy(path, specs / path.name)
    cli = [sys.executable, "-m", "harness.cli", "--specs-dir", str(specs)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = subprocess.run(cli + ["spec", "show", "ARGMIN"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert before.returncode != 0
    shutil.copy(DEFAULT_SPECS_DIR / "ARGMIN.yaml", specs / "ARGMIN.yaml")
    reports = tmp_path / "reports"
    subprocess.run(cli + ["run", "--operator", "ARGMIN", "--backend", "numpy", "--backend", "directml", "--workers", "0",
                          "--max-examples", "6", "--reports-dir", str(reports)],
                   capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    gate = subprocess.run(cli + ["gate", "--reports-dir", str(reports)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert gate.returncode == 0, gate.stdout[-2000:]
    statuses = collections.defaultdict(collections.Counter)
    rejected_rules = set()
    for record in record_dicts(reports / "results"):  # results-*.jsonl, gzip-compressed at the run's end
        statuses[record["backend"]][record["status"]] += 1
        if record["backend"] == "directml" and record["status"] == "rejected-invalid":
            rejected_rules.add(record["rule"])
    for backend in ("numpy", "directml"):
        assert statuses[backend]["pass"] > 0, (backend, statuses[backend])
    assert {"constraint.same_dimension_count", "constraint.axes_in_range", "constraint.output_sizes"} <= rejected_rules


def test_a_shape_rule_may_read_a_tensor_whose_name_ends_in_its_own(tmp_path):
    """The self-reference check of a shape rule compares names: a rule on WeightTensor that reads a
    RecurrenceWeightTensor's Sizes is not "WeightTensor depending on itself" (it was, by substring,
    for an attention spec's KeyTensor and StackedQueryKeyTensor); reading its own Sizes still is."""
    import pytest

    from harness.spec.load import SpecError, load_specs
    specs = tmp_path / "specs"
    specs.mkdir()
    for path in DEFAULT_SPECS_DIR.glob("_*.yaml"):
        shutil.copy(path, specs / path.name)
    for path in DEFAULT_SPECS_DIR.glob("ACTIVATION_*.yaml"):  # the activations RNN may take
        shutil.copy(path, specs / path.name)
    text = (DEFAULT_SPECS_DIR / "RNN.yaml").read_text(encoding="utf-8").replace("RecurrenceTensor", "RecurrenceWeightTensor")
    old = 'sizes: "[1, 2 if Direction == BIDIRECTIONAL else 1, free, InputTensor.Sizes[3]]"'
    assert old in text
    (specs / "RNN.yaml").write_text(text.replace(
        old, 'sizes: "[1, 2 if Direction == BIDIRECTIONAL else 1, RecurrenceWeightTensor.Sizes[2], InputTensor.Sizes[3]]"'), encoding="utf-8")
    assert "RNN" in load_specs(specs).operators
    (specs / "RNN.yaml").write_text(text.replace(
        old, 'sizes: "[1, 2 if Direction == BIDIRECTIONAL else 1, WeightTensor.Sizes[2], InputTensor.Sizes[3]]"'), encoding="utf-8")
    with pytest.raises(SpecError, match="cannot depend on WeightTensor itself"):
        load_specs(specs)
