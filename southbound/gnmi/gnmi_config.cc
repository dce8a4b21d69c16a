#include "southbound/gnmi/gnmi_config.h"

#include <arpa/inet.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "common/json.h"
#include "common/text.h"
#include "southbound/wire/device_state_util.h"

namespace loom::southbound::gnmi {
namespace {

using google::protobuf::RepeatedPtrField;
namespace v1 = loom::v1;

using Key = std::vector<std::string>;      // Key values in schema order, as in paths.
using SortKey = std::vector<std::string>;  // Same, numbers zero-padded (map order).

// A number as a sort key: 8 bytes big-endian, so byte-wise (std::string)
// order is numeric order; short enough to stay in the string's inline buffer.
std::string Pad(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, n >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(n & 0xff);
  return s;
}

// Deterministic wire bytes of `m` (map entries in key order).
void Bytes(const google::protobuf::MessageLite& m, std::string* out) {
  out->clear();
  google::protobuf::io::StringOutputStream zero_copy(out);
  google::protobuf::io::CodedOutputStream coded(&zero_copy);
  coded.SetSerializationDeterministic(true);
  m.SerializeWithCachedSizes(&coded);
}

// Same type and same content: equal deterministic serializations (proto3, so
// an unset field and its default value compare equal, maps compare as maps).
// Much cheaper than a reflective MessageDifferencer on the hot Set/Get path.
bool Equal(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  if (a.GetDescriptor() != b.GetDescriptor()) return false;
  const size_t na = a.ByteSizeLong(), nb = b.ByteSizeLong();
  if (na != nb) return false;
  thread_local std::string ba, bb;
  Bytes(a, &ba);
  Bytes(b, &bb);
  return ba == bb;
}

bool ParseU32(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// ---- JSON writing -------------------------------------------------------------

// A JSON object written member by member, in call order (deterministic).
class JsonWriter {
 public:
  void Str(std::string_view k, std::string_view v) {
    Key(k);
    loom::AppendJsonString(out_, v);
  }
  void U32(std::string_view k, uint32_t v) {
    Key(k);
    out_ += std::to_string(v);
  }
  // RFC 7951 6.1: 64-bit integers are JSON strings.
  void U64(std::string_view k, uint64_t v) {
    Key(k);
    loom::AppendJsonString(out_, std::to_string(v));
  }
  void StrList(std::string_view k, const RepeatedPtrField<std::string>& v) {
    Key(k);
    out_ += "[";
    for (int i = 0; i < v.size(); ++i) {
      if (i) out_ += ",";
      loom::AppendJsonString(out_, v[i]);
    }
    out_ += "]";
  }
  template <class R>
  void NumList(std::string_view k, const R& v, bool as_string) {
    Key(k);
    out_ += "[";
    for (int i = 0; i < v.size(); ++i) {
      if (i) out_ += ",";
      if (as_string) {
        loom::AppendJsonString(out_, std::to_string(v[i]));
      } else {
        out_ += std::to_string(v[i]);
      }
    }
    out_ += "]";
  }
  void U32Map(std::string_view k, const google::protobuf::Map<std::string, uint32_t>& m) {
    Key(k);
    std::map<std::string, uint32_t> sorted(m.begin(), m.end());
    out_ += "{";
    bool first = true;
    for (const auto& [name, w] : sorted) {
      if (!first) out_ += ",";
      first = false;
      loom::AppendJsonString(out_, name);
      out_ += ":" + std::to_string(w);
    }
    out_ += "}";
  }
  std::string Done() {
    out_.insert(out_.begin(), '{');
    out_.push_back('}');
    return std::move(out_);
  }

 private:
  void Key(std::string_view k) {
    if (!out_.empty()) out_ += ",";
    loom::AppendJsonString(out_, k);
    out_ += ":";
  }
  std::string out_;
};

// ---- JSON reading -------------------------------------------------------------

// Values are read with common/json.h (RFC 8259, UTF-8 checked, numbers kept
// as text, nesting and size bounded); member names must be unique.
using loom::JsonValue;

class PathView;
std::string PathText(const PathView& p);

// Names an operation and its path in error messages; the text is only built
// when an error is reported (not for every entry of every Set and Get).
class Where {
 public:
  Where(const char* op, const PathView& path) : op_(op), path_(&path) {}
  std::string str() const { return std::string(op_) + PathText(*path_); }

 private:
  const char* op_;
  const PathView* path_;
};

// Typed access to the members of a decoded JSON object. Member names may be
// module-qualified ("loom:mode"). Errors name `where_` and the member.
class JsonObject {
 public:
  JsonObject(const JsonValue& s, const Where& where)
      : s_(s), where_(where), used_(s.members.size(), false) {}

  Status Str(const char* name, std::string* out, bool* present = nullptr) {
    const JsonValue* v = Find(name, present);
    if (!v) return Status::Ok();
    if (v->kind != JsonValue::Kind::kString) return Bad(name, "expected a string");
    *out = v->text;
    return Status::Ok();
  }
  Status U32(const char* name, uint32_t* out, bool* present = nullptr) {
    const JsonValue* v = Find(name, present);
    if (!v) return Status::Ok();
    uint64_t x = 0;
    if (!ToU64(*v, /*allow_string=*/false, &x) || x > UINT32_MAX) {
      return Bad(name, "expected an integer 0..4294967295");
    }
    *out = static_cast<uint32_t>(x);
    return Status::Ok();
  }
  Status U64(const char* name, uint64_t* out, bool* present = nullptr) {
    const JsonValue* v = Find(name, present);
    if (!v) return Status::Ok();
    if (!ToU64(*v, /*allow_string=*/true, out)) {
      return Bad(name, "expected an unsigned 64-bit integer (decimal string)");
    }
    return Status::Ok();
  }
  Status StrList(const char* name, RepeatedPtrField<std::string>* out) {
    const JsonValue* v = Find(name, nullptr);
    if (!v) return Status::Ok();
    if (v->kind != JsonValue::Kind::kArray) return Bad(name, "expected a list of strings");
    out->Clear();
    for (const JsonValue& e : v->items) {
      if (e.kind != JsonValue::Kind::kString) return Bad(name, "expected a list of strings");
      out->Add(std::string(e.text));
    }
    return Status::Ok();
  }
  template <class R>
  Status NumList(const char* name, bool is64, R* out) {
    const JsonValue* v = Find(name, nullptr);
    if (!v) return Status::Ok();
    if (v->kind != JsonValue::Kind::kArray) return Bad(name, "expected a list of integers");
    out->Clear();
    for (const JsonValue& e : v->items) {
      uint64_t x = 0;
      if (!ToU64(e, is64, &x) || (!is64 && x > UINT32_MAX)) {
        return Bad(name, "expected a list of unsigned integers");
      }
      out->Add(static_cast<typename R::value_type>(x));
    }
    return Status::Ok();
  }
  Status U32Map(const char* name, google::protobuf::Map<std::string, uint32_t>* out) {
    const JsonValue* v = Find(name, nullptr);
    if (!v) return Status::Ok();
    if (v->kind != JsonValue::Kind::kObject) {
      return Bad(name, "expected an object {next-hop: weight}");
    }
    out->clear();
    for (const auto& member : v->members) {
      const std::string& k = member.name;
      uint64_t x = 0;
      if (!ToU64(member.value, false, &x) || x > UINT32_MAX) {
        return Bad(name, "weight of \"" + k + "\" is not an integer 0..4294967295");
      }
      (*out)[k] = static_cast<uint32_t>(x);
    }
    return Status::Ok();
  }
  // INVALID_ARGUMENT naming the first member that no accessor asked for.
  Status RejectUnknown() const {
    std::vector<std::string> unknown;
    for (size_t i = 0; i < s_.members.size(); ++i) {
      if (!used_[i]) unknown.push_back(s_.members[i].name);
    }
    if (unknown.empty()) return Status::Ok();
    std::sort(unknown.begin(), unknown.end());
    return InvalidArgument(where_.str() + ": unknown member \"" + unknown.front() + "\"");
  }
  Status Bad(std::string_view name, std::string_view why) const {
    return InvalidArgument(where_.str() + ": " + std::string(name) + ": " + std::string(why));
  }

 private:
  // The member `name`, else `loom:name`.
  const JsonValue* Find(const char* name, bool* present) {
    if (present) *present = false;
    const std::string_view plain(name);
    const std::string_view origin(kOrigin);
    size_t qualified = s_.members.size();
    for (size_t i = 0; i < s_.members.size(); ++i) {
      const std::string_view k(s_.members[i].name);
      if (k == plain) return Use(i, present);
      if (qualified == s_.members.size() && k.size() == origin.size() + 1 + plain.size() &&
          k.substr(0, origin.size()) == origin && k[origin.size()] == ':' &&
          k.substr(origin.size() + 1) == plain) {
        qualified = i;
      }
    }
    if (qualified < s_.members.size()) return Use(qualified, present);
    return nullptr;
  }
  const JsonValue* Use(size_t i, bool* present) {
    used_[i] = true;
    if (present) *present = true;
    return &s_.members[i].value;
  }
  static bool ToU64(const JsonValue& v, bool allow_string, uint64_t* out) {
    if (v.kind == JsonValue::Kind::kNumber) {
      const double d = std::strtod(v.text.c_str(), nullptr);
      if (!std::isfinite(d) || d < 0 || d != std::floor(d) || d > 9007199254740992.0) return false;
      *out = static_cast<uint64_t>(d);
      return true;
    }
    if (allow_string && v.kind == JsonValue::Kind::kString) {
      return ParseU64(v.text, out);
    }
    return false;
  }

  const JsonValue& s_;
  Where where_;
  std::vector<bool> used_;
};

Status ParseJsonValue(const ::gnmi::TypedValue& val, const Where& where, JsonValue* out) {
  std::string_view text;
  if (val.value_case() == ::gnmi::TypedValue::kJsonIetfVal) {
    text = val.json_ietf_val();
  } else if (val.value_case() == ::gnmi::TypedValue::kJsonVal) {
    text = val.json_val();
  } else {
    return InvalidArgument(where.str() +
                           ": value must be json_ietf_val or json_val (a JSON object)");
  }
  std::string why;
  if (!loom::ParseJson(text, out, &why, /*unique_names=*/true) ||
      out->kind != JsonValue::Kind::kObject) {
    return InvalidArgument(where.str() + ": value is not a JSON object");
  }
  return Status::Ok();
}

// ---- Validation helpers ----------------------------------------------------------

bool ValidPrefix(const std::string& p) {
  size_t slash = p.find('/');
  if (slash == std::string::npos) return false;
  std::string addr = p.substr(0, slash);
  uint32_t len = 0;
  if (!ParseU32(std::string_view(p).substr(slash + 1), &len)) return false;
  unsigned char buf[16];
  if (inet_pton(AF_INET, addr.c_str(), buf) == 1) return len <= 32;
  if (inet_pton(AF_INET6, addr.c_str(), buf) == 1) return len <= 128;
  return false;
}

template <class R>
Status CheckAscending(const R& v, const std::string& what, uint64_t max, size_t count) {
  if (v.empty()) return Status::Ok();
  if (static_cast<size_t>(v.size()) != count) {
    return InvalidArgument(what + ": " + std::to_string(v.size()) + " values, need 0 or " +
                           std::to_string(count));
  }
  for (int i = 0; i < v.size(); ++i) {
    if (static_cast<uint64_t>(v[i]) > max) {
      return InvalidArgument(what + ": value " + std::to_string(v[i]) + " above " +
                             std::to_string(max));
    }
    if (i > 0 && v[i] <= v[i - 1]) {
      return InvalidArgument(what + ": values must be strictly ascending");
    }
  }
  return Status::Ok();
}

// ---- Per-part traits ---------------------------------------------------------------

inline constexpr uint32_t kMaxQp = (1u << 24) - 1;  // RoCE QPNs are 24 bits.

// Each list part: schema path, keys, JSON value, validation and access.
template <class T>
struct Traits;

template <>
struct Traits<v1::ColorGroup> {
  static constexpr Part kPart = Part::kColors;
  static const std::vector<std::string>& Elems() {
    static const std::vector<std::string> v = {"colors", "color"};
    return v;
  }
  static const std::vector<std::string>& KeyNames() {
    static const std::vector<std::string> v = {"id"};
    return v;
  }
  static Key KeyOf(const v1::ColorGroup& m) { return {std::to_string(m.color())}; }
  static SortKey SortOf(const v1::ColorGroup& m) { return {Pad(m.color())}; }
  static auto Tie(const v1::ColorGroup& m) { return std::make_tuple(m.color()); }
  static std::string Name(const v1::ColorGroup& m) { return "color " + std::to_string(m.color()); }
  static Status SetKey(const Key& k, v1::ColorGroup* m) {
    uint32_t id = 0;
    if (!ParseU32(k[0], &id) || id == 0) {
      return InvalidArgument("color id \"" + k[0] + "\": expected 1..4294967295");
    }
    m->set_color(id);
    return Status::Ok();
  }
  static void Write(const v1::ColorGroup& m, JsonWriter* w) {
    w->U32("id", m.color());
    w->StrList("next-hops", m.next_hops());
  }
  static Status Read(JsonObject* o, v1::ColorGroup* m) {
    uint32_t id = m->color();
    Status s = o->U32("id", &id);
    if (s.ok() && id != m->color()) s = o->Bad("id", "differs from the path key");
    if (s.ok()) s = o->StrList("next-hops", m->mutable_next_hops());
    return s;
  }
  static Status Validate(const v1::ColorGroup& m, const CodecLimits& l) {
    if (m.color() == 0) return InvalidArgument("color 0: color ids are 1..4294967295");
    if (static_cast<uint32_t>(m.next_hops_size()) > l.max_next_hops) {
      return InvalidArgument(Name(m) + ": next-hops: more than " + std::to_string(l.max_next_hops));
    }
    std::set<std::string> seen;
    for (const auto& nh : m.next_hops()) {
      if (nh.empty()) return InvalidArgument(Name(m) + ": next-hops: empty next hop");
      if (!seen.insert(nh).second) {
        return InvalidArgument(Name(m) + ": next-hops: duplicate \"" + nh + "\"");
      }
    }
    return Status::Ok();
  }
  static void Canon(v1::ColorGroup* m) {
    std::sort(m->mutable_next_hops()->begin(), m->mutable_next_hops()->end());
  }
  static const RepeatedPtrField<v1::ColorGroup>& List(const v1::DeviceState& s) {
    return s.colors();
  }
  static RepeatedPtrField<v1::ColorGroup>* MutableList(v1::DeviceState* s) {
    return s->mutable_colors();
  }
};

template <>
struct Traits<v1::ColoredRoute> {
  static constexpr Part kPart = Part::kRoutes;
  static const std::vector<std::string>& Elems() {
    static const std::vector<std::string> v = {"routes", "route"};
    return v;
  }
  static const std::vector<std::string>& KeyNames() {
    static const std::vector<std::string> v = {"destination", "traffic-class", "qp-mask",
                                               "qp-value"};
    return v;
  }
  // qp-mask and qp-value default to 0 (the unsplit route) when a path element
  // names some key but not them, so the pre-split path of a route still names
  // that route in every operation; "*" addresses every split part.
  static const std::vector<std::string>& KeyDefaults() {
    static const std::vector<std::string> v = {"", "", "0", "0"};
    return v;
  }
  // Paths of unsplit routes carry only destination and traffic-class (as
  // before QP split existed).
  static bool EmitKey(const v1::ColoredRoute& m, size_t k) { return k < 2 || IsSplitRoute(m); }
  static Key KeyOf(const v1::ColoredRoute& m) {
    return {m.destination(), std::to_string(m.traffic_class()), std::to_string(m.qp_mask()),
            std::to_string(m.qp_value())};
  }
  static SortKey SortOf(const v1::ColoredRoute& m) {
    return {m.destination(), Pad(m.traffic_class()), Pad(m.qp_mask()), Pad(m.qp_value())};
  }
  static auto Tie(const v1::ColoredRoute& m) {
    return std::make_tuple(std::string_view(m.destination()), m.traffic_class(), m.qp_mask(),
                           m.qp_value());
  }
  static std::string Name(const v1::ColoredRoute& m) {
    std::string out = "route \"" + m.destination() + "\" tc " + std::to_string(m.traffic_class());
    if (IsSplitRoute(m)) {
      out += " qp " + std::to_string(m.qp_value()) + "/" + std::to_string(m.qp_mask());
    }
    return out;
  }
  static Status SetKey(const Key& k, v1::ColoredRoute* m) {
    uint32_t tc = 0, mask = 0, value = 0;
    if (k[0].empty()) return InvalidArgument("route: empty destination key");
    if (!ParseU32(k[1], &tc)) {
      return InvalidArgument("route traffic-class \"" + k[1] + "\": expected 0..7");
    }
    if (!ParseU32(k[2], &mask)) {
      return InvalidArgument("route qp-mask \"" + k[2] + "\": expected an integer");
    }
    if (!ParseU32(k[3], &value)) {
      return InvalidArgument("route qp-value \"" + k[3] + "\": expected an integer");
    }
    m->set_destination(k[0]);
    m->set_traffic_class(tc);
    m->set_qp_mask(mask);
    m->set_qp_value(value);
    return Status::Ok();
  }
  static void Write(const v1::ColoredRoute& m, JsonWriter* w) {
    w->Str("destination", m.destination());
    w->U32("traffic-class", m.traffic_class());
    if (IsSplitRoute(m)) {
      w->U32("qp-mask", m.qp_mask());
      w->U32("qp-value", m.qp_value());
    }
    w->Str("prefix", m.prefix());
    w->U32("color", m.color());
    w->U32("backup-color", m.backup_color());
    w->Str("job-id", m.job_id());
  }
  static Status Read(JsonObject* o, v1::ColoredRoute* m) {
    std::string dst = m->destination();
    uint32_t tc = m->traffic_class(), mask = m->qp_mask(), value = m->qp_value(), v = 0;
    bool present = false;
    Status s = o->Str("destination", &dst);
    if (s.ok() && dst != m->destination()) s = o->Bad("destination", "differs from the path key");
    if (s.ok()) s = o->U32("traffic-class", &tc);
    if (s.ok() && tc != m->traffic_class()) {
      s = o->Bad("traffic-class", "differs from the path key");
    }
    if (s.ok()) s = o->U32("qp-mask", &mask);
    if (s.ok() && mask != m->qp_mask()) s = o->Bad("qp-mask", "differs from the path key");
    if (s.ok()) s = o->U32("qp-value", &value);
    if (s.ok() && value != m->qp_value()) s = o->Bad("qp-value", "differs from the path key");
    if (s.ok()) s = o->Str("prefix", m->mutable_prefix());
    if (s.ok()) s = o->U32("color", &v, &present);
    if (s.ok() && present) m->set_color(v);
    if (s.ok()) s = o->U32("backup-color", &v, &present);
    if (s.ok() && present) m->set_backup_color(v);
    if (s.ok()) s = o->Str("job-id", m->mutable_job_id());
    return s;
  }
  static Status Validate(const v1::ColoredRoute& m, const CodecLimits&) {
    if (m.destination().empty()) return InvalidArgument("route: empty destination");
    if (m.traffic_class() > 7) return InvalidArgument(Name(m) + ": traffic-class above 7");
    if (m.qp_mask() > kMaxQp) {
      return InvalidArgument(Name(m) + ": qp-mask " + std::to_string(m.qp_mask()) +
                             ": QP numbers are 24-bit (0..16777215)");
    }
    if ((m.qp_value() & ~m.qp_mask()) != 0) {
      return InvalidArgument(Name(m) + ": qp-value " + std::to_string(m.qp_value()) +
                             " has bits outside qp-mask " + std::to_string(m.qp_mask()));
    }
    if (m.color() == 0) return InvalidArgument(Name(m) + ": color must be 1..4294967295");
    if (m.backup_color() == m.color()) {
      return InvalidArgument(Name(m) + ": backup-color equals color");
    }
    if (!m.prefix().empty() && !ValidPrefix(m.prefix())) {
      return InvalidArgument(Name(m) + ": prefix \"" + m.prefix() + "\" is not an IP prefix");
    }
    return Status::Ok();
  }
  static void Canon(v1::ColoredRoute*) {}
  static const RepeatedPtrField<v1::ColoredRoute>& List(const v1::DeviceState& s) {
    return s.routes();
  }
  static RepeatedPtrField<v1::ColoredRoute>* MutableList(v1::DeviceState* s) {
    return s->mutable_routes();
  }
};

template <>
struct Traits<v1::WeightSet> {
  static constexpr Part kPart = Part::kWeights;
  static const std::vector<std::string>& Elems() {
    static const std::vector<std::string> v = {"glb", "destinations", "destination"};
    return v;
  }
  static const std::vector<std::string>& KeyNames() {
    static const std::vector<std::string> v = {"name"};
    return v;
  }
  static Key KeyOf(const v1::WeightSet& m) { return {m.destination()}; }
  static SortKey SortOf(const v1::WeightSet& m) { return {m.destination()}; }
  static auto Tie(const v1::WeightSet& m) {
    return std::make_tuple(std::string_view(m.destination()));
  }
  static std::string Name(const v1::WeightSet& m) {
    return "glb destination \"" + m.destination() + "\"";
  }
  static Status SetKey(const Key& k, v1::WeightSet* m) {
    if (k[0].empty()) return InvalidArgument("glb destination: empty name key");
    m->set_destination(k[0]);
    return Status::Ok();
  }
  static void Write(const v1::WeightSet& m, JsonWriter* w) {
    w->Str("name", m.destination());
    w->U32Map("weights", m.weights());
  }
  static Status Read(JsonObject* o, v1::WeightSet* m) {
    std::string name = m->destination();
    Status s = o->Str("name", &name);
    if (s.ok() && name != m->destination()) s = o->Bad("name", "differs from the path key");
    if (s.ok()) s = o->U32Map("weights", m->mutable_weights());
    return s;
  }
  static Status Validate(const v1::WeightSet& m, const CodecLimits& l) {
    if (m.destination().empty()) return InvalidArgument("glb destination: empty name");
    if (m.weights().empty()) return InvalidArgument(Name(m) + ": weights: empty");
    if (static_cast<uint32_t>(m.weights_size()) > l.max_next_hops) {
      return InvalidArgument(Name(m) + ": weights: more than " + std::to_string(l.max_next_hops) +
                             " next hops");
    }
    std::map<std::string, uint32_t> sorted(m.weights().begin(), m.weights().end());
    for (const auto& [nh, w] : sorted) {
      if (nh.empty()) return InvalidArgument(Name(m) + ": weights: empty next hop");
      if (w == 0 || w > l.max_weight) {
        return InvalidArgument(Name(m) + ": weights: \"" + nh + "\" weight " + std::to_string(w) +
                               " outside 1.." + std::to_string(l.max_weight));
      }
    }
    return Status::Ok();
  }
  static void Canon(v1::WeightSet*) {}
  static const RepeatedPtrField<v1::WeightSet>& List(const v1::DeviceState& s) {
    return s.weights();
  }
  static RepeatedPtrField<v1::WeightSet>* MutableList(v1::DeviceState* s) {
    return s->mutable_weights();
  }
};

template <>
struct Traits<v1::AlbTable> {
  static constexpr Part kPart = Part::kAlbTables;
  static const std::vector<std::string>& Elems() {
    static const std::vector<std::string> v = {"alb", "groups", "group"};
    return v;
  }
  static const std::vector<std::string>& KeyNames() {
    static const std::vector<std::string> v = {"name"};
    return v;
  }
  static Key KeyOf(const v1::AlbTable& m) { return {m.group()}; }
  static SortKey SortOf(const v1::AlbTable& m) { return {m.group()}; }
  static auto Tie(const v1::AlbTable& m) { return std::make_tuple(std::string_view(m.group())); }
  static std::string Name(const v1::AlbTable& m) { return "alb group \"" + m.group() + "\""; }
  static Status SetKey(const Key& k, v1::AlbTable* m) {
    if (k[0].empty()) return InvalidArgument("alb group: empty name key");
    m->set_group(k[0]);
    return Status::Ok();
  }
  static void Write(const v1::AlbTable& m, JsonWriter* w) {
    w->Str("name", m.group());
    w->StrList("buckets", m.buckets());
  }
  static Status Read(JsonObject* o, v1::AlbTable* m) {
    std::string name = m->group();
    Status s = o->Str("name", &name);
    if (s.ok() && name != m->group()) s = o->Bad("name", "differs from the path key");
    if (s.ok()) s = o->StrList("buckets", m->mutable_buckets());
    return s;
  }
  static Status Validate(const v1::AlbTable& m, const CodecLimits& l) {
    if (m.group().empty()) return InvalidArgument("alb group: empty name");
    if (m.buckets().empty() || static_cast<uint32_t>(m.buckets_size()) > l.max_alb_buckets) {
      return InvalidArgument(Name(m) + ": buckets: " + std::to_string(m.buckets_size()) +
                             " entries, need 1.." + std::to_string(l.max_alb_buckets));
    }
    for (int i = 0; i < m.buckets_size(); ++i) {
      if (m.buckets(i).empty()) {
        return InvalidArgument(Name(m) + ": buckets: bucket " + std::to_string(i) +
                               " has no member");
      }
    }
    return Status::Ok();
  }
  static void Canon(v1::AlbTable*) {}
  static const RepeatedPtrField<v1::AlbTable>& List(const v1::DeviceState& s) {
    return s.alb_tables();
  }
  static RepeatedPtrField<v1::AlbTable>* MutableList(v1::DeviceState* s) {
    return s->mutable_alb_tables();
  }
};

template <>
struct Traits<v1::SprayRule> {
  static constexpr Part kPart = Part::kSprayRules;
  static const std::vector<std::string>& Elems() {
    static const std::vector<std::string> v = {"spray", "rules", "rule"};
    return v;
  }
  static const std::vector<std::string>& KeyNames() {
    static const std::vector<std::string> v = {"traffic-class", "qp-first"};
    return v;
  }
  static Key KeyOf(const v1::SprayRule& m) {
    return {std::to_string(m.traffic_class()), std::to_string(m.qp_first())};
  }
  static SortKey SortOf(const v1::SprayRule& m) {
    return {Pad(m.traffic_class()), Pad(m.qp_first())};
  }
  static auto Tie(const v1::SprayRule& m) {
    return std::make_tuple(m.traffic_class(), m.qp_first());
  }
  static std::string Name(const v1::SprayRule& m) {
    return "spray rule tc " + std::to_string(m.traffic_class()) + " qp-first " +
           std::to_string(m.qp_first());
  }
  static Status SetKey(const Key& k, v1::SprayRule* m) {
    uint32_t tc = 0, first = 0;
    if (!ParseU32(k[0], &tc)) {
      return InvalidArgument("spray rule traffic-class \"" + k[0] + "\": expected 0..7");
    }
    if (!ParseU32(k[1], &first)) {
      return InvalidArgument("spray rule qp-first \"" + k[1] + "\": expected an integer");
    }
    m->set_traffic_class(tc);
    m->set_qp_first(first);
    return Status::Ok();
  }
  static void Write(const v1::SprayRule& m, JsonWriter* w) {
    w->U32("traffic-class", m.traffic_class());
    w->U32("qp-first", m.qp_first());
    w->U32("qp-last", m.qp_last());
  }
  static Status Read(JsonObject* o, v1::SprayRule* m) {
    uint32_t tc = m->traffic_class(), first = m->qp_first(), last = 0;
    bool present = false;
    Status s = o->U32("traffic-class", &tc);
    if (s.ok() && tc != m->traffic_class()) {
      s = o->Bad("traffic-class", "differs from the path key");
    }
    if (s.ok()) s = o->U32("qp-first", &first);
    if (s.ok() && first != m->qp_first()) s = o->Bad("qp-first", "differs from the path key");
    if (s.ok()) s = o->U32("qp-last", &last, &present);
    if (s.ok() && present) m->set_qp_last(last);
    return s;
  }
  static Status Validate(const v1::SprayRule& m, const CodecLimits&) {
    if (m.traffic_class() > 7) return InvalidArgument(Name(m) + ": traffic-class above 7");
    if (m.qp_first() > kMaxQp || m.qp_last() > kMaxQp) {
      return InvalidArgument(Name(m) + ": QP numbers are 24-bit (0..16777215)");
    }
    if (m.qp_first() > m.qp_last()) {
      return InvalidArgument(Name(m) + ": qp-first above qp-last " + std::to_string(m.qp_last()));
    }
    return Status::Ok();
  }
  static void Canon(v1::SprayRule*) {}
  static const RepeatedPtrField<v1::SprayRule>& List(const v1::DeviceState& s) {
    return s.spray_rules();
  }
  static RepeatedPtrField<v1::SprayRule>* MutableList(v1::DeviceState* s) {
    return s->mutable_spray_rules();
  }
};

template <>
struct Traits<v1::QueueThresholds> {
  static constexpr Part kPart = Part::kThresholds;
  static const std::vector<std::string>& Elems() {
    static const std::vector<std::string> v = {"qos", "thresholds", "threshold"};
    return v;
  }
  static const std::vector<std::string>& KeyNames() {
    static const std::vector<std::string> v = {"interface", "priority"};
    return v;
  }
  static std::string IfKey(const v1::QueueThresholds& m) {
    return m.interface().empty() ? std::string(kAllInterfaces) : m.interface();
  }
  static Key KeyOf(const v1::QueueThresholds& m) {
    return {IfKey(m), std::to_string(m.priority())};
  }
  static SortKey SortOf(const v1::QueueThresholds& m) { return {m.interface(), Pad(m.priority())}; }
  static auto Tie(const v1::QueueThresholds& m) {
    return std::make_tuple(std::string_view(m.interface()), m.priority());
  }
  static std::string Name(const v1::QueueThresholds& m) {
    return "threshold " + IfKey(m) + " priority " + std::to_string(m.priority());
  }
  static Status SetKey(const Key& k, v1::QueueThresholds* m) {
    uint32_t prio = 0;
    if (k[0].empty()) return InvalidArgument("threshold: empty interface key (use \"ALL\")");
    if (!ParseU32(k[1], &prio)) {
      return InvalidArgument("threshold priority \"" + k[1] + "\": expected 0..7");
    }
    m->set_interface(k[0] == kAllInterfaces ? std::string() : k[0]);
    m->set_priority(prio);
    return Status::Ok();
  }
  static void Write(const v1::QueueThresholds& m, JsonWriter* w) {
    w->Str("interface", IfKey(m));
    w->U32("priority", m.priority());
    w->U64("ecn-kmin-bytes", m.ecn_kmin_bytes());
    w->U64("ecn-kmax-bytes", m.ecn_kmax_bytes());
    w->U32("ecn-pmax-percent", m.ecn_pmax_percent());
    w->U64("pfc-xoff-bytes", m.pfc_xoff_bytes());
    w->U64("pfc-xon-bytes", m.pfc_xon_bytes());
  }
  static Status Read(JsonObject* o, v1::QueueThresholds* m) {
    std::string ifname = IfKey(*m);
    uint32_t prio = m->priority(), u32 = 0;
    uint64_t u64 = 0;
    bool p = false;
    Status s = o->Str("interface", &ifname);
    if (s.ok() && ifname != IfKey(*m)) s = o->Bad("interface", "differs from the path key");
    if (s.ok()) s = o->U32("priority", &prio);
    if (s.ok() && prio != m->priority()) s = o->Bad("priority", "differs from the path key");
    if (s.ok()) s = o->U64("ecn-kmin-bytes", &u64, &p);
    if (s.ok() && p) m->set_ecn_kmin_bytes(u64);
    if (s.ok()) s = o->U64("ecn-kmax-bytes", &u64, &p);
    if (s.ok() && p) m->set_ecn_kmax_bytes(u64);
    if (s.ok()) s = o->U32("ecn-pmax-percent", &u32, &p);
    if (s.ok() && p) m->set_ecn_pmax_percent(u32);
    if (s.ok()) s = o->U64("pfc-xoff-bytes", &u64, &p);
    if (s.ok() && p) m->set_pfc_xoff_bytes(u64);
    if (s.ok()) s = o->U64("pfc-xon-bytes", &u64, &p);
    if (s.ok() && p) m->set_pfc_xon_bytes(u64);
    return s;
  }
  static Status Validate(const v1::QueueThresholds& m, const CodecLimits&) {
    if (m.interface() == kAllInterfaces) {
      return InvalidArgument("threshold: interface \"ALL\" is reserved (empty = every port)");
    }
    if (m.priority() > 7) return InvalidArgument(Name(m) + ": priority above 7");
    if (m.ecn_kmin_bytes() > m.ecn_kmax_bytes()) {
      return InvalidArgument(Name(m) + ": ecn-kmin-bytes above ecn-kmax-bytes");
    }
    if (m.ecn_pmax_percent() > 100) {
      return InvalidArgument(Name(m) + ": ecn-pmax-percent above 100");
    }
    if (m.pfc_xon_bytes() > m.pfc_xoff_bytes()) {
      return InvalidArgument(Name(m) + ": pfc-xon-bytes above pfc-xoff-bytes");
    }
    return Status::Ok();
  }
  static void Canon(v1::QueueThresholds*) {}
  static const RepeatedPtrField<v1::QueueThresholds>& List(const v1::DeviceState& s) {
    return s.thresholds();
  }
  static RepeatedPtrField<v1::QueueThresholds>* MutableList(v1::DeviceState* s) {
    return s->mutable_thresholds();
  }
};

// Key defaults of a list (KeyDefaults(): per key name, the value an absent key
// takes when the path element names other keys; "" = none, the key is a
// wildcard). Only routes have some.
template <class T>
const std::vector<std::string>& KeyDefaultsOf() {
  if constexpr (requires { Traits<T>::KeyDefaults(); }) {
    return Traits<T>::KeyDefaults();
  } else {
    static const std::vector<std::string> none;
    return none;
  }
}

// Whether key `k` of `m` appears in the entry's path (EmitKey(); default every key).
template <class T>
bool EmitKeyOf(const T& m, size_t k) {
  if constexpr (requires { Traits<T>::EmitKey(m, k); }) {
    return Traits<T>::EmitKey(m, k);
  } else {
    return true;
  }
}

// ---- DLB ------------------------------------------------------------------------

bool HasDlb(const v1::DeviceState& s) {
  return s.has_dlb() && s.dlb().mode() != v1::DLB_MODE_UNSPECIFIED;
}

bool ParseDlbMode(std::string_view name, v1::DlbMode* mode) {
  for (auto m : {v1::DLB_MODE_STATIC, v1::DLB_MODE_FLOWLET, v1::DLB_MODE_PER_PACKET,
                 v1::DLB_MODE_ASSIGNED_FLOW}) {
    if (name == DlbModeName(m)) {
      *mode = m;
      return true;
    }
  }
  return false;
}

Status ValidateDlb(const v1::DeviceState& s, const CodecLimits& l) {
  if (!s.has_dlb()) return Status::Ok();
  const v1::DlbProfile& d = s.dlb();
  if (d.mode() == v1::DLB_MODE_UNSPECIFIED) {
    v1::DlbProfile empty;
    if (Equal(d, empty)) return Status::Ok();
    return InvalidArgument("dlb: mode unspecified but other settings given");
  }
  if (!v1::DlbMode_IsValid(d.mode())) {
    return InvalidArgument("dlb: mode " + std::to_string(d.mode()) + " unknown");
  }
  if (d.inactivity_interval_ns() > l.max_inactivity_ns) {
    return InvalidArgument("dlb: inactivity-interval-ns " +
                           std::to_string(d.inactivity_interval_ns()) + " above " +
                           std::to_string(l.max_inactivity_ns));
  }
  if (d.load_weight_percent() > 100) {
    return InvalidArgument("dlb: load-weight-percent above 100");
  }
  Status st = CheckAscending(d.load_thresholds_percent(), "dlb: load-thresholds-percent", 100, 7);
  if (!st.ok()) return st;
  return CheckAscending(d.queue_thresholds_bytes(), "dlb: queue-thresholds-bytes", UINT64_MAX, 7);
}

void WriteDlb(const v1::DlbProfile& d, JsonWriter* w) {
  w->Str("mode", DlbModeName(d.mode()));
  w->U64("inactivity-interval-ns", d.inactivity_interval_ns());
  w->U32("load-weight-percent", d.load_weight_percent());
  w->NumList("load-thresholds-percent", d.load_thresholds_percent(), false);
  w->NumList("queue-thresholds-bytes", d.queue_thresholds_bytes(), true);
}

Status ReadDlb(JsonObject* o, v1::DlbProfile* d) {
  std::string mode;
  bool present = false;
  uint64_t u64 = 0;
  uint32_t u32 = 0;
  Status s = o->Str("mode", &mode, &present);
  if (s.ok() && present) {
    v1::DlbMode m;
    if (!ParseDlbMode(mode, &m)) {
      return o->Bad("mode", "\"" + mode + "\" is not static|flowlet|per-packet|assigned-flow");
    }
    d->set_mode(m);
  }
  if (s.ok()) s = o->U64("inactivity-interval-ns", &u64, &present);
  if (s.ok() && present) d->set_inactivity_interval_ns(u64);
  if (s.ok()) s = o->U32("load-weight-percent", &u32, &present);
  if (s.ok() && present) d->set_load_weight_percent(u32);
  if (s.ok())
    s = o->NumList("load-thresholds-percent", false, d->mutable_load_thresholds_percent());
  if (s.ok()) s = o->NumList("queue-thresholds-bytes", true, d->mutable_queue_thresholds_bytes());
  if (s.ok() && d->mode() == v1::DLB_MODE_UNSPECIFIED) s = o->Bad("mode", "missing");
  return s;
}

// ---- The keyed model a Set is applied to -------------------------------------------

template <class T>
using Entries = std::map<SortKey, T>;

struct Model {
  Entries<v1::ColorGroup> colors;
  Entries<v1::ColoredRoute> routes;
  Entries<v1::WeightSet> weights;
  std::optional<v1::DlbProfile> dlb;
  Entries<v1::AlbTable> alb;
  Entries<v1::SprayRule> spray;
  Entries<v1::QueueThresholds> thresholds;

  template <class T>
  Entries<T>& Get();
};
template <>
Entries<v1::ColorGroup>& Model::Get() {
  return colors;
}
template <>
Entries<v1::ColoredRoute>& Model::Get() {
  return routes;
}
template <>
Entries<v1::WeightSet>& Model::Get() {
  return weights;
}
template <>
Entries<v1::AlbTable>& Model::Get() {
  return alb;
}
template <>
Entries<v1::SprayRule>& Model::Get() {
  return spray;
}
template <>
Entries<v1::QueueThresholds>& Model::Get() {
  return thresholds;
}

template <class T>
void ToEntries(const v1::DeviceState& s, Entries<T>* out) {
  for (const T& m : Traits<T>::List(s)) {
    T c = m;
    Traits<T>::Canon(&c);
    (*out)[Traits<T>::SortOf(c)] = c;
  }
}

Model ToModel(const v1::DeviceState& s) {
  Model m;
  ToEntries(s, &m.colors);
  ToEntries(s, &m.routes);
  ToEntries(s, &m.weights);
  if (HasDlb(s)) m.dlb = s.dlb();
  ToEntries(s, &m.alb);
  ToEntries(s, &m.spray);
  ToEntries(s, &m.thresholds);
  return m;
}

template <class T>
void FromEntries(const Entries<T>& e, v1::DeviceState* s) {
  auto* list = Traits<T>::MutableList(s);
  list->Clear();
  for (const auto& [k, m] : e) *list->Add() = m;
}

void FromModel(const Model& m, v1::DeviceState* s) {
  FromEntries(m.colors, s);
  FromEntries(m.routes, s);
  FromEntries(m.weights, s);
  if (m.dlb) {
    *s->mutable_dlb() = *m.dlb;
  } else {
    s->clear_dlb();
  }
  FromEntries(m.alb, s);
  FromEntries(m.spray, s);
  FromEntries(m.thresholds, s);
}

// ---- Paths ----------------------------------------------------------------------------

::gnmi::Path JoinPaths(const ::gnmi::Path& prefix, const ::gnmi::Path& path) {
  ::gnmi::Path out = prefix;
  if (!path.origin().empty()) out.set_origin(path.origin());
  if (!path.target().empty()) out.set_target(path.target());
  for (const auto& e : path.elem()) *out.add_elem() = e;
  return out;
}

std::string PathText(const ::gnmi::Path& p) {
  std::string out = p.origin().empty() ? "" : p.origin() + ":";
  if (p.elem().empty()) return out + "/";
  for (const auto& e : p.elem()) {
    out += "/" + e.name();
    std::map<std::string, std::string> keys(e.key().begin(), e.key().end());
    for (const auto& [k, v] : keys) out += "[" + k + "=" + v + "]";
  }
  return out;
}

// A prefix joined with a path (JoinPaths) without copying either.
class PathView {
 public:
  PathView(const ::gnmi::Path& prefix, const ::gnmi::Path& path) : prefix_(&prefix), path_(&path) {}
  explicit PathView(const ::gnmi::Path& path) : prefix_(nullptr), path_(&path) {}
  const std::string& origin() const {
    return prefix_ != nullptr && path_->origin().empty() ? prefix_->origin() : path_->origin();
  }
  int elem_size() const { return head() + path_->elem_size(); }
  const ::gnmi::PathElem& elem(int i) const {
    return i < head() ? prefix_->elem(i) : path_->elem(i - head());
  }
  ::gnmi::Path Full() const { return prefix_ != nullptr ? JoinPaths(*prefix_, *path_) : *path_; }

 private:
  int head() const { return prefix_ != nullptr ? prefix_->elem_size() : 0; }
  const ::gnmi::Path* prefix_;
  const ::gnmi::Path* path_;
};

std::string PathText(const PathView& p) { return PathText(p.Full()); }

// What a path addresses.
struct Resolved {
  bool all = false;  // The root: every part.
  Part part = Part::kColors;
  // Lists: one value per key name; nullopt = any (key absent or "*").
  std::vector<std::optional<std::string>> keys;
  bool list_reached = false;  // The path reaches the list element.
  bool config = false;        // The path ends at `config` (or `/dlb`, `/dlb/config`).
  bool FullKey() const {
    return std::all_of(keys.begin(), keys.end(), [](const auto& k) { return k.has_value(); });
  }
};

Status ResolveList(const PathView& p, const std::vector<std::string>& elems,
                   const std::vector<std::string>& key_names,
                   const std::vector<std::string>& key_defaults, Resolved* r) {
  auto text = [&p] { return PathText(p); };
  r->keys.assign(key_names.size(), std::nullopt);
  std::vector<bool> named(key_names.size(), false);
  bool any_key = false;
  int n = p.elem_size();
  for (int i = 0; i < n; ++i) {
    const auto& e = p.elem(i);
    size_t ui = static_cast<size_t>(i);
    if (ui < elems.size()) {
      if (e.name() != elems[ui]) return InvalidArgument("unknown path " + text());
      bool is_list = ui + 1 == elems.size();
      if (!is_list && !e.key().empty()) {
        return InvalidArgument("path " + text() + ": \"" + e.name() + "\" has no keys");
      }
      if (is_list) {
        r->list_reached = true;
        for (const auto& [k, v] : e.key()) {
          auto it = std::find(key_names.begin(), key_names.end(), k);
          if (it == key_names.end()) {
            return InvalidArgument("path " + text() + ": unknown key \"" + k + "\"");
          }
          const size_t ki = static_cast<size_t>(it - key_names.begin());
          named[ki] = true;
          any_key = true;
          if (v != "*") r->keys[ki] = v;
        }
      }
    } else if (ui == elems.size() && e.name() == "config" && e.key().empty()) {
      r->config = true;
    } else if (ui == elems.size() + 1 && r->config) {
      return InvalidArgument("path " + text() + ": leaves are not addressable, use the config " +
                             "container");
    } else {
      return InvalidArgument("unknown path " + text());
    }
  }
  // An element naming some keys: the absent ones with a default take it.
  for (size_t k = 0; any_key && k < key_defaults.size(); ++k) {
    if (!named[k] && !key_defaults[k].empty()) r->keys[k] = key_defaults[k];
  }
  return Status::Ok();
}

// `p` is a full path (prefix joined).
Status Resolve(const PathView& p, Resolved* r) {
  if (p.origin() != kOrigin) {
    return InvalidArgument("path " + PathText(p) + ": origin must be \"loom\"");
  }
  if (p.elem_size() == 0) {
    r->all = true;
    return Status::Ok();
  }
  const std::string& first = p.elem(0).name();
  auto list = [&](auto tag) {
    using T = decltype(tag);
    r->part = Traits<T>::kPart;
    return ResolveList(p, Traits<T>::Elems(), Traits<T>::KeyNames(), KeyDefaultsOf<T>(), r);
  };
  if (first == "colors") return list(v1::ColorGroup());
  if (first == "routes") return list(v1::ColoredRoute());
  if (first == "glb") return list(v1::WeightSet());
  if (first == "alb") return list(v1::AlbTable());
  if (first == "spray") return list(v1::SprayRule());
  if (first == "qos") return list(v1::QueueThresholds());
  if (first == "dlb") {
    r->part = Part::kDlb;
    if (!p.elem(0).key().empty()) return InvalidArgument("path " + PathText(p) + ": no keys");
    if (p.elem_size() == 1 ||
        (p.elem_size() == 2 && p.elem(1).name() == "config" && p.elem(1).key().empty())) {
      r->config = true;
      r->list_reached = true;
      return Status::Ok();
    }
    if (p.elem_size() > 2 && p.elem(1).name() == "config") {
      return InvalidArgument("path " + PathText(p) +
                             ": leaves are not addressable, use the config container");
    }
  }
  return InvalidArgument("unknown path " + PathText(p));
}

template <class T>
bool KeyMatches(const T& m, const Resolved& r) {
  Key k = Traits<T>::KeyOf(m);
  for (size_t i = 0; i < k.size() && i < r.keys.size(); ++i) {
    if (r.keys[i] && *r.keys[i] != k[i]) return false;
  }
  return true;
}

template <class T>
void DeleteMatching(const Resolved& r, Entries<T>* e) {
  for (auto it = e->begin(); it != e->end();) {
    if (r.all || !r.list_reached || KeyMatches(it->second, r)) {
      it = e->erase(it);
    } else {
      ++it;
    }
  }
}

void DeleteResolved(const Resolved& r, Model* m) {
  auto del = [&](Part p) { return r.all || r.part == p; };
  if (del(Part::kColors)) DeleteMatching(r, &m->colors);
  if (del(Part::kRoutes)) DeleteMatching(r, &m->routes);
  if (del(Part::kWeights)) DeleteMatching(r, &m->weights);
  if (del(Part::kDlb)) m->dlb.reset();
  if (del(Part::kAlbTables)) DeleteMatching(r, &m->alb);
  if (del(Part::kSprayRules)) DeleteMatching(r, &m->spray);
  if (del(Part::kThresholds)) DeleteMatching(r, &m->thresholds);
}

// Replace (merge == false) or update (merge == true) of one list entry.
template <class T>
Status WriteEntry(const Resolved& r, const JsonValue& json, bool merge, const Where& where,
                  const CodecLimits& limits, Entries<T>* entries) {
  if (!r.list_reached || !r.FullKey()) {
    return InvalidArgument(where.str() +
                           ": replace/update must name one list entry with every key");
  }
  Key key;
  for (const auto& k : r.keys) key.push_back(*k);
  T m;
  Status s = Traits<T>::SetKey(key, &m);
  if (!s.ok()) return InvalidArgument(where.str() + ": " + s.message());
  auto it = entries->find(Traits<T>::SortOf(m));
  if (merge && it != entries->end()) m = it->second;
  JsonObject obj(json, where);
  s = Traits<T>::Read(&obj, &m);
  if (s.ok()) s = obj.RejectUnknown();
  if (!s.ok()) return s;
  Traits<T>::Canon(&m);
  s = Traits<T>::Validate(m, limits);
  if (!s.ok()) return InvalidArgument(where.str() + ": " + s.message());
  (*entries)[Traits<T>::SortOf(m)] = m;
  return Status::Ok();
}

Status WriteResolved(const Resolved& r, const ::gnmi::TypedValue& val, bool merge,
                     const Where& where, const CodecLimits& limits, Model* m) {
  if (r.all) return InvalidArgument(where.str() + ": replace/update of the root is not supported");
  JsonValue json;
  Status s = ParseJsonValue(val, where, &json);
  if (!s.ok()) return s;
  switch (r.part) {
    case Part::kColors:
      return WriteEntry(r, json, merge, where, limits, &m->colors);
    case Part::kRoutes:
      return WriteEntry(r, json, merge, where, limits, &m->routes);
    case Part::kWeights:
      return WriteEntry(r, json, merge, where, limits, &m->weights);
    case Part::kAlbTables:
      return WriteEntry(r, json, merge, where, limits, &m->alb);
    case Part::kSprayRules:
      return WriteEntry(r, json, merge, where, limits, &m->spray);
    case Part::kThresholds:
      return WriteEntry(r, json, merge, where, limits, &m->thresholds);
    case Part::kDlb: {
      v1::DlbProfile d;
      if (merge && m->dlb) d = *m->dlb;
      JsonObject obj(json, where);
      s = ReadDlb(&obj, &d);
      if (s.ok()) s = obj.RejectUnknown();
      if (!s.ok()) return s;
      v1::DeviceState tmp;
      *tmp.mutable_dlb() = d;
      s = ValidateDlb(tmp, limits);
      if (!s.ok()) return InvalidArgument(where.str() + ": " + s.message());
      m->dlb = d;
      return Status::Ok();
    }
  }
  return Internal("unreachable");
}

// ---- Encoding entries --------------------------------------------------------------

template <class T>
::gnmi::Path EntryPath(const T& m, bool config) {
  ::gnmi::Path p;
  const auto& elems = Traits<T>::Elems();
  const auto& names = Traits<T>::KeyNames();
  Key key = Traits<T>::KeyOf(m);
  for (size_t i = 0; i < elems.size(); ++i) {
    auto* e = p.add_elem();
    e->set_name(elems[i]);
    if (i + 1 == elems.size()) {
      for (size_t k = 0; k < names.size(); ++k) {
        if (EmitKeyOf(m, k)) (*e->mutable_key())[names[k]] = key[k];
      }
    }
  }
  if (config) p.add_elem()->set_name("config");
  return p;
}

::gnmi::Path DlbPath(bool config) {
  ::gnmi::Path p;
  p.add_elem()->set_name("dlb");
  if (config) p.add_elem()->set_name("config");
  return p;
}

template <class T>
std::string JsonOf(const T& m) {
  JsonWriter w;
  Traits<T>::Write(m, &w);
  return w.Done();
}

void AddUpdate(::gnmi::Path&& path, std::string json, RepeatedPtrField<::gnmi::Update>* out) {
  auto* u = out->Add();
  u->mutable_path()->Swap(&path);
  u->mutable_val()->set_json_ietf_val(std::move(json));
}

template <class T>
void AddEntryUpdates(const Entries<T>& e, const Resolved* filter,
                     RepeatedPtrField<::gnmi::Update>* out) {
  for (const auto& [k, m] : e) {
    if (filter && !filter->all && filter->list_reached && !KeyMatches(m, *filter)) continue;
    AddUpdate(EntryPath(m, true), JsonOf(m), out);
  }
}

template <class T>
void DiffEntries(const Entries<T>* cur, const Entries<T>& want, ::gnmi::SetRequest* req) {
  if (cur) {
    for (const auto& [k, m] : *cur) {
      if (!want.count(k)) *req->add_delete_() = EntryPath(m, false);
    }
  }
  for (const auto& [k, m] : want) {
    if (cur) {
      auto it = cur->find(k);
      if (it != cur->end() && Equal(it->second, m)) continue;
    }
    AddUpdate(EntryPath(m, true), JsonOf(m), req->mutable_replace());
  }
}

// AddPartUpdates for a canonical state (no keyed copy).
template <class T>
void AddStateListUpdates(const RepeatedPtrField<T>& list, const Resolved* filter,
                         RepeatedPtrField<::gnmi::Update>* out) {
  for (const T& m : list) {
    if (filter && !filter->all && filter->list_reached && !KeyMatches(m, *filter)) continue;
    AddUpdate(EntryPath(m, true), JsonOf(m), out);
  }
}

void AddStateUpdates(const v1::DeviceState& s, Part part, const Resolved* filter,
                     RepeatedPtrField<::gnmi::Update>* out) {
  switch (part) {
    case Part::kColors:
      return AddStateListUpdates(s.colors(), filter, out);
    case Part::kRoutes:
      return AddStateListUpdates(s.routes(), filter, out);
    case Part::kWeights:
      return AddStateListUpdates(s.weights(), filter, out);
    case Part::kAlbTables:
      return AddStateListUpdates(s.alb_tables(), filter, out);
    case Part::kSprayRules:
      return AddStateListUpdates(s.spray_rules(), filter, out);
    case Part::kThresholds:
      return AddStateListUpdates(s.thresholds(), filter, out);
    case Part::kDlb:
      if (HasDlb(s)) AddUpdate(DlbPath(true), ConfigJson(s.dlb()), out);
      return;
  }
}

template <class T>
void AddListUpdates(const Model& m, Part part, const Resolved* filter,
                    RepeatedPtrField<::gnmi::Update>* out) {
  AddEntryUpdates(const_cast<Model&>(m).Get<T>(), filter, out);
  (void)part;
}

void AddPartUpdates(const Model& m, Part part, const Resolved* filter,
                    RepeatedPtrField<::gnmi::Update>* out) {
  switch (part) {
    case Part::kColors:
      return AddListUpdates<v1::ColorGroup>(m, part, filter, out);
    case Part::kRoutes:
      return AddListUpdates<v1::ColoredRoute>(m, part, filter, out);
    case Part::kWeights:
      return AddListUpdates<v1::WeightSet>(m, part, filter, out);
    case Part::kAlbTables:
      return AddListUpdates<v1::AlbTable>(m, part, filter, out);
    case Part::kSprayRules:
      return AddListUpdates<v1::SprayRule>(m, part, filter, out);
    case Part::kThresholds:
      return AddListUpdates<v1::QueueThresholds>(m, part, filter, out);
    case Part::kDlb:
      if (m.dlb) AddUpdate(DlbPath(true), ConfigJson(*m.dlb), out);
      return;
  }
}

template <class T>
bool IsCanonicalList(const RepeatedPtrField<T>& list);

template <class T>
Status ValidateList(const v1::DeviceState& s, const CodecLimits& l) {
  if (IsCanonicalList(Traits<T>::List(s))) {
    // Keys strictly ascending: no duplicates to look for.
    for (const T& m : Traits<T>::List(s)) {
      Status st = Traits<T>::Validate(m, l);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  std::map<SortKey, const T*> seen;
  for (const T& m : Traits<T>::List(s)) {
    Status st = Traits<T>::Validate(m, l);
    if (!st.ok()) return st;
    T c = m;
    Traits<T>::Canon(&c);
    auto [it, inserted] = seen.emplace(Traits<T>::SortOf(c), &m);
    if (!inserted) {
      T prev = *it->second;
      Traits<T>::Canon(&prev);
      if (!Equal(prev, c)) {
        return InvalidArgument(Traits<T>::Name(m) + ": listed twice with different content");
      }
    }
  }
  return Status::Ok();
}

// Key order of two entries (the order of SortOf, without building keys).
template <class T>
bool KeyLess(const T& a, const T& b) {
  return Traits<T>::Tie(a) < Traits<T>::Tie(b);
}

bool IsCanonEntry(const v1::ColorGroup& m) {
  return std::is_sorted(m.next_hops().begin(), m.next_hops().end());
}
template <class T>
bool IsCanonEntry(const T&) {
  return true;
}

// Already canonical: entries canonical, keys strictly ascending.
template <class T>
bool IsCanonicalList(const RepeatedPtrField<T>& list) {
  for (int i = 0; i < list.size(); ++i) {
    if (!IsCanonEntry(list.Get(i))) return false;
    if (i > 0 && !KeyLess(list.Get(i - 1), list.Get(i))) return false;
  }
  return true;
}

// A DLB profile that Canonical() keeps.
const v1::DlbProfile* CanonDlb(const v1::DeviceState& s) {
  if (!s.has_dlb()) return nullptr;
  if (!HasDlb(s) && s.dlb().ByteSizeLong() == 0) return nullptr;
  return &s.dlb();
}

bool IsCanonicalState(const v1::DeviceState& s) {
  return IsCanonicalList(s.colors()) && IsCanonicalList(s.routes()) &&
         IsCanonicalList(s.weights()) && IsCanonicalList(s.alb_tables()) &&
         IsCanonicalList(s.spray_rules()) && IsCanonicalList(s.thresholds()) &&
         (!s.has_dlb() || CanonDlb(s) != nullptr);
}

template <class T>
void CanonList(v1::DeviceState* s) {
  auto* list = Traits<T>::MutableList(s);
  if (IsCanonicalList(*list)) return;  // What this codec produces.
  const int n = list->size();
  for (int i = 0; i < n; ++i) Traits<T>::Canon(list->Mutable(i));
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return KeyLess(list->Get(a), list->Get(b)); });
  RepeatedPtrField<T> out;
  out.Reserve(n);
  const T* prev = nullptr;
  for (int i : order) {
    const T& m = list->Get(i);
    if (prev && Equal(m, *prev)) continue;
    *out.Add() = m;
    prev = &m;
  }
  list->Swap(&out);
}

// DiffEntries for two canonical lists: one merge pass, no keyed copies.
template <class T>
void DiffSorted(const RepeatedPtrField<T>& cur, const RepeatedPtrField<T>& want,
                ::gnmi::SetRequest* req) {
  int i = 0, j = 0;
  while (i < cur.size() || j < want.size()) {
    if (j >= want.size() || (i < cur.size() && KeyLess(cur.Get(i), want.Get(j)))) {
      *req->add_delete_() = EntryPath(cur.Get(i), false);
      ++i;
    } else if (i >= cur.size() || KeyLess(want.Get(j), cur.Get(i))) {
      AddUpdate(EntryPath(want.Get(j), true), JsonOf(want.Get(j)), req->mutable_replace());
      ++j;
    } else {
      if (!Equal(cur.Get(i), want.Get(j))) {
        AddUpdate(EntryPath(want.Get(j), true), JsonOf(want.Get(j)), req->mutable_replace());
      }
      ++i;
      ++j;
    }
  }
}

void Canonicalize(v1::DeviceState* out) {
  CanonList<v1::ColorGroup>(out);
  CanonList<v1::ColoredRoute>(out);
  CanonList<v1::WeightSet>(out);
  if (out->has_dlb() && CanonDlb(*out) == nullptr) out->clear_dlb();
  CanonList<v1::AlbTable>(out);
  CanonList<v1::SprayRule>(out);
  CanonList<v1::QueueThresholds>(out);
}

}  // namespace

// ---- Public API -------------------------------------------------------------------------

const char* PartName(Part part) {
  switch (part) {
    case Part::kColors:
      return "colors";
    case Part::kRoutes:
      return "routes";
    case Part::kWeights:
      return "weights";
    case Part::kDlb:
      return "dlb";
    case Part::kAlbTables:
      return "alb_tables";
    case Part::kSprayRules:
      return "spray_rules";
    case Part::kThresholds:
      return "thresholds";
  }
  return "unknown";
}

::gnmi::Path PartPath(Part part) {
  ::gnmi::Path p;
  p.set_origin(kOrigin);
  switch (part) {
    case Part::kColors:
      p.add_elem()->set_name("colors");
      break;
    case Part::kRoutes:
      p.add_elem()->set_name("routes");
      break;
    case Part::kWeights:
      p.add_elem()->set_name("glb");
      break;
    case Part::kDlb:
      p.add_elem()->set_name("dlb");
      break;
    case Part::kAlbTables:
      p.add_elem()->set_name("alb");
      break;
    case Part::kSprayRules:
      p.add_elem()->set_name("spray");
      break;
    case Part::kThresholds:
      p.add_elem()->set_name("qos");
      p.add_elem()->set_name("thresholds");
      break;
  }
  return p;
}

const char* DlbModeName(v1::DlbMode mode) {
  switch (mode) {
    case v1::DLB_MODE_STATIC:
      return "static";
    case v1::DLB_MODE_FLOWLET:
      return "flowlet";
    case v1::DLB_MODE_PER_PACKET:
      return "per-packet";
    case v1::DLB_MODE_ASSIGNED_FLOW:
      return "assigned-flow";
    default:
      return "";
  }
}

Status ValidatePart(const v1::DeviceState& state, Part part, const CodecLimits& limits) {
  switch (part) {
    case Part::kColors:
      return ValidateList<v1::ColorGroup>(state, limits);
    case Part::kRoutes:
      return ValidateList<v1::ColoredRoute>(state, limits);
    case Part::kWeights:
      return ValidateList<v1::WeightSet>(state, limits);
    case Part::kDlb:
      return ValidateDlb(state, limits);
    case Part::kAlbTables:
      return ValidateList<v1::AlbTable>(state, limits);
    case Part::kSprayRules:
      return ValidateList<v1::SprayRule>(state, limits);
    case Part::kThresholds:
      return ValidateList<v1::QueueThresholds>(state, limits);
  }
  return InvalidArgument("unknown part");
}

Status ValidateState(const v1::DeviceState& state, PartMask parts, const CodecLimits& limits) {
  for (Part p : kEveryPart) {
    if (!(parts & Mask(p))) continue;
    Status s = ValidatePart(state, p, limits);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

void CopyParts(const v1::DeviceState& from, PartMask parts, v1::DeviceState* to) {
  if (parts & Mask(Part::kColors)) *to->mutable_colors() = from.colors();
  if (parts & Mask(Part::kRoutes)) *to->mutable_routes() = from.routes();
  if (parts & Mask(Part::kWeights)) *to->mutable_weights() = from.weights();
  if (parts & Mask(Part::kDlb)) {
    if (from.has_dlb()) {
      *to->mutable_dlb() = from.dlb();
    } else {
      to->clear_dlb();
    }
  }
  if (parts & Mask(Part::kAlbTables)) *to->mutable_alb_tables() = from.alb_tables();
  if (parts & Mask(Part::kSprayRules)) *to->mutable_spray_rules() = from.spray_rules();
  if (parts & Mask(Part::kThresholds)) *to->mutable_thresholds() = from.thresholds();
}

v1::DeviceState Project(const v1::DeviceState& state, PartMask parts) {
  v1::DeviceState out;
  out.set_device(state.device());
  out.set_generation(state.generation());
  CopyParts(state, parts, &out);
  return out;
}

v1::DeviceState Canonical(const v1::DeviceState& state) {
  v1::DeviceState out = state;
  Canonicalize(&out);
  return out;
}

v1::DeviceState Canonical(v1::DeviceState&& state) {
  v1::DeviceState out = std::move(state);
  Canonicalize(&out);
  return out;
}

namespace {
template <class T>
bool SameList(const RepeatedPtrField<T>& a, const RepeatedPtrField<T>& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (!Equal(a.Get(i), b.Get(i))) return false;
  }
  return true;
}
}  // namespace

PartMask DiffParts(const v1::DeviceState& a, const v1::DeviceState& b, PartMask parts) {
  // Canonical inputs (decoded or canonicalized before) are compared in place.
  std::optional<v1::DeviceState> copy_a, copy_b;
  if (!IsCanonicalState(a)) copy_a = Canonical(Project(a, parts));
  if (!IsCanonicalState(b)) copy_b = Canonical(Project(b, parts));
  const v1::DeviceState& ca = copy_a ? *copy_a : a;
  const v1::DeviceState& cb = copy_b ? *copy_b : b;
  PartMask out = 0;
  auto diff = [&](Part p, bool same) {
    if ((parts & Mask(p)) && !same) out |= Mask(p);
  };
  diff(Part::kColors, SameList(ca.colors(), cb.colors()));
  diff(Part::kRoutes, SameList(ca.routes(), cb.routes()));
  diff(Part::kWeights, SameList(ca.weights(), cb.weights()));
  const v1::DlbProfile *da = CanonDlb(ca), *db = CanonDlb(cb);
  diff(Part::kDlb, (da == nullptr) == (db == nullptr) && (!da || Equal(*da, *db)));
  diff(Part::kAlbTables, SameList(ca.alb_tables(), cb.alb_tables()));
  diff(Part::kSprayRules, SameList(ca.spray_rules(), cb.spray_rules()));
  diff(Part::kThresholds, SameList(ca.thresholds(), cb.thresholds()));
  return out;
}

std::string ConfigJson(const v1::ColorGroup& m) { return JsonOf(m); }
std::string ConfigJson(const v1::ColoredRoute& m) { return JsonOf(m); }
std::string ConfigJson(const v1::WeightSet& m) { return JsonOf(m); }
std::string ConfigJson(const v1::AlbTable& m) { return JsonOf(m); }
std::string ConfigJson(const v1::SprayRule& m) { return JsonOf(m); }
std::string ConfigJson(const v1::QueueThresholds& m) { return JsonOf(m); }
std::string ConfigJson(const v1::DlbProfile& m) {
  JsonWriter w;
  WriteDlb(m, &w);
  return w.Done();
}

::gnmi::SetRequest EncodeSetRequest(const v1::DeviceState* current, const v1::DeviceState& desired,
                                    PartMask parts, const std::string& target) {
  ::gnmi::SetRequest req;
  req.mutable_prefix()->set_origin(kOrigin);
  if (!target.empty()) req.mutable_prefix()->set_target(target);
  if (current && IsCanonicalState(*current) && IsCanonicalState(desired)) {
    // The driver's case: both sides canonical, diffed in one pass.
    for (Part p : kEveryPart) {
      if (!(parts & Mask(p))) continue;
      switch (p) {
        case Part::kColors:
          DiffSorted(current->colors(), desired.colors(), &req);
          break;
        case Part::kRoutes:
          DiffSorted(current->routes(), desired.routes(), &req);
          break;
        case Part::kWeights:
          DiffSorted(current->weights(), desired.weights(), &req);
          break;
        case Part::kAlbTables:
          DiffSorted(current->alb_tables(), desired.alb_tables(), &req);
          break;
        case Part::kSprayRules:
          DiffSorted(current->spray_rules(), desired.spray_rules(), &req);
          break;
        case Part::kThresholds:
          DiffSorted(current->thresholds(), desired.thresholds(), &req);
          break;
        case Part::kDlb: {
          // As ToModel: a profile without a mode is no profile.
          const v1::DlbProfile* c = HasDlb(*current) ? &current->dlb() : nullptr;
          const v1::DlbProfile* w = HasDlb(desired) ? &desired.dlb() : nullptr;
          if (w) {
            if (!c || !Equal(*c, *w)) {
              AddUpdate(DlbPath(true), ConfigJson(*w), req.mutable_replace());
            }
          } else if (c) {
            *req.add_delete_() = DlbPath(false);
          }
          break;
        }
      }
    }
    return req;
  }
  Model want = ToModel(desired);
  std::optional<Model> cur;
  if (current) cur = ToModel(*current);
  for (Part p : kEveryPart) {
    if (!(parts & Mask(p))) continue;
    if (!cur) {
      ::gnmi::Path container = PartPath(p);
      container.clear_origin();
      *req.add_delete_() = container;
    }
    const Model* c = cur ? &*cur : nullptr;
    switch (p) {
      case Part::kColors:
        DiffEntries(c ? &c->colors : nullptr, want.colors, &req);
        break;
      case Part::kRoutes:
        DiffEntries(c ? &c->routes : nullptr, want.routes, &req);
        break;
      case Part::kWeights:
        DiffEntries(c ? &c->weights : nullptr, want.weights, &req);
        break;
      case Part::kAlbTables:
        DiffEntries(c ? &c->alb : nullptr, want.alb, &req);
        break;
      case Part::kSprayRules:
        DiffEntries(c ? &c->spray : nullptr, want.spray, &req);
        break;
      case Part::kThresholds:
        DiffEntries(c ? &c->thresholds : nullptr, want.thresholds, &req);
        break;
      case Part::kDlb:
        if (want.dlb) {
          if (!c || !c->dlb || !Equal(*c->dlb, *want.dlb)) {
            AddUpdate(DlbPath(true), ConfigJson(*want.dlb), req.mutable_replace());
          }
        } else if (c && c->dlb) {
          *req.add_delete_() = DlbPath(false);
        }
        break;
    }
  }
  return req;
}

bool IsEmptySet(const ::gnmi::SetRequest& r) {
  return r.delete__size() == 0 && r.replace_size() == 0 && r.update_size() == 0;
}

Status ApplySetRequest(const ::gnmi::SetRequest& request, v1::DeviceState* state,
                       const CodecLimits& limits, ::gnmi::SetResponse* response,
                       int64_t timestamp_ns) {
  Model m = ToModel(*state);
  ::gnmi::SetResponse resp;
  *resp.mutable_prefix() = request.prefix();
  resp.set_timestamp(timestamp_ns);
  auto result = [&](const ::gnmi::Path& p, ::gnmi::UpdateResult::Operation op) {
    auto* r = resp.add_response();
    *r->mutable_path() = p;
    r->set_op(op);
  };
  for (const auto& d : request.delete_()) {
    const PathView full(request.prefix(), d);
    Resolved r;
    Status s = Resolve(full, &r);
    if (!s.ok()) return InvalidArgument("delete: " + s.message());
    DeleteResolved(r, &m);
    result(d, ::gnmi::UpdateResult::DELETE);
  }
  for (int pass = 0; pass < 2; ++pass) {
    const auto& ups = pass == 0 ? request.replace() : request.update();
    for (const auto& u : ups) {
      const PathView full(request.prefix(), u.path());
      Resolved r;
      const char* op = pass == 0 ? "replace " : "update ";
      Status s = Resolve(full, &r);
      if (!s.ok()) return InvalidArgument(op + s.message());
      s = WriteResolved(r, u.val(), pass == 1, Where(op, full), limits, &m);
      if (!s.ok()) return s;
      result(u.path(), pass == 0 ? ::gnmi::UpdateResult::REPLACE : ::gnmi::UpdateResult::UPDATE);
    }
  }
  FromModel(m, state);
  if (response) *response = std::move(resp);
  return Status::Ok();
}

::gnmi::GetRequest MakeGetRequest(PartMask parts, const std::string& target) {
  ::gnmi::GetRequest req;
  req.mutable_prefix()->set_origin(kOrigin);
  if (!target.empty()) req.mutable_prefix()->set_target(target);
  for (Part p : kEveryPart) {
    if (!(parts & Mask(p))) continue;
    ::gnmi::Path path = PartPath(p);
    path.clear_origin();
    *req.add_path() = path;
  }
  req.set_type(::gnmi::GetRequest::CONFIG);
  req.set_encoding(::gnmi::JSON_IETF);
  return req;
}

::gnmi::Notification EncodeNotification(const v1::DeviceState& state, PartMask parts,
                                        const std::string& target, int64_t timestamp_ns) {
  ::gnmi::Notification n;
  n.set_timestamp(timestamp_ns);
  n.mutable_prefix()->set_origin(kOrigin);
  if (!target.empty()) n.mutable_prefix()->set_target(target);
  if (IsCanonicalState(state)) {
    for (Part p : kEveryPart) {
      if (parts & Mask(p)) AddStateUpdates(state, p, nullptr, n.mutable_update());
    }
    return n;
  }
  Model m = ToModel(state);
  for (Part p : kEveryPart) {
    if (parts & Mask(p)) AddPartUpdates(m, p, nullptr, n.mutable_update());
  }
  return n;
}

Status EncodeGetResponse(const ::gnmi::GetRequest& request, const v1::DeviceState& state,
                         int64_t timestamp_ns, ::gnmi::GetResponse* response) {
  if (request.encoding() != ::gnmi::JSON && request.encoding() != ::gnmi::JSON_IETF) {
    return Status(StatusCode::kUnimplemented, "encoding " + std::to_string(request.encoding()) +
                                                  " not supported (JSON, JSON_IETF)");
  }
  std::vector<::gnmi::Path> paths;
  for (const auto& p : request.path()) paths.push_back(JoinPaths(request.prefix(), p));
  if (paths.empty()) paths.push_back(request.prefix());
  // A canonical state (the targets cache one) is encoded as it is.
  const bool canonical = IsCanonicalState(state);
  Model m;
  if (!canonical) m = ToModel(state);
  ::gnmi::GetResponse out;
  for (const auto& full : paths) {
    Resolved r;
    Status s = Resolve(PathView(full), &r);
    if (!s.ok()) return s;
    ::gnmi::Notification* n = out.add_notification();
    n->set_timestamp(timestamp_ns);
    n->mutable_prefix()->set_origin(kOrigin);
    if (!full.target().empty()) n->mutable_prefix()->set_target(full.target());
    for (Part p : kEveryPart) {
      if (!(r.all || r.part == p)) continue;
      if (canonical) {
        AddStateUpdates(state, p, &r, n->mutable_update());
      } else {
        AddPartUpdates(m, p, &r, n->mutable_update());
      }
    }
    if (!r.all && r.part != Part::kDlb && r.list_reached && r.FullKey() && n->update().empty()) {
      return NotFound("path " + PathText(PathView(full)) + " does not exist");
    }
  }
  *response = std::move(out);
  return Status::Ok();
}

Status DecodeGetResponse(const ::gnmi::GetResponse& response, v1::DeviceState* state,
                         const CodecLimits& limits) {
  Model m;
  for (const auto& n : response.notification()) {
    for (const auto& u : n.update()) {
      const PathView full(n.prefix(), u.path());
      Resolved r;
      Status s = Resolve(full, &r);
      if (!s.ok()) return s;
      if (!r.config) {
        return InvalidArgument("update " + PathText(full) + ": expected a config container");
      }
      s = WriteResolved(r, u.val(), false, Where("update ", full), limits, &m);
      if (!s.ok()) return s;
    }
  }
  v1::DeviceState out;
  out.set_device(state->device());
  out.set_generation(state->generation());
  FromModel(m, &out);
  *state = std::move(out);
  return Status::Ok();
}

}  // namespace loom::southbound::gnmi
