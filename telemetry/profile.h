// Telemetry platform profiles (loom.v1.TelemetryProfile, data files under
// telemetry/profiles/): loading, validation and the translation between what
// a platform serves and Loom's catalogue (telemetry/README.md).
//
// Native leaves. A received update is flattened to (path text, scalar):
// prefix and update path joined, origin and target dropped, formatted as
// path.h's text form without the leading "/" ("COUNTERS/Ethernet*" or
// "interfaces/interface[name=Ethernet0]/state/counters"); a JSON value
// (json_val / json_ietf_val, RFC 7951) that is an object or array is walked,
// each member adding a segment ("COUNTERS/Ethernet*/Ethernet0/
// SAI_PORT_STAT_IF_IN_OCTETS"), RFC 7951 module prefixes ("openconfig-
// interfaces:in-octets") removed, list entries written as
// "name[key=value]" (key from the profile's list_keys, else "name", "id", the
// position). Scalars keep their text: JSON strings ("123", RFC 7951's
// encoding of 64-bit numbers) and numbers alike.
//
// Patterns (LeafRule.match and .canonical) are path texts split into
// segments at "/" outside "[...]"; inside a segment "{var}" captures the
// shortest text that lets the rest match; a segment that is exactly "{var*}"
// captures zero or more whole segments. Matching is O(segments x segment
// length) per rule; rules are indexed by their literal last segment, so a
// leaf is tried against the few rules that can match it.
//
// ProfileTranslator holds one device's translation state (key maps learned
// from the device, the dedup of repeated samples). Not thread-safe: the
// collector keeps one per target and calls it from that target's stream
// callbacks only.
#ifndef LOOM_TELEMETRY_PROFILE_H_
#define LOOM_TELEMETRY_PROFILE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/telemetry_profile.pb.h"

namespace loom::telemetry {

// The catalogue signals, in display order.
const std::vector<std::string>& CatalogueSignals();
bool IsCatalogueSignal(std::string_view signal);
// The catalogue signal a catalogue path belongs to ("" = none). O(path).
std::string SignalOfCanonicalPath(const gnmi::Path& path);

// Reads one profile file (protobuf JSON) and validates it. Errors name the
// file, the signal and the field.
bool LoadProfileFile(const std::string& path, v1::TelemetryProfile* out, std::string* error);
// Validation: known signals, parsable paths and patterns, every canonical
// variable bound by each match pattern (or a key split), modes, marks,
// encodings, key maps referenced exist. Returns "" when valid.
std::string ValidateProfile(const v1::TelemetryProfile& profile);

// Profiles by name: the shipped directory first, then each user directory
// (a later file of the same name replaces an earlier one).
struct ProfileSet {
  std::map<std::string, v1::TelemetryProfile> profiles;
  // Which file each came from.
  std::map<std::string, std::string> files;
};
bool LoadProfiles(const std::vector<std::string>& dirs, ProfileSet* out, std::string* error);
// The directory of shipped profiles: $LOOM_PROFILE_DIR, else the first of
// <exe dir>/../share/loom/profiles, <exe dir>/../../telemetry/profiles (build
// tree), the source tree's telemetry/profiles that exists.
std::string ShippedProfileDir();

// One flattened native leaf.
struct NativeLeaf {
  std::string path;   // Text form, no origin, no leading "/".
  std::string value;  // Scalar text.
  bool is_number = false;
};

// Flattens an update under `prefix` (see the header comment). A value that
// is not valid JSON where JSON is declared yields `*error` and no leaves.
void FlattenUpdate(const gnmi::Path& prefix, const gnmi::Update& update,
                   const google::protobuf::Map<std::string, std::string>& list_keys,
                   std::vector<NativeLeaf>* out, std::string* error);

// A compiled path pattern.
class PathPattern {
 public:
  static Status Compile(std::string_view text, PathPattern* out);
  // Captures of a match, variable -> text; false when it does not match.
  bool Match(std::string_view path, std::map<std::string, std::string>* vars) const;
  // The same on a path already split with SplitPathSegments (origin ""):
  // what the translator uses, splitting each leaf once.
  bool MatchSegments(const std::vector<std::string>& segs,
                     std::map<std::string, std::string>* vars) const;
  // The pattern with variables substituted; false when one is unbound.
  bool Expand(const std::map<std::string, std::string>& vars, std::string* out) const;
  // Variables the pattern binds.
  std::vector<std::string> Variables() const;
  // The last segment when it has no variable ("" otherwise).
  const std::string& literal_tail() const { return literal_tail_; }

  struct Token {
    bool var = false;
    bool multi = false;  // "{var*}": whole segments
    std::string text;    // literal text or variable name
  };

 private:
  std::string origin_;  // "loom" for "loom:/..." templates
  std::vector<std::vector<Token>> segments_;
  std::string literal_tail_;
  // Literal text the last segment must start / end with (cheap rejection).
  std::string tail_prefix_;
  std::string tail_suffix_;
  bool has_multi_ = false;
};

// Splits a path text into segments at "/" outside "[...]" (backslash escapes
// honoured); the origin head ("loom:") and a leading "/" are dropped into
// `origin`.
std::vector<std::string> SplitPathSegments(std::string_view text, std::string* origin);
// The same into `*out`, reusing its strings (no allocation in steady state).
void SplitPathSegments(std::string_view text, std::string* origin, std::vector<std::string>* out);

// Key lookups for translation: map name -> (key -> value). "alias" is the
// device's interface aliases.
using KeyTables = std::map<std::string, std::unordered_map<std::string, std::string>>;

struct TranslateStats {
  uint64_t leaves = 0;        // Native leaves seen.
  uint64_t translated = 0;    // Catalogue updates produced.
  uint64_t unmatched = 0;     // No rule matched (ignored, like unknown paths).
  uint64_t unmapped_key = 0;  // A key map lacked the key (e.g. before the OID map arrived).
  uint64_t bad_value = 0;     // Not a number where one was needed, bad JSON.
  uint64_t repeated = 0;      // Identical to the last sample within the refresh interval.
  uint64_t key_map_updates = 0;
};

// ProfileTranslator: role — turns one device's native notifications into
// catalogue notifications per its profile. Trigger — the collector calls
// Translate() for every notification of a signal's stream and
// UpdateKeyMap() for key-map streams. Thread — the caller's; not
// thread-safe (one instance per target, one stream callback at a time).
class ProfileTranslator {
 public:
  // `aliases`: the device's interface_aliases (alias -> topology name).
  ProfileTranslator(const v1::TelemetryProfile& profile,
                    std::unordered_map<std::string, std::string> aliases);

  // Appends the catalogue updates of `n` to `out` (prefix empty, timestamp
  // kept). `signals` are the indexes (into profile.signals()) the stream
  // carries; each leaf goes to the first of them with a matching rule.
  // Returns the number of updates that were bad (bad JSON, unsupported type).
  size_t Translate(const std::vector<int>& signals, const gnmi::Notification& n, TimeNs arrival_ns,
                   gnmi::Notification* out, std::string* first_error);
  // A key map's notification: its flattened members become the map.
  void UpdateKeyMap(int key_map_index, const gnmi::Notification& n);
  const TranslateStats& stats() const { return stats_; }
  const v1::TelemetryProfile& profile() const { return profile_; }
  // Entries in a key map (for status output).
  size_t key_map_size(const std::string& name) const;
  // Per profile signal: catalogue updates produced (repeats included) and the
  // local time of the last one (-1 = none).
  // Atomics: read by the collector's supervisor without the translator's
  // lock (the translator may be busy with a large answer).
  struct SignalCounters {
    std::atomic<uint64_t> updates{0};
    std::atomic<TimeNs> last_arrival_ns{-1};
  };
  const SignalCounters& signal_counters(int signal_index) const { return counters_[signal_index]; }

 private:
  struct Rule {
    std::vector<PathPattern> match;
    PathPattern canonical;
    const v1::LeafRule* spec = nullptr;
  };
  struct SignalRules {
    std::unordered_map<std::string, std::vector<int>> by_tail;  // literal tail -> rules
    std::vector<int> other;
    std::vector<Rule> rules;
    TimeNs refresh_ns = 0;
  };
  // 1 = translated, 2 = a repeat (dropped), 0 = matched but dropped
  // (unmapped key, bad path), -1 = no rule of this signal matched.
  int Apply(const SignalRules& sr, const NativeLeaf& leaf, const std::vector<std::string>& segs,
            TimeNs ts, gnmi::Notification* out, std::string* first_error);

  v1::TelemetryProfile profile_;
  KeyTables tables_;
  std::vector<SignalRules> signals_;
  std::unique_ptr<SignalCounters[]> counters_;
  // Native leaf -> catalogue path, for state signals (ON_CHANGE), so that a
  // delete of a native subtree (an LLDP neighbour gone) deletes what it made.
  std::unordered_map<std::string, std::string> state_leaves_;
  std::vector<bool> state_signal_;
  struct Last {
    std::string value;
    TimeNs changed_ns = 0;
  };
  std::unordered_map<std::string, Last> last_;  // canonical text -> last value
  std::unordered_map<std::string, gnmi::Path> path_cache_;
  TranslateStats stats_;
};

// The other direction, for platform personalities (loom-fabric): a catalogue
// leaf rendered as the platform would serve it. `reverse` maps a KeyMap name
// to name -> device key (the inverse of what the device publishes).
struct RenderedLeaf {
  int signal_index = -1;
  std::string native_path;  // Text form of the first match pattern, expanded.
  std::string value;
};
class ProfileRenderer {
 public:
  explicit ProfileRenderer(const v1::TelemetryProfile& profile);
  // Catalogue path text (FormatPath) and scalar value -> native leaves (none
  // when the profile does not serve it).
  void Render(std::string_view canonical_path, std::string_view value, const KeyTables& reverse,
              std::vector<RenderedLeaf>* out) const;

 private:
  struct Rule {
    int signal_index;
    PathPattern canonical;
    PathPattern native;
    const v1::LeafRule* spec;
  };
  v1::TelemetryProfile profile_;
  std::vector<Rule> rules_;
};

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_PROFILE_H_
