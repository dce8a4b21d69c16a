// GLB: global load balancing weights from end-to-end path quality.
//
// What it computes. For every (device, destination) set — device = ingress
// leaf, destination = egress leaf — integer next-hop weights (a
// loom.v1.WeightSet: next hop = first-hop spine; in a 3-tier fabric the
// ingress-pod spine of a super-spine plane) that steer new flowlets away from
// congestion the ingress leaf cannot see locally: a next hop whose
// end-to-end band (min of local uplink and remote hops, telemetry
// ComputePathQualities) is clearly worse than the best next hop of the same
// set loses weight. Two ingress leaves sending to one egress leaf through a
// spine whose downlink is congested both lower that spine's weight.
//
// Model. weight(h) ~ live_capacity(h) x m(h), scaled to `weight_scale` with
// a floor of `min_weight` for live next hops (largest-remainder rounding).
// m(h) in [min_multiplier, 1] is the learned quality factor, kept in
// GlbState between rounds. It is an integral controller, not a
// band->weight map, because the feedback loop (lower the weight -> the
// congested path recovers -> a memoryless map would raise the weight again)
// would otherwise oscillate:
//   - decrease: h is fresh and best_band - band(h) >= min_band_gap
//     -> m(h) *= decrease_factor; fresh hops at the best band that had been
//     lowered earlier get one step back (the weight moves between them);
//   - relax: every fresh hop of the set has band >= good_band for
//     relax_after_rounds x backoff consecutive rounds -> every m moves one
//     step back towards 1 (the capacity share) and the count restarts. A
//     relax is a probe: when a decrease follows within relax_after_rounds
//     rounds (the relax brought the congestion back), backoff doubles, up
//     to max_relax_backoff; a relax after an undisturbed relax halves it.
//     So a persistent remote congestion is probed ever more rarely instead
//     of oscillating;
//   - otherwise hold.
// Damping and hysteresis: band differences below min_band_gap never act; a
// set's quality factors change at most once every min_rounds_between_changes
// rounds (telemetry must see the effect first); integer weights then walk to
// their target at most max_weight_step per round, and a set keeps its
// weights when no target differs by min_weight_delta or more (rounding
// jitter).
// Capacity changes (a parallel link down, a next hop down) apply at once and
// bypass damping: that is failure handling, not balancing.
// Staleness: a next hop is stale when any path through it is stale; it is
// never re-judged — it keeps its previous integer weight and m — and does
// not count as the best. A set whose next hops are all stale is unchanged.
//
// 3-tier fabrics. Several paths share a first hop (one per super-spine and
// egress spine). Inputs may repeat (device, destination, next_hop): the hop's
// band is the mean of its paths' bands, its capacity the maximum given.
// Spine-level sets (spine -> super-spine per egress leaf) are the same
// computation with device = spine; the caller builds those inputs.
//
// Every weight change carries a reason string. Sets absent from the input
// are dropped from the state (no traffic / no path any more).
//
// Complexity: O(P log P) for P input paths (grouping) plus O(N log N) per set
// of N next hops for the rounding. With every ordered leaf pair P =
// leaves^2 x spines (2-tier) or leaves^2 x spines x super-spines-per-plane
// (3-tier). Bound it by passing only pairs that carry traffic (the demand
// matrix of placed jobs), or by splitting destinations into shards evaluated
// in consecutive rounds (sets not passed in a round are dropped, so shard
// callers must carry the dropped sets' state themselves or pass all pairs).
// No limit on leaves (> 64), spines or parallel links.
//
// Assumptions: bands 0 (worst) .. 7 (best) as telemetry computes them; the
// caller calls once per telemetry round with the same parameters. Pure: no
// I/O, no clock, no threads; deterministic (ordered maps throughout).
#ifndef LOOM_CONTROLLER_ADAPTIVE_GLB_H_
#define LOOM_CONTROLLER_ADAPTIVE_GLB_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "api/topology/topology_index.h"
#include "controller/te/path_engine.h"
#include "loom/v1/device_state.pb.h"
#include "telemetry/link_state.h"

namespace loom::adaptive {

// One path (or the aggregate of several) from `device` towards `destination`
// through first hop `next_hop`.
struct GlbPath {
  std::string device;       // Ingress leaf (or spine, for spine-level sets).
  std::string destination;  // Egress leaf.
  std::string next_hop;     // First-hop spine (2-tier) / plane spine (3-tier).
  int band = 0;             // End-to-end quality 0 (worst) .. 7 (best).
  int local_band = 0;       // For reasons only.
  int remote_band = 0;      // For reasons only.
  // Live capacity device -> next_hop, parallel links summed; 0 = down.
  double live_capacity_bps = 0;
  bool stale = true;
};

struct GlbParams {
  uint32_t weight_scale = 100;  // A set's weights sum to about this.
  uint32_t min_weight = 1;      // Floor for a live next hop.
  int min_band_gap = 2;         // best - band needed to act.
  double decrease_factor = 0.7;
  double min_multiplier = 0.05;
  int good_band = 6;
  int relax_after_rounds = 5;
  int max_relax_backoff = 64;
  int min_rounds_between_changes = 2;
  uint32_t max_weight_step = 20;
  uint32_t min_weight_delta = 2;
};

// Returns "" when valid, else the offending field and why.
std::string ValidateGlbParams(const GlbParams& p);

struct GlbHopState {
  double multiplier = 1.0;
  uint32_t weight = 0;
  double capacity_bps = 0;
};

struct GlbSetState {
  std::map<std::string, GlbHopState> hops;  // By next hop.
  int64_t last_change_round = -1;
  int good_rounds = 0;
  int relax_backoff = 1;
  int64_t last_relax_round = -1;
  bool relaxed_since_decrease = false;
};

// Carried by the caller from one round to the next.
struct GlbState {
  int64_t round = 0;                                                // Rounds computed so far.
  std::map<std::pair<std::string, std::string>, GlbSetState> sets;  // (device, destination).
};

struct GlbWeightChange {
  std::string device;
  std::string destination;
  std::string next_hop;
  uint32_t old_weight = 0;  // 0: was absent.
  uint32_t new_weight = 0;  // 0: removed.
  std::string reason;
};

struct GlbResult {
  // Every set with a live next hop, per device, ascending by destination;
  // next hops with weight 0 are omitted (WeightSet semantics).
  std::map<std::string, std::vector<loom::v1::WeightSet>> weights;
  std::vector<GlbWeightChange> changes;
  GlbState state;  // Pass to the next round.
  int sets = 0;
  int stale_sets = 0;    // Every next hop stale: kept as is.
  int changed_sets = 0;  // At least one weight changed.
};

GlbResult ComputeGlbWeights(const std::vector<GlbPath>& paths, const GlbState& previous,
                            const GlbParams& params);

// Builds GLB inputs from telemetry path qualities: device = ingress leaf,
// destination = egress leaf, next hop = `spine` of the path, capacity = the
// live leaf->spine capacity in `graph` (built with the down links). Device
// indexes are into index.topology().devices(). O(P).
std::vector<GlbPath> GlbPathsFromQualities(const topology::TopologyIndex& index,
                                           const te::FabricGraph& graph,
                                           const std::vector<telemetry::PathQuality>& qualities);

}  // namespace loom::adaptive

#endif  // LOOM_CONTROLLER_ADAPTIVE_GLB_H_
