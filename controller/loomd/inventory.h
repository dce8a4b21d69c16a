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

#include "controller/te/device_limits.h"
#include "loom/v1/config.pb.h"
#include "loom/v1/fabric_service.pb.h"
#include "loom/v1/topology.pb.h"
#include "southbound/bgp/session.h"
#include "southbound/gnmi/adapter_driver.h"
#include "southbound/gnmi/gnmi_driver.h"
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

// Programming from the inventory.
struct Southbound {
  // Loom's BGP sessions (one per device and color), and its router id.
  std::vector<southbound::bgp::PeerConfig> bgp_sessions;
  uint32_t router_id = 0;
  // gNMI Set targets: devices that also have BGP (Set carries DLB, ALB,
  // thresholds and QP-split routes) and devices programmed over Set alone
  // (Set carries everything).
  std::vector<southbound::gnmi::GnmiDeviceConfig> set_with_bgp;
  std::vector<southbound::gnmi::GnmiDeviceConfig> set_only;
  // Platform Set adapters (sonic, openconfig): beside BGP (settings parts
  // only) or alone (everything the platform can express).
  std::vector<southbound::gnmi::AdapterDeviceConfig> adapter_with_bgp;
  std::vector<southbound::gnmi::AdapterDeviceConfig> adapter_only;
  // Devices whose desired state is only rendered (`loomctl render`).
  std::vector<std::string> render_only;
  // Route budgets: device -> max prefixes (0 entries are left out).
  std::map<std::string, uint32_t> max_prefixes;
};

// Validates the inventory's bgp / set parts and builds the sessions and Set
// targets. Errors name the device and field ("device leaf0: bgp.sessions[1]:
// via spine7 is not a neighbour of leaf0").
bool BuildSouthbound(const Inventory& inventory, const v1::Topology& topology, Southbound* out,
                     std::string* error);

// What each programmed device's drivers can carry (BGP-DPF: colored routes
// and weights; the Set adapter's capabilities for the rest). Devices
// without a driver, render-only ones and loom-fabric's (loom schema) are
// absent: they can be asked for everything.
loom::te::DeviceLimitsMap DeviceLimitsOf(const Southbound& southbound);

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
