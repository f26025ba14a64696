#!/usr/bin/env bash
# The reference and golden tests a second time with NumPy's dispatched SIMD paths switched off
# (NPY_DISABLE_CPU_FEATURES: AVX-512, AVX2, ... down to NumPy's compiled baseline), so that CI shows
# the reference gives the same bits on a CPU without them (a machine with AVX-512 and one without
# ran different float64 code for exp, arccos, ... before harness.reference.rounding).
#
# Exit status: that of pytest; 0 with a "skipped: ..." line where this CPU has no NumPy dispatch
# target beyond the baseline (there is only one path to run, and `make test` ran it).
set -uo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
TESTS=(tests/harness/test_reference_vectors.py tests/harness/test_cpu_independence.py
       tests/harness/test_precision_model.py tests/harness/test_reduce_bounds.py tests/harness/test_exp_model.py
       tests/harness/test_cast_model.py tests/harness/test_matmul_family.py)

features=$("$PY" -c 'from numpy._core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f
print(" ".join(x for x in d if f.get(x)))')
if [ -z "$features" ]; then
  echo "check_without_simd: skipped: NumPy dispatches to nothing beyond its baseline on this CPU"
  exit 0
fi
echo "check_without_simd: NPY_DISABLE_CPU_FEATURES=\"$features\""
NPY_DISABLE_CPU_FEATURES="$features" "$PY" -m pytest -q -n 2 -p no:cacheprovider "${TESTS[@]}"
