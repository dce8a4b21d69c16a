#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "common/text.h"

namespace loom {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::atomic<int> g_fd{2};
std::mutex g_write_mu;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

bool NeedsQuotes(std::string_view s) {
  if (s.empty()) return true;
  for (char c : s) {
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

std::string Timestamp() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  if (text == "debug") {
    *level = LogLevel::kDebug;
  } else if (text == "info") {
    *level = LogLevel::kInfo;
  } else if (text == "warn" || text == "warning") {
    *level = LogLevel::kWarn;
  } else if (text == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
void SetLogFormat(LogFormat format) { g_format.store(static_cast<int>(format)); }
void SetLogFd(int fd) { g_fd.store(fd); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

LogRecord::LogRecord(LogLevel level, std::string_view msg)
    : enabled_(LogEnabled(level)), level_(level) {
  if (enabled_) msg_ = msg;
}

LogRecord& LogRecord::With(std::string_view key, std::string_view value) {
  if (enabled_) {
    fields_.emplace_back(std::string(key), std::string(value));
    quoted_.push_back(true);
  }
  return *this;
}

LogRecord& LogRecord::With(std::string_view key, int64_t value) {
  if (enabled_) {
    fields_.emplace_back(std::string(key), std::to_string(value));
    quoted_.push_back(false);
  }
  return *this;
}

LogRecord& LogRecord::With(std::string_view key, uint64_t value) {
  if (enabled_) {
    fields_.emplace_back(std::string(key), std::to_string(value));
    quoted_.push_back(false);
  }
  return *this;
}

LogRecord& LogRecord::With(std::string_view key, double value) {
  if (enabled_) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", value);
    fields_.emplace_back(std::string(key), buf);
    quoted_.push_back(false);
  }
  return *this;
}

LogRecord& LogRecord::With(std::string_view key, bool value) {
  if (enabled_) {
    fields_.emplace_back(std::string(key), value ? "true" : "false");
    quoted_.push_back(false);
  }
  return *this;
}

LogRecord::~LogRecord() {
  if (!enabled_) return;
  std::string line;
  line.reserve(128);
  if (static_cast<LogFormat>(g_format.load()) == LogFormat::kJson) {
    line += "{\"ts\":";
    AppendJsonString(line, Timestamp());
    line += ",\"level\":";
    AppendJsonString(line, LevelName(level_));
    line += ",\"msg\":";
    AppendJsonString(line, msg_);
    for (size_t i = 0; i < fields_.size(); ++i) {
      line.push_back(',');
      AppendJsonString(line, fields_[i].first);
      line.push_back(':');
      if (quoted_[i]) {
        AppendJsonString(line, fields_[i].second);
      } else {
        line += fields_[i].second;
      }
    }
    line += "}\n";
  } else {
    line += "ts=" + Timestamp() + " level=" + LevelName(level_) + " msg=";
    AppendJsonString(line, msg_);
    for (const auto& [k, v] : fields_) {
      line += " " + k + "=";
      if (NeedsQuotes(v)) {
        AppendJsonString(line, v);
      } else {
        line += v;
      }
    }
    line.push_back('\n');
  }
  std::lock_guard<std::mutex> lock(g_write_mu);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(g_fd.load(), p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace loom
