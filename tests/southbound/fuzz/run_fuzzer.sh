#!/bin/sh
# Builds the BGP decoder fuzzer with clang++ (libFuzzer + ASan + UBSan) and
# runs it for a bounded time over a copy of the committed seed corpus.
# Usage: run_fuzzer.sh SOURCE_DIR BUILD_DIR [SECONDS]
# Exit 77 (ctest SKIP) when clang++ or the libFuzzer runtime is missing.
set -eu
src=$1
out=$2
secs=${3:-20}
if ! command -v clang++ >/dev/null 2>&1; then
  echo "SKIP: clang++ not installed (apt-get install -y clang libclang-rt-14-dev)"
  exit 77
fi
mkdir -p "$out"
bin="$out/bgp_decoder_fuzzer"
if ! clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$src" \
    "$src/tests/southbound/fuzz/bgp_decoder_fuzzer.cc" "$src/southbound/bgp/codec.cc" \
    -o "$bin" 2>"$out/build.log"; then
  if grep -q -e "libclang_rt.fuzzer" -e "cannot find" "$out/build.log"; then
    cat "$out/build.log"
    echo "SKIP: libFuzzer runtime missing (apt-get install -y libclang-rt-14-dev)"
    exit 77
  fi
  cat "$out/build.log"
  exit 1
fi
work="$out/corpus"
rm -rf "$work"
mkdir -p "$work"
cp "$src/tests/southbound/fuzz/corpus/"* "$work/"
exec "$bin" -error_exitcode=1 -timeout_exitcode=1 -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
  -print_final_stats=1 "$work"
