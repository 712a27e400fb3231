#!/usr/bin/env bash
# Runs each libFuzzer target of fuzz/ (built with ASan and UBSan by scripts/sanitize.sh) for a
# bounded time, from seeds written by fuzz/make_seeds.py. The corpus grows in a folder of the
# build, never in the repository; a finding is saved there as crash-* and fails the script.
#   bash scripts/fuzz.sh [SECONDS_EACH] [FUZZER ...]     (default 60 s, every fuzzer)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
fuzzers=("$@")
[ ${#fuzzers[@]} -eq 0 ] && fuzzers=(strategy workload program npy onnx record)
bash scripts/sanitize.sh --build >/dev/null
work=build-sanitize/fuzz-work
mkdir -p "$work"
.venv/bin/python fuzz/make_seeds.py "$work/seeds" --tessera build-sanitize/tessera >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for f in "${fuzzers[@]}"; do
  rm -rf "$work/findings/$f"
  mkdir -p "$work/corpus/$f" "$work/findings/$f"
  echo "fuzz: $f for ${seconds}s"
  max_len=4096
  [ "$f" = onnx ] && max_len=262144  # the seed models carry their weights
  # -timeout: an input that takes a second is a hang; -rss_limit_mb: one that takes 2 GiB a leak
  # or a runaway allocation. Both are findings.
  if ! build-sanitize/fuzz/${f}_fuzzer "$work/corpus/$f" "$work/seeds/$f" \
      -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 -max_len=$max_len \
      -artifact_prefix="$work/findings/$f/" -print_final_stats=1 \
      >"$work/$f.log" 2>&1; then
    echo "fuzz: $f FOUND something: $(ls "$work/findings/$f")"
    grep -m3 -E "FINDING|ERROR|SUMMARY" "$work/$f.log" || tail -20 "$work/$f.log"
    status=1
  fi
  grep -E "DONE|stat::number_of_executed_units" "$work/$f.log" | head -2
done
exit $status
