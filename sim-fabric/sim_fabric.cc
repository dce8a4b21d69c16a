// sim-fabric/ module: the emulator lands with issue 3.
namespace loom::sim {
const char* ModuleName() { return "sim-fabric"; }
}  // namespace loom::sim
