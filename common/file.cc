#include "common/file.h"

#include <fstream>
#include <vector>

namespace loom {

bool ReadFileCapped(const std::string& path, size_t max_bytes, const char* what, std::string* out,
                    std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot open " + what;
    return false;
  }
  out->clear();
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    if (out->size() + n > max_bytes) {
      out->clear();
      out->shrink_to_fit();
      const size_t mib = max_bytes >> 20;
      *error = path + ": " + what + " larger than " +
               (mib > 0 ? std::to_string(mib) + " MiB" : std::to_string(max_bytes) + " bytes");
      return false;
    }
    out->append(buf.data(), n);
  }
  if (in.bad()) {
    *error = path + ": cannot read " + what;
    return false;
  }
  return true;
}

}  // namespace loom
