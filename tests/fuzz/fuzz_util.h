// Shared pieces of the libFuzzer targets in tests/fuzz (README.md there):
// record framing of an input, a scratch directory, quiet logging, findings,
// and writing the seed corpus.
//
// Record framing: an input is a sequence of records
//   [tag: 1 byte][length: 2 bytes little-endian][payload: length bytes]
// A length beyond the end of the input takes what is left, so every byte
// string is a valid sequence and mutations never get stuck on framing.
//
// Seeds: every target writes its own seed corpus when the environment
// variable LOOM_FUZZ_WRITE_SEEDS names a directory (tests/fuzz/make_corpus.sh),
// then exits; the seeds are committed under tests/fuzz/corpus/<name>/.
#ifndef LOOM_TESTS_FUZZ_FUZZ_UTIL_H_
#define LOOM_TESTS_FUZZ_FUZZ_UTIL_H_

#include <fcntl.h>
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "common/log.h"

#ifndef LOOM_SOURCE_DIR
#error "LOOM_SOURCE_DIR must be defined (tests/fuzz/CMakeLists.txt)"
#endif

namespace loom::fuzz {

// A finding that is not a sanitizer report: print and abort (libFuzzer saves
// the input as crash-<sha1> under -artifact_prefix).
[[noreturn]] inline void Finding(const std::string& what) {
  std::fprintf(stderr, "==loom-fuzz== FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void Check(bool ok, const std::string& what) {
  if (!ok) Finding(what);
}

// True when LOOM_FUZZ_KNOWN (comma-separated ids) names a known finding the
// target should step around, to explore past it (crashes/README.md lists them).
inline bool Known(const char* id) {
  const char* k = std::getenv("LOOM_FUZZ_KNOWN");
  if (k == nullptr) return false;
  const std::string list = "," + std::string(k) + ",";
  return list.find("," + std::string(id) + ",") != std::string::npos;
}

// Reads records (see the header comment) and raw bytes off an input.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ >= end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  uint8_t Byte() { return empty() ? 0 : *p_++; }
  std::string Bytes(size_t n) {
    n = std::min(n, left());
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  std::string Rest() { return Bytes(left()); }
  // One record: false at the end of the input.
  bool Next(uint8_t* tag, std::string* payload) {
    if (empty()) return false;
    *tag = Byte();
    size_t len = Byte();
    len |= static_cast<size_t>(Byte()) << 8;
    *payload = Bytes(len);
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Appends one record to a seed.
inline void AddRecord(std::string* out, uint8_t tag, const std::string& payload) {
  if (payload.size() > 0xffff) Finding("seed record over 64 KiB");
  out->push_back(static_cast<char>(tag));
  out->push_back(static_cast<char>(payload.size() & 0xff));
  out->push_back(static_cast<char>(payload.size() >> 8));
  out->append(payload);
}

inline std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Finding("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFileOrDie(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) Finding("cannot write " + path);
}

// The seed directory when this run only writes seeds (LOOM_FUZZ_WRITE_SEEDS).
inline const char* SeedDir() {
  const char* d = std::getenv("LOOM_FUZZ_WRITE_SEEDS");
  return d != nullptr && *d != '\0' ? d : nullptr;
}

inline void WriteSeed(const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(SeedDir());
  WriteFileOrDie(std::string(SeedDir()) + "/" + name, bytes);
}

// A private scratch directory for the process (tmpfs when there is one:
// SQLite files and config files written per input), removed at exit.
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    std::string base = "/dev/shm";
    if (access(base.c_str(), W_OK) != 0) base = std::filesystem::temp_directory_path().string();
    std::string tmpl = base + "/loom-fuzz-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) Finding("mkdtemp in " + base + " failed");
    static std::string keep = tmpl;
    std::atexit([] { std::filesystem::remove_all(keep); });
    return tmpl;
  }();
  return dir;
}

// Loom's log records go to /dev/null and protobuf's (invalid UTF-8 in a
// string field, ...) nowhere (LOOM_FUZZ_LOG=1 keeps both on stderr): a line per
// rejected input would dominate the run time.
inline void QuietLogs() {
  if (std::getenv("LOOM_FUZZ_LOG") != nullptr) return;
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  static int fd = open("/dev/null", O_WRONLY);
  if (fd >= 0) SetLogFd(fd);
  SetLogLevel(LogLevel::kError);
}

}  // namespace loom::fuzz

#endif  // LOOM_TESTS_FUZZ_FUZZ_UTIL_H_
