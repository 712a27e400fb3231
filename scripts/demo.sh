#!/usr/bin/env bash
# Sets up, builds, runs a scheduled matmul with tessera, then compares it with OpenBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/tessera run matmul:M=1024,N=1024,K=1024 --strategy-file bench/strategies/matmul_blocked.txt
./build/bench/bench_matmul --size 1024
