// A small JSON (RFC 8259) reader for gNMI json_val / json_ietf_val values.
//
// Why not protobuf's JSON parser: it goes through google.protobuf.Value,
// turning every number into a double (RFC 7951 sends 64-bit counters as
// strings, but JSON-encoding targets also send bare numbers above 2^53) and
// costing half of a SONiC sample's translation time. This reader keeps
// numbers as their text, members in document order, and rejects what is not
// JSON with the byte offset and the reason.
//
// Limits: nesting depth 64 (deeper is an error, never a stack overflow), at
// most 1,000,000 values (bounded memory for a hostile 16 MB message);
// strings are unescaped (\uXXXX, surrogate pairs, to UTF-8). Pure; O(n).
#ifndef LOOM_TELEMETRY_JSON_H_
#define LOOM_TELEMETRY_JSON_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::telemetry {

struct JsonMember;

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  std::string text;  // kString: the unescaped string; kNumber: the number as written; kBool
                     // "true"/"false".
  std::vector<JsonMember> members;  // kObject, document order
  std::vector<JsonValue> items;     // kArray
};

struct JsonMember {
  std::string name;
  JsonValue value;
};

// Parses `text` (one JSON value, surrounding whitespace allowed). On error
// returns false and sets `*error` ("at 17: expected ':'").
bool ParseJson(std::string_view text, JsonValue* out, std::string* error);

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_JSON_H_
