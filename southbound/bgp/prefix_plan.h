// The addressing and session plan shared by Loom's BGP side (BgpDriver
// configuration) and the emulator's BGP leaves (sim-fabric/wire_bgp.h), so
// both ends agree on what a prefix and a colored session mean without any
// other coordination.
//
// Prefix plan: the i-th NIC of the topology (devices with role NIC, in
// topology order, 0-based) owns 198.18.0.0/15 + i as a /32:
// NIC 0 = 198.18.0.0/32, NIC 1 = 198.18.0.1/32, NIC 256 = 198.18.1.0/32,
// NIC 65536 = 198.19.0.0/32 (at most 131072 NICs; later NICs get none). A GPU
// resolves to the prefix of its NIC. A ColoredRoute towards a NIC carries that
// prefix; a WeightSet towards a leaf stands for the prefixes of the leaf's NICs.
//
// Session plan (BGP-DPF, one colored session per leaf and fabric color):
// - the fabric colors are the controller's route colors: top device t (a spine
//   in a 2-tier fabric, a super spine in a 3-tier one; topology order) has
//   color kFabricColorBase + t;
// - on leaf L the session of color c stands for the neighbor `via` through
//   which L reaches top t (t itself, or the first pod spine linked to it);
// - Loom dials leaf L (one TCP port per leaf on the emulator) from a distinct
//   loopback source address per color, LoomSourceAddress(t) = 127.1.x.y with
//   x.y = t + 1, and the leaf identifies the session (so its color) by that
//   address, the way BGP identifies neighbors.
//
// Pure functions of the topology; no I/O; thread-safe after construction.
#ifndef LOOM_SOUTHBOUND_BGP_PREFIX_PLAN_H_
#define LOOM_SOUTHBOUND_BGP_PREFIX_PLAN_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "loom/v1/device_state.pb.h"
#include "loom/v1/topology.pb.h"
#include "southbound/bgp/codec.h"
#include "southbound/bgp/session.h"

namespace loom::southbound::bgp {

// First fabric color (same value as the controller's kRouteColorBase).
inline constexpr uint32_t kFabricColorBase = 65536;
// Loom's default AS on the sessions to the emulator's leaves.
inline constexpr uint32_t kDefaultLoomAs = 65534;
inline constexpr uint32_t kMaxPlannedNics = 131072;

class PrefixPlan {
 public:
  explicit PrefixPlan(const loom::v1::Topology& topo);

  // "198.18.x.y/32" of a NIC or GPU id; "" when the device has none.
  std::string PrefixOf(const std::string& device) const;
  // The NIC that owns `prefix` (exactly its /32); "" when none.
  std::string NicOf(const Prefix& prefix) const;
  std::string NicOf(std::string_view prefix) const;
  // Leaf a NIC is attached to ("" when unknown).
  std::string LeafOf(const std::string& nic) const;
  // Destination id -> prefixes, for BgpDriverConfig::destination_prefixes:
  // every NIC and GPU -> its prefix, every leaf -> the prefixes of its NICs.
  std::map<std::string, std::vector<std::string>> DestinationPrefixes() const;
  // Destination id -> egress leaf, for BgpDriverConfig::egress_leaves (NNHN):
  // every NIC and GPU with a prefix -> the leaf its NIC attaches to.
  std::map<std::string, std::string> EgressLeaves() const;
  // Sets ColoredRoute.prefix from the plan where it is empty.
  void FillPrefixes(loom::v1::DeviceState* state) const;
  size_t nic_count() const { return nics_.size(); }

 private:
  std::vector<std::string> nics_;
  std::map<std::string, std::string> prefix_of_;  // NIC or GPU -> prefix text
  std::map<Prefix, std::string> nic_of_;
  std::map<std::string, std::string> leaf_of_;                 // NIC -> leaf
  std::map<std::string, std::vector<std::string>> leaf_nics_;  // leaf -> NICs
};

// One colored session of the plan.
struct ColorSession {
  std::string leaf;
  uint32_t color = 0;
  std::string via;           // Neighbor of the leaf the color leaves through.
  std::string loom_address;  // Loom's source address for this color.
};

// 127.1.x.y with x.y = top_index + 1 ("" beyond 65534).
std::string LoomSourceAddress(uint32_t top_index);
// Every (leaf, color) session, leaves and colors in topology order.
std::vector<ColorSession> ColorSessions(const loom::v1::Topology& topo);
// Switch id -> BGP identifier from the topology's `router_id` (switches
// without a parsable one are left out), for BgpDriverConfig::router_ids.
std::map<std::string, uint32_t> RouterIds(const loom::v1::Topology& topo);
// The AS of a leaf: its topology `asn`, else 4200000000 + leaf index.
uint32_t LeafAs(const loom::v1::Topology& topo, const std::string& leaf);

struct LoomSessionOptions {
  uint32_t loom_as = kDefaultLoomAs;
  uint32_t loom_router_id = 0x0a0000fe;  // 10.0.0.254
  std::string leaf_address = "127.0.0.1";
  uint16_t hold_time_s = 9;
  std::chrono::milliseconds connect_retry{1'000};
  std::chrono::milliseconds idle_hold{200};
};

// Loom's side: the sessions of BgpDriverConfig::sessions towards the leaves
// in `leaf_ports` (leaf id -> the emulator's port for it); name
// "<leaf>/<color>", device = leaf, fabric color, via, source address, active.
std::vector<PeerConfig> LoomPeers(const loom::v1::Topology& topo,
                                  const std::map<std::string, uint16_t>& leaf_ports,
                                  const LoomSessionOptions& options = LoomSessionOptions());
// The leaf's side: passive sessions accepting Loom's color sessions.
std::vector<PeerConfig> LeafPeers(const loom::v1::Topology& topo, const std::string& leaf,
                                  const LoomSessionOptions& options = LoomSessionOptions());

}  // namespace loom::southbound::bgp

#endif  // LOOM_SOUTHBOUND_BGP_PREFIX_PLAN_H_
