#include "southbound/gnmi/set_adapter.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "api/proto_util/fingerprint.h"
#include "common/json.h"
#include "common/text.h"
#include "southbound/gnmi/adapter_util.h"

namespace loom::southbound::gnmi {

namespace v1 = loom::v1;

const char* MarkName(Mark mark) {
  switch (mark) {
    case Mark::kValidated:
      return "VALIDATED";
    case Mark::kSourced:
      return "SOURCED";
    case Mark::kUnverified:
      return "UNVERIFIED";
  }
  return "UNVERIFIED";
}

Status AdapterOutput::FirstError() const {
  for (const auto& u : unexpressed)
    if (!u.partial) return u.status;
  return Status::Ok();
}

std::unique_ptr<SetAdapter> MakeSetAdapter(std::string_view name) {
  if (name == "loom") return MakeLoomAdapter();
  if (name == "sonic") return MakeSonicAdapter();
  if (name == "openconfig") return MakeOpenConfigAdapter();
  return nullptr;
}

std::string PathString(const ::gnmi::Path& prefix, const ::gnmi::Path& path) {
  std::string out;
  if (!prefix.origin().empty()) out += prefix.origin() + ":";
  auto add = [&out](const ::gnmi::Path& p) {
    for (const auto& e : p.elem()) {
      out += "/" + e.name();
      std::map<std::string, std::string> keys(e.key().begin(), e.key().end());
      for (const auto& [k, v] : keys) out += "[" + k + "=" + v + "]";
    }
  };
  add(prefix);
  add(path);
  if (out.empty() || out.back() == ':') out += "/";
  return out;
}

namespace {

void WriteJson(const loom::JsonValue& v, std::string* out) {
  switch (v.kind) {
    case loom::JsonValue::Kind::kNull:
      *out += "null";
      return;
    case loom::JsonValue::Kind::kBool:
    case loom::JsonValue::Kind::kNumber:
      *out += v.text;
      return;
    case loom::JsonValue::Kind::kString:
      loom::AppendJsonString(*out, v.text);
      return;
    case loom::JsonValue::Kind::kArray:
      *out += "[";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) *out += ",";
        WriteJson(v.items[i], out);
      }
      *out += "]";
      return;
    case loom::JsonValue::Kind::kObject:
      *out += "{";
      for (size_t i = 0; i < v.members.size(); ++i) {
        if (i) *out += ",";
        loom::AppendJsonString(*out, v.members[i].name);
        *out += ":";
        WriteJson(v.members[i].value, out);
      }
      *out += "}";
      return;
  }
}

std::string StripModule(const std::string& name) {
  auto colon = name.find(':');
  return colon == std::string::npos ? name : name.substr(colon + 1);
}

// An update's JSON (IETF) value when it is an object; false otherwise.
bool ObjectValue(const ::gnmi::Update& u, loom::JsonValue* v) {
  const std::string& text =
      !u.val().json_ietf_val().empty() ? u.val().json_ietf_val() : u.val().json_val();
  std::string err;
  return !text.empty() && loom::ParseJson(text, v, &err) &&
         v->kind == loom::JsonValue::Kind::kObject;
}

// Top-level member names of an update's JSON object value (module prefixes
// dropped: they are not part of gNMI path element names).
std::vector<std::string> UpdateMembers(const ::gnmi::Update& u) {
  std::vector<std::string> out;
  loom::JsonValue v;
  if (!ObjectValue(u, &v)) return out;
  for (const auto& m : v.members) out.push_back(StripModule(m.name));
  return out;
}

}  // namespace

::gnmi::GetRequest PristineGetRequest(const ::gnmi::SetRequest& request,
                                      const std::set<std::string>& known) {
  ::gnmi::GetRequest get;
  *get.mutable_prefix() = request.prefix();
  get.set_type(::gnmi::GetRequest::CONFIG);
  get.set_encoding(::gnmi::JSON_IETF);
  std::set<std::string> asked;
  for (const auto& u : request.update()) {
    std::string key = PathString(request.prefix(), u.path());
    if (known.count(key) || !asked.insert(key).second) continue;
    *get.add_path() = u.path();
  }
  return get;
}

void RecordPristine(const ::gnmi::GetRequest& request, const ::gnmi::GetResponse& response,
                    PristineValues* pristine, std::set<std::string>* known) {
  std::set<std::string> requested;
  for (const auto& p : request.path()) requested.insert(PathString(request.prefix(), p));
  for (const auto& n : response.notification()) {
    for (const auto& u : n.update()) {
      std::string key = PathString(n.prefix(), u.path());
      if (!requested.count(key)) continue;
      loom::JsonValue v;
      if (!ObjectValue(u, &v)) continue;
      auto& members = (*pristine)[key];
      for (const auto& m : v.members) {
        std::string value;
        WriteJson(m.value, &value);
        members[StripModule(m.name)] = std::move(value);
      }
    }
  }
  known->insert(requested.begin(), requested.end());
}

int AddStaleDeletes(const ::gnmi::SetRequest& previous, ::gnmi::SetRequest* next,
                    const PristineValues* pristine) {
  bool next_empty =
      next->delete__size() == 0 && next->replace_size() == 0 && next->update_size() == 0;
  if (next_empty) {
    *next->mutable_prefix() = previous.prefix();
  } else if (!loom::proto::SameMessage(previous.prefix(), next->prefix())) {
    return 0;
  }
  const ::gnmi::Path& prefix = next->prefix();
  std::set<std::string> written, deleted;
  std::map<std::string, std::set<std::string>> members;  // updated path -> members written
  for (const auto& u : next->replace()) written.insert(PathString(prefix, u.path()));
  for (const auto& u : next->update()) {
    std::string key = PathString(prefix, u.path());
    written.insert(key);
    for (auto& m : UpdateMembers(u)) members[key].insert(std::move(m));
  }
  for (const auto& p : next->delete_()) deleted.insert(PathString(prefix, p));
  int added = 0;
  auto add_delete = [&](const ::gnmi::Path& path) {
    std::string key = PathString(prefix, path);
    if (!deleted.insert(key).second) return;
    *next->add_delete_() = path;
    ++added;
  };
  for (const auto& u : previous.replace()) {
    if (!written.count(PathString(prefix, u.path()))) add_delete(u.path());
  }
  for (const auto& u : previous.update()) {
    std::string key = PathString(prefix, u.path());
    const auto it = members.find(key);
    std::set<std::string> keys;  // list keys on the path ("config/name" mirrors queue[name=3])
    for (const auto& e : u.path().elem()) {
      for (const auto& [k, v] : e.key()) keys.insert(k);
    }
    const std::map<std::string, std::string>* before = nullptr;
    if (pristine) {
      if (auto p = pristine->find(key); p != pristine->end()) before = &p->second;
    }
    std::string restore;  // members the device had before Loom, as one JSON object
    for (const auto& m : UpdateMembers(u)) {
      if (keys.count(m) || (it != members.end() && it->second.count(m))) continue;
      if (before) {
        if (auto b = before->find(m); b != before->end()) {
          restore += restore.empty() ? "{" : ",";
          loom::AppendJsonString(restore, m);
          restore += ":" + b->second;
          continue;
        }
      }
      ::gnmi::Path leaf = u.path();
      leaf.add_elem()->set_name(m);
      add_delete(leaf);
    }
    if (!restore.empty()) {
      auto* r = next->add_update();
      *r->mutable_path() = u.path();
      r->mutable_val()->set_json_ietf_val(restore + "}");
      ++added;
    }
  }
  return added;
}

namespace {

// A node of the merged YANG document: members in first-seen order; a list
// node holds entries.
struct YangNode {
  std::vector<std::string> order;
  std::map<std::string, YangNode> children;
  std::vector<std::string> entries;
  bool is_list = false;
};

void Insert(YangNode* root, const YangEntry& e) {
  YangNode* n = root;
  for (size_t i = 0; i < e.list_path.size(); ++i) {
    const std::string& name = e.list_path[i];
    if (!n->children.count(name)) n->order.push_back(name);
    n = &n->children[name];
  }
  n->is_list = true;
  n->entries.push_back(e.entry_json);
}

std::string Emit(const YangNode& n) {
  if (n.is_list) return adapter::Array(n.entries);
  std::string out = "{";
  bool first = true;
  for (const auto& name : n.order) {
    if (!first) out += ",";
    first = false;
    out += adapter::Quote(name) + ":" + Emit(n.children.at(name));
  }
  return out + "}";
}

}  // namespace

std::string YangDocument(const AdapterOutput& out) {
  YangNode root;
  for (const auto& e : out.yang_context) Insert(&root, e);
  for (const auto& b : out.blocks)
    for (const auto& e : b.yang) Insert(&root, e);
  return Emit(root);
}

std::string FormatPreview(const SetAdapter& adapter, const AdapterOutput& out) {
  std::ostringstream os;
  const auto& req = out.request;
  os << "# gNMI Set for adapter \"" << adapter.Name() << "\"";
  if (req.has_prefix()) os << ", prefix " << PathString(req.prefix(), ::gnmi::Path());
  os << "\n# " << out.blocks.size() << " block(s); marks: VALIDATED = passes yanglint against "
     << "reference/yang, SOURCED = cited, UNVERIFIED = neither\n";
  auto origin = [&req]() {
    ::gnmi::Path p;
    p.set_origin(req.prefix().origin());
    return p;
  };
  for (const auto& b : out.blocks) {
    os << "\n[" << MarkName(b.mark) << "] " << b.part << ": " << b.title << "\n";
    if (!b.source.empty()) os << "  source: " << b.source << "\n";
    if (!b.note.empty()) os << "  note: " << b.note << "\n";
    for (int i : b.deletes) os << "  delete  " << PathString(origin(), req.delete_(i)) << "\n";
    for (int i : b.replaces) {
      const auto& u = req.replace(i);
      os << "  replace " << PathString(origin(), u.path()) << "\n          "
         << adapter::ValueJson(u.val()) << "\n";
    }
    for (int i : b.updates) {
      const auto& u = req.update(i);
      os << "  update  " << PathString(origin(), u.path()) << "\n          "
         << adapter::ValueJson(u.val()) << "\n";
    }
  }
  if (!out.unexpressed.empty()) {
    os << "\n# not expressed on " << adapter.Name() << " (" << out.unexpressed.size() << "):\n";
    for (const auto& u : out.unexpressed) {
      os << (u.partial ? "  partial " : "  dropped ") << u.part;
      if (!u.entry.empty()) os << " " << u.entry;
      os << ": " << u.status.message() << "\n";
    }
  }
  return os.str();
}

// ---- adapter_util.h -----------------------------------------------------------

namespace adapter {

std::string Quote(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

void JsonObject::Key(std::string_view key) {
  if (!body_.empty()) body_ += ",";
  body_ += Quote(key);
  body_ += ":";
}
JsonObject& JsonObject::Str(std::string_view key, std::string_view value) {
  Key(key);
  body_ += Quote(value);
  return *this;
}
JsonObject& JsonObject::Num(std::string_view key, int64_t value) {
  Key(key);
  body_ += std::to_string(value);
  return *this;
}
JsonObject& JsonObject::Bool(std::string_view key, bool value) {
  Key(key);
  body_ += value ? "true" : "false";
  return *this;
}
JsonObject& JsonObject::Raw(std::string_view key, std::string_view json) {
  Key(key);
  body_ += json;
  return *this;
}

std::string Array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ",";
    out += items[i];
  }
  return out + "]";
}

::gnmi::Path MakePath(const std::vector<Elem>& elems) {
  ::gnmi::Path p;
  for (const auto& e : elems) {
    auto* pe = p.add_elem();
    pe->set_name(e.name);
    for (const auto& [k, v] : e.keys) (*pe->mutable_key())[k] = v;
  }
  return p;
}

void AddJson(::gnmi::Update* u, const ::gnmi::Path& path, const std::string& json) {
  *u->mutable_path() = path;
  u->mutable_val()->set_json_ietf_val(json);
}

std::string ValueJson(const ::gnmi::TypedValue& v) {
  if (v.value_case() == ::gnmi::TypedValue::kJsonIetfVal) return v.json_ietf_val();
  if (v.value_case() == ::gnmi::TypedValue::kJsonVal) return v.json_val();
  if (v.value_case() == ::gnmi::TypedValue::kStringVal) return Quote(v.string_val());
  if (v.value_case() == ::gnmi::TypedValue::kBoolVal) return v.bool_val() ? "true" : "false";
  return "(" + std::to_string(static_cast<int>(v.value_case())) + ")";
}

TopologyView::TopologyView(const v1::Topology* topology, const std::string& device)
    : topology_(topology) {
  if (topology == nullptr) return;
  std::map<std::string, v1::DeviceRole> roles;
  for (const auto& d : topology->devices()) {
    roles[d.id()] = d.role();
    if (d.id() == device) known_ = true;
  }
  auto is_switch = [&roles](const std::string& id) {
    auto it = roles.find(id);
    if (it == roles.end()) return false;
    return it->second == v1::DEVICE_ROLE_LEAF || it->second == v1::DEVICE_ROLE_SPINE ||
           it->second == v1::DEVICE_ROLE_SUPER_SPINE;
  };
  std::set<std::string> ports, fabric;
  for (const auto& l : topology->links()) {
    const v1::LinkEndpoint* mine = nullptr;
    const v1::LinkEndpoint* other = nullptr;
    if (l.a().device() == device) {
      mine = &l.a();
      other = &l.b();
    } else if (l.b().device() == device) {
      mine = &l.b();
      other = &l.a();
    } else {
      continue;
    }
    if (mine->interface().empty()) continue;
    by_neighbor_[other->device()].push_back(mine->interface());
    capacity_[mine->interface()] = l.capacity_bps();
    ports.insert(mine->interface());
    if (is_switch(other->device())) fabric.insert(mine->interface());
  }
  for (auto& [n, v] : by_neighbor_) std::sort(v.begin(), v.end());
  ports_.assign(ports.begin(), ports.end());
  fabric_.assign(fabric.begin(), fabric.end());
}

std::vector<std::string> TopologyView::InterfacesTo(const std::string& neighbor) const {
  auto it = by_neighbor_.find(neighbor);
  return it == by_neighbor_.end() ? std::vector<std::string>() : it->second;
}

int64_t TopologyView::PortCapacity(const std::string& port) const {
  auto it = capacity_.find(port);
  return it == capacity_.end() ? 0 : it->second;
}

std::string TopologyView::LeafOf(const std::string& endpoint) const {
  if (topology_ == nullptr) return "";
  std::string nic = endpoint;
  for (const auto& g : topology_->gpus())
    if (g.id() == endpoint) nic = g.nic();
  std::set<std::string> leaves;
  for (const auto& d : topology_->devices())
    if (d.role() == v1::DEVICE_ROLE_LEAF) leaves.insert(d.id());
  for (const auto& l : topology_->links()) {
    if (l.a().device() == nic && leaves.count(l.b().device())) return l.b().device();
    if (l.b().device() == nic && leaves.count(l.a().device())) return l.a().device();
  }
  return "";
}

void Refuse(AdapterOutput* out, std::string part, std::string entry, Status status, bool partial) {
  out->unexpressed.push_back({std::move(part), std::move(entry), std::move(status), partial});
}

}  // namespace adapter

}  // namespace loom::southbound::gnmi
