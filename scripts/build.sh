#!/usr/bin/env bash
# Configures (once) and builds Loom in ./build with Ninja (and ccache when present).
#   BUILD_DIR, BUILD_TYPE and JOBS override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
JOBS=${JOBS:-$(nproc)}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
fi
start=$(date +%s)
cmake --build "$BUILD_DIR" -j "$JOBS" "$@"
echo "build: done in $(( $(date +%s) - start ))s"
