// The adaptive part of the controller: turns every telemetry snapshot into
// GLB weights, ALB bucket tables, DLB settings and remediation, and explains
// each action as an event (cause -> action -> result).
//
// Role: owned by the Controller and called on its strand, once per telemetry
// snapshot, in two phases:
//   1. Assess(): flap dampening of oper-state changes and the remediation
//      rules (controller/adaptive/remediation.h) decide which links leave
//      placement (errors, capacity loss, flapping — oper DOWN is the
//      controller's own business), which lose GLB weight (capacity loss,
//      sustained hotspots, PFC pauses on fabric links) and which NIC ports
//      are reported (or quarantined) for PFC storms. The controller then
//      updates placement's down links and re-places affected jobs.
//   2. Balance(): with the updated fabric graph, GLB weights per (ingress
//      leaf, egress leaf) every round, ALB scans every alb scan interval on
//      the bucket tables the switches report, DLB timer tuning per leaf from
//      the NICs' observed burst gaps every dlb interval.
// Decorate() adds the results to the desired device states the reconciler
// programs (weights, alb_tables, dlb, spray_rules on leaves).
//
// Restoring a link remediation removed: a link removed for errors stays out
// until its telemetry was clean for restore_hold_ns; the hold doubles with
// every repeated removal (up to max_restore_hold_ns), because a link out of
// placement carries little traffic and so shows few errors — without the
// growing hold an error-prone link would oscillate in and out. Capacity
// loss is a direct measurement: the link returns as soon as its live
// capacity is back. Flapping links return when dampening reuses them.
//
// Pure state machine apart from the inputs: no I/O, no clock, no threads.
#ifndef LOOM_CONTROLLER_CORE_ADAPTIVE_ENGINE_H_
#define LOOM_CONTROLLER_CORE_ADAPTIVE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/topology/topology_index.h"
#include "common/clock.h"
#include "controller/adaptive/alb.h"
#include "controller/adaptive/dampening.h"
#include "controller/adaptive/dlb_tuning.h"
#include "controller/adaptive/glb.h"
#include "controller/adaptive/remediation.h"
#include "controller/te/device_limits.h"
#include "controller/te/path_engine.h"
#include "loom/v1/device_state.pb.h"
#include "loom/v1/event.pb.h"
#include "telemetry/link_state.h"

namespace loom::controller {

struct AdaptiveOptions {
  bool glb = true;
  bool alb = true;
  bool dlb_tuning = true;
  bool remediation = true;
  loom::adaptive::GlbParams glb_params;
  loom::adaptive::AlbParams alb_params;  // alb_params.scan_interval_ns: time between scans.
  loom::adaptive::DlbTuningParams dlb_params;
  loom::adaptive::DampeningParams dampening;
  loom::adaptive::RemediationParams remediation_params;
  // DLB tuning runs at most this often; a leaf is reprogrammed only when its
  // mode changes or its timer moves by more than dlb_min_change (relative).
  TimeNs dlb_interval_ns = 1 * kNsPerSec;
  double dlb_min_change = 0.25;
  // ... and only when the same decision was reached this many intervals in a
  // row (burst gaps and queueing skew are noisy; reprogramming is not free).
  int dlb_confirm = 3;
  // Every DLB mode change of a leaf is a "flap" of that leaf's mode (RFC 2439
  // dampening, controller/adaptive/dampening.h): a leaf whose decisions keep
  // reversing is held in its current mode until they stay quiet. The first
  // change is free; a reversal within about a half-life is applied and holds
  // further ones; reuse after the penalty decays (at most max_suppress_ns). Defaults:
  // 1000 per change, suppressed at 1500 (two changes within a half-life of 15 s),
  // reused below 750.
  loom::adaptive::DampeningParams dlb_dampening = {1000, 1500, 750, 15 * kNsPerSec, 60 * kNsPerSec};
  // Burst-gap samples kept per job (rolling window).
  size_t dlb_gap_window = 64;
  // Error-removed links: clean telemetry needed before they return.
  TimeNs restore_hold_ns = 60 * kNsPerSec;
  TimeNs max_restore_hold_ns = 3600 * kNsPerSec;
};

// Returns "" when valid, else the offending field and why.
std::string ValidateAdaptiveOptions(const AdaptiveOptions& o);

// One job with an endpoint NIC on a leaf (DLB tuning input).
struct LeafJob {
  std::string job_id;
  std::vector<std::string> nics;  // The job's NICs on this leaf.
  bool spray_eligible = false;    // Policy marks its traffic reorder-tolerant.
  uint32_t traffic_class = 0;
  uint32_t qp_first = 0, qp_last = 0;  // First QP range of the job (0, 0 = all).
};

struct AdaptiveEvent {
  loom::v1::EventType type = loom::v1::EVENT_TYPE_REMEDIATION;
  loom::v1::Severity severity = loom::v1::SEVERITY_INFO;
  std::string subject;
  std::string cause;
  std::string action;
  std::string result;
  // Result to be completed by the controller with what re-placement did.
  bool placement_result = false;
};

struct AssessOutcome {
  std::vector<AdaptiveEvent> events;
  bool removed_changed = false;  // removed_links() differs: re-place.
  bool hotspot_onset = false;    // A new sustained hotspot: re-optimize demand.
  bool desired_changed = false;
};

struct BalanceOutcome {
  std::vector<AdaptiveEvent> events;
  bool desired_changed = false;
  int glb_changed_sets = 0;
  int alb_moves = 0;
  int dlb_changes = 0;
};

class AdaptiveEngine {
 public:
  AdaptiveEngine(const loom::topology::TopologyIndex& topo, AdaptiveOptions options);

  // Phase 1. `oper_changes` are the link oper transitions the controller
  // just saw (link id, DOWN/UP).
  AssessOutcome Assess(const loom::telemetry::LinkSnapshot& snap, TimeNs now,
                       const std::vector<std::pair<std::string, bool>>& oper_changes);
  // Phase 2. `graph` is placement's graph with the current down links;
  // `leaf_jobs` maps each leaf to the jobs with NICs on it.
  BalanceOutcome Balance(const loom::telemetry::LinkSnapshot& snap, TimeNs now,
                         const loom::te::FabricGraph& graph,
                         const std::map<std::string, std::vector<LeafJob>>& leaf_jobs);

  // What each switch's southbound can program: ALB, DLB tuning, spraying and
  // GLB weights are computed only where they can be carried.
  void SetDeviceLimits(loom::te::DeviceLimitsMap limits) { limits_ = std::move(limits); }

  // Links remediation keeps out of placement (not oper-down ones).
  const std::set<std::string>& removed_links() const { return removed_; }
  // Why a link is out of placement ("" when it is not).
  std::string RemovalReason(const std::string& link) const;
  // The rule that took it out: "flapping", "capacity_loss" or "errors" ("" when
  // it is not out).
  std::string RemovalRule(const std::string& link) const;
  // Adds weights, ALB tables, DLB profiles and spray rules to `desired`.
  void Decorate(std::map<std::string, loom::v1::DeviceState>* desired) const;

  // Read-only views for status pages and tests.
  const std::map<std::string, std::vector<loom::v1::WeightSet>>& weights() const {
    return weights_;
  }
  const std::map<std::string, loom::v1::DlbProfile>& dlb() const { return dlb_; }
  const std::map<std::pair<std::string, std::string>, std::vector<std::string>>& alb_tables()
      const {
    return alb_tables_;
  }
  const std::set<std::string>& reported_nics() const { return storming_; }
  const std::set<std::string>& quarantined_nics() const { return quarantined_; }
  const AdaptiveOptions& options() const { return options_; }

 private:
  loom::te::DeviceLimitsMap limits_;
  struct Removal {
    std::string cause;
    bool by_capacity = false;  // Capacity loss: returns when the capacity does.
    bool by_dampening = false;
    TimeNs clean_since_ns = -1;
  };
  struct LinkMemory {
    loom::adaptive::DampeningState damp;
    uint64_t carrier_transitions = 0;
    // Counter sample time (oldest end) when Loom last saw an oper change;
    // -1 when the carrier counters have caught up with it.
    TimeNs settle_sample_ns = -1;
    bool seen = false;
    int removals = 0;  // Error removals so far (hold doubling).
  };

  void RunGlb(const loom::telemetry::LinkSnapshot& snap, const loom::te::FabricGraph& graph,
              const std::map<std::string, std::vector<LeafJob>>& leaf_jobs, BalanceOutcome* out);
  void RunAlb(const loom::telemetry::LinkSnapshot& snap, const loom::te::FabricGraph& graph,
              BalanceOutcome* out);
  void RunDlb(const loom::telemetry::LinkSnapshot& snap,
              const std::map<std::string, std::vector<LeafJob>>& leaf_jobs, BalanceOutcome* out);

  const loom::topology::TopologyIndex& topo_;
  AdaptiveOptions options_;
  std::vector<bool> rx_is_nic_;  // Per direction index.
  std::vector<bool> tx_is_nic_;
  // (device, interface) -> neighbor device.
  std::map<std::pair<std::string, std::string>, std::string> neighbor_;

  // Remediation and dampening.
  std::map<std::string, LinkMemory> links_;
  std::map<std::string, Removal> removal_;
  std::set<std::string> removed_;
  std::set<std::string> kept_last_;               // Wanted out but last uplink (reported once).
  std::vector<std::deque<double>> util_history_;  // Per direction.
  // GLB capacity factors from remediation: (tx device, rx device) -> factor.
  std::map<std::pair<std::string, std::string>, double> glb_factor_;
  std::map<std::string, std::string> hotspots_;  // direction key -> cause
  std::set<std::string> storming_;               // NIC ports reported
  std::set<std::string> quarantined_;

  // GLB.
  loom::adaptive::GlbState glb_state_;
  std::map<std::string, std::vector<loom::v1::WeightSet>> weights_;
  // ALB.
  TimeNs next_alb_ns_ = 0;
  int64_t alb_scan_ = 0;
  std::map<std::pair<std::string, std::string>, loom::adaptive::AlbGroupState> alb_state_;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> alb_tables_;
  // DLB.
  TimeNs next_dlb_ns_ = 0;
  std::map<std::string, std::deque<TimeNs>> job_gaps_;
  std::map<std::string, TimeNs> job_spacing_;
  std::map<std::string, loom::v1::DlbProfile> dlb_;
  struct PendingDlb {
    loom::v1::DlbProfile profile;
    int count = 0;
  };
  std::map<std::string, PendingDlb> dlb_pending_;
  std::map<std::string, loom::adaptive::DampeningState> dlb_damp_;  // per leaf: mode changes
  std::map<std::string, std::vector<loom::v1::SprayRule>> spray_;
};

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_CORE_ADAPTIVE_ENGINE_H_
