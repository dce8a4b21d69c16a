# Initial cache of Loom's fuzz build (tests/fuzz/README.md):
#   cmake -G Ninja -S <src> -B <dir> -C <src>/tests/fuzz/fuzz-build.cmake
# clang with libFuzzer's coverage instrumentation (no libFuzzer main: only the
# fuzz_* executables link -fsanitize=fuzzer), ASan and UBSan on all of Loom's
# libraries and the generated protobuf code. Asserts stay on (no NDEBUG).
# Loom is C++20 with lambdas capturing structured bindings: clang 16 or newer
# (Debian 12: apt-get install clang-16 libclang-rt-16-dev). run_fuzzers.sh picks
# one; by hand, pass -DCMAKE_CXX_COMPILER=... -DCMAKE_C_COMPILER=... before -C.
find_program(LOOM_FUZZ_CXX NAMES clang++-19 clang++-18 clang++-17 clang++-16 clang++)
find_program(LOOM_FUZZ_CC NAMES clang-19 clang-18 clang-17 clang-16 clang)
set(CMAKE_C_COMPILER "${LOOM_FUZZ_CC}" CACHE STRING "fuzz build: clang")
set(CMAKE_CXX_COMPILER "${LOOM_FUZZ_CXX}" CACHE STRING "fuzz build: clang++")
set(LOOM_FUZZ ON CACHE BOOL "build the libFuzzer targets of tests/fuzz")
set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "")
set(LOOM_FUZZ_SANITIZE
  "-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr,function -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  CACHE STRING "sanitizers of the fuzz build")
set(CMAKE_C_FLAGS "${LOOM_FUZZ_SANITIZE}" CACHE STRING "")
set(CMAKE_CXX_FLAGS "${LOOM_FUZZ_SANITIZE}" CACHE STRING "")
# -O1 with line tables: fast enough to fuzz, quick to compile, symbolized stacks.
set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O1 -gline-tables-only" CACHE STRING "")
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -gline-tables-only" CACHE STRING "")
# loom_strict() adds -Werror; clang warns where g++ does not and warnings are the
# g++ build's business, so -Wno-error goes after every target's own options.
set(CMAKE_C_COMPILE_OBJECT
  "<CMAKE_C_COMPILER> <DEFINES> <INCLUDES> <FLAGS> -Wno-error -o <OBJECT> -c <SOURCE>"
  CACHE STRING "")
set(CMAKE_CXX_COMPILE_OBJECT
  "<CMAKE_CXX_COMPILER> <DEFINES> <INCLUDES> <FLAGS> -Wno-error -o <OBJECT> -c <SOURCE>"
  CACHE STRING "")
