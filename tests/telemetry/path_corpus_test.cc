// Replays the path fuzzer's seed corpus through the parser with the normal
// (g++) build, so the property is checked even where libFuzzer is unavailable.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/telemetry/fuzz/path_fuzz_check.h"

namespace loom::telemetry {
namespace {

TEST(PathCorpusTest, EverySeedKeepsTheRoundTripProperty) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(LOOM_PATH_CORPUS_DIR)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    EXPECT_EQ(CheckPathInput(buf.str()), "") << entry.path();
    ++files;
  }
  EXPECT_GT(files, 10);
}

}  // namespace
}  // namespace loom::telemetry
