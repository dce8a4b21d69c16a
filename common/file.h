// Reading input files with a size cap: a file larger than the cap (or an
// endless one such as /dev/zero) is refused after reading cap + 1 bytes, with
// an error naming the file, what it is and the cap, instead of exhausting memory.
#ifndef LOOM_COMMON_FILE_H_
#define LOOM_COMMON_FILE_H_

#include <cstddef>
#include <string>

namespace loom {

// Caps for the files Loom reads (bytes).
constexpr size_t kMaxTopologyFileBytes = size_t{256} << 20;  // ~4x a 100k-GPU fabric
constexpr size_t kMaxConfigFileBytes = size_t{64} << 20;     // config + inventory + policy
constexpr size_t kMaxScenarioFileBytes = size_t{256} << 20;
constexpr size_t kMaxJobFileBytes = size_t{64} << 20;
constexpr size_t kMaxProfileFileBytes = size_t{4} << 20;
constexpr size_t kMaxSmallFileBytes = size_t{1} << 20;  // ready files, credentials

// Reads `path` into `out` (binary). False with `error` = "PATH: cannot open
// WHAT" or "PATH: WHAT larger than N MiB" (WHAT: "topology file", ...).
bool ReadFileCapped(const std::string& path, size_t max_bytes, const char* what, std::string* out,
                    std::string* error);

}  // namespace loom

#endif  // LOOM_COMMON_FILE_H_
