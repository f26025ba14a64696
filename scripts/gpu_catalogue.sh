#!/usr/bin/env bash
# The whole catalogue on a GPU machine (issue 31's budget: under 5 minutes on one H100/H200 with
# 16 cores), set up as scripts/gpu_run.sh describes: directml + numpy at the device's own level,
# timed, then the gate; the results, matrix and CSV files packed into OUT/catalogue.tgz.
#   OUT=DIR  JOBS=16  TIMEOUT=10 (seconds a DirectML case may take)  ARGS="..." (more run options)
#   REPORTS=DIR (default /tmp/catalogue)  GUARD=SECONDS (optional): interrupt the run then (SIGINT, as Ctrl-C: the reports are still written,
#   and an interrupted run fails the gate), so that a slow run still leaves its figures
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/catalogue-out}; JOBS=${JOBS:-16}; TIMEOUT=${TIMEOUT:-10}; S=${RUN:-scripts/gpu_run.sh}
R=${REPORTS:-/tmp/catalogue}; mkdir -p "$OUT"; rm -rf "$R"; export PYTHONUNBUFFERED=1
$S python -m backends.directml.check --directml-vulkan auto 2>&1 | tail -1
start=$(date +%s.%N)
# shellcheck disable=SC2086
${GUARD:+timeout -s INT -k 60 $GUARD} $S python -m harness.cli run --backend directml --backend numpy --workers "$JOBS" --directml-timeout "$TIMEOUT" \
  --reports-dir "$R" ${ARGS:-} > "$OUT/run.log" 2>&1
code=$?
echo "run: exit $code in $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)") s"
tail -4 "$OUT/run.log"
$S python -m harness.cli gate --reports-dir "$R" > "$OUT/gate.txt" 2>&1; echo "gate: exit $?"; tail -12 "$OUT/gate.txt"
$S python -m harness.cli matrix --reports-dir "$R" > /dev/null 2>&1
tar czf "$OUT/catalogue.tgz" -C "$R" --exclude allure-results . 2>/dev/null
ls -la "$OUT"
