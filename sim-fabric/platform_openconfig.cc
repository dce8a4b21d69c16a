// The OpenConfig datastore of a platform personality: a libyang data tree of
// the models the personality serves, changed by gNMI Set paths resolved
// against the schema, validated as a whole, translated into the emulator's
// settings. Semantics and status codes: platform_config.h.
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

// The top-level nodes the personality serves, and their modules.
struct Root {
  const char* name;
  const char* module;
};
constexpr Root kRoots[] = {{"interfaces", "openconfig-interfaces"},
                           {"qos", "openconfig-qos"},
                           {"network-instances", "openconfig-network-instance"},
                           {"lldp", "openconfig-lldp"}};

const std::vector<std::string>& Owned() {
  static const std::vector<std::string> k = {"colors", "routes", "weights", "thresholds",
                                             "disabled_interfaces"};
  return k;
}

// One resolved path element.
struct Step {
  const lysc_node* schema = nullptr;
  // List keys in schema order with the path's value; "" = not given or "*".
  std::vector<std::pair<const lysc_node*, std::string>> keys;
  bool all_keys = true;
};

std::string Unqualified(const std::string& s) {
  const size_t colon = s.find(':');
  return colon == std::string::npos ? s : s.substr(colon + 1);
}

// Member `name` of `obj`, with or without a module prefix.
const JsonValue* Member(const JsonValue& obj, const std::string& name) {
  if (obj.kind != JsonValue::Kind::kObject) return nullptr;
  for (const auto& m : obj.members) {
    if (m.name == name || Unqualified(m.name) == name) return &m.value;
  }
  return nullptr;
}

const JsonValue* Path(const JsonValue& obj, std::initializer_list<const char*> names) {
  const JsonValue* v = &obj;
  for (const char* n : names) {
    v = Member(*v, n);
    if (v == nullptr) return nullptr;
  }
  return v;
}

std::string Text(const JsonValue* v) { return v == nullptr ? "" : v->text; }

const std::vector<JsonValue>& Items(const JsonValue* v) {
  static const std::vector<JsonValue> kNone;
  return v != nullptr && v->kind == JsonValue::Kind::kArray ? v->items : kNone;
}

uint64_t Number(const std::string& s, uint64_t dflt) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return dflt;
  return std::strtoull(s.c_str(), nullptr, 10);
}

// Frees `node` from the tree whose first top-level sibling is `*tree`.
void FreeNode(lyd_node** tree, lyd_node* node) {
  if (node->parent == nullptr) {
    lyd_node* other =
        node->next != nullptr ? node->next : (node->prev != node ? node->prev : nullptr);
    lyd_free_tree(node);
    *tree = other != nullptr ? lyd_first_sibling(other) : nullptr;
    return;
  }
  lyd_free_tree(node);
}

struct OcCandidate final : PlatformConfig::Candidate {
  LydTree tree;
};

class OcConfig final : public PlatformConfig {
 public:
  OcConfig(DeviceFacts facts, std::shared_ptr<YangContext> yang, bool json_ietf_only)
      : facts_(std::move(facts)), yang_(std::move(yang)), json_ietf_only_(json_ietf_only) {}

  Status Init() {
    std::string ifs;
    for (const auto& p : facts_.ports) {
      std::string name;
      AppendJsonString(name, p);
      ifs += (ifs.empty() ? "" : ",") + std::string("{\"name\":") + name +
             ",\"config\":{\"name\":" + name +
             ",\"type\":\"iana-if-type:ethernetCsmacd\",\"enabled\":true}}";
    }
    const std::string seed =
        "{\"openconfig-interfaces:interfaces\":{\"interface\":[" + ifs +
        "]},\"openconfig-network-instance:network-instances\":{\"network-instance\":[{\"name\":"
        "\"default\",\"config\":{\"name\":\"default\",\"type\":\"openconfig-network-instance-"
        "types:DEFAULT_INSTANCE\"},\"protocols\":{\"protocol\":[{\"identifier\":\"openconfig-"
        "policy-types:STATIC\",\"name\":\"DEFAULT\",\"config\":{\"identifier\":\"openconfig-"
        "policy-types:STATIC\",\"name\":\"DEFAULT\"}}]}}]}}";
    std::lock_guard<std::mutex> lock(yang_->mu());
    lyd_node* tree = nullptr;
    if (lyd_parse_data_mem(yang_->ctx(), seed.c_str(), LYD_JSON,
                           LYD_PARSE_STRICT | LYD_PARSE_NO_STATE,
                           LYD_VALIDATE_NO_STATE | LYD_VALIDATE_PRESENT, &tree) != LY_SUCCESS) {
      LydTree hold(tree);
      return FailedPrecondition(
          "openconfig personality of " + facts_.device +
          ": the seeded configuration does not validate: " + yang_->LastError("libyang error"));
    }
    tree_.reset(tree);
    state_ = TranslateLocked(tree_.get());
    return Status::Ok();
  }

  const std::vector<std::string>& owned_fields() const override { return Owned(); }

  Status Prepare(const ::gnmi::SetRequest& req, std::unique_ptr<Candidate>* out) const override {
    auto c = std::make_unique<OcCandidate>();
    std::lock_guard<std::mutex> own(mu_);
    std::lock_guard<std::mutex> lock(yang_->mu());
    if (tree_) {
      lyd_node* dup = nullptr;
      if (lyd_dup_siblings(tree_.get(), nullptr, LYD_DUP_RECURSIVE, &dup) != LY_SUCCESS) {
        return Internal("libyang: cannot copy the configuration: " + yang_->LastError(""));
      }
      c->tree.reset(dup);
    }
    lyd_node* tree = c->tree.release();
    Status st = ApplyLocked(req, &tree, &c->response);
    if (st.ok() &&
        lyd_validate_all(&tree, yang_->ctx(), LYD_VALIDATE_NO_STATE | LYD_VALIDATE_PRESENT,
                         nullptr) != LY_SUCCESS) {
      st = InvalidArgument("configuration rejected by the OpenConfig YANG models: " +
                           yang_->LastError("libyang validation failed"));
    }
    c->tree.reset(tree);
    if (!st.ok()) return st;
    c->state = TranslateLocked(c->tree.get());
    *c->response.mutable_prefix() = req.prefix();
    *out = std::move(c);
    return Status::Ok();
  }

  void Commit(std::unique_ptr<Candidate> c) override {
    auto* oc = static_cast<OcCandidate*>(c.get());
    std::lock_guard<std::mutex> own(mu_);
    std::lock_guard<std::mutex> lock(yang_->mu());  // the old tree is freed with the context locked
    tree_ = std::move(oc->tree);
    state_ = std::move(oc->state);
  }

  bool IsConfigGet(const ::gnmi::GetRequest& req) const override {
    return req.type() == ::gnmi::GetRequest::CONFIG;
  }

  Status Get(const ::gnmi::GetRequest& req, int64_t ts, ::gnmi::GetResponse* resp) const override {
    if (req.encoding() != ::gnmi::JSON_IETF &&
        (json_ietf_only_ || req.encoding() != ::gnmi::JSON)) {
      return Status(StatusCode::kUnimplemented,
                    "encoding " + std::to_string(req.encoding()) +
                        " not supported for configuration; supported: " +
                        (json_ietf_only_ ? "JSON_IETF" : "JSON_IETF, JSON"));
    }
    std::lock_guard<std::mutex> own(mu_);
    std::lock_guard<std::mutex> lock(yang_->mu());
    std::vector<::gnmi::Path> paths(req.path().begin(), req.path().end());
    if (paths.empty()) paths.emplace_back();
    for (const auto& p : paths) {
      ::gnmi::Path full = telemetry::JoinPath(req.prefix(), p);
      if (Status s = CheckOriginTarget(full); !s.ok()) return s;
      full.clear_target();
      const std::string text = telemetry::FormatPath(full);
      std::vector<Step> steps;
      if (Status s = Resolve(full, text, /*writing=*/false, &steps); !s.ok()) return s;
      std::vector<const lyd_node*> nodes;
      if (steps.empty()) {
        for (const lyd_node* n = tree_.get(); n != nullptr; n = n->next) nodes.push_back(n);
      } else if (tree_) {
        std::string xpath;
        if (Status s = XPath(steps, &xpath); !s.ok()) return s;
        ly_set* set = nullptr;
        if (lyd_find_xpath(tree_.get(), xpath.c_str(), &set) != LY_SUCCESS) {
          return InvalidArgument("path " + text + ": " + yang_->LastError("bad path"));
        }
        for (uint32_t i = 0; i < set->count; ++i) nodes.push_back(set->dnodes[i]);
        ly_set_free(set, nullptr);
      }
      if (nodes.empty()) return NotFound("no configuration at " + text);
      ::gnmi::Notification* n = resp->add_notification();
      n->set_timestamp(ts);
      n->mutable_prefix()->set_target(req.prefix().target());
      for (const lyd_node* node : nodes) {
        std::string json;
        if (steps.empty()) {
          if (Status s = Print(tree_.get(), true, &json); !s.ok()) return s;
          ::gnmi::Update* u = n->add_update();
          u->mutable_path()->set_origin(full.origin());
          SetJson(req.encoding(), std::move(json), u);
          break;
        }
        if (Status s = Print(node, false, &json); !s.ok()) return s;
        JsonValue printed;
        std::string err;
        if (!ParseJson(json, &printed, &err) || printed.members.size() != 1) {
          return Internal("libyang printed unexpected JSON: " + err);
        }
        JsonValue value = std::move(printed.members[0].value);
        if (value.kind == JsonValue::Kind::kArray && value.items.size() == 1 &&
            node->schema->nodetype == LYS_LIST) {
          JsonValue one = std::move(value.items[0]);
          value = std::move(one);
        }
        ::gnmi::Update* u = n->add_update();
        *u->mutable_path() = DataPath(node, full.origin());
        SetJson(req.encoding(), JsonText(value), u);
      }
    }
    return Status::Ok();
  }

  v1::DeviceState State() const override {
    std::lock_guard<std::mutex> own(mu_);
    return state_;
  }

 private:
  static void SetJson(int encoding, std::string json, ::gnmi::Update* u) {
    if (encoding == ::gnmi::JSON) {
      u->mutable_val()->set_json_val(std::move(json));
    } else {
      u->mutable_val()->set_json_ietf_val(std::move(json));
    }
  }

  // Context locked.
  Status Print(const lyd_node* node, bool siblings, std::string* out) const {
    char* s = nullptr;
    const uint32_t opts = LYD_PRINT_SHRINK | (siblings ? LYD_PRINT_WITHSIBLINGS : 0);
    if (lyd_print_mem(&s, node, LYD_JSON, opts) != LY_SUCCESS) {
      std::free(s);
      return Internal("libyang cannot print the configuration: " + yang_->LastError(""));
    }
    *out = s != nullptr ? s : "{}";
    std::free(s);
    return Status::Ok();
  }

  // The gNMI path of a data node (names unprefixed, list keys as keys).
  static ::gnmi::Path DataPath(const lyd_node* node, const std::string& origin) {
    std::vector<const lyd_node*> chain;
    for (const lyd_node* n = node; n != nullptr; n = lyd_parent(n)) chain.push_back(n);
    ::gnmi::Path p;
    p.set_origin(origin);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      ::gnmi::PathElem* e = p.add_elem();
      e->set_name((*it)->schema->name);
      if ((*it)->schema->nodetype != LYS_LIST) continue;
      for (const lyd_node* k = lyd_child(*it); k != nullptr; k = k->next) {
        if (!(k->schema->flags & LYS_KEY)) break;
        (*e->mutable_key())[k->schema->name] = lyd_get_value(k);
      }
    }
    return p;
  }

  Status CheckOriginTarget(const ::gnmi::Path& full) const {
    if (!full.origin().empty() && full.origin() != "openconfig") {
      return InvalidArgument("origin \"" + full.origin() +
                             "\" is not supported by this target (openconfig personality of " +
                             facts_.device + "; origins: \"\", openconfig)");
    }
    if (!full.target().empty() && full.target() != facts_.device) {
      return NotFound("prefix.target \"" + full.target() + "\" is not this target (" +
                      facts_.device + ")");
    }
    return Status::Ok();
  }

  // Resolves `full` against the schema of the served models. `writing`:
  // key-less / wildcard list elements are refused on the way (replace and
  // update need every key).
  Status Resolve(const ::gnmi::Path& full, const std::string& text, bool writing,
                 std::vector<Step>* steps) const {
    const lysc_node* parent = nullptr;
    for (int i = 0; i < full.elem_size(); ++i) {
      const ::gnmi::PathElem& e = full.elem(i);
      const std::string name = Unqualified(e.name());
      const lysc_node* found = nullptr;
      if (i == 0) {
        for (const Root& r : kRoots) {
          if (name != r.name) continue;
          const lys_module* m = ly_ctx_get_module_implemented(yang_->ctx(), r.module);
          for (const lysc_node* n = nullptr;
               m != nullptr && (n = lys_getnext(n, nullptr, m->compiled, 0)) != nullptr;) {
            if (name == n->name) found = n;
          }
        }
        if (found == nullptr) {
          return NotFound("path " + text + ": /" + name +
                          " is not served by this target (openconfig personality of " +
                          facts_.device + " serves /interfaces, /qos, /network-instances, /lldp)");
        }
      } else {
        for (const lysc_node* n = nullptr; (n = lys_getnext(n, parent, nullptr, 0)) != nullptr;) {
          if (name == n->name &&
              (n->nodetype & (LYS_CONTAINER | LYS_LIST | LYS_LEAF | LYS_LEAFLIST)) != 0) {
            found = n;
            break;
          }
        }
        if (found == nullptr) {
          return NotFound("path " + text + ": no node \"" + name + "\" under " +
                          std::string(parent->name) +
                          " in the OpenConfig models (openconfig "
                          "personality of " +
                          facts_.device + ")");
        }
      }
      Step st;
      st.schema = found;
      if (found->nodetype == LYS_LIST) {
        std::set<std::string> known;
        for (const lysc_node* k = nullptr; (k = lys_getnext(k, found, nullptr, 0)) != nullptr;) {
          if (!(k->flags & LYS_KEY)) continue;
          known.insert(k->name);
          auto it = e.key().find(k->name);
          std::string v = it == e.key().end() || it->second == "*" ? "" : it->second;
          if (v.empty()) st.all_keys = false;
          st.keys.emplace_back(k, v.empty() ? v : QualifyIdentity(k, v));
        }
        for (const auto& [k, v] : e.key()) {
          if (!known.count(k)) {
            return InvalidArgument("path " + text + ": list " + found->name + " has no key \"" + k +
                                   "\"");
          }
        }
        if (writing && !st.all_keys) {
          return InvalidArgument("path " + text + ": list " + found->name +
                                 " needs every key for replace/update (gNMI spec 3.4.5)");
        }
      } else if (e.key_size() > 0) {
        return InvalidArgument("path " + text + ": " + found->name + " is not a list (keys given)");
      }
      steps->push_back(std::move(st));
      parent = found;
    }
    return Status::Ok();
  }

  // Member name of step i in RFC 7951 (module-qualified where the module changes).
  static std::string Qualified(const std::vector<Step>& steps, size_t i) {
    const lysc_node* n = steps[i].schema;
    if (i == 0 || steps[i - 1].schema->module != n->module) {
      return std::string(n->module->name) + ":" + n->name;
    }
    return n->name;
  }

  static Status XPath(const std::vector<Step>& steps, std::string* out) {
    out->clear();
    for (size_t i = 0; i < steps.size(); ++i) {
      *out += "/" + Qualified(steps, i);
      for (const auto& [k, v] : steps[i].keys) {
        if (v.empty()) continue;
        const char q = v.find('\'') == std::string::npos ? '\'' : '"';
        if (q == '"' && v.find('"') != std::string::npos) {
          return InvalidArgument("key value " + v + " has both quote characters");
        }
        *out += std::string("[") + k->name + "=" + q + v + q + "]";
      }
    }
    return Status::Ok();
  }

  static JsonValue KeyJson(const lysc_node* key, const std::string& v) {
    JsonValue j;
    j.text = v;
    j.kind = YangLeafKind(key) == JsonKind::kNumber &&
                     v.find_first_not_of("-0123456789") == std::string::npos
                 ? JsonValue::Kind::kNumber
                 : JsonValue::Kind::kString;
    return j;
  }

  // The RFC 7951 document that puts `value` at `steps` (every list keyed).
  Status Document(const std::vector<Step>& steps, JsonValue value, const std::string& text,
                  std::string* out) const {
    const Step& last = steps.back();
    const uint16_t type = last.schema->nodetype;
    if ((type & (LYS_CONTAINER | LYS_LIST)) && value.kind != JsonValue::Kind::kObject) {
      return InvalidArgument("value of " + text + " must be a JSON object (" + last.schema->name +
                             " is a " + (type == LYS_LIST ? "list entry" : "container") + ")");
    }
    // The path's keys go into the entry, and into its OpenConfig
    // config/<key> leaf when it has one (ygot-based OpenConfig targets keep
    // the key and config/<key> as one field, so an entry created through a
    // path has both); a value that says otherwise contradicts the path.
    auto add_keys = [&](const Step& st, JsonValue* obj) -> Status {
      const lysc_node* config = nullptr;
      for (const lysc_node* n = nullptr; (n = lys_getnext(n, st.schema, nullptr, 0)) != nullptr;) {
        if (n->nodetype == LYS_CONTAINER && std::string(n->name) == "config") config = n;
      }
      for (const auto& [k, v] : st.keys) {
        auto check = [&](const JsonValue* have) -> Status {
          if (have != nullptr && Unqualified(have->text) != Unqualified(v)) {
            return InvalidArgument("value of " + text + ": key " + k->name + " \"" + have->text +
                                   "\" contradicts the path (\"" + v + "\")");
          }
          return Status::Ok();
        };
        const JsonValue* have = Member(*obj, k->name);
        if (Status s = check(have); !s.ok()) return s;
        if (have == nullptr) {
          obj->members.insert(obj->members.begin(), JsonMember{k->name, KeyJson(k, v)});
        }
        const lysc_node* mirror = nullptr;
        for (const lysc_node* n = nullptr;
             config != nullptr && (n = lys_getnext(n, config, nullptr, 0)) != nullptr;) {
          if (n->nodetype == LYS_LEAF && std::string(n->name) == k->name) mirror = n;
        }
        if (mirror == nullptr) continue;
        JsonValue* cfg = nullptr;
        for (auto& m : obj->members) {
          if (Unqualified(m.name) == "config") cfg = &m.value;
        }
        if (cfg == nullptr) {
          JsonValue empty;
          empty.kind = JsonValue::Kind::kObject;
          obj->members.push_back(JsonMember{"config", std::move(empty)});
          cfg = &obj->members.back().value;
        }
        if (cfg->kind != JsonValue::Kind::kObject) continue;  // libyang reports it
        const JsonValue* in_cfg = Member(*cfg, k->name);
        if (Status s = check(in_cfg); !s.ok()) return s;
        if (in_cfg == nullptr) cfg->members.push_back(JsonMember{k->name, KeyJson(mirror, v)});
      }
      return Status::Ok();
    };
    JsonValue inner = std::move(value);
    for (size_t i = steps.size(); i-- > 0;) {
      JsonValue wrapped;
      if (i + 1 < steps.size()) {
        wrapped.kind = JsonValue::Kind::kObject;
        wrapped.members.push_back(JsonMember{Qualified(steps, i + 1), std::move(inner)});
      } else {
        wrapped = std::move(inner);
      }
      if (steps[i].schema->nodetype == LYS_LIST) {
        if (Status s = add_keys(steps[i], &wrapped); !s.ok()) return s;
        JsonValue arr;
        arr.kind = JsonValue::Kind::kArray;
        arr.items.push_back(std::move(wrapped));
        inner = std::move(arr);
      } else {
        inner = std::move(wrapped);
      }
    }
    JsonValue doc;
    doc.kind = JsonValue::Kind::kObject;
    doc.members.push_back(JsonMember{Qualified(steps, 0), std::move(inner)});
    *out = JsonText(doc);
    return Status::Ok();
  }

  // The JSON of an update's value, or a scalar TypedValue for a leaf.
  Status ValueOf(const ::gnmi::TypedValue& val, const Step* leaf, const std::string& text,
                 JsonValue* out) const {
    std::string err;
    switch (val.value_case()) {
      case ::gnmi::TypedValue::kJsonIetfVal:
        if (!ParseJson(val.json_ietf_val(), out, &err)) {
          return InvalidArgument("value of " + text + " is not JSON: " + err);
        }
        return Status::Ok();
      case ::gnmi::TypedValue::kJsonVal:
        if (json_ietf_only_) break;
        if (!ParseJson(val.json_val(), out, &err)) {
          return InvalidArgument("value of " + text + " is not JSON: " + err);
        }
        return Status::Ok();
      case ::gnmi::TypedValue::kStringVal:
      case ::gnmi::TypedValue::kUintVal:
      case ::gnmi::TypedValue::kIntVal:
      case ::gnmi::TypedValue::kBoolVal: {
        if (json_ietf_only_ || leaf == nullptr || leaf->schema->nodetype != LYS_LEAF) break;
        const JsonKind k = YangLeafKind(leaf->schema);
        if (val.has_bool_val()) {
          out->kind = JsonValue::Kind::kBool;
          out->text = val.bool_val() ? "true" : "false";
        } else if (val.has_string_val()) {
          out->kind = JsonValue::Kind::kString;
          out->text = QualifyIdentity(leaf->schema, val.string_val());
        } else {
          out->text =
              val.has_uint_val() ? std::to_string(val.uint_val()) : std::to_string(val.int_val());
          out->kind = k == JsonKind::kNumber ? JsonValue::Kind::kNumber : JsonValue::Kind::kString;
        }
        return Status::Ok();
      }
      default:
        break;
    }
    return Status(StatusCode::kUnimplemented,
                  "value of " + text + ": encoding not supported; supported: " +
                      (json_ietf_only_ ? "JSON_IETF" : "JSON_IETF, JSON, scalars for a leaf"));
  }

  // Applies the operations to `*tree` (context locked).
  Status ApplyLocked(const ::gnmi::SetRequest& req, lyd_node** tree,
                     ::gnmi::SetResponse* resp) const {
    auto resolve = [&](const ::gnmi::Path& p, bool writing, std::string* text,
                       std::vector<Step>* steps) -> Status {
      ::gnmi::Path full = telemetry::JoinPath(req.prefix(), p);
      if (Status s = CheckOriginTarget(full); !s.ok()) return s;
      full.clear_target();
      *text = telemetry::FormatPath(full);
      return Resolve(full, *text, writing, steps);
    };
    auto result = [&](const ::gnmi::Path& p, ::gnmi::UpdateResult::Operation op) {
      ::gnmi::UpdateResult* r = resp->add_response();
      *r->mutable_path() = p;
      r->set_op(op);
    };
    auto remove = [&](const std::vector<Step>& steps, const std::string& text) -> Status {
      if (*tree == nullptr) return Status::Ok();
      if (steps.empty()) {  // the root: every served model
        while (*tree != nullptr) FreeNode(tree, *tree);
        return Status::Ok();
      }
      std::string xpath;
      if (Status s = XPath(steps, &xpath); !s.ok()) return s;
      ly_set* set = nullptr;
      if (lyd_find_xpath(*tree, xpath.c_str(), &set) != LY_SUCCESS) {
        return InvalidArgument("path " + text + ": " + yang_->LastError("bad path"));
      }
      for (uint32_t i = set->count; i-- > 0;) {
        lyd_node* n = set->dnodes[i];
        if (n->schema->flags & LYS_KEY) continue;  // a key goes with its entry only
        FreeNode(tree, n);
      }
      ly_set_free(set, nullptr);
      return Status::Ok();
    };
    for (const auto& p : req.delete_()) {
      std::string text;
      std::vector<Step> steps;
      if (Status s = resolve(p, false, &text, &steps); !s.ok()) return s;
      if (Status s = remove(steps, text); !s.ok()) return s;
      result(p, ::gnmi::UpdateResult::DELETE);
    }
    auto write = [&](const ::gnmi::Update& u, bool replace) -> Status {
      std::string text;
      std::vector<Step> steps;
      if (Status s = resolve(u.path(), true, &text, &steps); !s.ok()) return s;
      JsonValue value;
      if (Status s = ValueOf(u.val(), steps.empty() ? nullptr : &steps.back(), text, &value);
          !s.ok()) {
        return s;
      }
      std::string doc;
      if (steps.empty()) {
        if (value.kind != JsonValue::Kind::kObject) {
          return InvalidArgument("value of / must be a JSON object of top-level models");
        }
        for (const auto& m : value.members) {
          bool served = false;
          for (const Root& r : kRoots) served |= m.name == std::string(r.module) + ":" + r.name;
          if (!served) {
            return NotFound("value of /: " + m.name +
                            " is not a model served by this target (module-qualified "
                            "/interfaces, /qos, /network-instances, /lldp)");
          }
        }
        doc = JsonText(value);
      } else if (Status s = Document(steps, std::move(value), text, &doc); !s.ok()) {
        return s;
      }
      lyd_node* sub = nullptr;
      if (lyd_parse_data_mem(yang_->ctx(), doc.c_str(), LYD_JSON,
                             LYD_PARSE_ONLY | LYD_PARSE_STRICT | LYD_PARSE_NO_STATE, 0,
                             &sub) != LY_SUCCESS) {
        LydTree hold(sub);
        return InvalidArgument((replace ? "replace " : "update ") + text + ": " +
                               yang_->LastError("libyang cannot parse the value"));
      }
      if (replace) {
        if (Status s = remove(steps, text); !s.ok()) {
          LydTree hold(sub);
          return s;
        }
      }
      if (sub != nullptr && lyd_merge_siblings(tree, sub, LYD_MERGE_DESTRUCT) != LY_SUCCESS) {
        return InvalidArgument((replace ? "replace " : "update ") + text + ": " +
                               yang_->LastError("libyang cannot merge the value"));
      }
      result(u.path(), replace ? ::gnmi::UpdateResult::REPLACE : ::gnmi::UpdateResult::UPDATE);
      return Status::Ok();
    };
    for (const auto& u : req.replace()) {
      if (Status s = write(u, true); !s.ok()) return s;
    }
    for (const auto& u : req.update()) {
      if (Status s = write(u, false); !s.ok()) return s;
    }
    return Status::Ok();
  }

  // The emulator's settings from the tree (context locked).
  v1::DeviceState TranslateLocked(const lyd_node* tree) const {
    v1::DeviceState s;
    s.set_device(facts_.device);
    if (tree == nullptr) return s;
    std::string json;
    JsonValue root;
    std::string err;
    if (!Print(tree, true, &json).ok() || !ParseJson(json, &root, &err)) return s;
    // Static routes of the default instance.
    std::map<std::string, StaticRoute> routes;
    for (const auto& ni : Items(Path(root, {"network-instances", "network-instance"}))) {
      if (Text(Member(ni, "name")) != "default") continue;
      for (const auto& proto : Items(Path(ni, {"protocols", "protocol"}))) {
        if (Unqualified(Text(Member(proto, "identifier"))) != "STATIC") continue;
        for (const auto& st : Items(Path(proto, {"static-routes", "static"}))) {
          const std::string prefix = Text(Member(st, "prefix"));
          const std::string nic = facts_.plan ? facts_.plan->NicOf(prefix) : "";
          if (nic.empty()) continue;
          StaticRoute r;
          r.prefix = prefix;
          bool ok = true;
          for (const auto& nh : Items(Path(st, {"next-hops", "next-hop"}))) {
            std::string neighbor;
            const std::string ifc = Text(Path(nh, {"interface-ref", "config", "interface"}));
            if (auto it = facts_.neighbor_of.find(ifc);
                !ifc.empty() && it != facts_.neighbor_of.end()) {
              neighbor = it->second;
            } else {
              const std::string index = Text(Member(nh, "index"));
              for (const auto& [port, n] : facts_.neighbor_of) {
                if (n == index) neighbor = n;
              }
            }
            if (neighbor.empty()) {
              ok = false;
              break;
            }
            r.neighbors.insert(neighbor);
            if (const JsonValue* w = Path(nh, {"config", "wecmp-weight"})) {
              const uint64_t weight = std::min<uint64_t>(Number(w->text, 0), 0xffffffffu);
              if (weight > 0) r.weights[neighbor] = static_cast<uint32_t>(weight);
            }
          }
          if (ok && !r.neighbors.empty()) routes[nic] = std::move(r);
        }
      }
    }
    AddStaticRoutes(routes, &s);
    // ECN profiles bound to output queues named by a priority.
    struct Ecn {
      uint64_t kmin = 0, kmax = 0, pmax = 100;
    };
    std::map<std::string, Ecn> profiles;
    for (const auto& p :
         Items(Path(root, {"qos", "queue-management-profiles", "queue-management-profile"}))) {
      const JsonValue* cfg = Path(p, {"wred", "uniform", "config"});
      if (cfg == nullptr || Text(Member(*cfg, "enable-ecn")) != "true") continue;
      Ecn e;
      e.kmin = Number(Text(Member(*cfg, "min-threshold")), 0);
      e.kmax = Number(Text(Member(*cfg, "max-threshold")), 0);
      e.pmax =
          std::min<uint64_t>(Number(Text(Member(*cfg, "max-drop-probability-percent")), 100), 100);
      if (e.kmax > 0) profiles[Text(Member(p, "name"))] = e;
    }
    for (const auto& ifc : Items(Path(root, {"qos", "interfaces", "interface"}))) {
      const std::string port = Text(Member(ifc, "interface-id"));
      if (!facts_.neighbor_of.count(port)) continue;
      for (const auto& q : Items(Path(ifc, {"output", "queues", "queue"}))) {
        const uint64_t prio = Number(Text(Member(q, "name")), 99);
        auto it = profiles.find(Text(Path(q, {"config", "queue-management-profile"})));
        if (prio > 7 || it == profiles.end()) continue;
        v1::QueueThresholds* t = s.add_thresholds();
        t->set_interface(port);
        t->set_priority(static_cast<uint32_t>(prio));
        t->set_ecn_kmin_bytes(it->second.kmin);
        t->set_ecn_kmax_bytes(it->second.kmax);
        t->set_ecn_pmax_percent(static_cast<uint32_t>(it->second.pmax));
      }
    }
    // Interfaces administratively disabled.
    for (const auto& i : Items(Path(root, {"interfaces", "interface"}))) {
      const std::string name = Text(Member(i, "name"));
      if (facts_.neighbor_of.count(name) && Text(Path(i, {"config", "enabled"})) == "false") {
        s.add_disabled_interfaces(name);
      }
    }
    std::sort(s.mutable_disabled_interfaces()->begin(), s.mutable_disabled_interfaces()->end());
    return s;
  }

  const DeviceFacts facts_;
  const std::shared_ptr<YangContext> yang_;
  const bool json_ietf_only_;
  mutable std::mutex mu_;  // taken before the context's mutex
  LydTree tree_;           // guarded by mu_
  v1::DeviceState state_;  // guarded by mu_
};

}  // namespace

Status MakeOpenConfigConfig(DeviceFacts facts, std::shared_ptr<YangContext> yang,
                            bool json_ietf_only, std::unique_ptr<PlatformConfig>* out) {
  if (!yang || yang->set() != YangModuleSet::kOpenConfig) {
    return FailedPrecondition("openconfig personality: the OpenConfig YANG set is not loaded");
  }
  auto c = std::make_unique<OcConfig>(std::move(facts), std::move(yang), json_ietf_only);
  if (Status s = c->Init(); !s.ok()) return s;
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace loom::sim
