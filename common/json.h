// The project's JSON (RFC 8259) reader: gNMI json_val / json_ietf_val values
// in telemetry (profile flattening) and in the southbound gNMI codec.
//
// Why not protobuf's JSON parser: it goes through google.protobuf.Value,
// turning every number into a double (RFC 7951 sends 64-bit counters as
// strings, but JSON-encoding targets also send bare numbers above 2^53) and
// dominating the cost of a decode. This reader keeps numbers as their text,
// members in document order, checks UTF-8 (well-formed, shortest form, no
// surrogates), and rejects what is not JSON with the byte offset and the
// reason.
//
// Limits: numbers within a double's range (their text is kept exact), nesting depth 64 (deeper is
// an error, never a stack overflow), at most 1,000,000 values (bounded memory for a hostile 16 MB
// message); strings are unescaped (\uXXXX, surrogate pairs, to UTF-8). Pure; O(n) (O(members^2) per
// object with unique_names).
#ifndef LOOM_COMMON_JSON_H_
#define LOOM_COMMON_JSON_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

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
// returns false and sets `*error` ("at 17: expected ':'"). With
// `unique_names`, an object naming a member twice is an error.
bool ParseJson(std::string_view text, JsonValue* out, std::string* error,
               bool unique_names = false);

}  // namespace loom

#endif  // LOOM_COMMON_JSON_H_
