// The public YANG modules loom-fabric's platform personalities validate gNMI
// Set payloads with, loaded into libyang 2 (Debian 12 libyang2-dev).
//
// Role: one libyang context per module set and directory, built once per
// process (about 0.1 s for the SONiC set, 0.8 s for the OpenConfig set) and
// shared by every personality of that kind. The modules are vendored,
// unmodified, in sim-fabric/yang/ (README.md and MANIFEST.tsv there name each
// file's repository, commit and blob); nothing is read from elsewhere.
//
// Module sets (what is loaded and implemented; imports are resolved from the
// same directory, recursively, never from the working directory):
//   kSonic       every module of sonic/yang-models (sonic-device_metadata
//                first), sonic/rendered (sonic-types, sonic-extension) and
//                sonic/pr-22264/sonic-ars.yang: CONFIG_DB tables as SONiC's
//                YANG containers (sonic-X:sonic-X/TABLE/TABLE_LIST). The same
//                command line as reference/yang/validate.sh sonic, plus
//                sonic-queue and sonic-scheduler.
//   kOpenConfig  openconfig-interfaces, -if-ethernet, -if-aggregate, -qos,
//                -lldp, -network-instance, -local-routing(-network-instance)
//                and iana-if-type with every import implemented (libyang's
//                LY_CTX_ALL_IMPLEMENTED = yanglint -ii; the network-instance
//                closure's identities need it, see sim-fabric/yang/README.md).
//
// Validation is `yanglint -t config`: strict parsing (an unknown node is an
// error), no state data, leafrefs / must / when / mandatory checked for the
// modules that have data.
//
// Thread: contexts are immutable after loading; every libyang call on one
// goes under its mutex (mu()). libyang's messages are never printed (the
// process-wide libyang log is switched to "store the last error" at the first
// load); LastError() reads them.
#ifndef LOOM_SIM_FABRIC_YANG_CONTEXT_H_
#define LOOM_SIM_FABRIC_YANG_CONTEXT_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

struct ly_ctx;
struct lyd_node;
struct lysc_node;

namespace loom::sim {

enum class YangModuleSet { kSonic, kOpenConfig };
const char* YangModuleSetName(YangModuleSet set);  // "sonic", "openconfig"

// The vendored module directory: $LOOM_YANG_DIR when set, else the first of
// <binary>/../share/loom/yang, <binary>/../../sim-fabric/yang,
// <binary>/../sim-fabric/yang, <source tree>/sim-fabric/yang that exists;
// "" when none does.
std::string ShippedYangDir();

// Frees a whole libyang data tree (all siblings).
struct LydFree {
  void operator()(lyd_node* n) const;
};
using LydTree = std::unique_ptr<lyd_node, LydFree>;

// How a CONFIG_DB field is written in RFC 7951 JSON (its YANG base type).
enum class JsonKind { kString, kNumber, kBool, kEmpty };

// One list of a SONiC table: CONFIG_DB "TABLE|k1|k2" rows are entries of
// /<module>:<module>/<table>/<list> keyed by `keys` in order.
struct SonicList {
  std::string module;  // "sonic-pfcwd"
  std::string table;   // "PFC_WD"
  std::string list;    // "PFC_WD_LIST"
  std::vector<std::string> keys;
  struct Field {
    JsonKind kind = JsonKind::kString;
    bool leaf_list = false;
  };
  std::map<std::string, Field> fields;  // every leaf and leaf-list, keys included
};

// The RFC 7951 JSON form of a leaf's (or leaf-list's) value.
JsonKind YangLeafKind(const struct lysc_node* leaf);
// An identityref value (also through leafrefs and unions) written without its
// module ("STATIC") qualified with the module of the derived identity of that
// name ("openconfig-policy-types:STATIC"); anything else unchanged.
std::string QualifyIdentity(const struct lysc_node* leaf, const std::string& value);

// YangContext: role — one loaded module set. Trigger — personalities'
// Set/Get. Thread — see the header comment.
class YangContext {
 public:
  // The context of `set` from `dir` (the directory holding sonic/ and
  // openconfig/), loaded at the first call for (set, dir) and cached.
  // FAILED_PRECONDITION naming the directory and libyang's message when the
  // modules cannot be loaded.
  static Status Get(YangModuleSet set, const std::string& dir, std::shared_ptr<YangContext>* out);
  ~YangContext();
  YangContext(const YangContext&) = delete;
  YangContext& operator=(const YangContext&) = delete;

  YangModuleSet set() const { return set_; }
  const std::string& dir() const { return dir_; }
  ly_ctx* ctx() const { return ctx_; }
  std::mutex& mu() const { return mu_; }
  // "<message> (<data path>)" of the last libyang error of this thread on
  // this context; `fallback` when there is none. Call with mu() held.
  std::string LastError(const std::string& fallback) const;
  // SONiC: table name -> its lists (several lists of one table differ in
  // their key count). Empty for other sets.
  const std::map<std::string, std::vector<SonicList>>& sonic_tables() const { return tables_; }
  // Implemented modules with their revisions ("openconfig-qos" -> "2024-..").
  const std::map<std::string, std::string>& modules() const { return modules_; }

 private:
  YangContext(YangModuleSet set, std::string dir) : set_(set), dir_(std::move(dir)) {}
  Status Load();

  const YangModuleSet set_;
  const std::string dir_;
  ly_ctx* ctx_ = nullptr;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<SonicList>> tables_;
  std::map<std::string, std::string> modules_;
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_YANG_CONTEXT_H_
