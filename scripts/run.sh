#!/usr/bin/env bash
# The main job: check the specs, then run the conformance suite on the default backends,
# writing reports under reports/.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/dmlconform spec lint
.venv/bin/dmlconform run "$@"
