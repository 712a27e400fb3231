#!/usr/bin/env bash
# Builds tessera with AddressSanitizer and UndefinedBehaviorSanitizer into build-sanitize/ (clang,
# so that the same build holds the libFuzzer targets of fuzz/) and runs the unit tests under them.
#   bash scripts/sanitize.sh            the test suite (but avx2.kernels) under both sanitizers
#   bash scripts/sanitize.sh --build    only build (scripts/fuzz.sh builds its targets itself)
# Any report of either sanitizer fails its test: UBSan does not recover, ASan never does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh clang libclang-rt-14-dev >/dev/null
# OpenMP through libgomp, the runtime of the kernels gcc compiles at run time, so that one process
# never holds two OpenMP runtimes (clang then runs tessera's own parallel loops serially).
cmake -S . -B build-sanitize -G Ninja -DTESSERA_SANITIZE=ON -DTESSERA_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" \
  -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=clang++ \
  -DOpenMP_CXX_FLAGS=-fopenmp=libgomp -DOpenMP_CXX_LIB_NAMES=gomp \
  -DOpenMP_gomp_LIBRARY="$(gcc -print-file-name=libgomp.so)" \
  -DTESSERA_PYTHON="$PWD/.venv/bin/python" >/dev/null
ninja -C build-sanitize
[ "${1:-}" = "--build" ] && exit 0

# LeakSanitizer runs too (detect_leaks): a leak fails the test that made it.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp"
# avx2.kernels repeats the kernel tests for the other vector ISA: the same host code again.
ctest --test-dir build-sanitize --output-on-failure -j 2 -E '^avx2[.]'
