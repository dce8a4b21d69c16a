#!/bin/bash
# Builds the path parser fuzzer with clang++ (libFuzzer + ASan + UBSan) and runs
# it for a bounded time over the committed seed corpus. Exit 77 (ctest: skipped)
# when clang++ cannot build a libFuzzer binary on this machine.
#
# usage: run_path_fuzzer.sh <source dir> <build dir> <work dir> [seconds]
set -euo pipefail
src=$1
build=$2
work=$3
seconds=${4:-20}
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
sources=("$src/telemetry/path.cc" "$gen/gnmi/gnmi.pb.cc" "$src/tests/telemetry/fuzz/path_fuzzer.cc")
bin="$work/path_fuzzer"
rebuild=0
[ -x "$bin" ] || rebuild=1
for f in "${sources[@]}" "$src/telemetry/path.h" "$src/tests/telemetry/fuzz/path_fuzz_check.h"; do
  [ "$f" -nt "$bin" ] && rebuild=1
done
if [ $rebuild = 1 ]; then
  echo "building $bin"
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src" -I"$gen" "${sources[@]}" -lprotobuf -lpthread -o "$bin"
fi

# New inputs go to a scratch corpus; the committed seeds are read only.
mkdir -p "$work/corpus"
"$bin" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/corpus" "$src/tests/telemetry/fuzz/corpus"
