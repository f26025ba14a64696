#!/usr/bin/env bash
# The main job: check the specs, run the conformance suite on the default backends, write the
# matrix and the HTML report under reports/, and finish with the gate's verdict (its exit code).
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/dmlconform spec lint || exit 1
# by default every operator at every level where its tables change (the level ladder), on every
# backend that validates descriptors; `make run ARGS="--feature-level own"` (or any level) for one level
levels=(--feature-level ladder)
# The default backends, and the older DirectML.dll versions the set-up fetched (DirectML 1.10.1 at
# FL 5.2, 1.8.0 at FL 5.0): each at its own level, where its level-gated rejections are. DirectML
# 1.5.1 (FL 3.1) is known not to run under Wine 8 (backends/directml/versions.yaml); ask for it with
# --backend directml@1.5.1 to see why. Any --backend given replaces this list. Without the set-up's
# DirectML stack, the default backends (directml then reported unavailable with the reason).
backends=()  # without the DirectML stack: the default backends (directml reported unavailable, not failed)
if [ -f .cache/directml/dmlrunner.exe ]; then
  backends=(--backend numpy --backend onnxruntime --backend directml)
  for old in "1.14.1 1.10.1" "1.11.1 1.8.0"; do
    wheel=${old% *} version=${old#* }
    [ -f ".cache/directml/dll/$wheel/DirectML.dll" ] && backends+=(--backend "directml@$version")
  done
fi
for arg in "$@"; do
  case "$arg" in
    --feature-level|--feature-level=*) levels=() ;;
    --backend|--backend=*) backends=() ;;
  esac
done
.venv/bin/dmlconform run "${levels[@]}" "${backends[@]}" "$@"
# the HTML report (one file: the failures and divergences, or every test after --report-detail full), the
# matrix, results.csv.gz and failures.csv; then the Allure results packed into one archive (docs/reports.md)
.venv/bin/dmlconform report || echo "run: the HTML report could not be built (see above); the matrix and JUnit XML are there"
.venv/bin/dmlconform gate
