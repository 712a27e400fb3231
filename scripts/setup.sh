#!/usr/bin/env bash
# Installs the Debian packages tessera needs. Idempotent and non-interactive; runs as root
# (no sudo needed) or through sudo when run as another user. Arguments name further packages
# (scripts/sanitize.sh adds clang and its sanitizer runtimes).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev libsqlite3-dev sqlite3 libxgboost-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libtorch-dev python3-venv
  "$@"
)

# The onnxruntime comparison test (tests/graph/compare_onnxruntime.py) and the Python package's
# tests run in a virtualenv of their own, .venv at the repository root, with onnx, onnxruntime,
# numpy and pytest from PyPI; the Python module is built with its nanobind.
setup_venv() {
  local root venv
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import onnx, onnxruntime, numpy, nanobind, pytest" 2>/dev/null; then
    return
  fi
  echo "setup: creating $venv with onnx, onnxruntime, numpy, nanobind, pytest"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q onnx onnxruntime numpy nanobind pytest
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  setup_venv
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
setup_venv
