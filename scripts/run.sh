#!/usr/bin/env bash
# README command (a): install what is missing, build, and run loomd with an
# example topology. Ctrl-C stops it. Extra arguments go to loomd.
#   LOOM_STATE_DIR  where the database lives (default ./.loom)
#   LOOM_TOPOLOGY   topology file (default deploy/examples/topology-rail-256.json)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
STATE=${LOOM_STATE_DIR:-$PWD/.loom}
TOPOLOGY=${LOOM_TOPOLOGY:-deploy/examples/topology-rail-256.json}
mkdir -p "$STATE"
echo
echo "loomd: gRPC on 127.0.0.1:50061, metrics on http://127.0.0.1:9464/metrics"
echo "try:   build/api/loomctl topology show"
echo "       build/api/loomctl jobs register deploy/examples/job-allreduce.json"
echo "       build/api/loomctl watch events"
echo
exec build/controller/loomd --topology "$TOPOLOGY" --db "$STATE/loom.db" \
  --grpc-listen 127.0.0.1:50061 --metrics-listen 127.0.0.1:9464 "$@"
