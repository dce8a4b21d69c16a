// southbound/ module: its issue has not landed yet; this file keeps the library
// target (and the dependency check) in place until then.
namespace loom::southbound {
const char* ModuleName() { return "southbound"; }
}  // namespace loom::southbound
