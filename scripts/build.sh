#!/usr/bin/env bash
# Configures and builds tessera (release flags, Ninja) into build/, with the Python module
# (build/python/tessera) from the nanobind in .venv that scripts/setup.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
ninja -C build
