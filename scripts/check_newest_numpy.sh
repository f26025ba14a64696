#!/usr/bin/env bash
# Forward-compatibility check: the NumPy-sensitive harness tests on the NEWEST NumPy pip can get.
#
# requirements.txt pins the NumPy that `make` installs; pyproject.toml allows any numpy>=2.0, and
# NumPy tightens its promotion rules from release to release (2.5 raises OverflowError where 2.4
# silently wrapped a Python integer into a narrower type). This keeps a second virtualenv,
# .venv-newest-numpy/, with the pinned requirements except NumPy, upgraded to the newest release,
# and runs the tests that exercise the formula evaluator and the reference there.
#
# Idempotent: the pinned requirements are installed again only when requirements.txt or
# pyproject.toml change; NumPy is upgraded on every run (a no-op when it is already the newest).
# Exit status: that of pytest; 0 with a "skipped: ..." line when pip cannot reach the registry.
set -uo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-newest-numpy
PYTHON=${PYTHON:-python3}
TESTS=(tests/harness/test_numpy_compat.py tests/harness/test_reference_vectors.py
       tests/harness/test_fast_paths.py tests/harness/test_diff.py)
# fail fast instead of retrying for minutes where there is no network
PIP_NET=(--retries 1 --timeout 30)
# what pip prints when it cannot reach an index (it retries, warns, and may still exit 0 on an
# --upgrade, keeping the NumPy it has: so these are looked for whatever pip's exit status)
NETWORK_ERRORS='NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|No route to host|Network is unreachable|Connection refused|Connection reset|ConnectTimeout|ReadTimeout|Read timed out|connection broken by|Max retries exceeded|ProxyError|SSLError|Could not fetch URL|not a trusted or secure host'

log=$(mktemp)
trap 'rm -f "$log"' EXIT

skip() { echo "check_newest_numpy: skipped: $*"; exit 0; }
fail() { echo "check_newest_numpy: $*" >&2; exit 1; }

# pip_or_skip DESCRIPTION ARGS...: `pip install ARGS` in the venv. A registry that cannot be reached
# is a skip (the newest NumPy is then unknown); any other failure is an error.
pip_or_skip() {
  local what=$1; shift
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PIP_NET[@]}" "$@" >"$log" 2>&1
  local status=$?
  if grep -Eq "$NETWORK_ERRORS" "$log"; then
    local why
    why=$(grep -Eom1 "\[Errno [^]]*\][^'\")]*" "$log" || grep -Eom1 "$NETWORK_ERRORS" "$log")
    skip "pip cannot reach the package registry while installing the $what (${why:-network error}); the newest NumPy is unknown here"
  fi
  if [ "$status" -ne 0 ]; then
    cat "$log" >&2
    fail "pip failed ($what, exit $status)"
  fi
}

command -v "$PYTHON" >/dev/null 2>&1 || fail "$PYTHON not found (set PYTHON=...)"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV" || fail "could not create $VENV (Debian: apt-get install python3-venv)"
fi

stamp=$VENV/.dmlconform-requirements
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  rm -f "$stamp"
  pip_or_skip "pinned requirements" -r requirements.txt
fi
pip_or_skip "newest numpy" --upgrade numpy
if [ ! -f "$stamp" ]; then
  pip_or_skip "dmlconform itself" --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
fi

version=$("$VENV/bin/python" -c 'import numpy; print(numpy.__version__)') || fail "numpy does not import in $VENV"
pinned=$(sed -n 's/^numpy==//p' requirements.txt)
echo "check_newest_numpy: numpy $version (requirements.txt pins ${pinned:-nothing})"

"$VENV/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}"
status=$?
if [ "$status" -ne 0 ]; then
  echo "check_newest_numpy: FAILED on numpy $version (pytest exit $status)" >&2
  exit "$status"
fi
echo "check_newest_numpy: passed on numpy $version"
