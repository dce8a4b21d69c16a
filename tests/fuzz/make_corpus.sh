#!/bin/bash
# Rewrites the generated seed corpora tests/fuzz/corpus/<name>/ from the
# fuzzers' own seed writers (LOOM_FUZZ_WRITE_SEEDS; each fuzzer knows its input
# format): valid requests, notifications, databases, and the repo's example
# JSON files. Inputs merged in by scripts/fuzz.sh --merge (files named by their
# SHA-1) are kept.
# usage: tests/fuzz/make_corpus.sh <fuzz-build-dir> [names...]
set -euo pipefail
build=$1
shift
src=$(cd "$(dirname "$0")/../.." && pwd)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(handlers json gnmi store)
for name in "${names[@]}"; do
  LOOM_FUZZ_WRITE_SEEDS="$src/tests/fuzz/corpus/$name" "$build/tests/fuzz/fuzz_$name"
  echo "$name: $(find "$src/tests/fuzz/corpus/$name" -maxdepth 1 -type f | wc -l) seeds in tests/fuzz/corpus/$name"
done
