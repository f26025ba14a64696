#!/usr/bin/env bash
# Idempotent set-up of the DirectML stack on Debian 12 (no GPU needed):
#   Wine 8 (Debian) -> Direct3D 12 via vkd3d -> Vulkan -> Mesa lavapipe 25 (bookworm-backports, CPU),
#   DirectML.dll from the onnxruntime-directml win_amd64 wheel on PyPI, and the runner built with mingw-w64.
# Everything goes under .cache/directml/ (the system's Mesa is never touched). Steps already done are skipped.
# Exit code 0: the stack ran a tiny case. Non-zero: a clear message says which step cannot work here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
D="$ROOT/.cache/directml"
mkdir -p "$D"
DML_WHEEL_VERSION=${DML_WHEEL_VERSION:-1.24.4}   # onnxruntime-directml wheel carrying DirectML 1.15.4 (FL 6.4)
DML_OLD_WHEELS=${DML_OLD_WHEELS:-"1.14.1 1.11.1"}  # older DLLs for level-gated tests (1.14.1: DirectML 1.10.1, FL 5.2; 1.11.1: DirectML 1.8.0, FL 5.0)
log() { echo "setup-directml: $*" >&2; }
fail() { log "$*"; exit 1; }

if [ "$(uname -s)" != "Linux" ]; then
  fail "this script sets up the Wine route on Linux; on Windows the runner runs natively (see README)"
fi
if ! grep -q 'ID=debian' /etc/os-release 2>/dev/null || ! grep -q 'VERSION_ID="12"' /etc/os-release 2>/dev/null; then
  log "warning: not Debian 12; the package names below are Debian 12's"
fi

# 1. Debian packages: Wine, Xvfb, the mingw-w64 cross compiler, the Vulkan loader, and glvnd (carried by the
#    portable stack for GPU drivers whose Vulkan ICD is a glvnd vendor library, as NVIDIA's is); gcc and the
#    Vulkan headers for the device-pick layer (--directml-gpus).
PKGS="wine wine64 libwine xvfb xauth libvulkan1 gcc-mingw-w64-x86-64 mingw-w64-x86-64-dev libegl1 libgles2 libopengl0 libglx0 gcc libc6-dev libvulkan-dev"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then fail "needs root to apt-get install:$missing (or install them yourself)"; fi
  command -v apt-get >/dev/null || fail "apt-get not found: install$missing with your package manager"
  log "installing$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >"$D/apt.log" 2>&1 \
    || fail "apt-get install failed (see $D/apt.log)"
fi

# 2. lavapipe from bookworm-backports, unpacked privately (bookworm's Mesa 22.3 lacks what vkd3d needs).
MESA="$D/mesa/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
if [ ! -f "$MESA" ]; then
  log "fetching Mesa lavapipe from bookworm-backports"
  mkdir -p "$D/apt/lists/partial" "$D/apt/cache/archives/partial" "$D/debs" "$D/mesa"
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$uri" ] || fail "cannot find this machine's Debian mirror in /etc/apt"
  echo "deb $uri bookworm-backports main" > "$D/apt/bp.list"
  APTB=(-o "Dir::Etc::SourceList=$D/apt/bp.list" -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$D/apt/lists" -o "Dir::Cache=$D/apt/cache")
  apt-get "${APTB[@]}" update -qq || fail "cannot read bookworm-backports from $uri"
  (cd "$D/debs" && apt-get "${APTB[@]}" download mesa-vulkan-drivers libdrm2 libdrm-amdgpu1 >/dev/null 2>&1) \
    || fail "cannot download mesa-vulkan-drivers from bookworm-backports"
  for f in "$D"/debs/*.deb; do dpkg -x "$f" "$D/mesa"; done
  [ -f "$MESA" ] || fail "lavapipe not found after unpacking the backports packages"
fi
cat > "$D/lvp_icd.json" <<JSON
{"file_format_version": "1.0.0", "ICD": {"library_path": "$MESA", "api_version": "1.4.305"}}
JSON

# 3. DirectML.dll from the onnxruntime-directml win_amd64 wheel (pinned).
DLL="$D/dll/$DML_WHEEL_VERSION/DirectML.dll"
if [ ! -f "$DLL" ]; then
  log "fetching DirectML.dll from onnxruntime-directml==$DML_WHEEL_VERSION"
  "$ROOT/.venv/bin/python" -m backends.directml.dlls fetch "$DML_WHEEL_VERSION" --dest "$D/dll" \
    || fail "cannot fetch onnxruntime-directml==$DML_WHEEL_VERSION from PyPI"
fi
for w in $DML_OLD_WHEELS; do
  if [ ! -f "$D/dll/$w/DirectML.dll" ]; then
    log "fetching the older DirectML.dll of onnxruntime-directml==$w"
    "$ROOT/.venv/bin/python" -m backends.directml.dlls fetch "$w" --dest "$D/dll" >/dev/null || log "warning: could not fetch wheel $w"
  fi
done

# 4. The runner, rebuilt when its source changes.
SRC="$ROOT/backends/directml/runner.c"
EXE="$D/dmlrunner.exe"
if [ ! -f "$EXE" ] || [ "$SRC" -nt "$EXE" ]; then
  log "building the runner"
  x86_64-w64-mingw32-gcc -O2 -Wall -Wno-unused-function -o "$EXE" "$SRC" -ld3d12 -ldxgi -ldxguid -luuid \
    || fail "the runner did not compile"
fi

# 4b. The device-pick Vulkan layer (backends/directml/gpus.py: one GPU per runner on a host with several).
LAYER="$D/vk_device_pick"
if [ ! -f "$LAYER/libdmlconform_vk_device_pick.so" ] || [ "$ROOT/backends/directml/vk_device_pick.c" -nt "$LAYER/libdmlconform_vk_device_pick.so" ]; then
  log "building the device-pick Vulkan layer"
  mkdir -p "$LAYER"
  gcc -shared -fPIC -O2 -Wall -fvisibility=hidden -o "$LAYER/libdmlconform_vk_device_pick.so" "$ROOT/backends/directml/vk_device_pick.c" \
    || fail "the device-pick layer did not compile"
fi
cp "$ROOT/backends/directml/VkLayer_DMLCONFORM_device_pick.json" "$LAYER/"

# 5. The Wine prefix (first start takes ~20 s), then one tiny case through the whole stack.
export WINEPREFIX="$D/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="winedbg.exe=d" HOME="$D/home"
mkdir -p "$HOME"
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  log "creating the Wine prefix"
  xvfb-run -a wine wineboot --init >"$D/wineboot.log" 2>&1 || true
fi
"$ROOT/.venv/bin/python" -m backends.directml.check || fail "the DirectML stack did not run the check case (see above)"
log "ready"
