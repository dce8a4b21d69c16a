// Vendor configuration renderers: the same DeviceState Loom programs over BGP
// and gNMI, written as configuration text for platforms driven by config
// (or for review): Junos, NX-OS, and SONiC CONFIG_DB JSON.
//
// - Junos: forwarding-options enhanced-hash-key ecmp-dlb (flowlet
//   inactivity-interval / per-packet / assigned-flow), BGP groups with
//   fabric-color per color, fabric-advertise routes with color and
//   backup-color, link-bandwidth communities and import policies for GLB
//   weights.
// - NX-OS: hardware profile dlb (dlb-interface, mode, flowlet-aging),
//   color / link-bandwidth route-maps, queuing and network-qos policies for
//   ECN/PFC thresholds.
// - SONiC: CONFIG_DB JSON with the ARS tables (ARS_PROFILE, ARS_INTERFACE,
//   ARS_OBJECT, ARS_NEXTHOP_GROUP), WRED_PROFILE / QUEUE / BUFFER_PROFILE for
//   thresholds, and LOOM_* tables for what SONiC has no table for.
// southbound/README.md says what each line means and which syntax is
// unverified.
//
// The topology supplies interface names (links of the device), ASNs, router
// ids and neighbors. Output is deterministic: the state is canonicalized
// (entries sorted by key) and topology lookups are sorted.
//
// Pure functions; thread-safe. O(state size x log + links).
#ifndef LOOM_SOUTHBOUND_RENDER_RENDER_H_
#define LOOM_SOUTHBOUND_RENDER_RENDER_H_

#include <string>
#include <string_view>

#include "loom/v1/device_state.pb.h"
#include "loom/v1/topology.pb.h"

namespace loom::southbound::render {

enum class Vendor { kJunos, kNxos, kSonic };

// "junos", "nxos", "sonic".
const char* VendorName(Vendor v);
// Accepts the names above; false otherwise.
bool ParseVendor(std::string_view name, Vendor* v);

// The configuration text of `state.device()` for `vendor`. A device missing
// from the topology still renders (no interface names or ASNs: placeholders
// and comments say so).
std::string Render(const loom::v1::DeviceState& state, const loom::v1::Topology& topology,
                   Vendor vendor);

std::string RenderJunos(const loom::v1::DeviceState& state, const loom::v1::Topology& topology);
std::string RenderNxos(const loom::v1::DeviceState& state, const loom::v1::Topology& topology);
std::string RenderSonic(const loom::v1::DeviceState& state, const loom::v1::Topology& topology);

}  // namespace loom::southbound::render

#endif  // LOOM_SOUTHBOUND_RENDER_RENDER_H_
