"""Stage 1, the specs: YAML source (bounded, with lines), schema, catalog, the operator model and
its loader and linter, the formula language, `spec show` and `spec diff`."""
