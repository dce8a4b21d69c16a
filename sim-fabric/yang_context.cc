#include "sim-fabric/yang_context.h"

#include <libyang/libyang.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "common/log.h"

namespace loom::sim {

namespace fs = std::filesystem;

namespace {

// The data modules each set loads explicitly (their imports come along).
const char* const kOpenConfigModules[] = {
    "openconfig-interfaces",
    "openconfig-if-ethernet",
    "openconfig-if-aggregate",
    "openconfig-qos",
    "openconfig-lldp",
    "openconfig-network-instance",
    "openconfig-local-routing",
    "openconfig-local-routing-network-instance",
    "iana-if-type",
};

// What a leaf's value looks like in RFC 7951 JSON.
JsonKind KindOf(const lysc_type* t) {
  switch (t->basetype) {
    case LY_TYPE_UINT8:
    case LY_TYPE_UINT16:
    case LY_TYPE_UINT32:
    case LY_TYPE_INT8:
    case LY_TYPE_INT16:
    case LY_TYPE_INT32:
      return JsonKind::kNumber;
    case LY_TYPE_BOOL:
      return JsonKind::kBool;
    case LY_TYPE_EMPTY:
      return JsonKind::kEmpty;
    case LY_TYPE_LEAFREF:
      return KindOf(reinterpret_cast<const lysc_type_leafref*>(t)->realtype);
    case LY_TYPE_UNION: {
      // A number only when every member is one; otherwise the string form
      // lets libyang try each member in turn.
      const auto* u = reinterpret_cast<const lysc_type_union*>(t);
      bool all_numbers = LY_ARRAY_COUNT(u->types) > 0;
      LY_ARRAY_COUNT_TYPE i;
      LY_ARRAY_FOR(u->types, i) {
        if (KindOf(u->types[i]) != JsonKind::kNumber) all_numbers = false;
      }
      return all_numbers ? JsonKind::kNumber : JsonKind::kString;
    }
    default:  // strings, enums, identities, 64-bit numbers, decimal64, bits, ...
      return JsonKind::kString;
  }
}

bool FindIdentity(const lysc_ident* base, const std::string& name, std::string* module, int depth) {
  if (depth > 32) return false;
  LY_ARRAY_COUNT_TYPE i;
  LY_ARRAY_FOR(base->derived, i) {
    const lysc_ident* d = base->derived[i];
    if (name == d->name && d->module->implemented) {
      *module = d->module->name;
      return true;
    }
    if (FindIdentity(d, name, module, depth + 1)) return true;
  }
  return false;
}

bool QualifyIn(const lysc_type* t, const std::string& value, std::string* module) {
  switch (t->basetype) {
    case LY_TYPE_IDENT: {
      const auto* it = reinterpret_cast<const lysc_type_identityref*>(t);
      LY_ARRAY_COUNT_TYPE i;
      LY_ARRAY_FOR(it->bases, i) {
        if (FindIdentity(it->bases[i], value, module, 0)) return true;
      }
      return false;
    }
    case LY_TYPE_LEAFREF:
      return QualifyIn(reinterpret_cast<const lysc_type_leafref*>(t)->realtype, value, module);
    case LY_TYPE_UNION: {
      const auto* u = reinterpret_cast<const lysc_type_union*>(t);
      LY_ARRAY_COUNT_TYPE i;
      LY_ARRAY_FOR(u->types, i) {
        if (QualifyIn(u->types[i], value, module)) return true;
      }
      return false;
    }
    default:
      return false;
  }
}

const lysc_type* TypeOf(const lysc_node* n) {
  if (n == nullptr) return nullptr;
  if (n->nodetype == LYS_LEAF) return reinterpret_cast<const lysc_node_leaf*>(n)->type;
  if (n->nodetype == LYS_LEAFLIST) return reinterpret_cast<const lysc_node_leaflist*>(n)->type;
  return nullptr;
}

}  // namespace

JsonKind YangLeafKind(const lysc_node* leaf) {
  const lysc_type* t = TypeOf(leaf);
  return t == nullptr ? JsonKind::kString : KindOf(t);
}

std::string QualifyIdentity(const lysc_node* leaf, const std::string& value) {
  const lysc_type* t = TypeOf(leaf);
  std::string module;
  if (t == nullptr || value.find(':') != std::string::npos || !QualifyIn(t, value, &module)) {
    return value;
  }
  return module + ":" + value;
}

const char* YangModuleSetName(YangModuleSet set) {
  return set == YangModuleSet::kSonic ? "sonic" : "openconfig";
}

std::string ShippedYangDir() {
  if (const char* env = std::getenv("LOOM_YANG_DIR"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    fs::path dir = exe.parent_path();
    candidates.push_back(dir / "../share/loom/yang");
    candidates.push_back(dir / "../../sim-fabric/yang");
    candidates.push_back(dir / "../sim-fabric/yang");
  }
#ifdef LOOM_SOURCE_DIR
  candidates.push_back(fs::path(LOOM_SOURCE_DIR) / "sim-fabric/yang");
#endif
  for (const auto& c : candidates) {
    if (fs::is_directory(c / "sonic", ec) && fs::is_directory(c / "openconfig", ec)) {
      return fs::weakly_canonical(c, ec).string();
    }
  }
  return "";
}

void LydFree::operator()(lyd_node* n) const { lyd_free_all(n); }

Status YangContext::Get(YangModuleSet set, const std::string& dir,
                        std::shared_ptr<YangContext>* out) {
  static std::mutex cache_mu;
  static std::map<std::pair<int, std::string>, std::shared_ptr<YangContext>> cache;
  std::lock_guard<std::mutex> lock(cache_mu);
  // Errors are stored for LastError(), nothing is printed (libyang's
  // warnings about upstream modules' XPath style would flood stderr).
  static const bool quiet = [] {
    ly_log_options(LY_LOSTORE_LAST);
    return true;
  }();
  (void)quiet;
  auto key = std::make_pair(static_cast<int>(set), dir);
  auto it = cache.find(key);
  if (it != cache.end()) {
    *out = it->second;
    return Status::Ok();
  }
  std::shared_ptr<YangContext> c(new YangContext(set, dir));
  Status s = c->Load();
  if (!s.ok()) return s;
  cache[key] = c;
  *out = std::move(c);
  return Status::Ok();
}

YangContext::~YangContext() {
  if (ctx_ != nullptr) ly_ctx_destroy(ctx_);
}

std::string YangContext::LastError(const std::string& fallback) const {
  const ly_err_item* e = ly_err_last(ctx_);
  if (e == nullptr || e->msg == nullptr) return fallback;
  std::string out = e->msg;
  if (e->path != nullptr && *e->path != '\0') out += std::string(" (") + e->path + ")";
  return out;
}

Status YangContext::Load() {
  const std::string name = YangModuleSetName(set_);
  const fs::path root = fs::path(dir_) / name;
  std::error_code ec;
  if (dir_.empty() || !fs::is_directory(root, ec)) {
    return FailedPrecondition("YANG modules for the " + name + " personality not found: \"" +
                              root.string() +
                              "\" is not a directory (loom-fabric --yang-dir DIR or LOOM_YANG_DIR; "
                              "the repository's sim-fabric/yang)");
  }
  const uint16_t opts = LY_CTX_DISABLE_SEARCHDIR_CWD | LY_CTX_NO_YANGLIBRARY |
                        (set_ == YangModuleSet::kOpenConfig ? LY_CTX_ALL_IMPLEMENTED : uint16_t{0});
  if (ly_ctx_new(nullptr, opts, &ctx_) != LY_SUCCESS) {
    return FailedPrecondition("libyang: cannot create a context");
  }
  auto fail = [&](const std::string& what) {
    return FailedPrecondition("YANG " + name + " set in " + root.string() + ": " + what + ": " +
                              LastError("libyang gave no message"));
  };
  std::vector<fs::path> files;
  if (set_ == YangModuleSet::kSonic) {
    for (const char* sub : {"yang-models", "rendered", "pr-22264"}) {
      if (ly_ctx_set_searchdir(ctx_, (root / sub).c_str()) != LY_SUCCESS) {
        return fail(std::string("search directory ") + sub);
      }
    }
    // sonic-device_metadata first: other modules refer to it in when/must.
    files.push_back(root / "yang-models/sonic-device_metadata.yang");
    std::vector<fs::path> rest;
    for (const auto& e : fs::directory_iterator(root / "yang-models", ec)) {
      if (e.path().extension() == ".yang" && e.path().filename() != "sonic-device_metadata.yang") {
        rest.push_back(e.path());
      }
    }
    std::sort(rest.begin(), rest.end());
    files.insert(files.end(), rest.begin(), rest.end());
    files.push_back(root / "pr-22264/sonic-ars.yang");
    for (const auto& f : files) {
      if (lys_parse_path(ctx_, f.c_str(), LYS_IN_YANG, nullptr) != LY_SUCCESS) {
        return fail("loading " + f.filename().string());
      }
    }
  } else {
    for (const char* sub : {"release", "third_party"}) {
      if (ly_ctx_set_searchdir(ctx_, (root / sub).c_str()) != LY_SUCCESS) {
        return fail(std::string("search directory ") + sub);
      }
    }
    for (const char* m : kOpenConfigModules) {
      if (ly_ctx_load_module(ctx_, m, nullptr, nullptr) == nullptr) {
        return fail(std::string("loading ") + m);
      }
    }
  }
  uint32_t idx = 0;
  while (const lys_module* m = ly_ctx_get_module_iter(ctx_, &idx)) {
    if (!m->implemented) continue;
    modules_[m->name] = m->revision != nullptr ? m->revision : "";
    if (set_ != YangModuleSet::kSonic || m->compiled == nullptr) continue;
    // sonic-X:sonic-X / TABLE / TABLE_LIST
    const lysc_node* top = nullptr;
    while ((top = lys_getnext(top, nullptr, m->compiled, 0)) != nullptr) {
      if (top->nodetype != LYS_CONTAINER) continue;
      const lysc_node* table = nullptr;
      while ((table = lys_getnext(table, top, nullptr, 0)) != nullptr) {
        if (table->nodetype != LYS_CONTAINER) continue;
        const lysc_node* list = nullptr;
        while ((list = lys_getnext(list, table, nullptr, 0)) != nullptr) {
          if (list->nodetype != LYS_LIST) continue;
          SonicList sl;
          sl.module = m->name;
          sl.table = table->name;
          sl.list = list->name;
          const lysc_node* leaf = nullptr;
          while ((leaf = lys_getnext(leaf, list, nullptr, 0)) != nullptr) {
            SonicList::Field f;
            if (leaf->nodetype == LYS_LEAF) {
              f.kind = KindOf(reinterpret_cast<const lysc_node_leaf*>(leaf)->type);
              if (leaf->flags & LYS_KEY) sl.keys.push_back(leaf->name);
            } else if (leaf->nodetype == LYS_LEAFLIST) {
              f.kind = KindOf(reinterpret_cast<const lysc_node_leaflist*>(leaf)->type);
              f.leaf_list = true;
            } else {
              continue;
            }
            sl.fields[leaf->name] = f;
          }
          tables_[sl.table].push_back(std::move(sl));
        }
      }
    }
  }
  LOG_INFO("yang modules loaded")
      .With("set", name)
      .With("dir", root.string())
      .With("modules", static_cast<int64_t>(modules_.size()));
  return Status::Ok();
}

}  // namespace loom::sim
