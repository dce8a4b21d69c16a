// The property the path fuzzer checks, shared with the g++ corpus replay test:
// ParsePath never crashes; what it accepts formats back to text that parses to
// the same path, and a parsed path matches itself.
#ifndef LOOM_TESTS_TELEMETRY_FUZZ_PATH_FUZZ_CHECK_H_
#define LOOM_TESTS_TELEMETRY_FUZZ_PATH_FUZZ_CHECK_H_

#include <string>
#include <string_view>

#include "telemetry/path.h"

namespace loom::telemetry {

// Returns an empty string when the property holds, else what broke.
inline std::string CheckPathInput(std::string_view text) {
  gnmi::Path p;
  if (!ParsePath(text, &p).ok()) return "";
  const std::string formatted = FormatPath(p);
  gnmi::Path q;
  Status s = ParsePath(formatted, &q);
  if (!s.ok()) return "formatted path does not parse: " + formatted + ": " + s.message();
  if (FormatPath(q) != formatted) return "round trip changed the path: " + formatted;
  if (q.origin() != p.origin() || q.target() != p.target() || q.elem_size() != p.elem_size()) {
    return "round trip changed origin/target/elements: " + formatted;
  }
  for (int i = 0; i < p.elem_size(); ++i) {
    if (p.elem(i).name() != q.elem(i).name() || p.elem(i).key_size() != q.elem(i).key_size()) {
      return "round trip changed element " + std::to_string(i) + ": " + formatted;
    }
    for (const auto& [k, v] : p.elem(i).key()) {
      auto it = q.elem(i).key().find(k);
      if (it == q.elem(i).key().end() || it->second != v) return "round trip changed key " + k;
    }
  }
  if (!PathMatches(p, p)) return "path does not match itself: " + formatted;
  return "";
}

}  // namespace loom::telemetry

#endif  // LOOM_TESTS_TELEMETRY_FUZZ_PATH_FUZZ_CHECK_H_
