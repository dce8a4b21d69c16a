#include "common/json.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace loom {
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxValues = 1'000'000;

class Parser {
 public:
  Parser(std::string_view s, bool unique_names) : s_(s), unique_names_(unique_names) {}

  bool Parse(JsonValue* out, std::string* error) {
    SkipSpace();
    if (!Value(out, 0)) {
      *error = "at " + std::to_string(pos_) + ": " + error_;
      return false;
    }
    SkipSpace();
    if (pos_ != s_.size()) {
      *error = "at " + std::to_string(pos_) + ": trailing characters after the value";
      return false;
    }
    return true;
  }

 private:
  bool Fail(const char* why) {
    error_ = why;
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return Fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool Value(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return Fail("nesting deeper than 64");
    if (++values_ > kMaxValues) return Fail("more than 1000000 values");
    if (pos_ >= s_.size()) return Fail("unexpected end of input");
    const char c = s_[pos_];
    switch (c) {
      case '{':
        return Object(out, depth);
      case '[':
        return Array(out, depth);
      case '"':
        out->kind = JsonValue::Kind::kString;
        return String(&out->text);
      case 't':
        out->kind = JsonValue::Kind::kBool;
        out->text = "true";
        return Literal("true");
      case 'f':
        out->kind = JsonValue::Kind::kBool;
        out->text = "false";
        return Literal("false");
      case 'n':
        out->kind = JsonValue::Kind::kNull;
        return Literal("null");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return Number(out);
        return Fail("unexpected character");
    }
  }

  bool Object(JsonValue* out, int depth) {
    out->kind = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected a member name");
      out->members.emplace_back();
      if (!String(&out->members.back().name)) return false;
      if (unique_names_) {
        for (size_t k = 0; k + 1 < out->members.size(); ++k) {
          if (out->members[k].name == out->members.back().name) {
            return Fail("a member name appears twice");
          }
        }
      }
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      SkipSpace();
      if (!Value(&out->members.back().value, depth + 1)) return false;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  bool Array(JsonValue* out, int depth) {
    out->kind = JsonValue::Kind::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      out->items.emplace_back();
      if (!Value(&out->items.back(), depth + 1)) return false;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  bool Number(JsonValue* out) {
    out->kind = JsonValue::Kind::kNumber;
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      size_t n = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        ++pos_;
        ++n;
      }
      return n;
    };
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Fail("invalid number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Fail("invalid number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Fail("invalid number");
    }
    out->text.assign(s_.substr(start, pos_ - start));
    // Beyond a double's range (1e999) is refused: no reader could use it.
    if (!std::isfinite(std::strtod(out->text.c_str(), nullptr))) {
      return Fail("number out of range");
    }
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Length of the UTF-8 sequence at `i` (first byte >= 0x80) when it is
  // well-formed, shortest form, not a surrogate and at most U+10FFFF; else 0.
  size_t Utf8Length(size_t i) const {
    const auto b0 = static_cast<unsigned char>(s_[i]);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if ((b0 & 0xe0) == 0xc0) {
      n = 1, cp = b0 & 0x1f, min = 0x80;
    } else if ((b0 & 0xf0) == 0xe0) {
      n = 2, cp = b0 & 0x0f, min = 0x800;
    } else if ((b0 & 0xf8) == 0xf0) {
      n = 3, cp = b0 & 0x07, min = 0x10000;
    } else {
      return 0;
    }
    if (s_.size() - i <= n) return 0;
    for (size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s_[i + k]);
      if ((c & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n + 1;
  }

  bool Hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return Fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Fail("invalid \\u escape");
      }
    }
    *out = v;
    return true;
  }

  bool String(std::string* out) {
    ++pos_;  // '"'
    out->clear();
    for (;;) {
      // Copy the run up to the next quote or backslash at once.
      size_t end = pos_;
      while (end < s_.size() && s_[end] != '"' && s_[end] != '\\') {
        const auto c = static_cast<unsigned char>(s_[end]);
        if (c < 0x20) {
          pos_ = end;
          return Fail("control character in a string");
        }
        if (c >= 0x80) {
          const size_t n = Utf8Length(end);
          if (n == 0) {
            pos_ = end;
            return Fail("invalid UTF-8 in a string");
          }
          end += n;
          continue;
        }
        ++end;
      }
      out->append(s_.substr(pos_, end - pos_));
      pos_ = end;
      if (pos_ >= s_.size()) return Fail("unterminated string");
      if (s_[pos_] == '"') {
        ++pos_;
        return true;
      }
      ++pos_;  // backslash
      if (pos_ >= s_.size()) return Fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            if (s_.substr(pos_, 2) != "\\u") return Fail("unpaired surrogate");
            pos_ += 2;
            if (!Hex4(&lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return Fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail("unpaired surrogate");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail("invalid escape");
      }
    }
  }

  std::string_view s_;
  const bool unique_names_;
  size_t pos_ = 0;
  size_t values_ = 0;
  const char* error_ = "";
};

}  // namespace

bool ParseJson(std::string_view text, JsonValue* out, std::string* error, bool unique_names) {
  *out = JsonValue();
  return Parser(text, unique_names).Parse(out, error);
}

}  // namespace loom
