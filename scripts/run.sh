#!/usr/bin/env bash
# README command (a): install what is missing, build, and run loomd driving
# the embedded emulator with the reference workload. Ctrl-C stops it. Extra
# arguments go to loomd.
#   LOOM_STATE_DIR  where the database lives (default ./.loom)
#   LOOM_SCENARIO   emulator scenario (default deploy/examples/scenario-reference.json)
#   LOOM_TOPOLOGY   run loomd on this topology WITHOUT the emulator instead
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
STATE=${LOOM_STATE_DIR:-$PWD/.loom}
mkdir -p "$STATE"
if [[ -n "${LOOM_TOPOLOGY:-}" ]]; then
  WHAT=(--topology "$LOOM_TOPOLOGY")
else
  WHAT=(--emulate "${LOOM_SCENARIO:-deploy/examples/scenario-reference.json}")
fi
echo
echo "loomd: gRPC on 127.0.0.1:50061, metrics on http://127.0.0.1:9464/metrics"
echo "live fabric view: open http://127.0.0.1:9464/ in a browser"
echo "in another terminal:"
echo "       build/api/loomctl jobs list                 # jobs and their colors"
echo "       build/api/loomctl jobs get llm-pretrain     # per-destination paths and reasons"
echo "       build/api/loomctl links list --device spine0  # live utilization and quality"
echo "       build/api/loomctl watch events"
echo
exec build/controller/loomd "${WHAT[@]}" --db "$STATE/loom.db" \
  --grpc-listen 127.0.0.1:50061 --metrics-listen 127.0.0.1:9464 "$@"
