"""`dmlconform spec show` prints the effective table, the formula and the constraints."""
from harness.cli import main
from harness.spec.load import operator_files
from tests.helpers import SPECS


def test_spec_show_quantize_at_6_1(capsys):
    assert main(["spec", "show", "ELEMENT_WISE_QUANTIZE_LINEAR", "--feature-level", "6.1"]) == 0
    out = capsys.readouterr().out
    assert "support at FL 6.1 (table 'FL 6.0 and above')" in out
    # ZeroPointTensor is still required at 6.1; it becomes optional at 6.2.
    zero_point = next(line for line in out.splitlines() if line.strip().startswith("ZeroPointTensor"))
    assert zero_point.split()[1] == "input" and "INT8, UINT8" in zero_point
    assert "InputTensor      input           dims 1 to 8  FLOAT32, FLOAT16, INT32" in out
    assert "clamp(round_half_even(x / scale) + zero_point, Min, Max)" in out
    assert "[constraint.scale_float32_for_int32_input]" in out
    assert "Min = type_min(OutputTensor)" in out


def test_spec_show_before_introduction(capsys):
    assert main(["spec", "show", "ELEMENT_WISE_BIT_NOT", "--feature-level", "2.1"]) == 0
    assert "not available at FL 2.1 (introduced at FL 3.0)" in capsys.readouterr().out


def test_spec_show_optional_zero_point_at_6_2(capsys):
    assert main(["spec", "show", "ELEMENT_WISE_QUANTIZE_LINEAR", "--feature-level", "6.4"]) == 0
    out = capsys.readouterr().out
    assert "table 'FL 6.2 and above'" in out
    assert "optional_input" in out


def test_spec_show_bad_arguments_say_what_is_allowed(capsys):
    assert main(["spec", "show", "NOPE"]) == 2
    err = capsys.readouterr().err
    assert "known: " in err and "ACTIVATION_HARD_SIGMOID, " in err  # the list, whichever operator sorts first
    assert main(["spec", "show", "ELEMENT_WISE_SIGN", "--feature-level", "7.0"]) == 2
    assert "allowed: 1.0, 2.0" in capsys.readouterr().err


def test_spec_lint_passes_on_specs(capsys):
    """Every operator file of the test specs lints clean; the count is the specs' own."""
    count = len(operator_files(SPECS.directory))
    assert count == len(SPECS.operators) > 0
    assert main(["--specs-dir", str(SPECS.directory), "spec", "lint"]) == 0
    assert f"{count} of {count} spec file(s) OK" in capsys.readouterr().out
