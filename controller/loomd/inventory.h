// loomd's device inventory: LoomdConfig.devices merged over device_defaults
// for every topology device, validated, and turned into the telemetry
// collector's targets (profile mode).
//
// Pure functions over the configuration, the topology and the loaded profile
// set; called at start-up and on SIGHUP (main thread).
#ifndef LOOM_CONTROLLER_LOOMD_INVENTORY_H_
#define LOOM_CONTROLLER_LOOMD_INVENTORY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/v1/config.pb.h"
#include "loom/v1/fabric_service.pb.h"
#include "loom/v1/topology.pb.h"
#include "telemetry/collector.h"
#include "telemetry/profile.h"

namespace loom::loomd {

// One resolved entry per topology device (devices without any inventory data
// get an empty entry with just the id).
struct Inventory {
  std::map<std::string, v1::InventoryDevice> devices;
};

// Merges defaults and entries. The legacy fields become inventory entries
// of platform "loom-fabric": telemetry_address for every switch,
// telemetry_targets per device (an explicit `devices` entry wins). Errors
// name the entry and field: "devices[2] (leaf9): not a topology device".
bool ResolveInventory(const v1::LoomdConfig& config, const v1::Topology& topology,
                      const telemetry::ProfileSet& profiles, Inventory* out, std::string* error);

// Collector targets for the devices with a gNMI address. Credentials are read
// from their references now ("env:VAR" / "file:PATH", "user:password").
bool BuildTelemetryTargets(const Inventory& inventory, const v1::Topology& topology,
                           const telemetry::ProfileSet& profiles, TimeNs sample_interval_ns,
                           std::vector<telemetry::TargetConfig>* out, std::string* error);

// `loomctl devices`: every topology device with its inventory entry and the
// collector's view of it. `embedded` = the in-process emulator feeds
// telemetry (no gNMI source per device).
v1::ListDevicesResponse DeviceStatuses(const Inventory& inventory, const v1::Topology& topology,
                                       const std::vector<telemetry::TargetHealth>& health,
                                       TimeNs now_ns, bool embedded, const std::string& only);

// Shell-glob match ("leaf-*"), as device_defaults.name_pattern uses.
bool GlobMatch(const std::string& pattern, const std::string& text);

}  // namespace loom::loomd

#endif  // LOOM_CONTROLLER_LOOMD_INVENTORY_H_
