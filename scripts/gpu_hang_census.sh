#!/usr/bin/env bash
# The hang census of issue 31, on a GPU machine set up as scripts/gpu_run.sh describes: where each
# hung case stops (each alone on its own runner, many at a time), whether the DirectML execution
# flags or NVIDIA's shader disk cache change it, whether a long wait ends it, and which descriptors
# of whole operators' cells hang (every case file kept, for the census in docs/gpu-results.md).
#   CASES=DIR (case files; default docs/gpu-cases/nvidia-hangs)  OPS="CONVOLUTION BATCH_NORMALIZATION"  JOBS=16  OUT=DIR
#   RUN="env" runs without scripts/gpu_run.sh (a machine set up by make, with .venv/bin first on PATH)
# Writes OUT/census.log, OUT/hangs.json and OUT/cells.tgz (the cells' results and case files).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/census}; CASES=${CASES:-docs/gpu-cases/nvidia-hangs}; JOBS=${JOBS:-16}; OPS=${OPS:-CONVOLUTION BATCH_NORMALIZATION}
mkdir -p "$OUT"; LOG="$OUT/census.log"; S=${RUN:-scripts/gpu_run.sh}; export PYTHONUNBUFFERED=1
say() { echo "== $*" | tee -a "$LOG"; }
hangs() { $S python -m backends.directml.hangs --jobs "$JOBS" "$@" >> "$LOG" 2>&1; tail -1 "$LOG"; }
say "check"; $S python -m backends.directml.check --directml-vulkan auto >> "$LOG" 2>&1; tail -1 "$LOG"
mapfile -t valid < <(grep -l "^expect: valid" "$CASES"/*.yaml | head -6)
say "one valid case with a 280 s limit (does the hang ever end?), in the background"
$S python -m backends.directml.hangs --jobs 1 --timeout 280 "${valid[0]}" > "$OUT/long.txt" 2>&1 &
long=$!
say "every case alone, 25 s limit"; hangs --timeout 25 --json "$OUT/hangs.json" "$CASES"/*.yaml
for flags in DISABLE_META_COMMANDS ALLOW_HALF_PRECISION_COMPUTATION; do
  say "six valid cases, exec flags $flags"; hangs --timeout 25 --exec-flags "$flags" "${valid[@]}"
done
say "six valid cases, NVIDIA shader disk cache off"; __GL_SHADER_DISK_CACHE=0 hangs --timeout 25 "${valid[@]}"
say "the cells of $OPS, every case file kept, 10 s limit"
ops=(); for op in $OPS; do ops+=(--operator "$op"); done
DMLCONFORM_KEEP_CASES=all timeout 330 $S python -m harness.cli run --backend directml "${ops[@]}" --workers "$JOBS" \
  --directml-timeout 10 --reports-dir /tmp/census-cells > "$OUT/cells.txt" 2>&1
tail -3 "$OUT/cells.txt" | tee -a "$LOG"
tar czf "$OUT/cells.tgz" -C /tmp/census-cells results cases
wait "$long"; say "the long wait"; cat "$OUT/long.txt" >> "$LOG"; tail -2 "$OUT/long.txt"
