#!/usr/bin/env bash
# Run a command against the real DirectML.dll on a GPU machine that has Python and a GPU driver but
# no package access, from a copy of this repository that carries
#   .gpu/stack.tar.xz   the portable DirectML stack (`dmlconform directml pack .gpu/stack.tar.xz`)
#   .gpu/*.whl          wheels the machine lacks (allure-pytest, allure-python-commons, and e.g.
#                       xxhash, jsonschema and its dependencies; `pip download` them for its Python)
# It unpacks the wheels into $SITE (/tmp/site) and the stack into $STACK (/tmp/stack) once, then runs
# the command with PYTHONPATH, DMLCONFORM_DIRECTML_STACK and the pytest plugin set up (a bare
# checkout has no pytest11 entry point, so PYTEST_ADDOPTS gets `-p harness.run.plugin`).
#
#   scripts/gpu_run.sh python -m backends.directml.check --directml-vulkan auto
#   scripts/gpu_run.sh python -m pytest tests/conformance -q --backend directml --backend numpy --max-examples 20 --reports-dir /tmp/r
#   scripts/gpu_run.sh python -m harness.cli run --backend directml --backend numpy --reports-dir /tmp/r
#
# Nothing outside $SITE and $STACK is written. The Vulkan driver is chosen by --directml-vulkan
# (auto: the GPU's ICD, e.g. /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json, with its
# library directory on LD_LIBRARY_PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SITE=${SITE:-/tmp/site}
STACK=${STACK:-/tmp/stack}
PY=${PYTHON:-python3}
log() { echo "gpu-run: $*" >&2; }

[ $# -gt 0 ] || { log "usage: scripts/gpu_run.sh COMMAND [ARGS...]"; exit 2; }
[ -f .gpu/stack.tar.xz ] || { log "no .gpu/stack.tar.xz: run 'dmlconform directml pack .gpu/stack.tar.xz' where the stack is set up"; exit 2; }

# 1. wheels: a wheel is a zip archive; unpacked into SITE it is importable and its entry points
#    (allure-pytest's pytest11) are found. No pip, no index, no build needed.
if compgen -G ".gpu/*.whl" >/dev/null; then
  stamp="$SITE/.dmlconform-wheels"
  if [ ! -f "$stamp" ] || [ -n "$(find .gpu -name '*.whl' -newer "$stamp" -print -quit)" ]; then
    log "unpacking $(ls .gpu/*.whl | wc -l) wheel(s) into $SITE"
    mkdir -p "$SITE"
    "$PY" - "$SITE" .gpu/*.whl <<'PY'
import sys, zipfile
site, wheels = sys.argv[1], sys.argv[2:]
for wheel in wheels:
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
PY
    touch "$stamp"
  fi
fi

# 2. the stack, unpacked again when the archive is newer than the unpacked copy
if [ ! -f "$STACK/manifest.json" ] || [ .gpu/stack.tar.xz -nt "$STACK/manifest.json" ]; then
  log "unpacking .gpu/stack.tar.xz into $STACK"
  rm -rf "$STACK"
  PYTHONPATH="$ROOT:$SITE" "$PY" -m backends.directml.pack unpack .gpu/stack.tar.xz "$STACK" >&2
  touch "$STACK/manifest.json"
fi

export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export DMLCONFORM_DIRECTML_STACK="$STACK"
case " ${PYTEST_ADDOPTS:-} " in
  *" harness.run.plugin "*) ;;
  *) if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(0 if any(e.value == "harness.run.plugin" for e in m.entry_points(group="pytest11")) else 1)' 2>/dev/null; then
       export PYTEST_ADDOPTS="-p harness.run.plugin ${PYTEST_ADDOPTS:-}"
     fi ;;
esac
# a bare checkout has no dmlconform.backends (nor dmlconform.commands) entry points either: name the
# built-in backends and backend commands (`directml pack|unpack`, harness.directml_dlls) from pyproject.toml
if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(0 if any(e.name == "numpy" for e in m.entry_points(group="dmlconform.backends")) else 1)' 2>/dev/null; then
  builtin=$("$PY" -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb")); print(",".join(f"{k}={v}" for k, v in d["project"]["entry-points"]["dmlconform.backends"].items()))')
  export DMLCONFORM_EXTRA_BACKENDS="$builtin${DMLCONFORM_EXTRA_BACKENDS:+,$DMLCONFORM_EXTRA_BACKENDS}"
  commands=$("$PY" -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb")); print(",".join(f"{k}={v}" for k, v in d["project"]["entry-points"]["dmlconform.commands"].items()))')
  export DMLCONFORM_EXTRA_COMMANDS="$commands${DMLCONFORM_EXTRA_COMMANDS:+,$DMLCONFORM_EXTRA_COMMANDS}"
fi
if [ "${1:-}" = python ]; then shift; set -- "$PY" "$@"; fi
exec "$@"
