"""The operator inventory (`dmlconform spec table`) and the README's copy of it."""
from pathlib import Path

from backends.onnxruntime_backend import load_mappings
from harness.spec.inventory import family_of, inventory_markdown
from harness.spec.load import load_specs

SPECS = load_specs()
README = Path(__file__).resolve().parents[2] / "README.md"


def test_families_are_read_from_the_specs():
    assert family_of(SPECS.operator("GEMM")) == "matrix multiplication"
    assert family_of(SPECS.operator("ACTIVATION_ELU")) == "activation"
    assert family_of(SPECS.operator("ELEMENT_WISE_ABS")) == "element-wise, one input"
    assert family_of(SPECS.operator("ELEMENT_WISE_ADD")) == "element-wise, several inputs"
    assert family_of(SPECS.operator("ELEMENT_WISE_QUANTIZE_LINEAR")) == "quantization"


def test_every_operator_is_in_exactly_one_row_and_the_total_adds_up():
    table = inventory_markdown(SPECS, set(load_mappings()))
    rows = [line for line in table.splitlines()[2:] if not line.startswith("| **all**")]
    assert sum(int(line.split("|")[2]) for line in rows) == len(SPECS.operators)
    assert f"| **{len(SPECS.operators)}** |" in table


def test_the_readme_table_is_current():
    want = inventory_markdown(SPECS, set(load_mappings()))
    assert want in README.read_text(), "README's operator table is stale: run scripts/update_operator_table.sh"
