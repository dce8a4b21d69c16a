// policy/ module: its issue has not landed yet; this file keeps the library
// target (and the dependency check) in place until then.
namespace loom::policy {
const char* ModuleName() { return "policy"; }
}  // namespace loom::policy
