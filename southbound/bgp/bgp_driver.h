// BgpDriver: the southbound Driver that programs devices over BGP-DPF.
//
// Mapping of a DeviceState (see device_state.proto):
// - ColoredRoute with a prefix -> an originated route with Color `color`,
//   backup color `backup_color` (DPF export per session fabric color), and a
//   large community (local AS, 1, traffic class).
// - ColoredRoute split by destination QP (qp_mask != 0, policy qp_split):
//   BGP-DPF carries one color per prefix, so such a route cannot be
//   expressed. It is not originated, not listed in `applied`, and reported as
//   a "routes" failure (INVALID_ARGUMENT naming "<destination> qp V/M");
//   the device's other routes still go out. Program such devices over gNMI.
// - WeightSet -> link-bandwidth communities (weight x bandwidth_per_weight
//   bytes/s) on the route of that destination, per session `via` (the next
//   hop the session stands for); a destination without a ColoredRoute is
//   resolved through destination_prefixes (or parsed as a prefix) and sent
//   uncolored.
// - NextHopReach (NNHN, draft-ietf-idr-next-next-hop-nodes) -> on the
//   session whose `via` is a listed next hop S, a route towards egress leaf
//   E (egress_leaves, or the destination itself) carries NNHN {BGP id of S;
//   BGP ids of the devices beyond S towards E, or of E when S reaches it
//   directly} (router_ids); a session whose via is listed but does not
//   reach E does not get the route (and a route no session's via reaches is
//   not originated at all). Sessions whose via is not listed, and routes
//   whose egress leaf no entry names, go out as before without NNHN. Which
//   routes carry the attribute: BgpDriverConfig::nnhn (default: only where
//   the topology needs it).
// - ColorGroup -> nothing is sent (fabric colors are session configuration);
//   a group is reported applied when the device has an Established session
//   of that fabric color (or an uncolored session, which carries all colors).
// - DLB, ALB tables, spray rules, thresholds are not BGP's: reported as
//   failed parts (UNIMPLEMENTED) when present unless ignore_non_bgp_parts.
// Routes of one device go only to that device's sessions (speaker group =
// device id).
//
// Trigger: Apply()/Read() from the controller strand. Thread: both return at
// once; the work runs on the speaker's io_context thread and the callbacks
// are invoked there, after the UPDATEs were written to the sockets.
#ifndef LOOM_SOUTHBOUND_BGP_BGP_DRIVER_H_
#define LOOM_SOUTHBOUND_BGP_BGP_DRIVER_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "southbound/bgp/asio.h"
#include "southbound/bgp/speaker.h"
#include "southbound/wire/driver.h"

namespace loom::southbound::bgp {

struct BgpDriverConfig {
  // Sessions to the devices; PeerConfig::device names the device.
  std::vector<PeerConfig> sessions;
  // Link bandwidth advertised per unit of GLB weight, bytes/s.
  float bandwidth_per_weight = 1e9f;
  // Destination id (e.g. an egress leaf) -> prefixes, for WeightSets whose
  // destination has no ColoredRoute.
  std::map<std::string, std::vector<std::string>> destination_prefixes;
  // Do not report DLB/ALB/spray/threshold parts as failures (another driver
  // programs them).
  bool ignore_non_bgp_parts = false;
  // For NNHN: device id -> BGP identifier (the topology's router_id; see
  // RouterIds() in prefix_plan.h), and destination id (NIC, GPU) -> its
  // egress leaf (PrefixPlan::EgressLeaves()).
  std::map<std::string, uint32_t> router_ids;
  // When routes carry NNHN (sessions whose via cannot reach a destination's
  // egress leaf never get its route, whatever the mode):
  //   kWhereNeeded: only routes towards an egress leaf that the device's listed
  //     next hops do not all reach directly (a next hop lost it, or reaches it
  //     through other devices: 3-tier) — in a healthy 2-tier Clos every spine
  //     reaches every leaf and NNHN would say nothing the route does not;
  //   kAlways: every route whose egress leaf the reach names;
  //   kOff: none.
  enum class NnhnMode { kWhereNeeded, kAlways, kOff };
  NnhnMode nnhn = NnhnMode::kWhereNeeded;
  std::map<std::string, std::string> egress_leaves;
};

class BgpDriver final : public loom::southbound::Driver {
 public:
  // `speaker` runs on `io` and must outlive the driver.
  BgpDriver(boost::asio::io_context& io, Speaker* speaker, BgpDriverConfig config);
  // Adds the sessions to the speaker (posted to the speaker thread).
  void Start();

  std::string Name() const override { return "bgp"; }
  bool Handles(const std::string& device) const override;
  void Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) override;
  void Read(const std::string& device,
            std::function<void(Status, loom::v1::DeviceState)> done) override;

  // Pure translation used by Apply (exposed for tests): originated routes
  // for `desired`, and the failures found while translating.
  std::vector<OriginatedRoute> Translate(const loom::v1::DeviceState& desired,
                                         std::vector<ApplyFailure>* failures,
                                         loom::v1::DeviceState* applied) const;

 private:
  // What the next-hop reach of a device means for a route towards each egress
  // leaf it names: not originated (no session's via reaches it), or the NNHN per
  // session via (empty map: an ordinary route to every session).
  struct NnhnPlan {
    struct Entry {
      bool drop = false;
      std::map<std::string, NextNextHops> by_via;
    };
    std::map<std::string, Entry> by_egress;
  };
  std::shared_ptr<const NnhnPlan> PlanNnhn(const loom::v1::DeviceState& desired,
                                           const std::set<std::string>& vias) const;
  // Sets nnhn_by_via on `routes` from desired.next_hop_reach() (see above);
  // `vias` are the device's session vias, `egress_of` each prefix's egress leaf.
  void AddNnhn(const loom::v1::DeviceState& desired, const std::set<std::string>& vias,
               const std::map<Prefix, std::string>& egress_of,
               std::map<Prefix, OriginatedRoute>* routes) const;
  // Speaker thread only.
  void Report(const loom::v1::DeviceState& desired, loom::v1::DeviceState applied,
              std::vector<ApplyFailure> failures, std::function<void(ApplyResult)> done);

  boost::asio::io_context& io_;
  Speaker* speaker_;
  const BgpDriverConfig config_;
  const std::set<std::string> devices_;
  std::map<std::string, loom::v1::DeviceState> applied_;  // Speaker thread only.
  // Per device: (serialized reach, its plan). Translate runs on the speaker
  // thread (or, in tests, on the only thread).
  mutable std::map<std::string, std::pair<std::string, std::shared_ptr<const NnhnPlan>>>
      nnhn_plans_;
};

}  // namespace loom::southbound::bgp

#endif  // LOOM_SOUTHBOUND_BGP_BGP_DRIVER_H_
