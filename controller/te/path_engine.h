// TELB path computation: which spine (2-tier) or super-spine plane (3-tier)
// carries the traffic towards each destination NIC of each job.
//
// Model. BGP-DPF colors a destination's route, so the unit Loom controls is
// a (job, destination NIC) pair — or, when the policy splits the job by QP
// (qp_split = P), each of the P parts of it, part k being the destination's
// QPs numbered k modulo P and carrying 1/P of its traffic: all traffic of a
// unit crosses one "top" device t (a spine in 2-tier fabrics, a super-spine
// in 3-tier ones; in 3-tier fabrics t also fixes the pod spines, one per
// plane). A unit's
// traffic is the sum of its sources' rates, grouped by source leaf; going
// through t it loads the directed edges leaf->spine(->super-spine->spine)
// ->leaf on its path (parallel links are one edge with their summed live
// capacity). Utilization = load / capacity. The objective is to minimize the
// maximum edge utilization, subject to: drained or failed links carry
// nothing, a unit only uses its allowed tops (isolation, policy colors).
//
// Algorithm. Greedy in decreasing demand (each unit to the top that
// minimizes the resulting maximum utilization on its path, ties broken by
// the sum of squared utilizations, then by the top the unit's job already
// uses most — so a job whose units do not compete for links, a ring, fills
// one spine plane and leaves whole planes to later jobs —, then by a
// per-destination rotation so equal choices spread), then local search (move
// units off the hottest edge while that lowers the maximum). Stability: a
// full recompute keeps the current placement unless the new one lowers the
// maximum utilization by more than `stability_gain` (relative), or the
// current maximum is over capacity and the new one is at least one point
// lower; units whose current path became infeasible are always re-placed.
// Incremental placement places only the new units around the fixed ones.
//
// Complexity: O(U log U + U*K*S*P) for the greedy pass (U units, K tops, S
// source leaves per unit, P <= 4 edges per path) plus O(R*U_e*K*S*P) for R
// local-search rounds (U_e units on the hottest edge). Memory: O(E + U*S)
// for 2-tier units whose sources sit on distinct leaves (what Placement
// builds; their paths are read from the graph's per-(leaf, top) edge tables
// when scored), O(U*K*S*P) stored candidates for other units. Pure: no I/O,
// no clock, no threads; deterministic for the same input (a PlaceWorkspace
// only lends buffers).
//
// Assumptions: a Clos where every leaf reaches every top (modulo failures)
// and, in 3-tier fabrics, every pod has exactly one spine connected to each
// super-spine (the plane model of the generator); intra-leaf traffic uses
// no edge.
#ifndef LOOM_CONTROLLER_TE_PATH_ENGINE_H_
#define LOOM_CONTROLLER_TE_PATH_ENGINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/topology/topology_index.h"

namespace loom::te {

// The fabric reduced to what placement needs.
class FabricGraph {
 public:
  // Builds the graph; links in `down_links` (drained or failed) have no
  // capacity. O(devices + links).
  static FabricGraph Build(const loom::topology::TopologyIndex& topo,
                           const std::set<std::string>& down_links);

  bool three_tier() const { return three_tier_; }
  int num_tops() const { return static_cast<int>(tops_.size()); }
  const std::string& top(int t) const { return tops_[static_cast<size_t>(t)]; }
  int TopIndex(const std::string& id) const;
  // Leaf index of a leaf id / of a NIC's leaf; -1 when unknown.
  int LeafIndex(const std::string& leaf) const;
  int NicLeaf(const std::string& nic) const;
  const std::string& leaf(int l) const { return leaves_[static_cast<size_t>(l)]; }
  int num_leaves() const { return static_cast<int>(leaves_.size()); }

  // Edges from leaf a to leaf b through top t. Returns false when the path
  // does not exist or an edge has no live capacity. Empty when a == b.
  bool PathEdges(int a, int b, int t, std::vector<int>* edges) const;
  // The spine a leaf uses as first hop towards top t (t itself in 2-tier).
  std::string FirstHop(int leaf, int t) const;
  int num_edges() const { return static_cast<int>(capacity_.size()); }
  double capacity(int e) const { return capacity_[static_cast<size_t>(e)]; }
  const std::string& edge_name(int e) const { return edge_names_[static_cast<size_t>(e)]; }
  // Edge id for (from device, to device), -1 when absent.
  int Edge(const std::string& from, const std::string& to) const;
  // 2-tier only: live leaf->top and top->leaf edges (-1 when dead/missing).
  int UpEdge(int leaf, int t) const {
    return up_edge_[static_cast<size_t>(leaf) * tops_.size() + static_cast<size_t>(t)];
  }
  int DownEdge(int leaf, int t) const {
    return down_edge_[static_cast<size_t>(leaf) * tops_.size() + static_cast<size_t>(t)];
  }
  // 2-tier only: every leaf's edges to and from top t are live.
  bool TopLive(int t) const { return top_live_[static_cast<size_t>(t)] != 0; }
  // 2-tier only: for every top, the ids of a leaf's live edges to and from it
  // are below those of every leaf after it (leaf index order), so a path's
  // edges are in id order when taken in leaf order. True for topologies whose
  // links are listed leaf by leaf, or spine by spine in leaf order.
  bool leaf_ordered() const { return leaf_ordered_; }

 private:
  int EdgeIdx(int from_dev, int to_dev) const;

  bool three_tier_ = false;
  std::vector<std::string> tops_;
  std::vector<std::string> leaves_;
  std::map<std::string, int> top_index_, leaf_index_, device_index_;
  std::unordered_map<std::string, int> nic_leaf_;
  // 2-tier: [leaf * tops + top] -> live leaf->top / top->leaf edge, -1 when
  // missing or without capacity (filled by Build; no name lookups later).
  std::vector<int> up_edge_, down_edge_;
  std::vector<char> top_live_;  // per top
  bool leaf_ordered_ = false;
  std::vector<std::string> leaf_pod_;                     // per leaf
  std::map<std::pair<std::string, int>, int> pod_spine_;  // (pod, top) -> device index
  std::map<std::pair<int, int>, int> edges_;              // (from dev, to dev) -> edge
  std::vector<double> capacity_;
  std::vector<std::string> edge_names_;
  std::vector<std::string> devices_;
};

// One (job, destination NIC) pair, or one QP part of it (policy qp_split:
// the destination's traffic whose destination QP q has (q & qp_mask) ==
// qp_value, an equal share of it).
struct Unit {
  std::string job_id;
  std::string dst_nic;
  int dst_leaf = -1;
  uint32_t qp_mask = 0, qp_value = 0;
  // (source leaf, rate in bits/s) — sources on the destination's leaf add
  // no fabric load and may be omitted.
  std::vector<std::pair<int, double>> sources;
  // Tops the unit may use; empty = all.
  std::vector<int> allowed;
  // Current top (-1: none). `pinned` keeps it (incremental placement).
  int current = -1;
  bool pinned = false;
};

struct PlacementParams {
  // A full recompute moves units only when it lowers the maximum utilization
  // by more than this fraction of the current maximum.
  double stability_gain = 0.05;
  int max_improvement_rounds = 5000;
  // Protection capacity (protection.h): backups with room for what a failed link
  // sheds, and moves that make the room without raising the maximum utilization;
  // 2-tier fabrics whose placement fits (maximum utilization <= 100 %).
  bool protect = true;
  double protection_ceiling = 0.9;
};

struct PlacementResult {
  // Chosen top per unit (-1: no feasible top).
  std::vector<int> top;
  // Backup top per unit (-1: none): with protection (2-tier), the top with
  // room for what the unit's single-link failures shed onto it; else the
  // allowed alternative with the least loaded path after placement.
  std::vector<int> backup;
  bool protected_backups = false;
  // Summed post-failure overload over single-link failures (bits/s), the
  // worst post-failure utilization, and the units moved to make room.
  double protection_deficit_bps = 0;
  double protection_worst_utilization = 0;
  int protection_moves = 0;
  // Why each unit went where it did.
  std::vector<std::string> reason;
  std::vector<double> edge_load;
  double max_utilization = 0;
  int hottest_edge = -1;
  // Units whose top differs from Unit::current.
  int moved = 0;
  // True when the new placement replaced the current one (full recompute).
  bool adopted_new = false;
};

enum class PlacementMode { kIncremental, kFull };

// Buffers Place reuses from one call to the next (per-edge loads, the
// maximum-utilization tree and the units-per-edge index of its solvers), so
// placing a few units does not allocate and clear arrays of every edge.
// Results never depend on what a workspace held; a copy starts empty. One
// caller at a time.
class PlaceWorkspace {
 public:
  PlaceWorkspace();
  ~PlaceWorkspace();
  PlaceWorkspace(const PlaceWorkspace&);
  PlaceWorkspace& operator=(const PlaceWorkspace&);

  struct Buffers;
  // Buffers of solver k (0: the one keeping current paths, 1: a full recompute's fresh one).
  Buffers* Get(int k);
  // Per-edge scratch of `edges` zeros; the caller puts back every zero it changed.
  std::vector<double>& Zeros(size_t edges) {
    if (zeros_.size() != edges) zeros_.assign(edges, 0.0);
    return zeros_;
  }

 private:
  std::unique_ptr<Buffers> keep_, fresh_;
  std::vector<double> zeros_;
};

// `base_load` (per edge, bits/s), when given, is traffic of units placed
// earlier and not passed in `units` (incremental placement of one job).
// `ws`, when given, lends Place its buffers.
PlacementResult Place(const FabricGraph& g, const std::vector<Unit>& units,
                      const PlacementParams& params, PlacementMode mode,
                      const std::vector<double>* base_load = nullptr, PlaceWorkspace* ws = nullptr);

// Bounded-churn re-placement (a fabric predicted over capacity): from every unit's
// current top (Unit::current; -1 stays unplaced), moves units off the hottest edge
// while that lowers the maximum utilization (Place's local search: single moves,
// pair moves, chains), but only units of at most `max_groups` distinct groups
// (`group[u]`: the unit's job) in all, so a re-placement of a fabric that cannot fit
// its jobs moves a bounded number of them for what it gains, instead of re-placing
// everything. Units not moved keep their top and get backup -1 (the caller keeps
// theirs); moved ones get a backup and a reason. Cost: one pass over the units plus
// at most min(params.max_improvement_rounds, 16 x max_groups) rounds.
PlacementResult Rebalance(const FabricGraph& g, const std::vector<Unit>& units,
                          const std::vector<uint32_t>& group, size_t max_groups,
                          const PlacementParams& params, PlaceWorkspace* ws = nullptr);

// Maximum utilization of a given assignment (for tests and benchmarks).
double MaxUtilization(const FabricGraph& g, const std::vector<Unit>& units,
                      const std::vector<int>& top);

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_PATH_ENGINE_H_
