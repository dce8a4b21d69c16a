// The SONiC datastore of a platform personality: CONFIG_DB written through
// sonic-gnmi's native write (origin sonic-db), validated as a whole against
// the sonic YANG set, translated into the emulator's settings. Semantics and
// status codes: platform_config.h.
#include <libyang/libyang.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "common/text.h"
#include "sim-fabric/platform_config.h"
#include "southbound/bgp/prefix_plan.h"
#include "telemetry/path.h"

namespace loom::sim {
namespace {

namespace v1 = loom::v1;

using Row = std::map<std::string, std::string>;  // field -> value
using Table = std::map<std::string, Row>;        // key -> row
using Db = std::map<std::string, Table>;         // table -> rows

constexpr char kOrigin[] = "sonic-db";
constexpr char kConfigDb[] = "CONFIG_DB";
constexpr char kNamespace[] = "localhost";
// Databases sonic-gnmi knows but this target does not write.
const char* const kOtherDbs[] = {"APPL_DB",     "ASIC_DB",         "COUNTERS_DB",
                                 "LOGLEVEL_DB", "PFC_WD_DB",       "FLEX_COUNTER_DB",
                                 "STATE_DB",    "SNMP_OVERLAY_DB", "APPL_STATE_DB",
                                 "DPU_APPL_DB", "CHASSIS_APP_DB"};

const std::vector<std::string>& Owned() {
  static const std::vector<std::string> k = {"colors",     "routes",       "dlb",
                                             "thresholds", "pfc_watchdog", "disabled_interfaces"};
  return k;
}

bool IsInteger(const std::string& s) {
  size_t i = s[0] == '-' ? 1 : 0;
  if (i >= s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::string FieldOf(const Row& r, const char* field, const std::string& dflt = "") {
  auto it = r.find(field);
  return it == r.end() ? dflt : it->second;
}

uint64_t Number(const std::string& s, uint64_t dflt) {
  if (s.empty() || !IsInteger(s) || s[0] == '-') return dflt;
  return std::strtoull(s.c_str(), nullptr, 10);
}

// A parsed CONFIG_DB path: depth 0 = the whole database (/CONFIG_DB/localhost),
// 1 = a table, 2 = a row, 3 = a field.
struct DbPath {
  std::string text;  // for messages
  int depth = 0;
  std::string table, key, field;
};

struct SonicCandidate final : PlatformConfig::Candidate {
  Db db;
  bool ars_seen = false;
};

class SonicConfig final : public PlatformConfig {
 public:
  SonicConfig(DeviceFacts facts, std::shared_ptr<YangContext> yang)
      : facts_(std::move(facts)), yang_(std::move(yang)) {}

  // Seeds the PORT table and checks that it validates.
  Status Init() {
    int lane = 0;
    for (const auto& p : facts_.ports) {
      Row& r = db_["PORT"][p];
      std::string lanes;
      for (int i = 0; i < 4; ++i) lanes += (i ? "," : "") + std::to_string(lane++);
      auto cap = facts_.capacity_bps.find(p);
      int64_t mbps = cap == facts_.capacity_bps.end() ? 100000 : cap->second / 1000000;
      mbps = std::clamp<int64_t>(mbps, 1, 1600000);
      r["lanes"] = lanes;
      r["speed"] = std::to_string(mbps);
      r["admin_status"] = "up";
    }
    Status s = Validate(db_);
    if (!s.ok())
      return FailedPrecondition("sonic personality of " + facts_.device +
                                ": the seeded CONFIG_DB does not validate: " + s.message());
    state_ = Translate(db_, false);
    return Status::Ok();
  }

  const std::vector<std::string>& owned_fields() const override { return Owned(); }

  Status Prepare(const ::gnmi::SetRequest& req, std::unique_ptr<Candidate>* out) const override {
    // Origin (sonic-gnmi server.go Set: prefix origin, else the paths' common one).
    std::vector<const ::gnmi::Path*> paths;
    for (const auto& p : req.delete_()) paths.push_back(&p);
    for (const auto& u : req.replace()) paths.push_back(&u.path());
    for (const auto& u : req.update()) paths.push_back(&u.path());
    std::string origin = req.prefix().origin();
    if (origin.empty() && !paths.empty()) {
      origin = paths[0]->origin();
      for (const auto* p : paths) {
        if (p->origin() != origin) {
          return Status(StatusCode::kUnimplemented, "Origin conflict in path");
        }
      }
    }
    if (origin != kOrigin) {
      return Status(StatusCode::kUnimplemented,
                    "Translib write is disabled: origin \"" + origin +
                        "\" is not sonic-db; this SONiC target writes CONFIG_DB only through "
                        "origin sonic-db (--gnmi_native_write; sonic personality of " +
                        facts_.device + ")");
    }
    auto c = std::make_unique<SonicCandidate>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      c->db = db_;
      c->ars_seen = ars_seen_;
    }
    std::string db_name;
    auto parse = [&](const ::gnmi::Path& p, DbPath* dp) -> Status {
      return ParseDbPath(req.prefix(), p, &db_name, dp);
    };
    for (const auto& p : req.delete_()) {
      DbPath dp;
      if (Status s = parse(p, &dp); !s.ok()) return s;
      Delete(dp, &c->db);
      AddResult(p, ::gnmi::UpdateResult::DELETE, &c->response);
    }
    for (const auto& u : req.replace()) {
      DbPath dp;
      if (Status s = parse(u.path(), &dp); !s.ok()) return s;
      if (Status s = Write(dp, u.val(), /*replace=*/true, &c->db); !s.ok()) return s;
      AddResult(u.path(), ::gnmi::UpdateResult::REPLACE, &c->response);
    }
    for (const auto& u : req.update()) {
      DbPath dp;
      if (Status s = parse(u.path(), &dp); !s.ok()) return s;
      if (Status s = Write(dp, u.val(), /*replace=*/false, &c->db); !s.ok()) return s;
      AddResult(u.path(), ::gnmi::UpdateResult::UPDATE, &c->response);
    }
    if (Status s = Validate(c->db); !s.ok()) return s;
    for (const char* t : {"ARS_PROFILE", "ARS_OBJECT", "ARS_INTERFACE", "ARS_NEXTHOP"}) {
      auto it = c->db.find(t);
      if (it != c->db.end() && !it->second.empty()) c->ars_seen = true;
    }
    c->state = Translate(c->db, c->ars_seen);
    *c->response.mutable_prefix() = req.prefix();
    *out = std::move(c);
    return Status::Ok();
  }

  void Commit(std::unique_ptr<Candidate> c) override {
    auto* sc = static_cast<SonicCandidate*>(c.get());
    std::lock_guard<std::mutex> lock(mu_);
    db_ = std::move(sc->db);
    ars_seen_ = sc->ars_seen;
    state_ = std::move(sc->state);
  }

  bool IsConfigGet(const ::gnmi::GetRequest& req) const override {
    if (req.prefix().target() == kConfigDb) return true;
    if (req.path_size() == 0) return false;
    ::gnmi::Path full = telemetry::JoinPath(req.prefix(), req.path(0));
    return full.elem_size() > 0 && full.elem(0).name() == kConfigDb;
  }

  Status Get(const ::gnmi::GetRequest& req, int64_t ts, ::gnmi::GetResponse* resp) const override {
    if (req.type() != ::gnmi::GetRequest::ALL) {
      return Status(StatusCode::kUnimplemented,
                    "unsupported request type: " + ::gnmi::GetRequest::DataType_Name(req.type()));
    }
    if (req.encoding() != ::gnmi::JSON && req.encoding() != ::gnmi::JSON_IETF) {
      return Status(StatusCode::kUnimplemented,
                    "encoding " + std::to_string(req.encoding()) +
                        " not supported for CONFIG_DB; supported: JSON, JSON_IETF");
    }
    const bool by_target = req.prefix().target() == kConfigDb;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : req.path()) {
      ::gnmi::Path full = telemetry::JoinPath(req.prefix(), p);
      full.clear_target();
      std::vector<std::string> e;
      for (const auto& el : full.elem()) e.push_back(el.name());
      const std::string text = telemetry::FormatPath(full);
      size_t at = 0;
      if (!by_target) {
        if (e.size() < 2 || e[0] != kConfigDb || e[1] != kNamespace) {
          return NotFound("path " + text + ": not /CONFIG_DB/localhost/TABLE[/KEY[/FIELD]]");
        }
        at = 2;
      }
      if (e.size() <= at || e.size() > at + 3) {
        return NotFound("path " + text + ": not a CONFIG_DB table, row or field");
      }
      std::string json;
      auto tit = db_.find(e[at]);
      if (e.size() == at + 1) {
        if (tit == db_.end() || tit->second.empty()) continue;  // table-only: no data, no error
        json = "{";
        bool first = true;
        for (const auto& [k, row] : tit->second) {
          if (!first) json += ",";
          first = false;
          AppendJsonString(json, k);
          json += ":" + RowJson(row);
        }
        json += "}";
      } else {
        const Row* row = nullptr;
        if (tit != db_.end()) {
          auto rit = tit->second.find(e[at + 1]);
          if (rit != tit->second.end()) row = &rit->second;
        }
        if (row == nullptr) return NotFound("No valid entry found for path " + text);
        if (e.size() == at + 2) {
          json = RowJson(*row);
        } else {
          auto fit = row->find(e[at + 2]);
          if (fit == row->end()) return NotFound("No valid entry found for path " + text);
          AppendJsonString(json, fit->second);
        }
      }
      ::gnmi::Notification* n = resp->add_notification();
      n->set_timestamp(ts);
      *n->mutable_prefix() = req.prefix();
      ::gnmi::Update* u = n->add_update();
      *u->mutable_path() = p;
      if (req.encoding() == ::gnmi::JSON) {
        u->mutable_val()->set_json_val(std::move(json));
      } else {
        u->mutable_val()->set_json_ietf_val(std::move(json));
      }
    }
    return Status::Ok();
  }

  v1::DeviceState State() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }

 private:
  static std::string RowJson(const Row& row) {
    std::string json = "{";
    bool first = true;
    for (const auto& [f, v] : row) {
      if (!first) json += ",";
      first = false;
      AppendJsonString(json, f);
      json += ":";
      AppendJsonString(json, v);
    }
    return json + "}";
  }

  static void AddResult(const ::gnmi::Path& p, ::gnmi::UpdateResult::Operation op,
                        ::gnmi::SetResponse* resp) {
    ::gnmi::UpdateResult* r = resp->add_response();
    *r->mutable_path() = p;
    r->set_op(op);
  }

  // /CONFIG_DB/localhost[/TABLE[/KEY[/FIELD]]] (prefix elements first).
  Status ParseDbPath(const ::gnmi::Path& prefix, const ::gnmi::Path& path, std::string* db_name,
                     DbPath* out) const {
    ::gnmi::Path full = telemetry::JoinPath(prefix, path);
    full.clear_target();
    out->text = telemetry::FormatPath(full);
    std::vector<std::string> e;
    for (const auto& el : full.elem()) e.push_back(el.name());
    if (e.size() < 2) {
      return NotFound("Invalid elem length: " + out->text +
                      " (CONFIG_DB paths are /CONFIG_DB/localhost/TABLE/KEY[/FIELD])");
    }
    if (!db_name->empty() && *db_name != e[0]) {
      return NotFound("Target conflict in path: " + out->text + " (" + *db_name + " elsewhere)");
    }
    *db_name = e[0];
    if (e[0] != kConfigDb) {
      for (const char* other : kOtherDbs) {
        if (e[0] == other) {
          return Status(StatusCode::kUnimplemented, "Set RPC does not support " + e[0] + " (" +
                                                        out->text +
                                                        "): this target writes CONFIG_DB only");
        }
      }
      return NotFound("Invalid target: database \"" + e[0] + "\" (" + out->text + ")");
    }
    if (e[1] != kNamespace) {
      return NotFound("Unsupported namespace/container " + e[1] + " (" + out->text + ")");
    }
    if (e.size() > 5) {
      return InvalidArgument("path " + out->text +
                             " is deeper than /CONFIG_DB/localhost/TABLE/KEY/FIELD");
    }
    out->depth = static_cast<int>(e.size()) - 2;
    if (out->depth >= 1) out->table = e[2];
    if (out->depth >= 2) out->key = e[3];
    if (out->depth >= 3) out->field = e[4];
    if (out->depth >= 1 && !yang_->sonic_tables().count(out->table)) {
      return UnknownTable(out->table, out->text);
    }
    return Status::Ok();
  }

  Status UnknownTable(const std::string& table, const std::string& where) const {
    std::string names;
    for (const auto& [t, l] : yang_->sonic_tables()) names += (names.empty() ? "" : ", ") + t;
    return InvalidArgument("CONFIG_DB table \"" + table + "\" (" + where +
                           ") has no YANG model on this target; tables: " + names);
  }

  static void Delete(const DbPath& p, Db* db) {
    switch (p.depth) {
      case 0:
        db->clear();
        return;
      case 1:
        db->erase(p.table);
        return;
      case 2: {
        auto it = db->find(p.table);
        if (it == db->end()) return;
        it->second.erase(p.key);
        if (it->second.empty()) db->erase(it);
        return;
      }
      default: {
        auto it = db->find(p.table);
        if (it == db->end()) return;
        auto rit = it->second.find(p.key);
        if (rit == it->second.end()) return;
        rit->second.erase(p.field);
        if (rit->second.empty()) it->second.erase(rit);
        if (it->second.empty()) db->erase(it);
      }
    }
  }

  // A CONFIG_DB field value from JSON: a string, or a number / boolean taken
  // as its text; an array of those is a list (comma-joined, as CONFIG_DB
  // stores "field@" lists).
  static Status Scalar(const JsonValue& v, const std::string& where, std::string* out) {
    switch (v.kind) {
      case JsonValue::Kind::kString:
      case JsonValue::Kind::kNumber:
      case JsonValue::Kind::kBool:
        *out = v.text;
        return Status::Ok();
      case JsonValue::Kind::kArray: {
        out->clear();
        for (size_t i = 0; i < v.items.size(); ++i) {
          std::string item;
          if (v.items[i].kind == JsonValue::Kind::kArray) {
            return InvalidArgument(where + ": a CONFIG_DB list holds strings, not lists");
          }
          if (Status s = Scalar(v.items[i], where, &item); !s.ok()) return s;
          *out += (i ? "," : "") + item;
        }
        return Status::Ok();
      }
      default:
        return InvalidArgument(where + ": a CONFIG_DB field value is a string (got " +
                               (v.kind == JsonValue::Kind::kNull ? "null" : "an object") + ")");
    }
  }

  static Status RowFrom(const JsonValue& v, const std::string& where, Row* row) {
    if (v.kind != JsonValue::Kind::kObject) {
      return InvalidArgument(where + ": a CONFIG_DB row is a JSON object of fields");
    }
    for (const auto& m : v.members) {
      if (Status s = Scalar(m.value, where + " field " + m.name, &(*row)[m.name]); !s.ok()) {
        return s;
      }
    }
    return Status::Ok();
  }

  Status TableFrom(const std::string& table, const JsonValue& v, const std::string& where,
                   bool replace, Table* t) const {
    if (v.kind != JsonValue::Kind::kObject) {
      return InvalidArgument(where + ": a CONFIG_DB table is a JSON object of rows");
    }
    if (replace) t->clear();
    for (const auto& m : v.members) {
      Row& row = (*t)[m.name];
      if (replace) row.clear();
      if (Status s = RowFrom(m.value, where + " row " + table + "|" + m.name, &row); !s.ok()) {
        return s;
      }
    }
    return Status::Ok();
  }

  Status Write(const DbPath& p, const ::gnmi::TypedValue& val, bool replace, Db* db) const {
    JsonValue v;
    switch (val.value_case()) {
      case ::gnmi::TypedValue::kJsonIetfVal:
      case ::gnmi::TypedValue::kJsonVal: {
        const std::string& text = val.has_json_ietf_val() ? val.json_ietf_val() : val.json_val();
        std::string err;
        if (!ParseJson(text, &v, &err)) {
          return InvalidArgument("value of " + p.text + " is not JSON: " + err);
        }
        break;
      }
      case ::gnmi::TypedValue::kStringVal:
        if (p.depth == 3) {
          v.kind = JsonValue::Kind::kString;
          v.text = val.string_val();
          break;
        }
        [[fallthrough]];
      default:
        return Status(StatusCode::kUnimplemented,
                      "value of " + p.text +
                          ": encoding not supported; CONFIG_DB values are JSON or JSON_IETF "
                          "(string_val for one field)");
    }
    switch (p.depth) {
      case 0: {
        if (v.kind != JsonValue::Kind::kObject) {
          return InvalidArgument(p.text + ": the CONFIG_DB value is a JSON object of tables");
        }
        if (replace) db->clear();
        for (const auto& m : v.members) {
          if (!yang_->sonic_tables().count(m.name)) return UnknownTable(m.name, p.text);
          if (Status s = TableFrom(m.name, m.value, p.text, replace, &(*db)[m.name]); !s.ok()) {
            return s;
          }
        }
        return Status::Ok();
      }
      case 1:
        return TableFrom(p.table, v, p.text, replace, &(*db)[p.table]);
      case 2: {
        Row& row = (*db)[p.table][p.key];
        if (replace) row.clear();
        return RowFrom(v, p.text, &row);
      }
      default:
        return Scalar(v, p.text, &(*db)[p.table][p.key][p.field]);
    }
  }

  // The whole CONFIG_DB as one RFC 7951 document, each table under its
  // module's container, validated like `yanglint -t config`.
  Status Validate(const Db& db) const {
    const auto& tables = yang_->sonic_tables();
    std::map<std::string, std::map<std::string, std::map<std::string, std::vector<std::string>>>>
        doc;  // module -> table -> list -> entries
    for (const auto& [table, rows] : db) {
      auto tit = tables.find(table);
      if (tit == tables.end()) return UnknownTable(table, "CONFIG_DB");
      for (const auto& [key, row] : rows) {
        const std::vector<std::string> parts = Split(key, '|');
        const SonicList* list = nullptr;
        for (const SonicList& l : tit->second) {
          if (l.keys.size() == parts.size()) list = &l;
        }
        if (list == nullptr) {
          std::string lists;
          for (const SonicList& l : tit->second) {
            lists += (lists.empty() ? "" : "; ") + l.list + " keyed";
            for (const auto& k : l.keys) lists += " " + k;
          }
          return InvalidArgument("CONFIG_DB key \"" + table + "|" + key + "\" has " +
                                 std::to_string(parts.size()) + " part(s); the YANG lists of " +
                                 table + " are " + lists);
        }
        std::string entry = "{";
        bool first = true;
        auto member = [&](const std::string& name, const std::string& value) {
          if (!first) entry += ",";
          first = false;
          std::string leaf = name;
          if (!leaf.empty() && leaf.back() == '@') leaf.pop_back();
          AppendJsonString(entry, leaf);
          entry += ":";
          auto fit = list->fields.find(leaf);
          const SonicList::Field f = fit == list->fields.end() ? SonicList::Field() : fit->second;
          auto typed = [&](const std::string& x) {
            switch (f.kind) {
              case JsonKind::kNumber:
                if (IsInteger(x)) {
                  entry += x;
                  return;
                }
                break;
              case JsonKind::kBool:
                if (x == "true" || x == "false") {
                  entry += x;
                  return;
                }
                break;
              case JsonKind::kEmpty:
                entry += "[null]";
                return;
              default:
                break;
            }
            AppendJsonString(entry, x);
          };
          if (f.leaf_list) {
            entry += "[";
            const std::vector<std::string> items = Split(value, ',');
            for (size_t i = 0; i < items.size(); ++i) {
              if (i > 0) entry += ",";
              typed(items[i]);
            }
            entry += "]";
          } else {
            typed(value);
          }
        };
        for (size_t i = 0; i < parts.size(); ++i) member(list->keys[i], parts[i]);
        for (const auto& [field, value] : row) {
          auto k = std::find(list->keys.begin(), list->keys.end(), field);
          if (k != list->keys.end()) {
            if (value != parts[k - list->keys.begin()]) {
              return InvalidArgument("CONFIG_DB row " + table + "|" + key + ": field " + field +
                                     " = \"" + value + "\" contradicts the key");
            }
            continue;
          }
          member(field, value);
        }
        entry += "}";
        doc[list->module][table][list->list].push_back(std::move(entry));
      }
    }
    std::string json = "{";
    bool first_mod = true;
    for (const auto& [module, ts] : doc) {
      if (!first_mod) json += ",";
      first_mod = false;
      AppendJsonString(json, module + ":" + module);
      json += ":{";
      bool first_table = true;
      for (const auto& [table, lists] : ts) {
        if (!first_table) json += ",";
        first_table = false;
        AppendJsonString(json, table);
        json += ":{";
        bool first_list = true;
        for (const auto& [list, entries] : lists) {
          if (!first_list) json += ",";
          first_list = false;
          AppendJsonString(json, list);
          json += ":[";
          for (size_t i = 0; i < entries.size(); ++i) json += (i ? "," : "") + entries[i];
          json += "]";
        }
        json += "}";
      }
      json += "}";
    }
    json += "}";
    std::lock_guard<std::mutex> lock(yang_->mu());
    lyd_node* tree = nullptr;
    const LY_ERR err = lyd_parse_data_mem(yang_->ctx(), json.c_str(), LYD_JSON,
                                          LYD_PARSE_STRICT | LYD_PARSE_NO_STATE,
                                          LYD_VALIDATE_NO_STATE | LYD_VALIDATE_PRESENT, &tree);
    LydTree hold(tree);
    if (err != LY_SUCCESS) {
      return InvalidArgument("CONFIG_DB rejected by the SONiC YANG models: " +
                             yang_->LastError("libyang error " + std::to_string(err)));
    }
    return Status::Ok();
  }

  // The emulator's settings from CONFIG_DB (header comment).
  v1::DeviceState Translate(const Db& db, bool ars_seen) const {
    v1::DeviceState s;
    s.set_device(facts_.device);
    auto table = [&](const char* name) -> const Table& {
      static const Table kEmpty;
      auto it = db.find(name);
      return it == db.end() ? kEmpty : it->second;
    };
    // Static routes.
    std::map<std::string, StaticRoute> routes;
    for (const auto& [key, row] : table("STATIC_ROUTE")) {
      const std::vector<std::string> parts = Split(key, '|');
      if (parts.size() != 2 || parts[0] != "default") continue;
      if (FieldOf(row, "blackhole").find("true") != std::string::npos) continue;
      const std::string nic = facts_.plan ? facts_.plan->NicOf(parts[1]) : "";
      if (nic.empty()) continue;
      StaticRoute r;
      r.prefix = parts[1];
      const std::string ifs = FieldOf(row, "ifname");
      if (ifs.empty()) continue;
      bool ok = true;
      for (const auto& i : Split(ifs, ',')) {
        auto it = facts_.neighbor_of.find(i);
        if (it == facts_.neighbor_of.end()) {
          ok = false;
          break;
        }
        r.neighbors.insert(it->second);
      }
      if (ok && !r.neighbors.empty()) routes[nic] = std::move(r);
    }
    AddStaticRoutes(routes, &s);
    // ARS -> DLB.
    const Table& profiles = table("ARS_PROFILE");
    const Table& objects = table("ARS_OBJECT");
    std::string object;
    if (!profiles.empty()) {
      const Row& prof = profiles.begin()->second;
      const std::string mode = FieldOf(prof, "ars_nhg_path_selector_mode", "interface");
      const std::string dflt = FieldOf(prof, "default_ars_object");
      if (mode == "global") {
        object = dflt;
      } else {
        for (const auto& [k, row] : table(mode == "nexthop" ? "ARS_NEXTHOP" : "ARS_INTERFACE")) {
          object = FieldOf(row, "ars_obj_name", dflt);
          if (objects.count(object)) break;
          object.clear();
        }
      }
    }
    if (auto it = objects.find(object); !object.empty() && it != objects.end()) {
      v1::DlbProfile* d = s.mutable_dlb();
      d->set_mode(FieldOf(it->second, "assign_mode") == "per_packet_quality"
                      ? v1::DLB_MODE_PER_PACKET
                      : v1::DLB_MODE_FLOWLET);
      if (uint64_t us = Number(FieldOf(it->second, "flowlet_idle_time"), 0); us > 0) {
        d->set_inactivity_interval_ns(us * 1000);
      }
    } else if (ars_seen) {
      s.mutable_dlb()->set_mode(v1::DLB_MODE_STATIC);
    }
    // WRED/ECN bound to queues.
    const Table& wred = table("WRED_PROFILE");
    for (const auto& [key, row] : table("QUEUE")) {
      const std::vector<std::string> parts = Split(key, '|');
      if (parts.size() != 2 || !facts_.neighbor_of.count(parts[0])) continue;
      auto wit = wred.find(FieldOf(row, "wred_profile"));
      if (wit == wred.end()) continue;
      const Row& w = wit->second;
      const std::string ecn = FieldOf(w, "ecn");
      if (ecn != "ecn_green" && ecn != "ecn_green_yellow" && ecn != "ecn_green_red" &&
          ecn != "ecn_all") {
        continue;
      }
      const uint64_t kmin = Number(FieldOf(w, "green_min_threshold"), 0);
      const uint64_t kmax = Number(FieldOf(w, "green_max_threshold"), 0);
      if (kmax == 0) continue;
      const uint64_t pmax =
          std::min<uint64_t>(Number(FieldOf(w, "green_drop_probability"), 100), 100);
      std::vector<std::string> q = Split(parts[1], '-');
      const uint64_t lo = Number(q[0], 99), hi = q.size() > 1 ? Number(q[1], 99) : lo;
      for (uint64_t prio = lo; prio <= hi && prio < 8; ++prio) {
        v1::QueueThresholds* t = s.add_thresholds();
        t->set_interface(parts[0]);
        t->set_priority(static_cast<uint32_t>(prio));
        t->set_ecn_kmin_bytes(kmin);
        t->set_ecn_kmax_bytes(kmax);
        t->set_ecn_pmax_percent(static_cast<uint32_t>(pmax));
      }
    }
    // PFC watchdog.
    const Table& wd = table("PFC_WD");
    for (const auto& [port, row] : wd) {
      if (port == "GLOBAL") continue;
      v1::PfcWatchdog* w = s.mutable_pfc_watchdog();
      if (w->interfaces_size() == 0) {
        const std::string a = FieldOf(row, "action", "drop");
        w->set_action(a == "forward" ? v1::PFC_WATCHDOG_ACTION_FORWARD
                      : a == "alert" ? v1::PFC_WATCHDOG_ACTION_ALERT
                                     : v1::PFC_WATCHDOG_ACTION_DROP);
        w->set_detection_time_ms(
            static_cast<uint32_t>(Number(FieldOf(row, "detection_time"), 200)));
        w->set_restoration_time_ms(
            static_cast<uint32_t>(Number(FieldOf(row, "restoration_time"), 200)));
        if (auto g = wd.find("GLOBAL"); g != wd.end()) {
          w->set_poll_interval_ms(
              static_cast<uint32_t>(Number(FieldOf(g->second, "POLL_INTERVAL"), 0)));
        }
      }
      w->add_interfaces(port);
    }
    // Ports without a PORT row or not admin up.
    const Table& ports = table("PORT");
    for (const auto& p : facts_.ports) {
      auto it = ports.find(p);
      if (it == ports.end() || FieldOf(it->second, "admin_status") != "up") {
        s.add_disabled_interfaces(p);
      }
    }
    return s;
  }

  const DeviceFacts facts_;
  const std::shared_ptr<YangContext> yang_;
  mutable std::mutex mu_;
  Db db_;                  // guarded by mu_
  bool ars_seen_ = false;  // guarded by mu_
  v1::DeviceState state_;  // guarded by mu_
};

}  // namespace

Status MakeSonicConfig(DeviceFacts facts, std::shared_ptr<YangContext> yang,
                       std::unique_ptr<PlatformConfig>* out) {
  if (!yang || yang->set() != YangModuleSet::kSonic) {
    return FailedPrecondition("sonic personality: the SONiC YANG set is not loaded");
  }
  auto c = std::make_unique<SonicConfig>(std::move(facts), std::move(yang));
  if (Status s = c->Init(); !s.ok()) return s;
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace loom::sim
