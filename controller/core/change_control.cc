// Controller: fabric-wide settings from configuration, and change safety —
// the ChangeGate between the computed desired state and the reconciler,
// its telemetry check, its events, its persisted accepted settings and the
// plan / apply / clear API. Runs on the controller strand.
#include <fnmatch.h>

#include <boost/asio/post.hpp>
#include <cctype>

#include "controller/core/controller.h"

namespace loom::controller {

namespace v1 = loom::v1;

namespace {

bool SettingMatches(const v1::FabricSetting& s, const v1::Device& d) {
  if (s.role() != v1::DEVICE_ROLE_UNSPECIFIED && s.role() != d.role()) return false;
  if (!s.name_pattern().empty() && fnmatch(s.name_pattern().c_str(), d.id().c_str(), 0) != 0) {
    return false;
  }
  return true;
}

}  // namespace

namespace {

struct Matched {
  const v1::FabricSetting* dlb = nullptr;
  const v1::FabricSetting* thresholds = nullptr;
  const v1::FabricSetting* watchdog = nullptr;
};

// The settings entries that give `d` each part, less what its southbound
// cannot carry (`dropped` lists those parts).
Matched Match(const std::vector<v1::FabricSetting>& settings, const v1::Device& d,
              const loom::te::DeviceLimits& lim, std::vector<std::string>* dropped) {
  Matched m;
  for (const auto& s : settings) {
    if (!SettingMatches(s, d)) continue;
    if (s.has_dlb()) m.dlb = &s;
    if (!s.thresholds().empty()) m.thresholds = &s;
    if (s.has_pfc_watchdog()) m.watchdog = &s;
  }
  auto drop = [&](const v1::FabricSetting*& p, bool can, const char* part) {
    if (p && !can) {
      p = nullptr;
      if (dropped) dropped->push_back(part);
    }
  };
  drop(m.dlb, lim.dlb, "dlb");
  drop(m.thresholds, lim.thresholds, "thresholds");
  drop(m.watchdog, lim.pfc_watchdog, "pfc_watchdog");
  return m;
}

bool IsSwitch(const v1::Device& d) {
  return d.role() == v1::DEVICE_ROLE_LEAF || d.role() == v1::DEVICE_ROLE_SPINE ||
         d.role() == v1::DEVICE_ROLE_SUPER_SPINE;
}

}  // namespace

std::vector<std::string> Controller::UncarriedSettings(
    const std::vector<v1::FabricSetting>& settings, const v1::Topology& topology,
    const loom::te::DeviceLimitsMap& limits) {
  std::vector<std::string> out;
  for (const auto& d : topology.devices()) {
    if (!IsSwitch(d)) continue;
    const auto& lim = loom::te::LimitsOf(limits, d.id());
    std::vector<std::string> dropped;
    Match(settings, d, lim, &dropped);
    for (const auto& part : dropped) {
      out.push_back(d.id() + ": " + part + " (programmed by " +
                    (lim.driver.empty() ? std::string("its driver") : lim.driver) + ")");
    }
  }
  return out;
}

void Controller::AddFabricSettings(std::map<std::string, v1::DeviceState>* desired) const {
  if (fabric_settings_.empty()) return;
  for (const auto& d : topo_->topology().devices()) {
    auto it = desired->find(d.id());
    if (it == desired->end()) continue;  // not a switch Loom programs
    const Matched m = Match(fabric_settings_, d, loom::te::LimitsOf(limits_, d.id()), nullptr);
    const v1::FabricSetting* dlb = m.dlb;
    const v1::FabricSetting* thresholds = m.thresholds;
    const v1::FabricSetting* watchdog = m.watchdog;
    v1::DeviceState& st = it->second;
    // DLB tuning (already in `desired`) wins over the configured base profile.
    if (dlb && !st.has_dlb()) *st.mutable_dlb() = dlb->dlb();
    if (thresholds && st.thresholds().empty()) *st.mutable_thresholds() = thresholds->thresholds();
    if (watchdog && !st.has_pfc_watchdog()) *st.mutable_pfc_watchdog() = watchdog->pfc_watchdog();
  }
}

void Controller::SetFabricSettings(std::vector<v1::FabricSetting> settings) {
  boost::asio::post(strand_, [this, settings = std::move(settings)]() mutable {
    fabric_settings_ = std::move(settings);
    ++fabric_settings_version_;
    desired_dirty_ = true;
  });
}

std::vector<LinkHealthSample> Controller::SampleLinks(
    const std::vector<std::string>& devices) const {
  std::vector<LinkHealthSample> out;
  if (!snapshot_) return out;
  std::set<std::string> want(devices.begin(), devices.end());
  for (const auto& d : snapshot_->links) {
    if (!d.link_id || !d.tx_device || !d.rx_device) continue;
    if (!want.count(*d.tx_device) && !want.count(*d.rx_device)) continue;
    LinkHealthSample s;
    s.link = *d.link_id + " " + *d.tx_device + "->" + *d.rx_device;
    s.stale = d.stale;
    s.down = d.oper == loom::telemetry::OperStatus::kDown;
    s.utilization = d.utilization;
    s.pfc_pause = d.pfc_pause_ratio;
    s.drops_pps = d.drops_pps;
    out.push_back(std::move(s));
  }
  return out;
}

bool Controller::DeviceInSync(const std::string& device, std::string* error) const {
  const DeviceSync* s = reconciler_.Sync(device);
  if (!s) return false;
  if (s->driver.empty()) {
    *error = "no southbound driver programs it";
    return false;
  }
  if (!s->in_sync) *error = s->last_error;
  return s->in_sync;
}

void Controller::OnGateNote(const GateNote& n) {
  Mutation m;
  v1::Event ev = NewEvent(n.kind == GateNote::Kind::kChange ? v1::EVENT_TYPE_CHANGE_ROLLOUT
                                                            : v1::EVENT_TYPE_ROUTE_CHURN_LIMITED,
                          n.subject);
  ev.set_severity(n.warning ? v1::SEVERITY_WARNING : v1::SEVERITY_INFO);
  ev.set_cause(n.cause);
  ev.set_action(n.action);
  ev.set_result(n.result);
  m.events.push_back(std::move(ev));
  CommitAndPublish(m);
}

void Controller::UpdateChangeGauges() {
  const v1::ChangeState now = gate_.State();
  for (int s = v1::CHANGE_STATE_DISABLED; s <= v1::CHANGE_STATE_QUARANTINED; ++s) {
    std::string name = v1::ChangeState_Name(static_cast<v1::ChangeState>(s));
    name = name.substr(sizeof("CHANGE_STATE_") - 1);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    change_state_family_.Add({{"state", name}}).Set(s == now ? 1 : 0);
  }
  change_state_family_.Add({{"field", "revision"}}).Set(static_cast<double>(gate_.revision()));
  change_state_family_.Add({{"field", "pending_devices"}})
      .Set(static_cast<double>(gate_.pending_devices()));
}

void Controller::ReleaseToReconciler(bool changed) {
  UpdateChangeGauges();
  if (changed) reconciler_.SetDesired(gate_.Released());
  PersistChangeState();
}

void Controller::PersistChangeState() {
  std::vector<std::string> devices = gate_.TakeAcceptedChanges();
  uint64_t revision = 0;
  v1::QuarantinedChange quarantine;
  const bool plan_state = gate_.TakePlanState(&revision, &quarantine);
  if (devices.empty() && !plan_state) return;
  Mutation m;
  for (const auto& d : devices) {
    auto it = gate_.Accepted().find(d);
    if (it == gate_.Accepted().end()) {
      m.delete_settings.push_back(d);
    } else {
      m.put_settings.push_back(it->second);
    }
  }
  if (plan_state) {
    m.put_meta["change_revision"] = std::to_string(revision);
    m.put_meta["change_quarantine"] = quarantine.SerializeAsString();
  }
  if (!CommitAndPublish(m).ok()) {
    // Written again with the next change (a restart must not revert what
    // the devices were given).
    gate_.ReturnAcceptedChanges(devices);
    if (plan_state) gate_.MarkPlanStateDirty();
  }
}

void Controller::GetChangePlan(Done<v1::ChangePlan> done) {
  boost::asio::post(strand_, [this, done = std::move(done)]() {
    PushDesired();
    done(Status::Ok(), gate_.Plan());
  });
}

void Controller::RecordApproval(const Caller& caller, const std::string& action,
                                uint64_t revision) {
  if (caller.identity.empty()) return;
  Mutation m;
  v1::Event ev = NewEvent(v1::EVENT_TYPE_CHANGE_ROLLOUT, "change-" + std::to_string(revision));
  ev.set_actor(caller.identity);
  ev.set_peer(caller.peer);
  ev.set_cause("operator request");
  ev.set_action(action);
  ev.set_result("accepted");
  m.events.push_back(std::move(ev));
  CommitAndPublish(m);
}

void Controller::ApplyChangePlan(uint64_t revision, Done<v1::ChangePlan> done, Caller caller) {
  boost::asio::post(strand_, [this, revision, done = std::move(done),
                              caller = std::move(caller)]() {
    PushDesired();
    if (revision == 0) return done(InvalidArgument("revision: must name the plan's revision"), {});
    Status s = gate_.Apply(revision);
    if (!s.ok()) return done(s, {});
    RecordApproval(caller, "approved the rollout of change " + std::to_string(revision), revision);
    ReleaseToReconciler(true);
    done(Status::Ok(), gate_.Plan());
  });
}

void Controller::ClearChangeQuarantine(uint64_t revision, Done<v1::ChangePlan> done,
                                       Caller caller) {
  boost::asio::post(
      strand_, [this, revision, done = std::move(done), caller = std::move(caller)]() {
        PushDesired();
        if (revision == 0) {
          return done(InvalidArgument("revision: must name the quarantined revision"), {});
        }
        Status s = gate_.ClearQuarantine(revision);
        if (!s.ok()) return done(s, {});
        RecordApproval(caller, "cleared the quarantine of change " + std::to_string(revision),
                       revision);
        ReleaseToReconciler(true);
        done(Status::Ok(), gate_.Plan());
      });
}

}  // namespace loom::controller
