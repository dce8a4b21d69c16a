#!/usr/bin/env bash
# README command (b): install what is missing, build everything, run the
# format and dependency checks and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
scripts/install-deps.sh --test
t1=$(date +%s)
scripts/build.sh
t2=$(date +%s)
scripts/check-format.sh
python3 scripts/check-deps.py --build-dir "${BUILD_DIR:-build}"
python3 scripts/dev/profile_table.py --check docs/real-fabric.md
echo "test: install $((t1 - t0))s, build $((t2 - t1))s, checks $(( $(date +%s) - t2 ))s; running ctest"
cd "${BUILD_DIR:-build}"
# ctest's summary ("N% tests passed, M tests failed out of K") is the last line.
exec ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
