"""docs/spec.schema.json, the standalone JSON Schema of a spec file, is the schema the loader
checks (regenerate it with `python -m harness.cli spec schema > docs/spec.schema.json`)."""
import json
from pathlib import Path

import jsonschema
import yaml

from harness.spec.load import DEFAULT_SPECS_DIR, operator_files
from harness.spec.schema import schema_document

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "spec.schema.json"


def test_the_shipped_schema_file_is_the_loaders_schema():
    assert json.loads(SCHEMA_FILE.read_text()) == json.loads(json.dumps(schema_document()))


def test_every_spec_is_valid_and_a_misspelt_key_is_not():
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    jsonschema.Draft202012Validator.check_schema(validator.schema)
    for path in operator_files(DEFAULT_SPECS_DIR):
        data = yaml.safe_load(path.read_text())
        assert not list(validator.iter_errors(data)), path.name
        data["fields"][0]["c_typ"] = data["fields"][0].pop("c_type")
        assert [tuple(e.absolute_path) for e in validator.iter_errors(data)][:1] == [("fields", 0)], path.name
