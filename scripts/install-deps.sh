#!/usr/bin/env bash
# Installs, with apt-get, whatever Loom needs that is missing; nothing else.
# Idempotent: when everything is present it changes nothing and needs no network.
#   scripts/install-deps.sh          build and run dependencies
#   scripts/install-deps.sh --test   plus what the test suite needs
set -euo pipefail

BUILD_PKGS=(
  cmake ninja-build ccache g++ pkg-config git
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  prometheus-cpp-dev libboost-dev libsqlite3-dev libyang2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)
TEST_PKGS=(
  clang-format python3 python3-grpcio python3-protobuf prometheus libyang2-tools
  gobgpd exabgp clang libclang-rt-14-dev clang-16 libclang-rt-16-dev libglpk-dev
  frr iperf3 iputils-ping prometheus-alertmanager python3-yaml
)

want=("${BUILD_PKGS[@]}")
if [[ "${1:-}" == "--test" ]]; then
  want+=("${TEST_PKGS[@]}")
fi

missing=()
for p in "${want[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
