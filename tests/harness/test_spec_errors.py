"""Malformed specs give one clear `file:line: key.path: message` error and exit code 1.

Each case copies the shared spec files and the operators the cases break into a temporary
directory (tests.helpers.copy_specs), breaks one thing in one file by a text edit, and checks the reported line (found from a marker in the broken text), key path and message.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.spec.load import DEFAULT_SPECS_DIR, load_specs
from harness.spec.source import SpecError, format_key_path
from tests.helpers import copy_specs

SIGN = "ELEMENT_WISE_SIGN.yaml"
QUANT = "ELEMENT_WISE_QUANTIZE_LINEAR.yaml"
HSIG = "ACTIVATION_HARD_SIGMOID.yaml"
BITNOT = "ELEMENT_WISE_BIT_NOT.yaml"
ADAM = "ADAM_OPTIMIZER.yaml"

# (id, file, old text, new text, marker of the reported line (None: no line check), key path, message part)
CASES = [
    ("unknown_data_type", SIGN, "types: [FLOAT32, FLOAT16]}\n      OutputTensor: {kind: output, dims: [4, 4], types: [FLOAT32, FLOAT16]}",
     "types: [FLOAT32, FLOAT17]}\n      OutputTensor: {kind: output, dims: [4, 4], types: [FLOAT32, FLOAT16]}",
     "FLOAT17", "support[3].tensors.InputTensor.types[1]", "unknown data type 'FLOAT17'"),
    ("unknown_level", SIGN, 'level: "2.1"', 'level: "2.5"', 'level: "2.5"', "support[2].level", "unknown feature level '2.5'"),
    ("levels_out_of_order", HSIG, 'level: "2.0"', 'level: "3.1"', 'level: "3.1"', "support[1].level", "newest level first"),
    ("table_before_introduction", BITNOT, 'level: "3.0"\n', 'level: "2.1"\n', 'level: "2.1"', "support[1].level", "older than the operator's introduction"),
    ("dims_above_eight", SIGN, "dims: [1, 8], types: [FLOAT32, FLOAT16, INT64", "dims: [1, 9], types: [FLOAT32, FLOAT16, INT64",
     "dims: [1, 9]", "support[0].tensors.InputTensor.dims", "1 <= min <= max <= 8"),
    ("dims_reversed", HSIG, "dims: [4, 5], types: [FLOAT32, FLOAT16]}\n      OutputTensor: {kind: output, dims: [4, 5]",
     "dims: [5, 4], types: [FLOAT32, FLOAT16]}\n      OutputTensor: {kind: output, dims: [4, 5]",
     "dims: [5, 4]", "support[1].tensors.InputTensor.dims", "min <= max"),
    ("dims_not_a_pair", HSIG, "dims: [4, 4], types: [FLOAT32, FLOAT16]}\n      OutputTensor",
     "dims: [4], types: [FLOAT32, FLOAT16]}\n      OutputTensor", "dims: [4]", "support[2].tensors.InputTensor.dims", "has 1 item(s); expected at least 2"),
    ("table_misses_tensor", BITNOT,
     "      OutputTensor: {kind: output, dims: [1, 8], types: [UINT32, UINT16, UINT8]}\n", "",
     None, "support[1].tensors", "does not cover tensor field(s) OutputTensor"),
    ("table_unknown_tensor", BITNOT, "      OutputTensor: {kind: output, dims: [1, 8], types: [UINT32, UINT16, UINT8]}\n",
     "      OutputTensor: {kind: output, dims: [1, 8], types: [UINT32, UINT16, UINT8]}\n      BiasTensor: {kind: input, dims: [1, 8], types: [UINT8]}\n",
     "BiasTensor", "support[1].tensors.BiasTensor", "'BiasTensor' is not a tensor field"),
    ("bad_kind", SIGN, "OutputTensor: {kind: output, dims: [4, 4], types: [FLOAT32, FLOAT16]}",
     "OutputTensor: {kind: outptu, dims: [4, 4], types: [FLOAT32, FLOAT16]}", "kind: outptu", "support[3].tensors.OutputTensor.kind",
     "'outptu' is not one of"),
    ("kind_against_role", SIGN, "OutputTensor: {kind: output, dims: [4, 4], types: [FLOAT32, FLOAT16]}",
     "OutputTensor: {kind: input, dims: [4, 4], types: [FLOAT32, FLOAT16]}", "OutputTensor: {kind: input, dims: [4, 4]",
     "support[3].tensors.OutputTensor.kind", "does not fit field role 'output'"),
    ("missing_formula", BITNOT, "formula:\n", "formulas:\n", "formulas:", "formulas", "Additional properties are not allowed ('formulas' was unexpected)"),
    ("missing_required_key", SIGN, "desc_struct: DML_ELEMENT_WISE_SIGN_OPERATOR_DESC\n", "", None, "", "'desc_struct' is a required property"),
    ("undefined_formula_name", HSIG, 'expression: "max(0, min(Alpha * x + Beta, 1))"', 'expression: "max(0, min(Alpha * x + Gamma, 1))"',
     "Gamma, 1))", "formula.expression", "undefined name(s) Gamma"),
    ("formula_not_whitelisted_call", SIGN, 'expression: "where(x < 0, -1, where(x > 0, 1, 0))"', 'expression: "open(x)"',
     'expression: "open(x)"', "formula.expression", "function 'open' is not allowed"),
    ("formula_attribute_access", SIGN, 'expression: "where(x < 0, -1, where(x > 0, 1, 0))"', 'expression: "x.__class__"',
     'expression: "x.__class__"', "formula.expression", "Attribute"),
    ("formula_syntax", SIGN, 'expression: "where(x < 0, -1, where(x > 0, 1, 0))"', 'expression: "where(x < 0, -1"',
     'expression: "where(x < 0, -1"', "formula.expression", "not a valid expression"),
    ("formula_input_not_a_field", SIGN, "inputs: {x: InputTensor}", "inputs: {x: InputTensr}", "inputs: {x: InputTensr}",
     "formula.inputs.x", "'InputTensr' is not an input tensor field"),
    ("constraint_unknown_tensor", SIGN, "tensors: [InputTensor, OutputTensor],\n     text: \"InputTensor and OutputTensor must have the same DataType.\"",
     "tensors: [InputTensor, OutTensor],\n     text: \"InputTensor and OutputTensor must have the same DataType.\"",
     "id: same_data_type", "constraints[0]", "'OutTensor' is not a tensor field"),
    ("constraint_bad_rule", SIGN, "rule: same_shape", "rule: same_layout", "rule: same_layout", "constraints[1].rule", "'same_layout' is not one of"),
    ("duplicate_constraint_id", SIGN, "{id: same_shape, rule: same_shape", "{id: same_data_type, rule: same_shape",
     "{id: same_data_type, rule: same_shape", "constraints[1].id", "duplicate constraint id same_data_type"),
    ("conditional_unknown_type", QUANT, "when: {tensor: InputTensor, types: [INT32]}", "when: {tensor: InputTensor, types: [INT31]}",
     "types: [INT31]", "constraints[0].when.types[0]", "unknown data type 'INT31'"),
    ("optional_without_absent_meaning", QUANT, "  absent_inputs:\n    zero_point:\n      value: 0\n", "  absent_inputs:\n    zp:\n      value: 0\n",
     "    zp:", "formula.absent_inputs.zp", "'zp' is not a formula input"),
    ("comparison_unknown_type", SIGN, "  default: {kind: exact}", "  default: {kind: exact}\n  FLOAT33: {kind: exact}",
     "FLOAT33", "comparison.FLOAT33", "comparison keys are 'default' or data type names"),
    ("ulp_without_bound", HSIG, "  default: {kind: exact}", "  default: {kind: ulp}", "  default: {kind: ulp}",
     "comparison.default", "kind ulp needs max_ulp"),
    ("operator_name_mismatch", SIGN, "operator: ELEMENT_WISE_SIGN\n", "operator: ELEMENT_WISE_SIGNUM\n", "operator: ELEMENT_WISE_SIGNUM",
     "operator", "must match the file name"),
    ("duplicate_key", SIGN, "introduced: \"2.0\"\n", "introduced: \"2.0\"\nintroduced: \"2.1\"\n", 'introduced: "2.1"', "",
     "duplicate key 'introduced'"),
    ("yaml_syntax", SIGN, "summary: The sign", "summary: [The sign", None, "", "invalid YAML"),
    ("other_output_not_an_output", ADAM, "    OutputFirstMomentTensor: \"Beta1", "    GradientTensor: \"Beta1", "GradientTensor: \"Beta1",
     "formula.other_outputs.GradientTensor", "is not an output tensor field other than formula.output"),
    ("other_output_undefined_name", ADAM, "\"Beta1 * m + (1.0 - Beta1) * g\"", "\"Beta1 * m + (1.0 - Beta3) * g\"", "Beta3",
     "formula.other_outputs.OutputFirstMomentTensor", "undefined name(s) Beta3"),
    ("unspecified_outputs_not_an_output", ADAM, "outputs: [OutputParametersTensor]\n    why: \"The page says", "outputs: [InputParametersTensor]\n    why: \"The page says",
     "outputs: [InputParametersTensor]", "unspecified[0].outputs[0]", "'InputParametersTensor' is not an output tensor field"),
    ("not_a_mapping", BITNOT, None, "- just\n- a list\n", None, "", "must be a mapping"),
    ("type_newer_than_table", SIGN, "dims: [4, 4], types: [FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, UINT8]}\n      OutputTensor",
     "dims: [4, 4], types: [FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, UINT8, INT64]}\n      OutputTensor", "UINT8, INT64]",
     "support[2].tensors.InputTensor.types[8]", "INT64 exists only from FL 3.0"),
    ("example_length_mismatch", BITNOT, "inputs: {InputTensor: [0, 128, 42, 255]}", "inputs: {InputTensor: [0, 128, 42]}",
     "- name: docs_uint8_table", "examples[0]", "same length"),
    ("in_place_pairs_without_allowed", QUANT, "  allowed: false\n  pairs: []", "  allowed: false\n  pairs: [{output: OutputTensor, input: InputTensor}]",
     "pairs: [{output", "in_place.pairs", "exactly when allowed is true"),
    ("attribute_default_on_tensor", SIGN, '{name: InputTensor, role: input, c_type: "const DML_TENSOR_DESC*"}',
     '{name: InputTensor, role: input, c_type: "const DML_TENSOR_DESC*", default: 1}', "default: 1}", "fields[0].default",
     "only attributes take a default"),
    ("data_range_unknown_level", "GATHER.yaml", 'when: "FeatureLevel < FL_3_0"', 'when: "FeatureLevel < FL_3_5"',
     'FL_3_5', "generation.data_ranges[1].when", "FL_3_5"),
    ("level_names_only_in_data_ranges", "REDUCE.yaml", 'when: "Function in [SUM, L1]",\n       bits: "31',
     'when: "FeatureLevel >= FL_3_0",\n       bits: "31', 'FeatureLevel >= FL_3_0', "generation.limits[0].when", "FeatureLevel"),
    ("unspecified_bad_name", QUANT, 'when: "scale == 0"', 'when: "scael == 0"', 'when: "scael == 0"', "unspecified[0].when",
     "undefined name(s) scael"),
]
ERROR_FILES = sorted({case[1] for case in CASES})


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_spec_is_reported_with_file_line_and_key(tmp_path, capsys, case):
    _, filename, old, new, marker, key_path, message = case
    specs = copy_specs(tmp_path / "specs", *ERROR_FILES)
    target = specs / filename
    text = target.read_text()
    if old is None:
        broken = new
    else:
        assert old in text, f"test setup: {old!r} not found in {filename}"
        broken = text.replace(old, new, 1)
    target.write_text(broken)

    assert main(["--specs-dir", str(specs), "spec", "lint"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"{target}:"), line
    assert message in line, line
    if key_path:
        assert f": {key_path}: " in line, line
    if marker is not None:
        expected_line = next(i for i, text_line in enumerate(broken.splitlines(), 1) if marker in text_line)
        assert line.startswith(f"{target}:{expected_line}: "), line


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_spec_stops_the_loader_with_the_same_error(tmp_path, capsys, case):
    """`load_specs` (what `dmlconform run`, `replay` and the suite's --specs-dir use) refuses each
    malformed spec with a SpecError naming the broken file, its key path and the message, the
    same error `spec lint` prints."""
    _, filename, old, new, _, key_path, message = case
    specs = copy_specs(tmp_path / "specs", *ERROR_FILES)
    target = specs / filename
    text = target.read_text()
    target.write_text(new if old is None else text.replace(old, new, 1))
    with pytest.raises(SpecError) as raised:
        load_specs(specs)
    error = raised.value
    assert Path(error.file) == target, error.render()
    assert message in error.message, error.render()
    if key_path:
        assert format_key_path(error.key_path) == key_path, error.render()
    assert main(["--specs-dir", str(specs), "spec", "lint"]) == 1
    assert capsys.readouterr().err.strip() == error.render()


def test_broken_shared_data_file_is_reported(tmp_path, capsys):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    path = specs / "_feature_levels.yaml"
    path.write_text(path.read_text().replace('{name: "2.1", enum: 0x2100', '{name: "2.1", enum: 0x1100'))
    assert main(["--specs-dir", str(specs), "spec", "lint"]) == 1
    err = capsys.readouterr().err
    assert f"{path}:" in err and "feature_levels[2].enum" in err and "oldest first" in err


def test_cli_exit_code_and_no_traceback(tmp_path):
    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS_DIR, specs)
    (specs / SIGN).write_text((specs / SIGN).read_text().replace("operator_type: 79", "operator_type: many"))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "--specs-dir", str(specs), "spec", "show", "ELEMENT_WISE_SIGN"],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "operator_type: 'many' is not of type 'integer'" in proc.stderr
