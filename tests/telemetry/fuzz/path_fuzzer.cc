// libFuzzer target for the gNMI path text parser. Built and run by
// run_path_fuzzer.sh with clang++ -fsanitize=fuzzer,address,undefined.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tests/telemetry/fuzz/path_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why =
      loom::telemetry::CheckPathInput(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!why.empty()) {
    std::fprintf(stderr, "path property violated: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
