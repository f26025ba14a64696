#!/usr/bin/env bash
# Idempotent set-up for dmlconform: a project-local virtualenv with the pinned packages.
# Re-running it does nothing when requirements.txt and pyproject.toml have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: $PYTHON not found; install Python 3.11 or newer (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "setup: Python 3.11 or newer is needed, found $("$PYTHON" --version 2>&1)" >&2
  exit 1
fi

# Report tools: the Allure 3 command line (npm, pinned in package.json / package-lock.json) and
# Debian's Chromium for the report's browser test. Each is skipped with a message where it cannot be had.
npm_stamp=node_modules/.dmlconform-setup
npm_want=$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)
if [ ! -f "$npm_stamp" ] || [ "$(cat "$npm_stamp")" != "$npm_want" ] || [ ! -x node_modules/.bin/allure ]; then
  if command -v npm >/dev/null 2>&1; then
    npm ci --no-audit --no-fund --silent >/dev/null 2>&1 && echo "$npm_want" > "$npm_stamp" \
      || echo "setup: npm ci failed; 'dmlconform report' (the HTML report) will not work" >&2
  else
    echo "setup: npm not found (Debian: apt-get install nodejs npm); 'dmlconform report' needs it" >&2
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1) \
      || echo "setup: could not install chromium; the report's browser test will be skipped" >&2
  else
    echo "setup: chromium not installed (needs root and apt); the report's browser test will be skipped" >&2
  fi
fi

stamp=.venv/.dmlconform-setup
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ]; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PYTHON" -m venv .venv 2>/dev/null; then
    echo "setup: python venv module missing; installing python3-venv" >&2
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$PYTHON" -m venv .venv
    else
      echo "setup: run as root on Debian, or install python3-venv yourself" >&2; exit 1
    fi
  fi
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
echo "$want" > "$stamp"
echo "setup: .venv ready"
