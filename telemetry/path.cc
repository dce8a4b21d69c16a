#include "telemetry/path.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace loom::telemetry {
namespace {

Status ErrorAt(std::string_view text, size_t pos, std::string_view reason) {
  std::string msg = "path '";
  msg.append(text.substr(0, 200));
  if (text.size() > 200) msg.append("...");
  msg.append("': at ").append(std::to_string(pos)).append(": ").append(reason);
  return InvalidArgument(std::move(msg));
}

// Reads characters up to (not including) an unescaped character in `stops`,
// unescaping "\x" to "x". Leaves `*pos` on the stop character (or the end).
// Returns false on a trailing lone backslash.
bool ReadToken(std::string_view text, size_t* pos, std::string_view stops, std::string* out) {
  out->clear();
  size_t i = *pos;
  while (i < text.size()) {
    char c = text[i];
    if (c == '\\') {
      if (i + 1 >= text.size()) {
        *pos = i;
        return false;
      }
      out->push_back(text[i + 1]);
      i += 2;
      continue;
    }
    if (stops.find(c) != std::string_view::npos) break;
    out->push_back(c);
    ++i;
  }
  *pos = i;
  return true;
}

// Position of the first unescaped '/' or '[' (or npos).
size_t FirstUnescaped(std::string_view text, bool* saw_escape) {
  *saw_escape = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\') {
      *saw_escape = true;
      ++i;
      continue;
    }
    if (text[i] == '/' || text[i] == '[') return i;
  }
  return std::string_view::npos;
}

void AppendEscaped(std::string* out, std::string_view s, std::string_view specials) {
  for (char c : s) {
    if (c == '\\' || specials.find(c) != std::string_view::npos) out->push_back('\\');
    out->push_back(c);
  }
}

bool MatchElems(const gnmi::Path& pattern, int pi, const gnmi::Path& path, int ei) {
  const int pn = pattern.elem_size();
  const int en = path.elem_size();
  while (pi < pn) {
    const gnmi::PathElem& pe = pattern.elem(pi);
    if (pe.name() == "...") {
      if (pi + 1 == pn) return true;
      for (int k = ei; k <= en; ++k) {
        if (MatchElems(pattern, pi + 1, path, k)) return true;
      }
      return false;
    }
    if (ei >= en) return false;
    const gnmi::PathElem& ce = path.elem(ei);
    if (pe.name() != "*" && pe.name() != ce.name()) return false;
    for (const auto& [k, v] : pe.key()) {
      auto it = ce.key().find(k);
      if (it == ce.key().end()) return false;
      if (v != "*" && v != it->second) return false;
    }
    ++pi;
    ++ei;
  }
  return ei == en;
}

}  // namespace

bool IsOpenConfigOrigin(std::string_view origin) {
  return origin.empty() || origin == "openconfig";
}

Status ParsePath(std::string_view text, gnmi::Path* out) {
  out->Clear();
  size_t pos = 0;
  bool saw_escape = false;
  const size_t first = FirstUnescaped(text, &saw_escape);
  if (first != std::string_view::npos && text[first] == '/' && first > 0 && !saw_escape) {
    std::string_view head = text.substr(0, first);
    if (head.back() == ':' || head.back() == '@') {
      const size_t at = head.find('@');
      std::string_view origin = head;
      if (at != std::string_view::npos) {
        out->set_target(std::string(head.substr(0, at)));
        origin = head.substr(at + 1);
      }
      if (!origin.empty()) {
        if (origin.back() != ':') return ErrorAt(text, first - 1, "origin must end with ':'");
        origin.remove_suffix(1);
        if (origin.empty()) return ErrorAt(text, first - 1, "empty origin before ':'");
        if (origin.find('@') != std::string_view::npos) {
          return ErrorAt(text, head.find('@', at == std::string_view::npos ? 0 : at + 1),
                         "'@' in origin");
        }
        out->set_origin(std::string(origin));
      }
      pos = first;
    }
  }
  if (pos < text.size() && text[pos] == '/') {
    ++pos;
    if (pos == text.size()) return Status::Ok();  // root
  } else if (pos == text.size()) {
    return ErrorAt(text, pos, "empty path");
  }
  std::string token, value;
  while (true) {
    const size_t start = pos;
    if (!ReadToken(text, &pos, "/[]", &token)) return ErrorAt(text, pos, "dangling '\\'");
    if (token.empty()) {
      if (pos < text.size() && text[pos] == ']') return ErrorAt(text, pos, "unexpected ']'");
      return ErrorAt(text, start, "empty element name");
    }
    if (pos < text.size() && text[pos] == ']') return ErrorAt(text, pos, "unexpected ']'");
    gnmi::PathElem* elem = out->add_elem();
    elem->set_name(token);
    while (pos < text.size() && text[pos] == '[') {
      const size_t key_start = ++pos;
      if (!ReadToken(text, &pos, "=][/", &token)) return ErrorAt(text, pos, "dangling '\\'");
      if (pos >= text.size()) return ErrorAt(text, pos, "unterminated key: missing '='");
      if (text[pos] != '=') {
        return ErrorAt(text, pos, std::string("expected '=' in key, found '") + text[pos] + "'");
      }
      if (token.empty()) return ErrorAt(text, key_start, "empty key name");
      const size_t value_start = ++pos;
      if (!ReadToken(text, &pos, "]", &value)) return ErrorAt(text, pos, "dangling '\\'");
      if (pos >= text.size()) return ErrorAt(text, key_start - 1, "unterminated key: missing ']'");
      if (value.empty()) return ErrorAt(text, value_start, "empty value for key '" + token + "'");
      if (!elem->mutable_key()->insert({token, value}).second) {
        return ErrorAt(text, key_start, "duplicate key '" + token + "'");
      }
      ++pos;  // ']'
    }
    if (pos == text.size()) return Status::Ok();
    if (text[pos] != '/') {
      return ErrorAt(text, pos, std::string("expected '/' or '[', found '") + text[pos] + "'");
    }
    ++pos;
    if (pos == text.size()) return ErrorAt(text, pos, "empty element name (trailing '/')");
  }
}

std::string FormatPath(const gnmi::Path& path) {
  std::string out;
  if (!path.target().empty()) out.append(path.target()).push_back('@');
  if (!path.origin().empty()) out.append(path.origin()).push_back(':');
  if (path.elem_size() == 0) {
    out.push_back('/');
    return out;
  }
  std::vector<std::pair<const std::string*, const std::string*>> keys;
  for (const gnmi::PathElem& e : path.elem()) {
    out.push_back('/');
    AppendEscaped(&out, e.name(), "/[]");
    if (e.key().empty()) continue;
    keys.clear();
    for (const auto& [k, v] : e.key()) keys.emplace_back(&k, &v);
    std::sort(keys.begin(), keys.end(),
              [](const auto& a, const auto& b) { return *a.first < *b.first; });
    for (const auto& [k, v] : keys) {
      out.push_back('[');
      AppendEscaped(&out, *k, "=[]/");
      out.push_back('=');
      AppendEscaped(&out, *v, "]");
      out.push_back(']');
    }
  }
  return out;
}

gnmi::Path JoinPath(const gnmi::Path& prefix, const gnmi::Path& path) {
  gnmi::Path out;
  out.set_origin(path.origin().empty() ? prefix.origin() : path.origin());
  out.set_target(path.target().empty() ? prefix.target() : path.target());
  out.mutable_elem()->Reserve(prefix.elem_size() + path.elem_size());
  for (const auto& e : prefix.elem()) *out.add_elem() = e;
  for (const auto& e : path.elem()) *out.add_elem() = e;
  return out;
}

bool PathMatches(const gnmi::Path& pattern, const gnmi::Path& path) {
  if (!pattern.target().empty() && pattern.target() != "*" && pattern.target() != path.target()) {
    return false;
  }
  const bool oc_a = IsOpenConfigOrigin(pattern.origin());
  const bool oc_b = IsOpenConfigOrigin(path.origin());
  if (oc_a != oc_b || (!oc_a && pattern.origin() != path.origin())) return false;
  return MatchElems(pattern, 0, path, 0);
}

}  // namespace loom::telemetry
