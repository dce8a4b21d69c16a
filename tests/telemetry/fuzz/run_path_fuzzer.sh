#!/bin/bash
# Builds a telemetry fuzzer with clang++ (libFuzzer + ASan + UBSan) and runs it
# for a bounded time over its committed seed corpus. Exit 77 (ctest: skipped)
# when clang++ cannot build a libFuzzer binary on this machine.
#   path:    the gNMI path text parser (corpus/)
#   profile: JSON values through the reader, flattening and the sonic and
#            openconfig profiles' translation (corpus-profile/)
#
# usage: run_path_fuzzer.sh <source dir> <build dir> <work dir> [seconds] [path|profile]
set -euo pipefail
src=$1
build=$2
work=$3
seconds=${4:-20}
name=${5:-path}
cxx=${CLANGXX:-clang++}
mkdir -p "$work"

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "skip: $cxx not found"; exit 77
fi
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  > "$work/probe.cc"
if ! "$cxx" -fsanitize=fuzzer "$work/probe.cc" -o "$work/probe" >/dev/null 2>&1; then
  echo "skip: $cxx -fsanitize=fuzzer does not work (install libclang-rt-14-dev)"; exit 77
fi

gen="$build/telemetry/proto"
api="$build/api/proto"
headers=("$src/telemetry/path.h")
if [ "$name" = profile ]; then
  sources=("$src/telemetry/path.cc" "$src/common/json.cc" "$src/common/file.cc" "$src/telemetry/profile.cc"
           "$gen/gnmi/gnmi.pb.cc" "$api/loom/v1/telemetry_profile.pb.cc"
           "$src/tests/telemetry/fuzz/profile_fuzzer.cc")
  headers+=("$src/common/json.h" "$src/common/file.h" "$src/telemetry/profile.h")
  seeds="$src/tests/telemetry/fuzz/corpus-profile"
else
  sources=("$src/telemetry/path.cc" "$gen/gnmi/gnmi.pb.cc" "$src/tests/telemetry/fuzz/path_fuzzer.cc")
  headers+=("$src/tests/telemetry/fuzz/path_fuzz_check.h")
  seeds="$src/tests/telemetry/fuzz/corpus"
fi
bin="$work/${name}_fuzzer"
rebuild=0
[ -x "$bin" ] || rebuild=1
for f in "${sources[@]}" "${headers[@]}"; do
  [ "$f" -nt "$bin" ] && rebuild=1
done
if [ $rebuild = 1 ]; then
  echo "building $bin"
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -DLOOM_SOURCE_DIR="\"$src\"" -I"$src" -I"$gen" -I"$api" "${sources[@]}" -lprotobuf \
    -lpthread -o "$bin"
fi

# New inputs go to a scratch corpus; the committed seeds are read only.
mkdir -p "$work/corpus-$name"
"$bin" -error_exitcode=1 -timeout_exitcode=1 -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/$name-" "$work/corpus-$name" "$seeds"
