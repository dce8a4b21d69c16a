// gNMI path text form <-> gnmi::Path, and wildcard matching.
//
// Text form (gNMI path-strings convention, plus an optional target):
//
//   [target "@"] [origin ":"] "/" elem ("/" elem)*        e.g.
//   /interfaces/interface[name=Ethernet1]/state/counters/in-octets
//   loom:/pfc/interfaces/interface[name=Ethernet1]/priorities/priority[id=3]/state/rx-pkts
//   leaf-0@loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/state
//
//   elem  := name ("[" key "=" value "]")*
//   - "\" escapes the next character anywhere (names, key names, values).
//   - In a name, "/" and "[" must be escaped; in a key name "=" and "]"; in a
//     value "]" and "\" ("/" and "=" may appear unescaped inside a value).
//   - A leading "/" is optional ("state/counters" is a relative path).
//   - The origin/target head is recognised only before the first "/" when it
//     contains no "[" and ends with ":" (origin) and/or contains "@" (target).
//     "/" alone is the root path (no elements).
//   - Wildcards: an element named "*" matches one element, "..." any number
//     of elements (zero or more); a key value "*" matches any value.
//
// Errors name the 0-based character position: `at 17: empty key name`.
// FormatPath writes keys sorted by name and escapes what must be escaped, so
// ParsePath(FormatPath(p)) == p for every path ParsePath can produce.
//
// Pure functions; thread-safe. Parse and format are O(length of the text).
#ifndef LOOM_TELEMETRY_PATH_H_
#define LOOM_TELEMETRY_PATH_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "gnmi/gnmi.pb.h"

namespace loom::telemetry {

// Parses `text` into `*out` (cleared first). On error `*out` is unspecified and
// the status is INVALID_ARGUMENT with the position and the reason.
Status ParsePath(std::string_view text, gnmi::Path* out);

// The canonical text form of `path` (see above). The root path is "/".
std::string FormatPath(const gnmi::Path& path);

// `prefix` followed by `path`: origin and target from `path` when set, else
// from `prefix`; elements of both in order.
gnmi::Path JoinPath(const gnmi::Path& prefix, const gnmi::Path& path);

// True when the concrete path `path` is matched by `pattern`, which may hold
// wildcards: "*" / "..." elements, "*" key values; a key absent from the
// pattern matches any value, a key present in the pattern but absent from
// `path` does not match. Origins match when equal, where "" and "openconfig"
// are the same origin. An empty or "*" pattern target matches any target.
// O(elements x keys) without "..."; with "..." O(elements^2) worst case.
bool PathMatches(const gnmi::Path& pattern, const gnmi::Path& path);

// True when `origin` names the OpenConfig schema ("" or "openconfig").
bool IsOpenConfigOrigin(std::string_view origin);

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_PATH_H_
