#!/usr/bin/env bash
# The main job: check the specs, run the conformance suite on the default backends, write the
# matrix and the HTML report under reports/, and finish with the gate's verdict (its exit code).
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/dmlconform spec lint || exit 1
# by default every operator at every level where its tables change (the level ladder), on every
# backend that validates descriptors; `make run ARGS="--feature-level own"` (or any level) for one level
levels=(--feature-level ladder)
for arg in "$@"; do
  case "$arg" in --feature-level|--feature-level=*) levels=() ;; esac
done
.venv/bin/dmlconform run "${levels[@]}" "$@"
.venv/bin/dmlconform report || echo "run: the HTML report could not be built (see above); the matrix and JUnit XML are there"
.venv/bin/dmlconform gate
