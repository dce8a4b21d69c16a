#!/usr/bin/env bash
# Installs, with apt-get, whatever Loom needs that is missing; nothing else (with
# --test, also the test suite's pinned npm packages, see below).
# Idempotent: when everything is present it changes nothing and needs no network.
#   scripts/install-deps.sh          build and run dependencies
#   scripts/install-deps.sh --test   plus what the test suite needs (chromium for the
#                                    live view test), and the npm packages of
#                                    deploy/grafana and tests/e2e/browser (npm ci,
#                                    pinned by their package-lock.json) when their
#                                    node_modules is missing
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PKGS=(
  cmake ninja-build ccache g++ pkg-config git
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  prometheus-cpp-dev libboost-dev libsqlite3-dev libyang2-dev
  libgtest-dev libgmock-dev libbenchmark-dev grpc-proto libssl-dev libcpp-jwt-dev
  nlohmann-json3-dev
)
TEST_PKGS=(
  clang-format python3 python3-grpcio python3-protobuf prometheus libyang2-tools
  gobgpd exabgp clang libclang-rt-14-dev clang-16 libclang-rt-16-dev libglpk-dev
  frr iperf3 iputils-ping prometheus-alertmanager python3-yaml nodejs
  chromium fonts-dejavu-core slurmctld slurmd slurm-client munge
  python3-venv python3-pip python3-setuptools
)

want=("${BUILD_PKGS[@]}")
if [[ "${1:-}" == "--test" ]]; then
  want+=("${TEST_PKGS[@]}")
  # Debian packages npm on its own; NodeSource's nodejs carries it.
  command -v npm >/dev/null || want+=(npm)
fi

# From the npm registry at the versions each package-lock.json pins: the Grafana
# dashboards' TypeScript toolchain (@grafana/schema, typescript) and the live
# view test's puppeteer-core (drives Debian's chromium; downloads no browser).
npm_deps() {
  [[ "${1:-}" == "--test" ]] || return 0
  local d
  for d in deploy/grafana tests/e2e/browser; do
    if [[ ! -d $d/node_modules ]]; then
      echo "install-deps: npm ci --prefix $d"
      npm ci --prefix "$d" --no-audit --no-fund
    fi
  done
}

missing=()
for p in "${want[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#want[@]} packages present"
  npm_deps "${1:-}"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
npm_deps "${1:-}"
