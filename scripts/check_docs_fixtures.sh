#!/usr/bin/env bash
# CI: `dmlconform spec check-docs` on the invented fixture pages (every layout and language, the
# page-defect fixtures too) against the fixture spec, with the shipped catalog: no drift (exit 0).
# The real DirectML pages are not in this repository; checking specs/ against them is a step a
# person runs (README, "Specs from the API pages").
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp specs/_*.yaml tests/fixtures/pages/specs/*.yaml "$work"/
.venv/bin/dmlconform --specs-dir "$work" spec check-docs tests/fixtures/pages tests/fixtures/pages/defects --json "$work/drift.json" > "$work/drift.md"
head -3 "$work/drift.md"
