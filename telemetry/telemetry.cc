// telemetry/ module: its issue has not landed yet; this file keeps the library
// target (and the dependency check) in place until then.
namespace loom::telemetry {
const char* ModuleName() { return "telemetry"; }
}  // namespace loom::telemetry
