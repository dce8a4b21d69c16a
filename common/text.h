// Small helpers shared by every module: status code names, stable hashing.
#ifndef LOOM_COMMON_TEXT_H_
#define LOOM_COMMON_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

// "OK", "INVALID_ARGUMENT", ... for a gRPC / loom::StatusCode number
// (0..16); "UNKNOWN" outside that range.
const char* StatusCodeName(int code);

// Appends `s` to `out` as a JSON string (quotes, escapes, control characters
// as \u00XX).
void AppendJsonString(std::string& out, std::string_view s);

// `s` quoted for an error message: at most `max` bytes of it, bytes outside
// printable ASCII as \xNN, and its full size when clipped:
// "abc..." (1048576 bytes). Errors never echo whole inputs.
std::string QuoteInput(std::string_view s, size_t max = 64);

// 64-bit FNV-1a: a stable hash (same value on every run and machine).
uint64_t Fnv1a64(std::string_view bytes);

}  // namespace loom

#endif  // LOOM_COMMON_TEXT_H_
