#!/usr/bin/env bash
# Sets up, builds and runs the test suite, then the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer (scripts/sanitize.sh), then each libFuzzer target for 30 seconds
# (scripts/fuzz.sh); see docs/reliability.md. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j 2
bash scripts/sanitize.sh
bash scripts/fuzz.sh 30
