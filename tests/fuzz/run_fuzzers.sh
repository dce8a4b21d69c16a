#!/bin/bash
# Builds Loom's fuzz build (clang >= 16, libFuzzer, ASan + UBSan; tests/fuzz/README.md)
# if needed and runs each fuzzer for a bounded time over its committed corpus
# (tests/fuzz/corpus/<name>, read only; new inputs go to <work>/corpus/<name>).
#
# usage: run_fuzzers.sh [--build-only | --no-build] <src> <fuzz-build-dir> <work-dir>
#                       <seconds-per-fuzzer> [names...]
#   names: handlers json gnmi store (default: all)
#   --build-only  configure and build, run nothing (ctest fixture fuzz_build)
#   --no-build    run what is built (fails when a fuzzer is missing)
# Environment: CLANGXX / CLANGCC pick the compiler; LOOM_FUZZ_SANITIZE replaces
# the sanitizer flags when the build is first configured (fuzz-build.cmake: ASan
# + UBSan; UBSan is about a quarter of the compile time); LOOM_FUZZ_MERGE=1 merges
# what a run found into the committed corpus (libFuzzer -merge=1: only inputs
# with new coverage); LOOM_FUZZ_TIMEOUT (s per input, default 10) and
# LOOM_FUZZ_RSS_MB (default 2560); LOOM_FUZZ_ARGS adds libFuzzer flags.
# Exit: 0 every fuzzer ran clean; 1 a crash, leak, timeout, OOM or build
# failure (the input that did it is printed); 77 skipped (no usable clang).
set -uo pipefail

mode=all
case "${1:-}" in
  --build-only) mode=build; shift ;;
  --no-build) mode=run; shift ;;
esac
if [ $# -lt 4 ]; then
  sed -n '2,21p' "$0" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$2
work=$3
seconds=$4
shift 4
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(handlers json gnmi store)
mkdir -p "$work" "$build"
build=$(cd "$build" && pwd)
work=$(cd "$work" && pwd)

skip() { echo "SKIP: $*"; exit 77; }

# --- compiler: clang >= 16 (lambdas capturing structured bindings) with libFuzzer
pick() {
  for c in "$@"; do
    if command -v "$c" >/dev/null 2>&1; then echo "$c"; return 0; fi
  done
  return 1
}
cxx=${CLANGXX:-$(pick clang++-19 clang++-18 clang++-17 clang++-16 clang++)} ||
  skip "no clang++ (apt-get install -y clang-16 libclang-rt-16-dev)"
cc=${CLANGCC:-${cxx/clang++/clang}}
major=$("$cxx" -dumpversion 2>/dev/null | cut -d. -f1)
if [ -z "$major" ] || [ "$major" -lt 16 ]; then
  skip "$cxx is clang $major; Loom needs clang >= 16 (apt-get install -y clang-16 libclang-rt-16-dev)"
fi
probe="$work/probe"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  > "$probe.cc"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe.cc" -o "$probe" >/dev/null 2>&1; then
  skip "$cxx -fsanitize=fuzzer,address,undefined cannot link (apt-get install -y libclang-rt-$major-dev)"
fi

# --- build
if [ "$mode" != run ]; then
  gen=(-G Ninja)
  command -v ninja >/dev/null 2>&1 || gen=(-G "Unix Makefiles")
  if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^LOOM_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "FAIL: $build holds a build that is not a fuzz build; give another directory"
    exit 1
  fi
  configured=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
  if [ "$configured" != "$(command -v "$cxx")" ]; then
    echo "configuring the fuzz build in $build with $cxx"
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
    san=()
    [ -n "${LOOM_FUZZ_SANITIZE:-}" ] && san=(-DLOOM_FUZZ_SANITIZE="$LOOM_FUZZ_SANITIZE")
    if ! cmake "${gen[@]}" -S "$src" -B "$build" -DCMAKE_CXX_COMPILER="$(command -v "$cxx")" \
        -DCMAKE_C_COMPILER="$(command -v "$cc")" "${san[@]}" \
        -C "$src/tests/fuzz/fuzz-build.cmake"; then
      echo "FAIL: configuring the fuzz build"
      exit 1
    fi
  fi
  start=$(date +%s)
  if ! cmake --build "$build" --target loom_fuzzers -- -j"$(nproc)"; then
    echo "FAIL: building the fuzzers (log above)"
    exit 1
  fi
  echo "fuzz build: $(( $(date +%s) - start )) s"
  [ "$mode" = build ] && exit 0
fi

# --- run
symbolizer=$(pick llvm-symbolizer-"$major" llvm-symbolizer || true)
[ -z "$symbolizer" ] && [ -x /usr/lib/llvm-"$major"/bin/llvm-symbolizer ] &&
  symbolizer=/usr/lib/llvm-"$major"/bin/llvm-symbolizer
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

max_len() {
  case $1 in
    json|store) echo 65536 ;;
    *) echo 16384 ;;
  esac
}
# handlers and store touch ~35k coverage features per input; libFuzzer's
# entropic schedule then spends most of the time updating feature frequencies
# (4x fewer executions), so they run with the classic schedule.
schedule() {
  case $1 in
    handlers|store) echo -entropic=0 ;;
  esac
}

failed=0
for name in "${names[@]}"; do
  bin="$build/tests/fuzz/fuzz_$name"
  seeds="$src/tests/fuzz/corpus/$name"
  if [ ! -x "$bin" ]; then
    echo "FAIL: $bin is not built (run without --no-build, or: cmake --build $build --target loom_fuzzers)"
    failed=1
    continue
  fi
  if [ ! -d "$seeds" ]; then
    echo "FAIL: no committed corpus $seeds (tests/fuzz/make_corpus.sh writes it)"
    failed=1
    continue
  fi
  scratch="$work/corpus/$name"
  artifacts="$work/artifacts/$name"
  log="$work/$name.log"
  mkdir -p "$scratch" "$artifacts"
  echo "== fuzz_$name: ${seconds} s over $seeds (new inputs: $scratch)"
  # shellcheck disable=SC2086,SC2046  # LOOM_FUZZ_ARGS and the schedule: several flags
  "$bin" -max_total_time="$seconds" -timeout="${LOOM_FUZZ_TIMEOUT:-10}" \
    -rss_limit_mb="${LOOM_FUZZ_RSS_MB:-2560}" -max_len="$(max_len "$name")" \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 $(schedule "$name") \
    -artifact_prefix="$artifacts/" ${LOOM_FUZZ_ARGS:-} "$scratch" "$seeds" >"$log" 2>&1
  rc=$?
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
  [ -z "$done_line" ] && done_line=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(echo "$done_line" | grep -o 'cov: [0-9]*' | cut -d' ' -f2)
  ft=$(echo "$done_line" | grep -o 'ft: [0-9]*' | cut -d' ' -f2)
  corp=$(echo "$done_line" | grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' | cut -d' ' -f2)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  echo "fuzz_$name: runs ${runs:-?}, exec/s ${eps:-?}, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?} (log: $log)"
  if [ $rc -ne 0 ]; then
    failed=1
    echo "FAIL: fuzz_$name exited $rc; the end of its log:"
    grep -v '^#[0-9]' "$log" | tail -60
    grep -h -o 'Test unit written to .*' "$log" | while read -r _ _ _ _ path; do
      echo "ARTIFACT: $path"
      echo "reproduce: $bin $path"
    done
    continue
  fi
  if [ "${LOOM_FUZZ_MERGE:-0}" = 1 ]; then
    before=$(find "$seeds" -maxdepth 1 -type f | wc -l)
    "$bin" -merge=1 -max_len="$(max_len "$name")" -timeout="${LOOM_FUZZ_TIMEOUT:-10}" \
      -rss_limit_mb="${LOOM_FUZZ_RSS_MB:-2560}" "$seeds" "$scratch" >"$work/$name.merge.log" 2>&1 ||
      { echo "FAIL: merging into $seeds (see $work/$name.merge.log)"; failed=1; continue; }
    echo "fuzz_$name: merged $(( $(find "$seeds" -maxdepth 1 -type f | wc -l) - before )) input(s) into $seeds"
  fi
done
exit $failed
