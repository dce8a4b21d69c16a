// Scenario files for loom-fabric: load, validate and apply to a Fabric.
//
// A scenario is the protobuf JSON of loom.sim.v1.Scenario (parsed with
// protobuf's JSON parser). Pure functions except for reading the file;
// thread-compatible.
#ifndef LOOM_SIM_FABRIC_SCENARIO_H_
#define LOOM_SIM_FABRIC_SCENARIO_H_

#include <memory>
#include <string>

#include "loom/sim/v1/scenario.pb.h"
#include "loom/v1/topology.pb.h"
#include "sim-fabric/fabric.h"

namespace loom::sim {

struct LoadedScenario {
  loom::sim::v1::Scenario spec;
  loom::v1::Topology topology;
  FabricOptions options;
  TimeNs duration_ns = kNsPerSec;
  TimeNs sample_ns = 10 * kNsPerUs;
};

// Reads and validates a scenario file (and its topology file, relative to it).
bool LoadScenarioFile(const std::string& path, LoadedScenario* out, std::string* error);
// Same from JSON text; `base_dir` resolves topology_file.
bool ParseScenarioJson(const std::string& json, const std::string& base_dir, LoadedScenario* out,
                       std::string* error);
// Builds the fabric and applies queue settings, modes, colors, DCQCN overrides,
// jobs and faults.
std::unique_ptr<Fabric> BuildScenarioFabric(const LoadedScenario& sc, std::string* error);

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_SCENARIO_H_
