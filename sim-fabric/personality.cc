#include "sim-fabric/personality.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>

#include "common/log.h"
#include "common/text.h"
#include "sim-fabric/yang_context.h"
#include "southbound/bgp/prefix_plan.h"
#include "telemetry/path.h"

namespace loom::sim {

// A path the sonic personality serves under one database: a signal's or a
// key map's path.
struct Personality::Home {
  std::string target;
  std::vector<std::string> segs;  // path segments, escapes kept
  std::string text;
};

// One native leaf of the device as the platform serves it: a rendered
// catalogue leaf, or (sonic) a member of a key map.
struct Personality::Native {
  int leaf = -1;                  // schema leaf; -1 = key-map member
  int signal = -1;                // profile signal index; -1 = key-map member
  int home = -1;                  // sonic: index into homes_
  std::vector<std::string> segs;  // full native path segments, escapes kept
  std::vector<std::string> rest;  // sonic: segments after the home, unescaped
  std::string native_text;        // as ProfileRenderer wrote it
  gnmi::Path path;                // OpenConfig kinds: parsed native path
  gnmi::Path parent;              // OpenConfig kinds: container path
  std::string parent_text;
  std::string name;   // OpenConfig kinds: leaf name
  std::string fixed;  // key-map member value
  bool identity = true;
  bool numeric = false;  // the catalogue value is a number
  TimeNs refresh_ns = 0;
  LeafKind kind = LeafKind::kCounter;
};

// Everything value-independent about serving one device schema.
struct Personality::DeviceMap {
  std::shared_ptr<const DeviceSchema> schema;
  std::vector<std::string> canonical;  // per schema leaf: catalogue path text
  std::vector<Native> natives;         // schema-leaf order, key-map members last
  telemetry::KeyTables reverse;        // key map name -> (name -> device key)
};

namespace {

constexpr int kMaxPaths = 256;
constexpr int kMaxPathElems = 32;

std::vector<std::string> Segs(std::string_view text) {
  std::string origin;
  std::string t = "/";
  t += text;
  return telemetry::SplitPathSegments(t, &origin);
}

std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out.push_back(s[i]);
  }
  return out;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A JSON object being assembled from (key path, string value) pairs; members
// in key order.
struct JsonNode {
  std::map<std::string, std::unique_ptr<JsonNode>> kids;
  std::string value;
  bool scalar = false;

  void Insert(const std::vector<std::string>& keys, size_t from, const std::string& v) {
    JsonNode* n = this;
    for (size_t i = from; i < keys.size(); ++i) {
      auto& kid = n->kids[keys[i]];
      if (!kid) kid = std::make_unique<JsonNode>();
      n = kid.get();
    }
    n->value = v;
    n->scalar = true;
  }
  void Write(std::string* out) const {
    if (scalar && kids.empty()) {
      loom::AppendJsonString(*out, value);
      return;
    }
    out->push_back('{');
    bool first = true;
    for (const auto& [k, v] : kids) {
      if (!first) out->push_back(',');
      first = false;
      loom::AppendJsonString(*out, k);
      out->push_back(':');
      v->Write(out);
    }
    out->push_back('}');
  }
};

// The top-level module of an OpenConfig path, for RFC 7951 member names.
std::string ModuleOf(const gnmi::Path& p) {
  if (p.elem_size() == 0) return "openconfig";
  const std::string& first = p.elem(0).name();
  if (first == "interfaces") return "openconfig-interfaces";
  if (first == "qos") return "openconfig-qos";
  if (first == "lldp") return "openconfig-lldp";
  return "openconfig-" + first;
}

std::string EncodingName(int e) {
  return gnmi::Encoding_IsValid(e) ? gnmi::Encoding_Name(static_cast<gnmi::Encoding>(e))
                                   : std::to_string(e);
}

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "oid:0x%" PRIx64, v);
  return buf;
}

}  // namespace

// ------------------------------------------------------------------ names

bool ParsePersonalityKind(std::string_view name, PersonalityKind* out) {
  if (name == "sonic") {
    *out = PersonalityKind::kSonic;
  } else if (name == "openconfig") {
    *out = PersonalityKind::kOpenConfig;
  } else if (name == "openconfig-json") {
    *out = PersonalityKind::kOpenConfigJson;
  } else {
    return false;
  }
  return true;
}

const char* PersonalityName(PersonalityKind kind) {
  switch (kind) {
    case PersonalityKind::kSonic:
      return "sonic";
    case PersonalityKind::kOpenConfig:
      return "openconfig";
    case PersonalityKind::kOpenConfigJson:
      return "openconfig-json";
  }
  return "?";
}

const char* PersonalityProfileName(PersonalityKind kind) {
  return kind == PersonalityKind::kSonic ? "sonic" : "openconfig";
}

bool ParsePersonalitySpec(std::string_view text, PersonalitySpec* out, std::string* error) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    *error = "bad --personality " + std::string(text) + " (DEVICE=NAME)";
    return false;
  }
  out->device = std::string(text.substr(0, eq));
  if (!ParsePersonalityKind(text.substr(eq + 1), &out->kind)) {
    *error = "bad --personality " + std::string(text) + ": unknown personality \"" +
             std::string(text.substr(eq + 1)) + "\" (sonic, openconfig, openconfig-json)";
    return false;
  }
  return true;
}

std::string Personality::PortOid(int iface) {
  return Hex(0x1000000000000ULL + static_cast<uint64_t>(iface) + 1);
}

std::string Personality::QueueOid(int iface, int queue) {
  return Hex(0x15000000000000ULL + static_cast<uint64_t>(iface) * 256 +
             static_cast<uint64_t>(queue) + 1);
}

// ------------------------------------------------------------------ Session

// Session: role — one Subscribe stream (or one Get) on a personality: its
// subscriptions compiled against the device map, with per-leaf delivery
// state. Trigger — GnmiTarget's reactor: Initial() once, Tick() per published
// snapshot, Poll() per Poll. Thread — its owner's (not thread-safe).
class Personality::Session final : public SubscribeSession {
 public:
  Session(std::shared_ptr<Personality> p, const gnmi::SubscriptionList& list)
      : p_(std::move(p)),
        mode_(list.mode()),
        updates_only_(list.updates_only()),
        encoding_(list.encoding()),
        target_(list.prefix().target()) {}

  gnmi::SubscriptionList::Mode mode() const override { return mode_; }
  void Initial(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) override {
    for (Sub& s : subs_) {
      s.next_due = snap.virtual_ns + s.interval_ns;
      s.last_sent = snap.virtual_ns;
    }
    Run(snap, Pass::kInitial, out);
  }
  void Tick(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) override {
    Run(snap, Pass::kTick, out);
  }
  void Poll(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) override {
    Run(snap, Pass::kPoll, out);
  }

 private:
  friend class Personality;
  enum class Pass { kInitial, kTick, kPoll };
  struct Sub {
    gnmi::Path path;                // prefix joined, no target
    std::vector<std::string> segs;  // sonic: path segments
    gnmi::Path pattern;             // OpenConfig kinds: path + "..."
    gnmi::SubscriptionMode mode = gnmi::SAMPLE;
    TimeNs interval_ns = 0;
    TimeNs heartbeat_ns = 0;
    bool suppress = false;
    TimeNs next_due = 0;
    TimeNs last_sent = 0;
    int begin = 0, end = 0;  // entries_ range
  };
  struct Entry {
    int native = 0;
    int depth = 0;  // sonic: segments of the native path the subscription path covers
    bool on_change = false;
    bool sent = false;
    std::string last;
    TimeNs last_sent = 0;
    uint64_t peak = 0;
    bool cached = false;
    LeafValue src;
    std::string rendered;
  };

  bool sonic() const { return p_->kind_ == PersonalityKind::kSonic; }

  // Sonic: the subscription covers native `n` when its segments equal the
  // first ones of the native path ("*" = any one) and reach past the home.
  bool SonicMatch(const Sub& s, const Native& n, int* depth) const {
    const Home& h = p_->homes_[n.home];
    if (h.target != target_ || s.segs.size() < h.segs.size()) return false;
    if (s.segs.size() > n.segs.size()) return false;
    for (size_t i = 0; i < s.segs.size(); ++i) {
      if (s.segs[i] != "*" && s.segs[i] != n.segs[i]) return false;
    }
    *depth = static_cast<int>(s.segs.size() - h.segs.size());
    return true;
  }

  void Compile(std::shared_ptr<const DeviceMap> map) {
    map_ = std::move(map);
    entries_.clear();
    for (Sub& s : subs_) {
      s.begin = static_cast<int>(entries_.size());
      for (int i = 0; i < static_cast<int>(map_->natives.size()); ++i) {
        const Native& n = map_->natives[i];
        Entry e;
        e.native = i;
        if (sonic()) {
          if (!SonicMatch(s, n, &e.depth)) continue;
        } else if (!telemetry::PathMatches(s.pattern, n.path)) {
          continue;
        }
        e.on_change = s.mode == gnmi::ON_CHANGE ||
                      (s.mode == gnmi::TARGET_DEFINED && n.kind == LeafKind::kState);
        entries_.push_back(std::move(e));
      }
      s.end = static_cast<int>(entries_.size());
    }
  }

  void Run(const FabricSnapshot& snap, Pass pass, std::vector<gnmi::Notification>* out) {
    std::shared_ptr<const DeviceMap> map = p_->MapFor(snap);
    if (!map) return;
    if (map != map_) Compile(map);
    const int device = snap.Find(p_->device_);
    std::map<TimeNs, std::shared_ptr<const FabricSnapshot>> held;
    for (TimeNs r : p_->refreshes_) held[r] = p_->Held(r);
    auto source = [&](const Native& n) -> const LeafValue* {
      if (n.leaf < 0) return nullptr;
      if (n.refresh_ns > 0) {
        const auto& h = held[n.refresh_ns];
        if (h) {
          const int d = h->Find(p_->device_);
          if (d >= 0 && h->schemas[d] == map_->schema) return &h->values[d][n.leaf];
        }
      }
      if (device < 0 || snap.schemas[device] != map_->schema) return nullptr;
      return &snap.values[device][n.leaf];
    };
    const TimeNs t = snap.virtual_ns;
    std::vector<std::pair<int, std::string>> emit;  // entry, value
    for (Sub& s : subs_) {
      bool due = false;
      if (pass == Pass::kTick && s.mode != gnmi::ON_CHANGE && t >= s.next_due) {
        due = true;
        s.next_due += s.interval_ns;
        if (s.next_due <= t) s.next_due = t + s.interval_ns;
      }
      const bool sub_heartbeat = s.heartbeat_ns > 0 && t - s.last_sent >= s.heartbeat_ns;
      if (pass == Pass::kTick && !due && s.mode == gnmi::SAMPLE) {
        // Nothing due: only the per-interval peaks move.
        for (int i = s.begin; i < s.end; ++i) {
          Entry& e = entries_[i];
          const Native& n = map_->natives[e.native];
          if (n.kind != LeafKind::kPeak || !n.identity) continue;
          if (const LeafValue* src = source(n); src != nullptr && !src->is_string) {
            e.peak = std::max(e.peak, src->u);
          }
        }
        continue;
      }
      emit.clear();
      bool changed = false;
      std::vector<std::pair<int, std::string>> all;
      for (int i = s.begin; i < s.end; ++i) {
        Entry& e = entries_[i];
        const Native& n = map_->natives[e.native];
        std::string v;
        if (n.leaf < 0) {
          v = n.fixed;
        } else {
          const LeafValue* src = source(n);
          if (src == nullptr) continue;
          if (n.kind == LeafKind::kPeak && n.identity && !src->is_string) {
            e.peak = pass == Pass::kInitial ? 0 : std::max(e.peak, src->u);
          }
          if (n.identity) {
            v = src->is_string ? src->s : std::to_string(src->u);
          } else {
            if (!e.cached || e.src != *src) {
              e.src = *src;
              e.rendered = p_->Render(*map_, n, *src);
              e.cached = true;
            }
            v = e.rendered;
          }
        }
        if (pass != Pass::kTick) {
          if (pass == Pass::kInitial) {
            e.sent = true;
            e.last = v;
            e.last_sent = t;
            if (updates_only_) continue;
          }
          emit.emplace_back(i, std::move(v));
          continue;
        }
        if (sonic()) {
          const bool diff = !e.sent || v != e.last;
          changed = changed || diff;
          if (s.mode == gnmi::ON_CHANGE ? (diff || sub_heartbeat) : due) {
            all.emplace_back(i, std::move(v));
          }
          continue;
        }
        // OpenConfig kinds: per leaf, as the catalogue target.
        bool send = false;
        const bool heartbeat = s.heartbeat_ns > 0 && t - e.last_sent >= s.heartbeat_ns;
        if (e.on_change) {
          send = !e.sent || v != e.last || heartbeat;
        } else if (due) {
          if (n.kind == LeafKind::kPeak && n.identity && n.numeric) {
            v = std::to_string(e.peak);
            e.peak = 0;
          }
          send = !(s.suppress && e.sent && v == e.last && !heartbeat);
        }
        if (send) {
          e.last = v;
          e.sent = true;
          e.last_sent = t;
          emit.emplace_back(i, std::move(v));
        }
      }
      if (pass == Pass::kTick && sonic()) {
        // SAMPLE: the whole object when due (none when suppressed and
        // unchanged); ON_CHANGE: what changed (everything on a heartbeat).
        if (s.mode != gnmi::ON_CHANGE && s.suppress && !changed && !sub_heartbeat) all.clear();
        for (auto& [i, v] : all) {
          entries_[i].last = v;
          entries_[i].sent = true;
          entries_[i].last_sent = t;
        }
        emit = std::move(all);
      }
      if (emit.empty()) continue;
      s.last_sent = t;
      if (sonic()) {
        EmitSonic(snap, s, emit, out);
      } else {
        EmitOpenConfig(snap, emit, out);
      }
    }
  }

  void EmitSonic(const FabricSnapshot& snap, const Sub& s,
                 const std::vector<std::pair<int, std::string>>& emit,
                 std::vector<gnmi::Notification>* out) const {
    JsonNode root;
    for (const auto& [i, v] : emit) {
      const Entry& e = entries_[i];
      root.Insert(map_->natives[e.native].rest, static_cast<size_t>(e.depth), v);
    }
    std::string json;
    root.Write(&json);
    gnmi::Notification& n = out->emplace_back();
    n.set_timestamp(snap.timestamp_ns);
    n.mutable_prefix()->set_target(target_);
    gnmi::Update* u = n.add_update();
    *u->mutable_path() = s.path;
    if (encoding_ == gnmi::JSON) {
      u->mutable_val()->set_json_val(std::move(json));
    } else {
      u->mutable_val()->set_json_ietf_val(std::move(json));
    }
  }

  void EmitOpenConfig(const FabricSnapshot& snap,
                      const std::vector<std::pair<int, std::string>>& emit,
                      std::vector<gnmi::Notification>* out) const {
    if (encoding_ == gnmi::PROTO) {
      const std::string* parent = nullptr;
      for (const auto& [i, v] : emit) {
        const Native& n = map_->natives[entries_[i].native];
        if (parent == nullptr || *parent != n.parent_text) {
          parent = &n.parent_text;
          gnmi::Notification& note = out->emplace_back();
          note.set_timestamp(snap.timestamp_ns);
          *note.mutable_prefix() = n.parent;
          note.mutable_prefix()->set_target(target_);
        }
        gnmi::Update* u = out->back().add_update();
        u->mutable_path()->add_elem()->set_name(n.name);
        if (n.numeric && AllDigits(v)) {
          u->mutable_val()->set_uint_val(std::strtoull(v.c_str(), nullptr, 10));
        } else {
          u->mutable_val()->set_string_val(v);
        }
      }
      return;
    }
    // JSON_IETF / JSON: one update per container, an object of its leaves.
    gnmi::Notification& note = out->emplace_back();
    note.set_timestamp(snap.timestamp_ns);
    note.mutable_prefix()->set_target(target_);
    const bool ietf = encoding_ == gnmi::JSON_IETF;
    size_t k = 0;
    while (k < emit.size()) {
      const Native& first = map_->natives[entries_[emit[k].first].native];
      const std::string module = ModuleOf(first.path);
      std::string json = "{";
      size_t j = k;
      for (; j < emit.size(); ++j) {
        const Native& n = map_->natives[entries_[emit[j].first].native];
        if (n.parent_text != first.parent_text) break;
        if (j > k) json.push_back(',');
        loom::AppendJsonString(json, ietf ? module + ":" + n.name : n.name);
        json.push_back(':');
        loom::AppendJsonString(json, emit[j].second);
      }
      json.push_back('}');
      gnmi::Update* u = note.add_update();
      *u->mutable_path() = first.parent;
      if (ietf) {
        u->mutable_val()->set_json_ietf_val(std::move(json));
      } else {
        u->mutable_val()->set_json_val(std::move(json));
      }
      k = j;
    }
  }

  std::shared_ptr<Personality> p_;
  gnmi::SubscriptionList::Mode mode_;
  bool updates_only_;
  int encoding_;
  std::string target_;
  std::vector<Sub> subs_;
  std::vector<Entry> entries_;
  std::shared_ptr<const DeviceMap> map_;
};

// ------------------------------------------------------------------ Personality

Personality::Personality(PersonalityKind kind, const v1::TelemetryProfile& profile,
                         std::string device, const GnmiOptions& options)
    : kind_(kind),
      profile_(profile),
      device_(std::move(device)),
      options_(options),
      renderer_(profile_) {
  min_interval_ns_ =
      std::max<TimeNs>({options_.min_sample_interval_ns, options_.tick_ns,
                        static_cast<TimeNs>(profile_.min_sample_interval_ms()) * kNsPerMs});
  std::set<TimeNs> refreshes;
  std::set<std::string> targets;
  auto add_home = [&](const std::string& target, const std::string& path) {
    std::vector<std::string> segs = Segs(path);
    for (const Home& h : homes_) {
      if (h.target == target && h.segs == segs) return;
    }
    Home h;
    h.target = target;
    h.segs = std::move(segs);
    h.text = path;
    homes_.push_back(std::move(h));
    targets.insert(target);
  };
  for (const auto& s : profile_.signals()) {
    bool identity = true;
    for (const auto& r : s.leaves()) {
      if (r.enum_map_size() > 0 || (r.scale() != 0 && r.scale() != 1)) identity = false;
    }
    identity_.push_back(identity ? 1 : 0);
    const TimeNs refresh = static_cast<TimeNs>(s.refresh_interval_ms()) * kNsPerMs;
    refresh_ns_.push_back(refresh);
    if (refresh > 0) refreshes.insert(refresh);
    if (kind_ == PersonalityKind::kSonic) add_home(s.target(), s.path());
  }
  if (kind_ == PersonalityKind::kSonic) {
    for (const auto& km : profile_.key_maps()) add_home(km.target(), km.path());
  }
  refreshes_.assign(refreshes.begin(), refreshes.end());
  targets_.assign(targets.begin(), targets.end());
}

Personality::~Personality() = default;

gnmi::CapabilityResponse Personality::Capabilities() const {
  gnmi::CapabilityResponse r;
  auto add = [&](const char* name, const char* org, const char* version) {
    gnmi::ModelData* m = r.add_supported_models();
    m->set_name(name);
    m->set_organization(org);
    m->set_version(version);
  };
  if (kind_ == PersonalityKind::kSonic) {
    add("sonic-db", "SONiC", "0.1.0");
    r.add_supported_encodings(gnmi::JSON);
    r.add_supported_encodings(gnmi::JSON_IETF);
    r.add_supported_encodings(gnmi::PROTO);
  } else {
    add("openconfig-interfaces", "OpenConfig working group", "3.0.0");
    add("openconfig-if-ethernet", "OpenConfig working group", "2.13.0");
    add("openconfig-qos", "OpenConfig working group", "0.11.0");
    add("openconfig-lldp", "OpenConfig working group", "0.2.1");
    if (platform_) {  // Set: the models of the vendored set (sim-fabric/yang)
      add("openconfig-network-instance", "OpenConfig working group", "4.7.0");
      add("openconfig-local-routing", "OpenConfig working group", "4.1.0");
    }
    if (kind_ == PersonalityKind::kOpenConfig) {
      r.add_supported_encodings(gnmi::PROTO);
      r.add_supported_encodings(gnmi::JSON_IETF);
      r.add_supported_encodings(gnmi::JSON);
    } else {
      r.add_supported_encodings(gnmi::JSON_IETF);
    }
  }
  r.set_gnmi_version("0.10.0");
  return r;
}

Status Personality::CreateSession(const gnmi::SubscriptionList& list, const FabricSnapshot& snap,
                                  std::unique_ptr<SubscribeSession>* out) {
  const std::string who = std::string(PersonalityName(kind_)) + " personality of " + device_;
  if (list.mode() != gnmi::SubscriptionList::STREAM &&
      list.mode() != gnmi::SubscriptionList::ONCE && list.mode() != gnmi::SubscriptionList::POLL) {
    return InvalidArgument("SubscriptionList.mode " + std::to_string(list.mode()) +
                           " is not STREAM, ONCE or POLL");
  }
  if (list.subscription_size() == 0) {
    return InvalidArgument("SubscriptionList.subscription is empty");
  }
  if (list.subscription_size() > kMaxPaths) {
    return InvalidArgument("SubscriptionList has more than " + std::to_string(kMaxPaths) +
                           " subscriptions");
  }
  // gNMI rejects the whole request for one bad path: origins first.
  std::vector<gnmi::Path> joined;
  std::vector<std::string> texts;
  for (const gnmi::Subscription& in : list.subscription()) {
    gnmi::Path p = telemetry::JoinPath(list.prefix(), in.path());
    p.clear_target();
    const std::string text = telemetry::FormatPath(p);
    if (p.elem_size() > kMaxPathElems) {
      return InvalidArgument("subscription " + text.substr(0, 200) + " has more than " +
                             std::to_string(kMaxPathElems) + " elements");
    }
    const std::string& origin = p.origin();
    const bool rejected =
        std::find(profile_.rejected_origins().begin(), profile_.rejected_origins().end(), origin) !=
        profile_.rejected_origins().end();
    const bool allowed = origin.empty() || origin == "openconfig" ||
                         (kind_ == PersonalityKind::kSonic && origin == "sonic-db");
    if (rejected || !allowed) {
      return InvalidArgument("subscription " + text + ": origin \"" + origin +
                             "\" is not supported by this target (" + who +
                             (rejected ? "; rejected by profile " + profile_.name() : "") + ")");
    }
    joined.push_back(std::move(p));
    texts.push_back(text);
  }
  if (kind_ == PersonalityKind::kOpenConfigJson && list.encoding() != gnmi::JSON_IETF) {
    return Status(StatusCode::kUnimplemented, "encoding " + EncodingName(list.encoding()) +
                                                  " not supported; supported: JSON_IETF");
  }
  if (Status s = CheckEncoding(list.encoding()); !s.ok()) return s;
  const std::string& target = list.prefix().target();
  if (kind_ == PersonalityKind::kSonic) {
    if (std::find(targets_.begin(), targets_.end(), target) == targets_.end()) {
      std::string names;
      for (const auto& t : targets_) names += (names.empty() ? "" : ", ") + t;
      return NotFound("prefix.target \"" + target + "\" is not a database of this target (" + who +
                      " serves " + names + ")");
    }
  } else if (!target.empty() && target != device_) {
    return NotFound("prefix.target \"" + target + "\" is not this target (" + who + ")");
  }
  std::shared_ptr<const DeviceMap> map = MapFor(snap);
  if (!map) return NotFound("device " + device_ + " is not in the fabric");

  auto session = std::make_unique<Session>(shared_from_this(), list);
  constexpr uint64_t kMaxNs = static_cast<uint64_t>(std::numeric_limits<TimeNs>::max() / 4);
  for (int i = 0; i < list.subscription_size(); ++i) {
    const gnmi::Subscription& in = list.subscription(i);
    const std::string& text = texts[i];
    Session::Sub sub;
    sub.path = joined[i];
    if (in.mode() != gnmi::TARGET_DEFINED && in.mode() != gnmi::ON_CHANGE &&
        in.mode() != gnmi::SAMPLE) {
      return InvalidArgument("subscription " + text + ": unknown mode " +
                             std::to_string(in.mode()));
    }
    sub.mode = in.mode();
    sub.suppress = in.suppress_redundant();
    if (list.mode() == gnmi::SubscriptionList::STREAM) {
      if (kind_ == PersonalityKind::kSonic && in.mode() == gnmi::TARGET_DEFINED) {
        return InvalidArgument("subscription " + text +
                               ": TARGET_DEFINED not supported for DB targets");
      }
      if (in.sample_interval() > kMaxNs || in.heartbeat_interval() > kMaxNs) {
        return InvalidArgument("subscription " + text + ": interval out of range");
      }
      const auto interval = static_cast<TimeNs>(in.sample_interval());
      const auto heartbeat = static_cast<TimeNs>(in.heartbeat_interval());
      if (sub.mode != gnmi::ON_CHANGE && interval != 0 && interval < min_interval_ns_) {
        return InvalidArgument("subscription " + text + ": sample_interval " +
                               std::to_string(interval) + " ns is below the minimum " +
                               std::to_string(min_interval_ns_) + " ns (" + who + ")");
      }
      if (heartbeat != 0 && heartbeat < min_interval_ns_) {
        return InvalidArgument("subscription " + text + ": heartbeat_interval " +
                               std::to_string(heartbeat) + " ns is below the minimum " +
                               std::to_string(min_interval_ns_) + " ns (" + who + ")");
      }
      sub.heartbeat_ns = heartbeat;
      if (interval != 0) {
        sub.interval_ns = interval;
      } else if (kind_ == PersonalityKind::kSonic || sub.mode == gnmi::SAMPLE) {
        sub.interval_ns = min_interval_ns_;
      } else {
        sub.interval_ns = std::max(options_.default_sample_interval_ns, min_interval_ns_);
      }
    }
    bool served = false;
    if (kind_ == PersonalityKind::kSonic) {
      gnmi::Path no_origin = sub.path;
      no_origin.clear_origin();
      sub.segs = Segs(telemetry::FormatPath(no_origin));
      for (const Home& h : homes_) {
        if (h.target != target || sub.segs.size() < h.segs.size()) continue;
        bool ok = true;
        for (size_t k = 0; k < h.segs.size() && ok; ++k) {
          ok = sub.segs[k] == "*" || sub.segs[k] == h.segs[k];
        }
        served = served || ok;
      }
      if (!served) {
        std::string names;
        for (const Home& h : homes_) {
          if (h.target == target) names += (names.empty() ? "" : ", ") + h.text;
        }
        return NotFound("subscription " + text + ": not served under target " + target + " (" +
                        who + " serves " + names + ")");
      }
    } else {
      sub.pattern = sub.path;
      sub.pattern.set_origin("");
      sub.pattern.add_elem()->set_name("...");
      for (const Native& n : map->natives) {
        if (telemetry::PathMatches(sub.pattern, n.path)) {
          served = true;
          break;
        }
      }
      // A served model without data yet (LLDP) is not an error.
      for (const auto& s : profile_.signals()) {
        if (served || sub.path.elem_size() == 0) break;
        gnmi::Path sp;
        if (!telemetry::ParsePath(s.path(), &sp).ok() || sp.elem_size() == 0) continue;
        served = sp.elem(0).name() == sub.path.elem(0).name();
      }
      if (!served) {
        return NotFound("subscription " + text + ": not served by this target (" + who + ")");
      }
    }
    session->subs_.push_back(std::move(sub));
  }
  session->Compile(map);
  *out = std::move(session);
  return Status::Ok();
}

Status Personality::Get(const FabricSnapshot& snap, const gnmi::GetRequest& req,
                        gnmi::GetResponse* resp) {
  resp->Clear();
  if (platform_ && platform_->IsConfigGet(req)) return platform_->Get(req, WallNs(), resp);
  if (!gnmi::GetRequest::DataType_IsValid(req.type())) {
    return InvalidArgument("unknown GetRequest.type " + std::to_string(req.type()));
  }
  if (req.path_size() > kMaxPaths) {
    return InvalidArgument("GetRequest has more than " + std::to_string(kMaxPaths) + " paths");
  }
  gnmi::SubscriptionList list;
  *list.mutable_prefix() = req.prefix();
  list.set_mode(gnmi::SubscriptionList::ONCE);
  list.set_encoding(req.encoding());
  if (req.path_size() == 0) {
    list.add_subscription();
  } else {
    for (const auto& p : req.path()) *list.add_subscription()->mutable_path() = p;
  }
  std::unique_ptr<SubscribeSession> session;
  Status s = CreateSession(list, snap, &session);
  if (!s.ok()) return s;
  if (req.type() == gnmi::GetRequest::CONFIG) return Status::Ok();  // no configuration data
  std::vector<gnmi::Notification> ns;
  session->Initial(snap, &ns);
  for (auto& n : ns) *resp->add_notification() = std::move(n);
  return Status::Ok();
}

void Personality::AttachConfig(std::unique_ptr<PlatformConfig> config, WireConfig* wire) {
  platform_ = std::move(config);
  wire_ = wire;
}

void Personality::Set(const gnmi::SetRequest& req,
                      std::function<void(Status, gnmi::SetResponse)> done) {
  if (!platform_ || wire_ == nullptr) {
    done(Status(StatusCode::kUnimplemented, std::string("gNMI Set is not enabled on the ") +
                                                PersonalityName(kind_) + " personality of " +
                                                device_ + " (no fabric config attached)"),
         gnmi::SetResponse());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(set_mu_);
    sets_.push_back({&req, std::move(done)});
    if (set_running_) return;
    set_running_ = true;
  }
  RunSets();
}

void Personality::RunSets() {
  for (;;) {
    PendingSet p;
    {
      std::lock_guard<std::mutex> lock(set_mu_);
      if (sets_.empty()) {
        set_running_ = false;
        return;
      }
      p = std::move(sets_.front());
      sets_.pop_front();
    }
    std::unique_ptr<PlatformConfig::Candidate> c;
    Status s = platform_->Prepare(*p.req, &c);
    if (!s.ok()) {
      LOG_INFO("personality set rejected")
          .With("device", device_)
          .With("personality", PersonalityName(kind_))
          .With("code", static_cast<int64_t>(s.code()))
          .With("error", s.message());
      p.done(s, gnmi::SetResponse());
      continue;
    }
    // Applied on the fabric thread; the next Set starts when this one is done.
    auto holder = std::make_shared<std::unique_ptr<PlatformConfig::Candidate>>(std::move(c));
    const loom::v1::DeviceState state = (*holder)->state;
    wire_->Program(device_, state, platform_->owned_fields(),
                   [self = shared_from_this(), holder, done = std::move(p.done)](Status st) {
                     if (st.ok()) {
                       gnmi::SetResponse resp = std::move((*holder)->response);
                       resp.set_timestamp(WallNs());
                       self->platform_->Commit(std::move(*holder));
                       done(Status::Ok(), std::move(resp));
                     } else {
                       LOG_INFO("personality set refused by the emulator")
                           .With("device", self->device_)
                           .With("error", st.message());
                       done(st, gnmi::SetResponse());
                     }
                     self->RunSets();
                   });
    return;
  }
}

void Personality::OnPublish(const std::shared_ptr<const FabricSnapshot>& snap) {
  std::lock_guard<std::mutex> lock(mu_);
  const int d = snap->Find(device_);
  for (TimeNs r : refreshes_) {
    auto& h = held_[r];
    bool renew = !h || snap->virtual_ns / r != h->virtual_ns / r;
    if (!renew && d >= 0) {
      const int hd = h->Find(device_);
      renew = hd < 0 || h->schemas[hd] != snap->schemas[d];  // a new layout starts a window
    }
    if (renew) h = snap;
  }
}

std::shared_ptr<const FabricSnapshot> Personality::Held(TimeNs refresh_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(refresh_ns);
  return it == held_.end() ? nullptr : it->second;
}

std::shared_ptr<const Personality::DeviceMap> Personality::MapFor(const FabricSnapshot& snap) {
  const int d = snap.Find(device_);
  if (d < 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!map_ || map_->schema != snap.schemas[d]) map_ = BuildMap(snap, d);
  return map_;
}

std::string Personality::Render(const DeviceMap& m, const Native& n, const LeafValue& src) const {
  const std::string text = src.is_string ? src.s : std::to_string(src.u);
  std::vector<telemetry::RenderedLeaf> out;
  renderer_.Render(m.canonical[n.leaf], text, m.reverse, &out);
  for (const auto& r : out) {
    if (r.native_path == n.native_text) return r.value;
  }
  return text;
}

std::shared_ptr<const Personality::DeviceMap> Personality::BuildMap(const FabricSnapshot& snap,
                                                                    int device) const {
  auto m = std::make_shared<DeviceMap>();
  m->schema = snap.schemas[device];
  const DeviceSchema& schema = *m->schema;
  const std::vector<LeafValue>& values = snap.values[device];

  // Key maps: the device's ports and queues in schema order, with
  // deterministic object ids.
  std::vector<std::pair<std::string, std::string>> ports, queues;  // name, oid
  std::map<std::string, int> port_index;
  for (const auto& c : schema.containers) {
    const gnmi::Path& pre = c.prefix;
    if (!pre.origin().empty() || pre.elem_size() == 0) continue;
    if (pre.elem_size() == 3 && pre.elem(0).name() == "interfaces") {
      auto it = pre.elem(1).key().find("name");
      if (it == pre.elem(1).key().end()) continue;
      const int idx = static_cast<int>(port_index.size());
      if (port_index.emplace(it->second, idx).second) ports.emplace_back(it->second, PortOid(idx));
    } else if (pre.elem(0).name() == "qos" && pre.elem_size() >= 6) {
      auto ifc = pre.elem(2).key().find("interface-id");
      auto q = pre.elem(5).key().find("name");
      if (ifc == pre.elem(2).key().end() || q == pre.elem(5).key().end()) continue;
      auto pi = port_index.find(ifc->second);
      const int idx = pi == port_index.end() ? 0 : pi->second;
      queues.emplace_back(ifc->second + ":" + q->second,
                          QueueOid(idx, std::atoi(q->second.c_str())));
    }
  }
  struct KeyMapMembers {
    int home = -1;
    std::vector<std::pair<std::string, std::string>> members;  // member, value
  };
  std::vector<KeyMapMembers> key_maps;
  for (const auto& km : profile_.key_maps()) {
    const std::vector<std::pair<std::string, std::string>>* pairs = nullptr;
    if (km.path() == "COUNTERS_PORT_NAME_MAP") pairs = &ports;
    if (km.path() == "COUNTERS_QUEUE_NAME_MAP") pairs = &queues;
    if (pairs == nullptr) {
      LOG_WARN("personality: key map not emulated").With("map", km.name()).With("path", km.path());
      continue;
    }
    auto& table = m->reverse[km.name()];
    KeyMapMembers kmm;
    const std::vector<std::string> segs = Segs(km.path());
    for (int h = 0; h < static_cast<int>(homes_.size()); ++h) {
      if (homes_[h].target == km.target() && homes_[h].segs == segs) kmm.home = h;
    }
    for (const auto& [name, oid] : *pairs) {
      table[name] = oid;
      if (km.invert()) {
        kmm.members.emplace_back(name, oid);
      } else {
        kmm.members.emplace_back(oid, name);
      }
    }
    key_maps.push_back(std::move(kmm));
  }

  // Every catalogue leaf rendered as the profile says.
  m->canonical.resize(schema.leaves.size());
  std::vector<telemetry::RenderedLeaf> rendered;
  for (int i = 0; i < static_cast<int>(schema.leaves.size()); ++i) {
    const DeviceSchema::Leaf& leaf = schema.leaves[i];
    m->canonical[i] = telemetry::FormatPath(
        telemetry::JoinPath(schema.containers[leaf.container].prefix, leaf.rel));
    const LeafValue& v = values[i];
    rendered.clear();
    renderer_.Render(m->canonical[i], v.is_string ? v.s : std::to_string(v.u), m->reverse,
                     &rendered);
    for (auto& r : rendered) {
      Native n;
      n.leaf = i;
      n.signal = r.signal_index;
      n.native_text = std::move(r.native_path);
      n.segs = Segs(n.native_text);
      n.identity = identity_[n.signal] != 0;
      n.refresh_ns = refresh_ns_[n.signal];
      n.kind = leaf.kind;
      n.numeric = !v.is_string;
      if (kind_ == PersonalityKind::kSonic) {
        const std::vector<std::string> home_segs = Segs(profile_.signals(n.signal).path());
        for (int h = 0; h < static_cast<int>(homes_.size()); ++h) {
          if (homes_[h].segs == home_segs &&
              homes_[h].target == profile_.signals(n.signal).target()) {
            n.home = h;
          }
        }
        const bool under = n.home >= 0 && n.segs.size() >= home_segs.size() &&
                           std::equal(home_segs.begin(), home_segs.end(), n.segs.begin());
        if (!under) {
          LOG_WARN("personality: rendered leaf outside its signal's path")
              .With("leaf", n.native_text)
              .With("signal", profile_.signals(n.signal).signal());
          continue;
        }
        for (size_t k = home_segs.size(); k < n.segs.size(); ++k) {
          n.rest.push_back(Unescape(n.segs[k]));
        }
      } else {
        if (!telemetry::ParsePath("/" + n.native_text, &n.path).ok() || n.path.elem_size() == 0) {
          continue;
        }
        n.parent = n.path;
        n.name = n.parent.elem(n.parent.elem_size() - 1).name();
        n.parent.mutable_elem()->RemoveLast();
        n.parent_text = telemetry::FormatPath(n.parent);
      }
      m->natives.push_back(std::move(n));
    }
  }
  for (const KeyMapMembers& kmm : key_maps) {
    if (kmm.home < 0) continue;
    for (const auto& [member, value] : kmm.members) {
      Native n;
      n.home = kmm.home;
      n.segs = homes_[kmm.home].segs;
      n.segs.push_back(member);
      n.rest.push_back(member);
      n.native_text = homes_[kmm.home].text + "/" + member;
      n.fixed = value;
      n.kind = LeafKind::kState;
      m->natives.push_back(std::move(n));
    }
  }
  return m;
}

// ------------------------------------------------------------------ targets

Status StartPersonalityTargets(const std::vector<PersonalitySpec>& specs,
                               const std::vector<std::string>& profile_dirs,
                               const std::vector<std::string>& devices, const GnmiOptions& options,
                               std::vector<std::unique_ptr<GnmiTarget>>* out,
                               const PersonalitySetOptions& set_options) {
  out->clear();
  if (specs.empty()) return Status::Ok();
  if (set_options.wire != nullptr && set_options.topology == nullptr) {
    return InvalidArgument("personalities: Set needs the topology");
  }
  const std::string yang_dir =
      set_options.yang_dir.empty() ? ShippedYangDir() : set_options.yang_dir;
  std::shared_ptr<const southbound::bgp::PrefixPlan> plan;
  if (set_options.topology != nullptr) {
    plan = std::make_shared<southbound::bgp::PrefixPlan>(*set_options.topology);
  }
  std::vector<std::string> dirs;
  const std::string shipped = telemetry::ShippedProfileDir();
  if (!shipped.empty()) dirs.push_back(shipped);
  for (const auto& d : profile_dirs) dirs.push_back(d);
  telemetry::ProfileSet set;
  std::string error;
  if (!telemetry::LoadProfiles(dirs, &set, &error)) return InvalidArgument(error);
  std::set<std::string> seen;
  for (const PersonalitySpec& spec : specs) {
    if (std::find(devices.begin(), devices.end(), spec.device) == devices.end()) {
      return NotFound("--personality " + spec.device + "=" + PersonalityName(spec.kind) +
                      ": no such device in the fabric");
    }
    if (!seen.insert(spec.device).second) {
      return InvalidArgument("--personality: device " + spec.device + " given twice");
    }
    auto it = set.profiles.find(PersonalityProfileName(spec.kind));
    if (it == set.profiles.end()) {
      return NotFound(std::string("--personality ") + spec.device + "=" +
                      PersonalityName(spec.kind) + ": profile " +
                      PersonalityProfileName(spec.kind) + " not found (shipped directory \"" +
                      shipped + "\" and --profile-dir)");
    }
    GnmiTargetOptions to;
    to.listen_address = "127.0.0.1:0";
    auto target = std::make_unique<GnmiTarget>(options, to);
    auto persona = std::make_shared<Personality>(spec.kind, it->second, spec.device, options);
    if (set_options.wire != nullptr && set_options.wire->IsSwitch(spec.device)) {
      const YangModuleSet ys =
          spec.kind == PersonalityKind::kSonic ? YangModuleSet::kSonic : YangModuleSet::kOpenConfig;
      std::shared_ptr<YangContext> yang;
      Status ys_status = YangContext::Get(ys, yang_dir, &yang);
      if (!ys_status.ok()) {
        return FailedPrecondition("--personality " + spec.device + "=" +
                                  PersonalityName(spec.kind) + ": " + ys_status.message());
      }
      DeviceFacts facts = FactsOf(*set_options.topology, spec.device, plan);
      std::unique_ptr<PlatformConfig> config;
      Status cs =
          spec.kind == PersonalityKind::kSonic
              ? MakeSonicConfig(std::move(facts), std::move(yang), &config)
              : MakeOpenConfigConfig(std::move(facts), std::move(yang),
                                     spec.kind == PersonalityKind::kOpenConfigJson, &config);
      if (!cs.ok()) return cs;
      persona->AttachConfig(std::move(config), set_options.wire);
    }
    target->SetBehaviour(std::move(persona));
    Status s = target->Start();
    if (!s.ok()) return s;
    out->push_back(std::move(target));
  }
  return Status::Ok();
}

}  // namespace loom::sim
