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
