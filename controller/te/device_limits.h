// What a switch's southbound can be asked to program, from its drivers'
// capabilities (BGP-DPF sessions, the gNMI Set platform adapter's
// SetCapabilities, southbound/gnmi/set_adapter.h). Placement and the
// adaptive engine read it so that they never ask a device for what it cannot
// do: a job's QP split, selective spraying, DLB tuning, ALB moves and GLB
// weights are computed only for devices that can carry them, and the job's
// or event's reason says where a capability was missing.
// A device absent from the map can do everything (the emulator's drivers).
#ifndef LOOM_CONTROLLER_TE_DEVICE_LIMITS_H_
#define LOOM_CONTROLLER_TE_DEVICE_LIMITS_H_

#include <cstdint>
#include <map>
#include <string>

namespace loom::te {

// Colored routes Loom installs on a device whose inventory sets no route
// budget (route_budget.max_prefixes): a conservative share of a data-center
// switch's host-route FIB (64k-256k /32 entries) beside the underlay.
inline constexpr uint32_t kDefaultRouteBudget = 16384;

struct DeviceLimits {
  // Routes split by destination QP (policy qp_split).
  bool qp_split_routes = true;
  // DLB mode and flowlet timer.
  bool dlb = true;
  // Selective spraying rules.
  bool spray = true;
  // ALB hash-bucket tables.
  bool alb = true;
  // GLB weights (link bandwidth or weighted next hops).
  bool glb_weights = true;
  // Configured fabric-wide settings: ECN/PFC thresholds, the PFC watchdog.
  bool thresholds = true;
  bool pfc_watchdog = true;
  // Colored routes the device may hold (inventory route_budget.max_prefixes,
  // kDefaultRouteBudget when none is set). Placement installs at most this
  // many; the rest of the traffic takes the underlay's ECMP (placement.h).
  uint32_t max_routes = kDefaultRouteBudget;
  // How the device is programmed, for reasons ("bgp", "bgp+gnmi:sonic").
  std::string driver;
};

using DeviceLimitsMap = std::map<std::string, DeviceLimits>;

// The limits of `device` (all capable when absent).
inline const DeviceLimits& LimitsOf(const DeviceLimitsMap& m, const std::string& device) {
  static const DeviceLimits kAll;
  auto it = m.find(device);
  return it == m.end() ? kAll : it->second;
}

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_DEVICE_LIMITS_H_
