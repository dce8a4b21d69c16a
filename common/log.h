// Structured logging: one line per record, "key=value" text or JSON.
//
//   LOG_INFO("job registered").With("job", id).With("tenant", t);
//
// The record is written when the temporary goes out of scope. Thread-safe:
// each record is written with a single write() under a mutex.
#ifndef LOOM_COMMON_LOG_H_
#define LOOM_COMMON_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// Parses "debug", "info", "warn", "error". Returns false on anything else.
bool ParseLogLevel(std::string_view text, LogLevel* level);

void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
// Where records go (default stderr). Takes a file descriptor.
void SetLogFd(int fd);
bool LogEnabled(LogLevel level);

class LogRecord {
 public:
  LogRecord(LogLevel level, std::string_view msg);
  ~LogRecord();
  LogRecord(const LogRecord&) = delete;
  LogRecord& operator=(const LogRecord&) = delete;

  LogRecord& With(std::string_view key, std::string_view value);
  LogRecord& With(std::string_view key, const char* value) {
    return With(key, std::string_view(value));
  }
  LogRecord& With(std::string_view key, const std::string& value) {
    return With(key, std::string_view(value));
  }
  LogRecord& With(std::string_view key, int64_t value);
  LogRecord& With(std::string_view key, uint64_t value);
  LogRecord& With(std::string_view key, int value) { return With(key, int64_t{value}); }
  LogRecord& With(std::string_view key, unsigned value) { return With(key, uint64_t{value}); }
  LogRecord& With(std::string_view key, double value);
  LogRecord& With(std::string_view key, bool value);

 private:
  bool enabled_;
  LogLevel level_;
  std::string msg_;
  std::vector<std::pair<std::string, std::string>> fields_;
  std::vector<bool> quoted_;
};

}  // namespace loom

#define LOG_DEBUG(msg) ::loom::LogRecord(::loom::LogLevel::kDebug, msg)
#define LOG_INFO(msg) ::loom::LogRecord(::loom::LogLevel::kInfo, msg)
#define LOG_WARN(msg) ::loom::LogRecord(::loom::LogLevel::kWarn, msg)
#define LOG_ERROR(msg) ::loom::LogRecord(::loom::LogLevel::kError, msg)

#endif  // LOOM_COMMON_LOG_H_
