#!/usr/bin/env bash
# Longer fuzzing runs for developers (tests/fuzz/README.md): builds the fuzz
# build (clang >= 16, libFuzzer, ASan + UBSan) in build-fuzz/ if needed and runs
# each fuzzer for 10 minutes (default) over its committed corpus; new inputs
# collect in build-fuzz/fuzz-work/corpus/<name> across runs.
#
# usage: scripts/fuzz.sh [-t SECONDS] [--merge] [handlers|json|gnmi|store ...]
#   -t SECONDS  time per fuzzer (default 600)
#   --merge     afterwards, add the inputs that found new coverage to the
#               committed corpus tests/fuzz/corpus/<name> (review and commit them)
# Environment: BUILD_FUZZ_DIR (default build-fuzz), FUZZ_WORK_DIR (default
# $BUILD_FUZZ_DIR/fuzz-work); run_fuzzers.sh's CLANGXX, LOOM_FUZZ_TIMEOUT,
# LOOM_FUZZ_RSS_MB, LOOM_FUZZ_ARGS (e.g. "-jobs=2 -workers=2").
# A crash prints the input (ARTIFACT: ...) and how to reproduce it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=600
names=()
while [ $# -gt 0 ]; do
  case $1 in
    -t) seconds=$2; shift 2 ;;
    --merge) export LOOM_FUZZ_MERGE=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) names+=("$1"); shift ;;
  esac
done
build=${BUILD_FUZZ_DIR:-build-fuzz}
exec bash tests/fuzz/run_fuzzers.sh "$PWD" "$build" "${FUZZ_WORK_DIR:-$build/fuzz-work}" \
  "$seconds" "${names[@]+"${names[@]}"}"
