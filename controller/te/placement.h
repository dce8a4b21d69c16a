// Placement: the controller's TELB state — which path every job's traffic
// takes — and the per-device forwarding state that realizes it.
//
// Role: turns (topology, down links, policy, jobs) into PathAssignments and
// desired DeviceStates, using the pure path engine. Triggered by the
// controller on job registration/update/release (incremental placement),
// and on topology changes (drains, failures) or periodic re-optimization
// (full recompute with stability). Thread: the controller strand only.
//
// Colors. Route colors are per top device (spine in 2-tier, super-spine in
// 3-tier): color = kRouteColorBase + top index, so one BGP-DPF fabric color
// per spine plane. Policy colors (ids < kRouteColorBase) restrict which tops
// a job may use. Isolation: tops pinned to a dedicated tenant by its policy
// colors, or handed out to dedicated tenants without colors (an equal share
// of the free tops each, deterministic by tenant name), carry no other
// tenant's traffic.
#ifndef LOOM_CONTROLLER_TE_PLACEMENT_H_
#define LOOM_CONTROLLER_TE_PLACEMENT_H_

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/topology/topology_index.h"
#include "controller/te/demand.h"
#include "controller/te/device_limits.h"
#include "controller/te/path_engine.h"
#include "loom/v1/device_state.pb.h"
#include "loom/v1/job.pb.h"
#include "policy/policy_engine.h"

namespace loom::te {

constexpr uint32_t kRouteColorBase = 65536;

class Placement {
 public:
  Placement(std::shared_ptr<const loom::topology::TopologyIndex> topo, PlacementParams params);

  // Installs a (validated) policy set. Takes effect for jobs placed after;
  // call Recompute() to apply it to existing jobs.
  void SetPolicy(const loom::v1::PolicySet& set);
  const loom::policy::PolicyEngine& policy() const { return policy_; }
  // Links that carry nothing (drained or failed). Rebuilds the graph;
  // returns true when the set changed (the caller then recomputes).
  bool SetDownLinks(const std::set<std::string>& down);
  // What each switch's southbound can program (device_limits.h). Takes
  // effect for jobs placed after; call Recompute() for existing ones.
  void SetDeviceLimits(DeviceLimitsMap limits) {
    limits_ = std::move(limits);
    ++version_;
    MarkAllChanged();
  }

  // Adds or replaces a job and places its traffic incrementally around the
  // other jobs. A job whose status already carries routes (reloaded after a
  // restart) keeps them where they are still feasible.
  loom::v1::PathAssignment Upsert(const loom::v1::Job& job);
  void Remove(const std::string& job_id);
  // Undo of a group of Upserts (a failed group commit): the per-edge load before
  // them, restored exactly once they were removed again (adding and removing a
  // job's rates leaves rounding residue that would tip later choices).
  std::vector<double> LoadSnapshot() const { return load_; }
  void RestoreLoad(std::vector<double> load);
  bool Has(const std::string& job_id) const { return jobs_.count(job_id) > 0; }

  // The substance of an assignment: destinations and their primary and
  // backup paths (reasons and predictions excluded).
  static std::string RouteKey(const loom::v1::PathAssignment& a);
  // Current assignment of a job (empty when unknown).
  loom::v1::PathAssignment AssignmentOf(const std::string& job_id) const;

  // Measured refinement of a job's demand: the job's NICs send `scale` x
  // what the collective model predicts at line rate (0 < scale <= 1).
  // Returns true when it changed by more than 20 % (worth a recompute);
  // takes effect at the next Upsert/Recompute.
  bool SetDemandScale(const std::string& job_id, double scale);
  double DemandScale(const std::string& job_id) const;
  // Modelled send rate (bits/s, at scale 1) of each NIC of a job.
  std::map<std::string, double> ModelledNicRates(const std::string& job_id) const;
  // Measured traffic matrix of a job (NIC-to-NIC rates the fabric reported):
  // replaces its stated matrix and pattern (demand.h) from the next
  // Upsert/Recompute; empty = back to the prior. Returns true when it changed.
  // Dropped when the job is removed or its endpoints or stated matrix change.
  bool SetMeasuredDemand(const std::string& job_id, std::vector<NicDemand> pairs);
  const std::vector<NicDemand>* MeasuredDemand(const std::string& job_id) const;
  // Measurement found the job's traffic where its matrix says (TrafficMeter):
  // a job that may be sprayed is pinned from now on where pinning fits (until
  // then its prior is unconfirmed and it is sprayed). True when newly so.
  bool SetDemandConfirmed(const std::string& job_id);
  // The NIC-to-NIC rates (at scale 1) the job is placed with.
  std::vector<NicDemand> DemandInUse(const std::string& job_id) const;

  // Recomputes every job. Returns the assignments whose routes changed.
  std::map<std::string, loom::v1::PathAssignment> Recompute(PlacementMode mode);

  // What a re-placement changed, to put it back (RollBack).
  struct Undo;
  // Bounded-churn re-placement of a fabric predicted over capacity: moves the
  // traffic of at most `max_jobs` jobs, units on the hottest links whose move
  // lowers the maximum (path_engine.h Rebalance); with at most `max_jobs` jobs, a
  // full recompute. Cost: one pass over the placed units, not a new placement.
  // Fills `undo`; returns the assignments whose routes changed.
  std::map<std::string, loom::v1::PathAssignment> Rebalance(size_t max_jobs, Undo* undo);
  // Puts back what the re-placement that filled `undo` changed. Changes made after
  // it must have been undone first (newest first).
  void RollBack(Undo&& undo);

  // Desired state. Routes are scoped and budgeted:
  // - a unit's colored route goes only on the leaves its traffic enters the
  //   fabric from (its source leaves; in a 3-tier fabric also the pod spine
  //   those leaves reach its top through, when that is not the destination's
  //   pod spine). Other leaves send nothing the placement accounts for to
  //   that destination; their traffic to it takes the underlay's ECMP.
  // - a device gets at most its route budget (DeviceLimits::max_routes);
  //   beyond it, the routes carrying the least traffic from that device are
  //   left out (their traffic takes ECMP) and the jobs' reasons say so.
  // The placement keeps a compact route table (integer references into its
  // units, per device) and builds a device's protobuf only when asked.
  //
  // Desired state of every switch (leaves and spines; super-spines have no
  // choices to make): DesiredStateOf for each of DesiredDevices().
  std::map<std::string, loom::v1::DeviceState> DesiredStates() const;
  // The switches that have a desired state (id order).
  std::vector<std::string> DesiredDevices() const;
  // Desired state of one switch (empty when it has none).
  loom::v1::DeviceState DesiredStateOf(const std::string& device) const;
  // Switches whose desired state (DesiredStateOf) may differ from when this was
  // last called (all of them the first time and after fabric-wide changes: graph,
  // policy, limits, NIC sets, spraying), and forgets them. A job's change marks
  // the leaves of its NICs (every switch in 3-tier fabrics or when the job may be
  // sprayed: spray rules and pod spines).
  std::set<std::string> TakeChangedDevices();
  // Route figures of the current desired state.
  struct RouteStats {
    size_t routes = 0;         // installed, every device
    size_t leaves = 0;         // leaves in the fabric
    size_t max_per_leaf = 0;   // installed on the busiest leaf
    double mean_per_leaf = 0;  // installed per leaf
    size_t dropped = 0;        // left out for route budgets
    size_t devices_over_budget = 0;
    uint32_t min_budget = 0;  // smallest leaf budget
    size_t table_bytes = 0;   // memory of the compact route table
  };
  RouteStats Routes() const;

  // NICs whose RoCE transport tolerates reordering (inventory
  // nic.reorder_tolerance FULL): a job all of whose NICs are in the set may be
  // sprayed per packet where pinning cannot fit, as one whose policy says
  // spray_eligible. Takes effect at the next Upsert/Recompute.
  void SetReorderTolerantNics(std::set<std::string> nics);
  // NICs that keep out-of-order packets but resend one per reorder event (inventory
  // nic.reorder_tolerance SELECTIVE_REPEAT): a job whose NICs are all tolerant or
  // selective-repeat may be sprayed too, its predicted completion when sprayed taken
  // kSelectiveRepeatSprayCost times longer (the resends).
  void SetSelectiveRepeatNics(std::set<std::string> nics);
  // A selective-repeat NIC resends a packet per reorder event; spraying at full load
  // reorders about a third of the packets (sim-fabric/reorder.h's model: 8 flows sprayed
  // over 4 fully used uplinks deliver 1.21 of 1.60 Tb/s): a sprayed job is predicted to
  // take this much longer.
  static constexpr double kSelectiveRepeatSprayCost = 1.33;

  // Tests: the incremental bookkeeping (spraying decided over the jobs that may be
  // sprayed only) gives what deciding it over every job gives. "" when it does,
  // else the first difference.
  std::string CheckIncrementalState() const;

  double max_utilization() const { return max_utilization_; }
  const FabricGraph& graph() const { return graph_; }
  // Color of a top device; 0 when unknown.
  uint32_t ColorOf(const std::string& top) const;

 private:
  struct JobRec {
    loom::v1::Job job;
    // The job id's first 8 bytes, big-endian, zero-padded: ordered as the ids are
    // where they differ (BudgetLess).
    uint64_t id_prefix = 0;
    loom::policy::Decision decision;
    // What the devices could not carry of the policy's action (for the reason).
    std::string limits_note;
    DemandSource demand_source = DemandSource::kPattern;
    // May be sprayed per packet (policy, or every NIC reorder-tolerant). Such a
    // job's leaves spray its class: what the demand predicts is pinned by
    // colored routes, traffic it does not predict (no route) is sprayed.
    bool spray_ok = false;
    // What spraying costs the job's NICs: 1 (policy, or every NIC tolerant), or the
    // selective-repeat factor on its predicted completion.
    double spray_cost = 1.0;
    std::vector<int> nic_leaves;  // leaves of the job's NICs (sorted)
    // Per unit: sprayed at its source leaves instead of pinned (UpdateSpraying).
    std::vector<char> sprayed;
    std::string spray_note;
    std::vector<Unit> units;
    std::vector<int> top, backup;
    std::vector<std::string> reason;
    // Modelled send rate per NIC at scale 1 (cached: telemetry asks often; computed
    // on first use after the units were built, with the scale they were built with).
    mutable std::map<std::string, double> modelled;
    mutable bool modelled_valid = false;
    double modelled_scale = 1.0;
  };

  void IndexGraph();
  // Why the job's QP split cannot be programmed ("" when it can).
  std::string QpSplitBlocker() const;
  void BuildUnits(JobRec& rec, const std::map<std::string, int>& current) const;
  std::vector<int> AllowedTops(const JobRec& rec) const;
  void RecomputeDedication();
  void AddLoad(const JobRec& rec, double sign);
  loom::v1::PathAssignment MakeAssignment(const JobRec& rec) const;
  // RouteKey(MakeAssignment(rec)), built from the record.
  std::string RouteKeyOf(const JobRec& rec) const;
  std::vector<int> TopsOfColors(const google::protobuf::RepeatedField<uint32_t>& colors) const;
  void UpdateMax();
  // Spraying where pinning cannot fit (2-tier): a leaf whose busiest live
  // uplink (downlink) is predicted over capacity, and whose live uplinks
  // (downlinks) would carry the same load spread evenly at least kSprayGain
  // lower, is one where whole-flow pinning cannot fit. Every unit of a job that
  // may be sprayed with a source leaf (its destination leaf) like that is
  // sprayed at its source leaves: no colored route there, a spray rule for the
  // job's class, and the switch spreads its packets over every live uplink by
  // quality, as switch per-packet spraying does. Load accounting stays with
  // the pinned top (an approximation: the spread evens out what is pinned).
  // Visits the jobs that may be sprayed (spray_ok_jobs_), or every job.
  void UpdateSpraying(bool every_job = false);
  // After BuildUnits: keeps spray_ok_jobs_ and a job's never-sprayed flags.
  void TrackSpraying(const std::string& id, JobRec& rec);
  static std::string SprayWhy(const JobRec& rec);
  // Compact route table (see DesiredStates), rebuilt when version_ moved.
  void BuildRouteTable() const;
  // A leaf this job has routes on is past half its route budget.
  bool NearRouteBudget(const JobRec& rec) const;
  // Routes needed per leaf (before budgets), kept up to date with the units
  // placed; leaves above their budget make MakeAssignment build the table.
  void CountRoutes(const JobRec& rec, int sign);
  std::string BudgetNote(const std::string& job_id) const;
  // The note of what route budgets leave out of a job's routes, from (switch ->
  // routes left out); "" when nothing.
  std::string FormatBudgetNote(const std::map<std::string, size_t>& where) const;
  // Route budgets without the whole table (2-tier): per leaf, its colored routes
  // ordered as the table keeps them (rate descending, then job id, then unit), with
  // order statistics, so one job's routes left out are found in O(its routes x log).
  // Kept up to date with the jobs once built (IndexRoutes); invalid after a full
  // recompute, a graph change or a copy, and rebuilt when next needed.
  struct BudgetKey {
    double neg_rate;
    const JobRec* rec;
    uint32_t unit;
  };
  struct BudgetLess {
    bool operator()(const BudgetKey& a, const BudgetKey& b) const {
      if (a.neg_rate != b.neg_rate) return a.neg_rate < b.neg_rate;
      if (a.rec != b.rec) {
        // Job id order: the ids' first 8 bytes (big-endian) decide most pairs.
        if (a.rec->id_prefix != b.rec->id_prefix) return a.rec->id_prefix < b.rec->id_prefix;
        if (int c = a.rec->job.job_id().compare(b.rec->job.job_id()); c != 0) return c < 0;
      }
      return a.unit < b.unit;
    }
  };
  using BudgetTree =
      __gnu_pbds::tree<BudgetKey, __gnu_pbds::null_type, BudgetLess, __gnu_pbds::rb_tree_tag,
                       __gnu_pbds::tree_order_statistics_node_update>;
  struct BudgetIndex {
    bool valid = false;
    std::vector<BudgetTree> per_leaf;
  };
  struct CachedBudgetIndex : BudgetIndex {
    CachedBudgetIndex() = default;
    CachedBudgetIndex(const CachedBudgetIndex&) : BudgetIndex() {}
    CachedBudgetIndex(CachedBudgetIndex&&) noexcept : BudgetIndex() {}
    CachedBudgetIndex& operator=(const CachedBudgetIndex&) {
      static_cast<BudgetIndex&>(*this) = BudgetIndex();
      return *this;
    }
    CachedBudgetIndex& operator=(CachedBudgetIndex&&) noexcept {
      static_cast<BudgetIndex&>(*this) = BudgetIndex();
      return *this;
    }
  };
  mutable CachedBudgetIndex budget_index_;
  // Calls f(leaf, key) for each colored route of the job the table would hold on a
  // leaf (2-tier; BuildRouteTable's rules).
  template <typename F>
  void ForEachLeafRoute(const JobRec& rec, F&& f) const;
  // Adds (sign > 0) or removes a job's routes from the budget index when it is valid.
  void IndexRoutes(const JobRec& rec, int sign) const;
  void BuildBudgetIndex() const;
  // BudgetNote from the index (2-tier).
  std::string IndexedBudgetNote(const JobRec& rec) const;

  std::shared_ptr<const loom::topology::TopologyIndex> topo_;
  PlacementParams params_;
  DeviceLimitsMap limits_;
  loom::policy::PolicyEngine policy_;
  std::set<std::string> down_;
  FabricGraph graph_;
  // Every endpoint resolved to its NIC once, and each NIC's leaf in graph_ (-1: none).
  EndpointTable endpoints_;
  std::vector<int> nic_leaf_;
  std::vector<int> top_by_name_;  // top indexes in id order
  std::map<std::string, JobRec> jobs_;
  std::vector<double> load_;  // per edge, all placed units
  PlaceWorkspace workspace_;  // the path engine's buffers, reused between calls
  double max_utilization_ = 0;
  // tenant -> tops reserved for it (dedicated isolation).
  std::map<std::string, std::set<int>> dedicated_;
  // job -> measured demand scale (absent = 1).
  std::map<std::string, double> scale_;
  std::set<std::string> reorder_tolerant_;
  std::set<std::string> selective_repeat_;
  std::set<std::string> confirmed_;  // jobs whose pattern prior measurement confirmed
  // job -> measured traffic matrix (absent = the stated matrix or the pattern).
  std::map<std::string, std::vector<NicDemand>> measured_;
  // Jobs that may be sprayed (JobRec::spray_ok), the only ones UpdateSpraying visits.
  std::set<std::string> spray_ok_jobs_;

  // Bumped by every change to jobs, graph, policy or limits.
  uint64_t version_ = 1;
  // Switches whose desired state may have changed (TakeChangedDevices).
  std::vector<char> changed_;  // per switch (switches_ order)
  bool changed_all_ = true;
  void MarkChanged(const JobRec& rec);
  void MarkAllChanged() { changed_all_ = true; }
  std::vector<uint32_t> leaf_routes_;  // per graph leaf: routes needed
  // Switches with a desired state (topology order) and their index by id.
  std::vector<std::string> switches_;
  std::map<std::string, int> switch_index_;
  struct RouteRef {
    const JobRec* rec;
    uint32_t unit;
  };
  struct RouteTable {
    uint64_t version = 0;
    std::vector<uint32_t> begin;  // per switch: first ref (size switches + 1)
    std::vector<RouteRef> refs;   // per switch, in (job id, unit) order
    // Per switch: (color, next hop) of its color table.
    std::vector<std::vector<std::pair<uint32_t, std::string>>> colors;
    std::map<std::string, std::string> budget_note;  // job -> what was left out
    size_t dropped = 0, over_budget = 0;
    // Per switch: jobs with units sprayed from it (spray rules).
    std::vector<std::vector<const JobRec*>> spray_jobs;
  };
  // The table points into jobs_'s nodes: a copied or moved Placement (the
  // controller's rollback copies) starts without one and rebuilds it.
  // BuildRouteTable's per-switch scratch (kept for its storage; empty between builds).
  mutable std::vector<std::vector<std::pair<RouteRef, double>>> route_scratch_;
  struct CachedRouteTable : RouteTable {
    CachedRouteTable() = default;
    CachedRouteTable(const CachedRouteTable&) : RouteTable() {}
    CachedRouteTable(CachedRouteTable&&) noexcept : RouteTable() {}
    CachedRouteTable& operator=(const CachedRouteTable&) {
      static_cast<RouteTable&>(*this) = RouteTable();
      return *this;
    }
    CachedRouteTable& operator=(CachedRouteTable&&) noexcept {
      static_cast<RouteTable&>(*this) = RouteTable();
      return *this;
    }
    CachedRouteTable& operator=(RouteTable&& t) {
      static_cast<RouteTable&>(*this) = std::move(t);
      return *this;
    }
  };
  mutable CachedRouteTable table_;
  // Route key of each job's assignment as last handed out (Upsert, Recompute):
  // a full recompute reports the jobs whose spraying changed since, too.
  std::map<std::string, std::string> last_key_;
};

struct Placement::Undo {
  // The records of the jobs the re-placement changed, as they were before it, and
  // their route keys as last handed out (absent: none).
  std::map<std::string, JobRec> jobs;
  std::map<std::string, std::string> last_key;
  std::vector<double> load;  // per edge, before it
  bool valid = false;
};

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_PLACEMENT_H_
