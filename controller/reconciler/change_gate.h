// ChangeGate: decides which part of the desired state the controller
// computes reaches the devices, and when.
//
// Role: sits between the controller's computed desired state and the
// reconciler. It splits every device's state in two classes:
//   - fabric-wide settings (DLB profile, ALB tables, ECN/PFC thresholds, PFC
//     watchdog) change through a plan: a revision grows whenever the
//     computed settings change; in approve mode the plan waits for Apply();
//     then the canary devices get it, Loom waits until they run it and
//     watches their links for `canary_wait_ns`, and either rolls the change
//     out to the rest (at most `max_devices_per_minute`) or rolls the canary
//     back and quarantines the change until its inputs change or an
//     operator clears it;
//   - job-driven state (routes, colors, GLB weights, spray rules, disabled
//     interfaces, next-hop reach) passes at once, with routes limited per
//     device by a churn budget (token bucket; the rest wait for it).
// When disabled, everything passes unchanged. Every step is reported
// through the note callback (the controller turns notes into events).
// Triggered by Update() (new computed state) and Tick() (the controller's
// timer). Thread: the controller strand; callbacks are called on it.
#ifndef LOOM_CONTROLLER_RECONCILER_CHANGE_GATE_H_
#define LOOM_CONTROLLER_RECONCILER_CHANGE_GATE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "loom/v1/device_state.pb.h"
#include "loom/v1/fabric_service.pb.h"

namespace loom::controller {

struct ChangeSafetyOptions {
  // Fabric-wide settings go through plans and canaries.
  bool enabled = false;
  // Plans wait for Apply().
  bool approve = false;
  // Preferred canary devices; else the first `canary_count` changed devices.
  std::vector<std::string> canary;
  uint32_t canary_count = 1;
  TimeNs canary_wait_ns = 30 * kNsPerSec;
  // A canary that does not run the change this long after it was given is a
  // failed canary.
  TimeNs canary_apply_timeout_ns = 60 * kNsPerSec;
  uint32_t max_devices_per_minute = 0;  // 0 = unlimited
  double max_pfc_pause_increase = 0.05;
  double max_drop_pps_increase = 1;
  double max_utilization_drop = 0.5;
  // Job-driven route changes per device per minute (0 = unlimited).
  uint32_t route_churn_per_minute = 0;
};

// One direction of a link next to a canary device, as telemetry sees it now.
struct LinkHealthSample {
  std::string link;  // e.g. "leaf0:Ethernet0->spine0"
  bool down = false;
  bool stale = false;
  double utilization = 0;  // 0..1
  double pfc_pause = 0;    // fraction of time paused, 0..1
  double drops_pps = 0;
};

struct GateNote {
  enum class Kind { kChange, kRouteChurn };
  Kind kind = Kind::kChange;
  bool warning = false;
  std::string subject;  // "change/<revision>" or the device
  std::string cause, action, result;
};

// The fabric-wide part of a device state (dlb, alb_tables, thresholds,
// pfc_watchdog), and the rest.
loom::v1::DeviceState FabricWidePart(const loom::v1::DeviceState& s);
void StripFabricWide(loom::v1::DeviceState* s);
// Human diff of two fabric-wide parts, one line per item.
std::vector<std::string> DiffFabricWide(const loom::v1::DeviceState& before,
                                        const loom::v1::DeviceState& after);

class ChangeGate {
 public:
  // Health of the links next to `devices`.
  using Sampler =
      std::function<std::vector<LinkHealthSample>(const std::vector<std::string>& devices)>;
  // Whether the device runs its current desired state; `error` says why not
  // when the driver failed.
  using InSync = std::function<bool(const std::string& device, std::string* error)>;

  ChangeGate(const Clock& clock, ChangeSafetyOptions options, Sampler sampler, InSync in_sync);

  void SetNoteCallback(std::function<void(const GateNote&)> cb) { on_note_ = std::move(cb); }
  // The mode shown in plans ("auto", "approve", "shadow").
  void SetModeName(std::string mode) { mode_name_ = std::move(mode); }
  bool enabled() const { return options_.enabled; }
  // Neither plans nor a churn budget: the computed state goes to the
  // reconciler as it is (the caller skips Update and keeps no copy).
  bool pass_through() const { return !options_.enabled && options_.route_churn_per_minute == 0; }

  // Settings the devices were given before, the last plan revision and the
  // quarantined change (persisted by the controller), restored before the
  // first Update.
  void RestoreAccepted(std::map<std::string, loom::v1::DeviceState> accepted);
  void RestorePlanState(uint64_t revision, const loom::v1::QuarantinedChange* quarantine);
  // Accepted settings changed since the last call: the devices to persist
  // (their entry in Accepted(), or erased when absent there).
  std::vector<std::string> TakeAcceptedChanges();
  // A failed write: the devices are persisted again with the next changes.
  void ReturnAcceptedChanges(const std::vector<std::string>& devices) {
    accepted_changes_.insert(devices.begin(), devices.end());
  }
  // The revision or the quarantine changed since the last call: what to
  // persist (`quarantine` cleared when there is none).
  bool TakePlanState(uint64_t* revision, loom::v1::QuarantinedChange* quarantine);
  void MarkPlanStateDirty() { plan_state_dirty_ = true; }
  // Change safety off: what the devices are given now is what they run, so a
  // later switch to plans starts from it (no setting is withdrawn then).
  void RecordGiven(const std::map<std::string, loom::v1::DeviceState>& computed);
  const std::map<std::string, loom::v1::DeviceState>& Accepted() const { return accepted_; }

  // A new computed desired state (every device). True when Released()
  // changed.
  bool Update(const std::map<std::string, loom::v1::DeviceState>& computed);
  // Advances canaries, rollouts and budgets. True when Released() changed.
  bool Tick();
  // What the reconciler should program.
  const std::map<std::string, loom::v1::DeviceState>& Released() const { return released_; }

  loom::v1::ChangePlan Plan() const;
  // Cheap summary for metrics: the plan's state, revision and the devices
  // whose settings differ from what they were given.
  loom::v1::ChangeState State() const;
  uint64_t revision() const { return revision_; }
  size_t pending_devices() const { return changed_.size(); }
  // approve mode: starts the rollout of the plan built on `revision`.
  Status Apply(uint64_t revision);
  Status ClearQuarantine(uint64_t revision);

 private:
  struct Rollout {
    uint64_t revision = 0;
    std::map<std::string, loom::v1::DeviceState> target;    // device -> new settings
    std::map<std::string, loom::v1::DeviceState> previous;  // device -> settings before
    std::set<std::string> had_previous;
    std::vector<std::string> canary;
    std::vector<std::string> rest;  // not yet given, in order
    std::set<std::string> given;
    bool canary_passed = false;
    bool released = false;  // Released() includes the canary's change
    TimeNs canary_given_ns = 0;
    TimeNs observe_from_ns = -1;
    TimeNs last_sample_ns = 0;
    std::map<std::string, LinkHealthSample> baseline;
    struct Acc {
      double util = 0, pfc = 0, drops = 0, w = 0;  // sums weighted by time
      int n = 0;
    };
    std::map<std::string, Acc> acc;
  };
  struct Quarantine {
    uint64_t revision = 0;
    std::string reason;
    // (device, part) -> content of that part the change tried to give.
    std::map<std::pair<std::string, std::string>, std::string> parts;
    loom::v1::QuarantinedChange stored;
  };
  struct RouteBudget {
    double tokens = 0;
    TimeNs at = 0;
    bool limited = false;  // changes are waiting (noted once per episode)
  };

  void Replan();
  // A rollout ended: plan and start the next change.
  void Advance();
  // The current plan still contains quarantined content.
  bool Blocked() const;
  void MaybeStart();
  void StartRollout();
  void GiveDevice(const std::string& device);
  void AdvanceRollout();
  void Fail(const std::string& reason);
  void Finish();
  bool Compose();
  bool TakeDeviceToken();
  void Note(bool warning, const std::string& cause, const std::string& action,
            const std::string& result, uint64_t revision);
  std::vector<std::string> CanaryOf(const std::vector<std::string>& changed) const;
  // Routes of `device` the churn budget lets through now.
  void LimitRoutes(const std::string& device, loom::v1::DeviceState* out);

  const Clock& clock_;
  ChangeSafetyOptions options_;
  Sampler sampler_;
  InSync in_sync_;
  std::function<void(const GateNote&)> on_note_;
  std::string mode_name_ = "auto";

  std::map<std::string, loom::v1::DeviceState> computed_;
  std::map<std::string, loom::v1::DeviceState> candidate_;  // fabric-wide parts
  std::map<std::string, loom::v1::DeviceState> accepted_;
  std::set<std::string> accepted_changes_;
  std::map<std::string, loom::v1::DeviceState> released_;
  std::map<std::string, std::string> released_keys_;

  // The plan: devices whose candidate differs from accepted.
  uint64_t revision_ = 0;
  std::string plan_key_;
  std::vector<std::string> changed_;
  bool approved_ = false;          // the current revision was approved
  bool dirty_ = false;             // Released() must be recomposed
  bool plan_state_dirty_ = false;  // revision_ or quarantine_ changed (persist)
  bool announced_ = false;
  std::optional<Rollout> rollout_;
  std::optional<Quarantine> quarantine_;
  std::string last_detail_;

  double device_tokens_ = 0;
  TimeNs device_tokens_at_ = 0;

  // Route churn: what was released per device, and its budget.
  std::map<std::string, std::map<std::string, loom::v1::ColoredRoute>> routes_given_;
  std::map<std::string, RouteBudget> route_budget_;
};

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_RECONCILER_CHANGE_GATE_H_
