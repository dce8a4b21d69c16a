#!/usr/bin/env bash
# Observability recipe: loomd (embedded emulator running the fault scenario by
# default) + Debian's Prometheus loading Loom's rules and scraping it every 2 s.
# Open the Prometheus UI at the printed address: Status > Rules shows the rules,
# Alerts shows LoomLinkDown / LoomPfcStorm / ... fire as the scenario's faults
# happen (a link down at 15 s, a flap at 45 s, a PFC storm at 100 s), and
# `loomctl jobs why ring-small` explains what the job saw.
#
#   deploy/observability/run.sh [--scenario FILE] [--prometheus-port N]
#        [--loomd-args "..."]      (environment: BUILD_DIR, default build)
# Ctrl-C stops both. Needs `prometheus` (Debian) and a built loomd (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
SCENARIO=deploy/examples/scenario-faults.json
PROM_PORT=9090
LOOMD_ARGS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --scenario) SCENARIO=$2; shift 2 ;;
    --prometheus-port) PROM_PORT=$2; shift 2 ;;
    --loomd-args) LOOMD_ARGS=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v prometheus >/dev/null || { echo "run.sh: install prometheus (apt-get install prometheus)" >&2; exit 2; }
[[ -x "$BUILD_DIR/controller/loomd" ]] || { echo "run.sh: build first (scripts/build.sh)" >&2; exit 2; }
DIR=$(mktemp -d /tmp/loom-observability.XXXXXX)
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; echo "logs kept in $DIR"; }
PIDS=()
trap cleanup EXIT INT TERM

# shellcheck disable=SC2086
"$BUILD_DIR/controller/loomd" --emulate "$SCENARIO" --db "$DIR/loom.db" \
  --grpc-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --ready-file "$DIR/loomd.json" \
  $LOOMD_ARGS >"$DIR/loomd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do [[ -s "$DIR/loomd.json" ]] && break; sleep 0.1; done
[[ -s "$DIR/loomd.json" ]] || { echo "run.sh: loomd did not start; see $DIR/loomd.log" >&2; exit 1; }
GRPC=$(sed -E 's/.*"grpc_port":([0-9]+).*/\1/' "$DIR/loomd.json")
METRICS=$(sed -E 's/.*"metrics_port":([0-9]+).*/\1/' "$DIR/loomd.json")

cp deploy/prometheus/loom.rules.yml "$DIR/"
cat >"$DIR/prometheus.yml" <<YML
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - loom.rules.yml
scrape_configs:
  - job_name: loom
    static_configs:
      - targets: ["127.0.0.1:$METRICS"]
YML
promtool check config "$DIR/prometheus.yml" >/dev/null
prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$DIR/prometheus.log" 2>&1 &
PIDS+=($!)

echo "loomd:      gRPC 127.0.0.1:$GRPC, metrics http://127.0.0.1:$METRICS/metrics"
echo "live view:  http://127.0.0.1:$METRICS/  (topology, link colors, jobs' paths, events)"
echo "Prometheus: http://127.0.0.1:$PROM_PORT  (Alerts, Status > Rules)"
echo "try:        $BUILD_DIR/api/loomctl --server 127.0.0.1:$GRPC watch events"
echo "            $BUILD_DIR/api/loomctl --server 127.0.0.1:$GRPC jobs why ring-small"
echo "            curl -s 'http://127.0.0.1:$PROM_PORT/api/v1/alerts'"
echo "Ctrl-C stops both (logs in $DIR)."
wait -n "${PIDS[@]}"
