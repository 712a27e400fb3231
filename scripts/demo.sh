#!/usr/bin/env bash
# Sets up, builds, tunes a 1024^3 matmul with the learned tuner (records in tessera.db), then
# measures the best kernel found against OpenBLAS and oneDNN in the same process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/tessera tune matmul:M=1024,N=1024,K=1024 --trials 64 --batch 32 --db tessera.db
./build/tessera bench matmul:M=1024,N=1024,K=1024 --db tessera.db
