#include "telemetry/profile.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/file.h"
#include "common/json.h"
#include "telemetry/path.h"

namespace loom::telemetry {
namespace {

namespace fs = std::filesystem;

bool IsLoomOrigin(std::string_view origin) { return origin == "loom"; }

bool IsYangIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

// Removes an RFC 7951 module prefix ("openconfig-interfaces:in-octets"). Only
// "identifier:identifier" counts, so data keys such as SONiC's "Ethernet0:3"
// or "oid:0x1500..." are kept whole.
std::string_view StripModule(std::string_view name) {
  size_t c = name.find(':');
  if (c == std::string_view::npos) return name;
  if (!IsYangIdentifier(name.substr(0, c)) || !IsYangIdentifier(name.substr(c + 1))) return name;
  return name.substr(c + 1);
}

void AppendEscapedName(std::string* out, std::string_view s) {
  for (char c : s) {
    if (c == '\\' || c == '/' || c == '[') out->push_back('\\');
    out->push_back(c);
  }
}

void WalkJson(const JsonValue& v, const std::string& path,
              const google::protobuf::Map<std::string, std::string>& list_keys,
              const std::string& list_name, std::vector<NativeLeaf>* out) {
  switch (v.kind) {
    case JsonValue::Kind::kObject:
      for (const auto& [k, member] : v.members) {
        std::string_view name = StripModule(k);
        if (member.kind == JsonValue::Kind::kArray) {
          WalkJson(member, path, list_keys, std::string(name), out);
          continue;
        }
        std::string p = path;
        if (!p.empty()) p.push_back('/');
        AppendEscapedName(&p, name);
        WalkJson(member, p, list_keys, "", out);
      }
      return;
    case JsonValue::Kind::kArray:
      for (size_t i = 0; i < v.items.size(); ++i) {
        const JsonValue& item = v.items[i];
        std::string p = path;
        if (!p.empty()) p.push_back('/');
        AppendEscapedName(&p, list_name.empty() ? "item" : list_name);
        if (item.kind != JsonValue::Kind::kObject) {
          p += "[index=" + std::to_string(i) + "]";
          WalkJson(item, p, list_keys, "", out);
          continue;
        }
        // The list key: list_keys' entry, else "name", else "id", else the position.
        std::vector<std::string> candidates;
        if (auto it = list_keys.find(list_name); it != list_keys.end()) {
          candidates.push_back(it->second);
        }
        candidates.push_back("name");
        candidates.push_back("id");
        const JsonValue* key_value = nullptr;
        std::string key;
        for (const std::string& c : candidates) {
          for (const auto& [k, fv] : item.members) {
            if (StripModule(k) == c && fv.kind != JsonValue::Kind::kObject &&
                fv.kind != JsonValue::Kind::kArray) {
              key = c;
              key_value = &fv;
              break;
            }
          }
          if (key_value != nullptr) break;
        }
        p += key_value != nullptr ? "[" + key + "=" + key_value->text + "]"
                                  : "[index=" + std::to_string(i) + "]";
        // The key leaf itself is not repeated as a member.
        for (const auto& [k, member] : item.members) {
          if (key_value == &member) continue;
          std::string_view name = StripModule(k);
          if (member.kind == JsonValue::Kind::kArray) {
            WalkJson(member, p, list_keys, std::string(name), out);
            continue;
          }
          std::string mp = p + "/";
          AppendEscapedName(&mp, name);
          WalkJson(member, mp, list_keys, "", out);
        }
      }
      return;
    case JsonValue::Kind::kNull:
      return;
    default: {
      NativeLeaf leaf;
      leaf.path = path;
      leaf.value = v.text;
      leaf.is_number = v.kind == JsonValue::Kind::kNumber;
      out->push_back(std::move(leaf));
    }
  }
}

std::string NoOriginText(gnmi::Path p) {
  p.clear_origin();
  p.clear_target();
  std::string s = FormatPath(p);
  if (s == "/") return "";
  if (!s.empty() && s[0] == '/') s.erase(0, 1);
  return s;
}

const std::set<std::string>& KnownModes() {
  static const std::set<std::string> m = {"SAMPLE", "ON_CHANGE"};
  return m;
}
const std::set<std::string>& KnownEncodings() {
  static const std::set<std::string> m = {"PROTO", "JSON_IETF", "JSON"};
  return m;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end != nullptr && *end == '\0' && !std::isnan(*out);
}

}  // namespace

const std::vector<std::string>& CatalogueSignals() {
  static const std::vector<std::string> s = {
      "interface-counters", "oper-status", "port-speed",   "queue-counters",     "ecn-marks",
      "queue-watermark",    "queue-depth", "pfc-counters", "pfc-pause-duration", "pfc-watchdog",
      "nic-roce",           "alb-buckets", "lldp"};
  return s;
}

bool IsCatalogueSignal(std::string_view signal) {
  for (const auto& s : CatalogueSignals()) {
    if (s == signal) return true;
  }
  return false;
}

std::string SignalOfCanonicalPath(const gnmi::Path& path) {
  const auto& e = path.elem();
  const int n = e.size();
  if (n == 0) return "";
  const std::string& last = e[n - 1].name();
  const bool loom = IsLoomOrigin(path.origin());
  const std::string& first = e[0].name();
  if (first == "interfaces") {
    if (loom) return last == "operational-speed-bps" ? "port-speed" : "";
    if (last == "oper-status") return "oper-status";
    if (n >= 4 && e[n - 2].name() == "counters") return "interface-counters";
    return "";
  }
  if (first == "qos") {
    if (loom) return last == "current-queue-len" ? "queue-depth" : "";
    if (last == "ecn-marked-pkts" || last == "ecn-marked-octets") return "ecn-marks";
    if (last == "max-queue-len") return "queue-watermark";
    return "queue-counters";
  }
  if (first == "pfc" && loom) {
    for (const auto& el : e) {
      if (el.name() == "watchdog") return "pfc-watchdog";
    }
    if (last == "rx-pkts" || last == "tx-pkts") return "pfc-counters";
    return "pfc-pause-duration";
  }
  if (first == "nic" && loom) return "nic-roce";
  if (first == "alb" && loom) return "alb-buckets";
  if (first == "lldp") return "lldp";
  return "";
}

void SplitPathSegments(std::string_view text, std::string* origin, std::vector<std::string>* out) {
  origin->clear();
  // Origin head: before the first '/', ending with ':' and without '['.
  size_t slash = text.find('/');
  if (slash != std::string_view::npos && slash > 0 && text[slash - 1] == ':' &&
      text.substr(0, slash).find('[') == std::string_view::npos) {
    origin->assign(text.substr(0, slash - 1));
    text.remove_prefix(slash);
  }
  // Reuses the strings already in *out (no allocation in steady state).
  size_t n = 0;
  auto next = [&]() -> std::string& {
    if (n == out->size()) out->emplace_back();
    std::string& s = (*out)[n++];
    s.clear();
    return s;
  };
  std::string* cur = nullptr;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '/' && depth == 0) {
      if (cur != nullptr && !cur->empty()) cur = nullptr;
      continue;
    }
    if (cur == nullptr) cur = &next();
    if (c == '\\' && i + 1 < text.size()) {
      cur->push_back(c);
      cur->push_back(text[++i]);
      continue;
    }
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    cur->push_back(c);
  }
  out->resize(n);
}

std::vector<std::string> SplitPathSegments(std::string_view text, std::string* origin) {
  std::vector<std::string> out;
  SplitPathSegments(text, origin, &out);
  return out;
}

Status PathPattern::Compile(std::string_view text, PathPattern* out) {
  *out = PathPattern();
  std::vector<std::string> segs = SplitPathSegments(text, &out->origin_);
  if (segs.empty()) return InvalidArgument("pattern '" + std::string(text) + "' is empty");
  std::set<std::string> seen;
  for (const std::string& seg : segs) {
    std::vector<Token> toks;
    size_t i = 0;
    while (i < seg.size()) {
      if (seg[i] == '{') {
        size_t close = seg.find('}', i);
        if (close == std::string::npos) {
          return InvalidArgument("pattern '" + std::string(text) + "': unclosed '{'");
        }
        Token t;
        t.var = true;
        t.text = seg.substr(i + 1, close - i - 1);
        if (!t.text.empty() && t.text.back() == '*') {
          t.multi = true;
          t.text.pop_back();
          if (i != 0 || close + 1 != seg.size()) {
            return InvalidArgument("pattern '" + std::string(text) + "': {" + t.text +
                                   "*} must be a whole segment");
          }
        }
        if (t.text.empty()) {
          return InvalidArgument("pattern '" + std::string(text) + "': empty variable name");
        }
        if (!seen.insert(t.text).second) {
          return InvalidArgument("pattern '" + std::string(text) + "': variable {" + t.text +
                                 "} appears twice");
        }
        if (!toks.empty() && toks.back().var) {
          return InvalidArgument("pattern '" + std::string(text) +
                                 "': two variables need a literal between them");
        }
        toks.push_back(std::move(t));
        i = close + 1;
        continue;
      }
      size_t next = seg.find('{', i);
      if (next == std::string::npos) next = seg.size();
      Token t;
      t.text = seg.substr(i, next - i);
      toks.push_back(std::move(t));
      i = next;
    }
    out->segments_.push_back(std::move(toks));
  }
  const auto& last = out->segments_.back();
  if (last.size() == 1 && !last[0].var) out->literal_tail_ = last[0].text;
  if (!last.empty() && !last.front().var) out->tail_prefix_ = last.front().text;
  if (last.size() > 1 && !last.back().var) out->tail_suffix_ = last.back().text;
  for (const auto& seg : out->segments_) {
    if (seg.size() == 1 && seg[0].multi) out->has_multi_ = true;
  }
  return Status::Ok();
}

namespace {

using Tokens = std::vector<PathPattern::Token>;

// Matches one segment's tokens against `s` from token `ti` and position `si`.
bool MatchSegment(const Tokens& toks, size_t ti, std::string_view s, size_t si,
                  std::map<std::string, std::string>* vars) {
  if (ti == toks.size()) return si == s.size();
  const auto& t = toks[ti];
  if (!t.var) {
    if (s.compare(si, t.text.size(), t.text) != 0) return false;
    return MatchSegment(toks, ti + 1, s, si + t.text.size(), vars);
  }
  // Variable: shortest capture (non-empty) that lets the rest match.
  for (size_t end = si + 1; end <= s.size(); ++end) {
    if (MatchSegment(toks, ti + 1, s, end, vars)) {
      (*vars)[t.text] = std::string(s.substr(si, end - si));
      return true;
    }
  }
  return false;
}

bool MatchFrom(const std::vector<Tokens>& pat, size_t pi, const std::vector<std::string>& segs,
               size_t si, std::map<std::string, std::string>* vars) {
  if (pi == pat.size()) return si == segs.size();
  const Tokens& toks = pat[pi];
  if (toks.size() == 1 && toks[0].multi) {
    for (size_t end = si; end <= segs.size(); ++end) {
      if (MatchFrom(pat, pi + 1, segs, end, vars)) {
        std::string joined;
        for (size_t k = si; k < end; ++k) {
          if (!joined.empty()) joined.push_back('/');
          joined += segs[k];
        }
        (*vars)[toks[0].text] = joined;
        return true;
      }
    }
    return false;
  }
  if (si >= segs.size()) return false;
  if (!MatchSegment(toks, 0, segs[si], 0, vars)) return false;
  return MatchFrom(pat, pi + 1, segs, si + 1, vars);
}

}  // namespace

bool PathPattern::MatchSegments(const std::vector<std::string>& segs,
                                std::map<std::string, std::string>* vars) const {
  if (!origin_.empty() && !IsOpenConfigOrigin(origin_)) return false;
  if (segs.empty()) return false;
  if (!has_multi_) {
    if (segs.size() != segments_.size()) return false;
    const std::string& tail = segs.back();
    if (!literal_tail_.empty() && tail != literal_tail_) return false;
    if (tail.size() < tail_prefix_.size() + tail_suffix_.size() ||
        tail.compare(0, tail_prefix_.size(), tail_prefix_) != 0 ||
        tail.compare(tail.size() - tail_suffix_.size(), tail_suffix_.size(), tail_suffix_) != 0) {
      return false;
    }
  }
  std::map<std::string, std::string> got;
  if (!MatchFrom(segments_, 0, segs, 0, &got)) return false;
  for (auto& [k, v] : got) (*vars)[k] = std::move(v);
  return true;
}

bool PathPattern::Match(std::string_view path, std::map<std::string, std::string>* vars) const {
  std::string origin;
  std::vector<std::string> segs = SplitPathSegments(path, &origin);
  if (origin != origin_ && !(IsOpenConfigOrigin(origin) && IsOpenConfigOrigin(origin_))) {
    return false;
  }
  std::map<std::string, std::string> got;
  if (!MatchFrom(segments_, 0, segs, 0, &got)) return false;
  for (auto& [k, v] : got) (*vars)[k] = std::move(v);
  return true;
}

bool PathPattern::Expand(const std::map<std::string, std::string>& vars, std::string* out) const {
  out->clear();
  if (!origin_.empty()) *out = origin_ + ":";
  for (const auto& seg : segments_) {
    std::string s;
    for (const auto& t : seg) {
      if (!t.var) {
        s += t.text;
        continue;
      }
      auto it = vars.find(t.text);
      if (it == vars.end()) return false;
      s += it->second;
    }
    if (s.empty()) continue;  // An empty {var*}.
    out->push_back('/');
    *out += s;
  }
  if (out->empty() || out->back() == ':') out->push_back('/');
  return true;
}

std::vector<std::string> PathPattern::Variables() const {
  std::vector<std::string> v;
  for (const auto& seg : segments_) {
    for (const auto& t : seg) {
      if (t.var) v.push_back(t.text);
    }
  }
  return v;
}

void FlattenUpdate(const gnmi::Path& prefix, const gnmi::Update& update,
                   const google::protobuf::Map<std::string, std::string>& list_keys,
                   std::vector<NativeLeaf>* out, std::string* error) {
  gnmi::Path full = JoinPath(prefix, update.path());
  // Deprecated `element` form: each string is one element name.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  if (full.elem_size() == 0 && (prefix.element_size() > 0 || update.path().element_size() > 0)) {
    // Each string is one element in text form ("interface[name=Ethernet0]").
    std::string text;
    for (const auto& e : prefix.element()) text += "/" + e;
    for (const auto& e : update.path().element()) text += "/" + e;
    gnmi::Path parsed;
    if (!ParsePath(text, &parsed).ok()) {
      *error = "bad element path " + text;
      return;
    }
    for (const auto& e : parsed.elem()) *full.add_elem() = e;
  }
#pragma GCC diagnostic pop
  std::string base = NoOriginText(full);
  const gnmi::TypedValue& v = update.val();
  NativeLeaf leaf;
  leaf.path = base;
  switch (v.value_case()) {
    case gnmi::TypedValue::kJsonVal:
    case gnmi::TypedValue::kJsonIetfVal: {
      const std::string& text =
          v.value_case() == gnmi::TypedValue::kJsonVal ? v.json_val() : v.json_ietf_val();
      JsonValue parsed;
      std::string why;
      if (!ParseJson(text, &parsed, &why)) {
        *error = "invalid JSON at " + (base.empty() ? std::string("/") : base) + ": " + why;
        return;
      }
      WalkJson(parsed, base, list_keys, "", out);
      return;
    }
    case gnmi::TypedValue::kStringVal:
      leaf.value = v.string_val();
      break;
    case gnmi::TypedValue::kAsciiVal:
      leaf.value = v.ascii_val();
      break;
    case gnmi::TypedValue::kUintVal:
      leaf.value = std::to_string(v.uint_val());
      leaf.is_number = true;
      break;
    case gnmi::TypedValue::kIntVal:
      leaf.value = std::to_string(v.int_val());
      leaf.is_number = true;
      break;
    case gnmi::TypedValue::kDoubleVal: {
      std::ostringstream os;
      os.precision(17);
      os << v.double_val();
      leaf.value = os.str();
      leaf.is_number = true;
      break;
    }
    case gnmi::TypedValue::kBoolVal:
      leaf.value = v.bool_val() ? "true" : "false";
      break;
    default:
      *error = "unsupported value type at " + base;
      return;
  }
  out->push_back(std::move(leaf));
}

// ---- profiles ---------------------------------------------------------------

std::string ValidateProfile(const v1::TelemetryProfile& p) {
  if (p.name().empty()) return "name: empty";
  for (int i = 0; i < p.encodings_size(); ++i) {
    if (!KnownEncodings().count(p.encodings(i))) {
      return "encodings[" + std::to_string(i) + "]: unknown encoding '" + p.encodings(i) +
             "' (PROTO, JSON_IETF, JSON)";
    }
  }
  std::set<std::string> maps = {"alias"};
  for (int i = 0; i < p.key_maps_size(); ++i) {
    const auto& k = p.key_maps(i);
    const std::string where = "key_maps[" + std::to_string(i) + "] (" + k.name() + ")";
    if (k.name().empty() || !maps.insert(k.name()).second) {
      return where + ": name empty or repeated";
    }
    gnmi::Path tmp;
    if (Status s = ParsePath(k.path(), &tmp); !s.ok() || k.path().empty()) {
      return where + ".path: " + (k.path().empty() ? "empty" : s.message());
    }
    if (k.mark() != "SOURCED" && k.mark() != "UNVERIFIED") {
      return where + ".mark: must be SOURCED or UNVERIFIED";
    }
    if (k.mark() == "SOURCED" && k.source().empty()) return where + ".source: SOURCED needs one";
  }
  for (int i = 0; i < p.signals_size(); ++i) {
    const auto& s = p.signals(i);
    const std::string where = "signals[" + std::to_string(i) + "] (" + s.signal() + ")";
    if (!IsCatalogueSignal(s.signal())) return where + ".signal: not a catalogue signal";
    gnmi::Path tmp;
    if (Status st = ParsePath(s.path(), &tmp); !st.ok() || s.path().empty()) {
      return where + ".path: " + (s.path().empty() ? "empty" : st.message());
    }
    if (!KnownModes().count(s.mode())) return where + ".mode: must be SAMPLE or ON_CHANGE";
    if (s.mark() != "SOURCED" && s.mark() != "UNVERIFIED") {
      return where + ".mark: must be SOURCED or UNVERIFIED";
    }
    if (s.mark() == "SOURCED" && s.source().empty()) return where + ".source: SOURCED needs one";
    if (s.leaves_size() == 0) return where + ".leaves: none";
    for (int j = 0; j < s.leaves_size(); ++j) {
      const auto& r = s.leaves(j);
      const std::string lw = where + ".leaves[" + std::to_string(j) + "]";
      PathPattern canon;
      if (Status st = PathPattern::Compile(r.canonical(), &canon); !st.ok()) {
        return lw + ".canonical: " + st.message();
      }
      if (r.match_size() == 0) return lw + ".match: none";
      std::set<std::string> produced;
      for (const auto& [var, kt] : r.keys()) {
        if (!maps.count(kt.map()))
          return lw + ".keys." + var + ": unknown key map '" + kt.map() + "'";
        for (const auto& into : kt.into()) produced.insert(into);
        if (kt.into_size() > 0 && kt.split().empty())
          return lw + ".keys." + var + ": into needs split";
      }
      for (int m = 0; m < r.match_size(); ++m) {
        PathPattern mp;
        if (Status st = PathPattern::Compile(r.match(m), &mp); !st.ok()) {
          return lw + ".match[" + std::to_string(m) + "]: " + st.message();
        }
        std::set<std::string> bound(produced);
        for (const auto& v : mp.Variables()) bound.insert(v);
        for (const auto& v : canon.Variables()) {
          if (!bound.count(v)) {
            return lw + ".match[" + std::to_string(m) + "]: does not bind {" + v +
                   "} used by canonical";
          }
        }
      }
      if (r.scale() < 0 || std::isnan(r.scale())) return lw + ".scale: must be >= 0";
    }
  }
  for (int i = 0; i < p.unserved_size(); ++i) {
    if (!IsCatalogueSignal(p.unserved(i).signal())) {
      return "unserved[" + std::to_string(i) + "].signal: not a catalogue signal '" +
             p.unserved(i).signal() + "'";
    }
  }
  return "";
}

bool LoadProfileFile(const std::string& path, v1::TelemetryProfile* out, std::string* error) {
  std::string text;
  if (!ReadFileCapped(path, kMaxProfileFileBytes, "profile", &text, error)) return false;
  out->Clear();
  google::protobuf::util::JsonParseOptions opts;
  auto st = google::protobuf::util::JsonStringToMessage(text, out, opts);
  if (!st.ok()) {
    *error = path + ": " + std::string(st.message());
    return false;
  }
  if (std::string e = ValidateProfile(*out); !e.empty()) {
    *error = path + ": " + e;
    return false;
  }
  return true;
}

bool LoadProfiles(const std::vector<std::string>& dirs, ProfileSet* out, std::string* error) {
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      *error = "profile directory " + dir + ": not a directory";
      return false;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      v1::TelemetryProfile p;
      if (!LoadProfileFile(f.string(), &p, error)) return false;
      if (p.name() != f.stem().string()) {
        *error = f.string() + ": name '" + p.name() + "' differs from the file name";
        return false;
      }
      out->files[p.name()] = f.string();
      out->profiles[p.name()] = std::move(p);
    }
  }
  return true;
}

std::string ShippedProfileDir() {
  if (const char* env = std::getenv("LOOM_PROFILE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    fs::path dir = exe.parent_path();
    candidates.push_back(dir / "../share/loom/profiles");
    candidates.push_back(dir / "../../telemetry/profiles");
    candidates.push_back(dir / "../telemetry/profiles");
  }
#ifdef LOOM_SOURCE_DIR
  candidates.push_back(fs::path(LOOM_SOURCE_DIR) / "telemetry/profiles");
#endif
  for (const auto& c : candidates) {
    if (fs::is_directory(c, ec)) return fs::weakly_canonical(c, ec).string();
  }
  return "";
}

// ---- translation ------------------------------------------------------------

ProfileTranslator::ProfileTranslator(const v1::TelemetryProfile& profile,
                                     std::unordered_map<std::string, std::string> aliases)
    : profile_(profile) {
  tables_["alias"] = std::move(aliases);
  for (const auto& s : profile_.signals()) {
    SignalRules sr;
    sr.refresh_ns = static_cast<TimeNs>(s.refresh_interval_ms()) * kNsPerMs;
    for (const auto& r : s.leaves()) {
      Rule rule;
      rule.spec = &r;
      bool ok = PathPattern::Compile(r.canonical(), &rule.canonical).ok();
      for (const auto& m : r.match()) {
        PathPattern p;
        if (PathPattern::Compile(m, &p).ok()) rule.match.push_back(std::move(p));
      }
      if (!ok || rule.match.empty()) continue;  // ValidateProfile rejects these.
      const int idx = static_cast<int>(sr.rules.size());
      std::set<std::string> tails;
      bool any_var_tail = false;
      for (const auto& p : rule.match) {
        if (p.literal_tail().empty()) {
          any_var_tail = true;
        } else {
          tails.insert(p.literal_tail());
        }
      }
      for (const auto& t : tails) sr.by_tail[t].push_back(idx);
      if (any_var_tail) sr.other.push_back(idx);
      sr.rules.push_back(std::move(rule));
    }
    signals_.push_back(std::move(sr));
  }
  counters_ = std::make_unique<SignalCounters[]>(signals_.size());
  for (const auto& s : profile_.signals()) state_signal_.push_back(s.mode() == "ON_CHANGE");
}

size_t ProfileTranslator::key_map_size(const std::string& name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? 0 : it->second.size();
}

void ProfileTranslator::UpdateKeyMap(int key_map_index, const gnmi::Notification& n) {
  if (key_map_index < 0 || key_map_index >= profile_.key_maps_size()) return;
  const auto& km = profile_.key_maps(key_map_index);
  gnmi::Path base;
  (void)ParsePath(km.path(), &base);
  const std::string base_text = NoOriginText(base);
  auto& table = tables_[km.name()];
  for (const auto& u : n.update()) {
    std::vector<NativeLeaf> leaves;
    std::string err;
    FlattenUpdate(n.prefix(), u, profile_.list_keys(), &leaves, &err);
    for (const auto& l : leaves) {
      // The member name is the part after the map's own path.
      std::string_view rest = l.path;
      if (rest.size() > base_text.size() && rest.substr(0, base_text.size()) == base_text &&
          rest[base_text.size()] == '/') {
        rest.remove_prefix(base_text.size() + 1);
      } else {
        size_t slash = rest.rfind('/');
        if (slash != std::string_view::npos) rest.remove_prefix(slash + 1);
      }
      if (km.invert()) {
        table[l.value] = std::string(rest);
      } else {
        table[std::string(rest)] = l.value;
      }
      ++stats_.key_map_updates;
    }
  }
}

int ProfileTranslator::Apply(const SignalRules& sr, const NativeLeaf& leaf,
                             const std::vector<std::string>& segs, TimeNs ts,
                             gnmi::Notification* out, std::string* first_error) {
  static const std::string kEmpty;
  const std::string& tail = segs.empty() ? kEmpty : segs.back();
  auto try_rules = [&](const std::vector<int>& idxs) -> int {
    for (int i : idxs) {
      const Rule& r = sr.rules[i];
      for (const auto& m : r.match) {
        std::map<std::string, std::string> vars;
        if (!m.MatchSegments(segs, &vars)) continue;
        // Key translations.
        for (const auto& [var, kt] : r.spec->keys()) {
          auto vit = vars.find(var);
          if (vit == vars.end()) continue;
          std::string value = vit->second;
          auto tit = tables_.find(kt.map());
          if (tit != tables_.end() && !tit->second.empty()) {
            auto kit = tit->second.find(value);
            if (kit != tit->second.end()) {
              value = kit->second;
            } else if (kt.map() != "alias") {
              ++stats_.unmapped_key;
              return 0;
            }
          } else if (kt.map() != "alias") {
            ++stats_.unmapped_key;
            return 0;
          }
          if (!kt.split().empty()) {
            size_t pos = 0;
            for (int k = 0; k < kt.into_size(); ++k) {
              size_t next =
                  k + 1 == kt.into_size() ? std::string::npos : value.find(kt.split(), pos);
              if (k + 1 < kt.into_size() && next == std::string::npos) {
                ++stats_.unmapped_key;
                return 0;
              }
              vars[kt.into(k)] = value.substr(pos, next == std::string::npos ? next : next - pos);
              pos = next == std::string::npos ? next : next + kt.split().size();
            }
          } else {
            vit->second = value;
          }
        }
        // Interface names the device reports by alias (inventory).
        if (auto ifv = vars.find("if"); ifv != vars.end()) {
          const auto& aliases = tables_["alias"];
          if (auto a = aliases.find(ifv->second); a != aliases.end()) ifv->second = a->second;
        }
        std::string canonical;
        if (!r.canonical.Expand(vars, &canonical)) return 0;
        // Value.
        gnmi::TypedValue val;
        if (r.spec->enum_map_size() > 0) {
          auto e = r.spec->enum_map().find(leaf.value);
          val.set_string_val(e != r.spec->enum_map().end() ? e->second : leaf.value);
        } else {
          double d = 0;
          if (ParseDouble(leaf.value, &d)) {
            const double scale = r.spec->scale() == 0 ? 1.0 : r.spec->scale();
            const bool integral = leaf.value.find_first_of(".eE") == std::string::npos;
            if (integral && scale == 1.0 && leaf.value[0] != '-') {
              val.set_uint_val(std::strtoull(leaf.value.c_str(), nullptr, 10));
            } else if (integral && scale == 1.0) {
              val.set_int_val(std::strtoll(leaf.value.c_str(), nullptr, 10));
            } else if (d * scale >= 0 && std::floor(d * scale) == d * scale && d * scale < 1.8e19) {
              val.set_uint_val(static_cast<uint64_t>(d * scale));
            } else {
              val.set_double_val(d * scale);
            }
          } else {
            val.set_string_val(leaf.value);
          }
        }
        // Repeated samples between device refreshes carry no new information.
        if (sr.refresh_ns > 0) {
          const std::string& vtext = leaf.value;
          if (last_.size() > 1'000'000) last_.clear();
          auto [it, inserted] = last_.try_emplace(canonical);
          if (!inserted && it->second.value == vtext &&
              ts - it->second.changed_ns < sr.refresh_ns && ts >= it->second.changed_ns) {
            ++stats_.repeated;
            return 2;
          }
          if (inserted || it->second.value != vtext) it->second.changed_ns = ts;
          it->second.value = vtext;
        }
        auto pit = path_cache_.find(canonical);
        if (pit == path_cache_.end()) {
          gnmi::Path p;
          if (Status s = ParsePath(canonical, &p); !s.ok()) {
            if (first_error->empty()) *first_error = s.message();
            ++stats_.bad_value;
            return 0;
          }
          if (path_cache_.size() > 1'000'000) path_cache_.clear();
          pit = path_cache_.emplace(canonical, std::move(p)).first;
        }
        gnmi::Update* u = out->add_update();
        *u->mutable_path() = pit->second;
        *u->mutable_val() = std::move(val);
        ++stats_.translated;
        return 1;
      }
    }
    return -1;
  };
  int r = -1;
  if (auto it = sr.by_tail.find(tail); it != sr.by_tail.end()) r = try_rules(it->second);
  if (r < 0) r = try_rules(sr.other);
  return r;
}

size_t ProfileTranslator::Translate(const std::vector<int>& signals, const gnmi::Notification& n,
                                    TimeNs arrival_ns, gnmi::Notification* out,
                                    std::string* first_error) {
  out->set_timestamp(n.timestamp());
  size_t bad = 0;
  std::vector<NativeLeaf> leaves;
  std::vector<std::string> segs;
  std::string origin;
  auto route = [&](const NativeLeaf& l, gnmi::Notification* dst) -> int {
    SplitPathSegments(l.path, &origin, &segs);
    for (int si : signals) {
      if (si < 0 || si >= static_cast<int>(signals_.size())) continue;
      const int r = Apply(signals_[si], l, segs, n.timestamp(), dst, first_error);
      if (r < 0) continue;
      if (r > 0) {
        counters_[si].updates.fetch_add(1, std::memory_order_relaxed);
        counters_[si].last_arrival_ns.store(arrival_ns, std::memory_order_relaxed);
        if (state_signal_[si] && dst->update_size() > 0 && state_leaves_.size() < 100'000) {
          state_leaves_[l.path] = FormatPath(dst->update(dst->update_size() - 1).path());
        }
      }
      return r;
    }
    ++stats_.unmatched;
    return -1;
  };
  for (const auto& u : n.update()) {
    leaves.clear();
    std::string err;
    FlattenUpdate(n.prefix(), u, profile_.list_keys(), &leaves, &err);
    if (!err.empty()) {
      ++bad;
      ++stats_.bad_value;
      if (first_error->empty()) *first_error = err;
      continue;
    }
    for (const auto& l : leaves) {
      ++stats_.leaves;
      route(l, out);
    }
  }
  for (const auto& d : n.delete_()) {
    // A delete removes the catalogue leaves made from the native leaves at or
    // under it (state signals are remembered for this); a leaf delete of
    // another signal is translated as the leaf itself.
    const std::string native = NoOriginText(JoinPath(n.prefix(), d));
    bool any = false;
    for (auto it = state_leaves_.begin(); it != state_leaves_.end();) {
      const std::string& leaf = it->first;
      if (leaf == native ||
          (leaf.size() > native.size() && leaf.compare(0, native.size(), native) == 0 &&
           leaf[native.size()] == '/') ||
          native.empty()) {
        gnmi::Path p;
        if (ParsePath(it->second, &p).ok()) *out->add_delete_() = std::move(p);
        last_.erase(it->second);
        it = state_leaves_.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    if (any) continue;
    NativeLeaf l;
    l.path = native;
    SplitPathSegments(l.path, &origin, &segs);
    gnmi::Notification tmp;
    for (int si : signals) {
      if (si < 0 || si >= static_cast<int>(signals_.size())) continue;
      if (Apply(signals_[si], l, segs, n.timestamp(), &tmp, first_error) == 1 &&
          tmp.update_size() > 0) {
        *out->add_delete_() = tmp.update(0).path();
        --stats_.translated;
        last_.erase(FormatPath(tmp.update(0).path()));
        break;
      }
    }
  }
  return bad;
}

// ---- rendering (personalities) ----------------------------------------------

ProfileRenderer::ProfileRenderer(const v1::TelemetryProfile& profile) : profile_(profile) {
  for (int s = 0; s < profile_.signals_size(); ++s) {
    for (const auto& r : profile_.signals(s).leaves()) {
      Rule rule;
      rule.signal_index = s;
      rule.spec = &r;
      if (!PathPattern::Compile(r.canonical(), &rule.canonical).ok()) continue;
      if (r.match_size() == 0 || !PathPattern::Compile(r.match(0), &rule.native).ok()) continue;
      rules_.push_back(std::move(rule));
    }
  }
}

void ProfileRenderer::Render(std::string_view canonical_path, std::string_view value,
                             const KeyTables& reverse, std::vector<RenderedLeaf>* out) const {
  for (const Rule& r : rules_) {
    std::map<std::string, std::string> vars;
    if (!r.canonical.Match(canonical_path, &vars)) continue;
    bool ok = true;
    for (const auto& [var, kt] : r.spec->keys()) {
      // Rebuild the native key from the variables it was split into.
      std::string key;
      if (!kt.split().empty()) {
        for (int k = 0; k < kt.into_size(); ++k) {
          auto it = vars.find(kt.into(k));
          if (it == vars.end()) {
            ok = false;
            break;
          }
          if (k > 0) key += kt.split();
          key += it->second;
        }
      } else {
        auto it = vars.find(var);
        if (it == vars.end()) continue;
        key = it->second;
      }
      if (!ok) break;
      auto tit = reverse.find(kt.map());
      if (tit != reverse.end()) {
        auto kit = tit->second.find(key);
        if (kit != tit->second.end()) {
          key = kit->second;
        } else if (kt.map() != "alias") {
          ok = false;
          break;
        }
      } else if (kt.map() != "alias") {
        ok = false;
        break;
      }
      vars[var] = key;
    }
    if (!ok) continue;
    RenderedLeaf leaf;
    leaf.signal_index = r.signal_index;
    if (!r.native.Expand(vars, &leaf.native_path)) continue;
    if (!leaf.native_path.empty() && leaf.native_path[0] == '/') leaf.native_path.erase(0, 1);
    leaf.value = std::string(value);
    if (r.spec->enum_map_size() > 0) {
      for (const auto& [native, canon] : r.spec->enum_map()) {
        if (canon == value) {
          leaf.value = native;
          break;
        }
      }
    } else if (r.spec->scale() != 0 && r.spec->scale() != 1) {
      double d = 0;
      if (ParseDouble(leaf.value, &d)) {
        double v = d / r.spec->scale();
        leaf.value = std::to_string(static_cast<uint64_t>(std::llround(std::max(0.0, v))));
      }
    }
    out->push_back(std::move(leaf));
  }
}

}  // namespace loom::telemetry
