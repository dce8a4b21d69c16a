// Controller: what the telemetry sources say about the fabric itself —
// signals devices do not serve (events naming what is off) and LLDP
// neighbours that contradict the topology (links out of placement). Runs on
// the controller strand, from ApplySnapshot().
#include "controller/core/controller.h"
#include "telemetry/profile.h"

namespace loom::controller {

namespace v1 = loom::v1;

namespace {

// What Loom stops doing for a device's links when it lacks a signal.
std::string SignalConsequence(const std::string& signal) {
  if (signal == "interface-counters") {
    return "its links' rates and quality are unknown; GLB, ALB and hotspot remediation do not act "
           "on them";
  }
  if (signal == "oper-status") return "link state comes from counters only";
  if (signal == "pfc-counters" || signal == "pfc-pause-duration") {
    return "PFC pause figures are unavailable: PFC storm detection is off for its links";
  }
  if (signal == "pfc-watchdog") return "PFC watchdog storms are not seen on its links";
  if (signal == "ecn-marks" || signal == "queue-depth" || signal == "queue-watermark") {
    return "its links' quality uses utilization only";
  }
  if (signal == "nic-roce") return "CNP and retransmission figures are unavailable for its links";
  if (signal == "alb-buckets") return "ALB bucket rebalancing is off on it";
  if (signal == "lldp") return "its links stay unverified by LLDP";
  if (signal == "port-speed") return "degraded (lane-loss) capacity is not detected on its links";
  return "decisions that need it are off";
}

}  // namespace

bool Controller::CheckTelemetrySources(std::vector<v1::Event>* events) {
  // Signals that became unavailable / available again.
  const auto& now_unavail = snapshot_->unavailable_signals;
  for (const auto& [device, sigs] : now_unavail) {
    const auto before = unavailable_signals_.find(device);
    for (const auto& [signal, reason] : sigs) {
      if (before != unavailable_signals_.end() && before->second.count(signal)) continue;
      v1::Event ev = NewEvent(v1::EVENT_TYPE_TELEMETRY_SIGNAL_CHANGED, device);
      ev.set_severity(v1::SEVERITY_WARNING);
      ev.set_cause("telemetry: " + device + " does not serve " + signal + " (" + reason + ")");
      ev.set_action(SignalConsequence(signal));
      events->push_back(std::move(ev));
    }
  }
  for (const auto& [device, sigs] : unavailable_signals_) {
    const auto now = now_unavail.find(device);
    for (const auto& [signal, reason] : sigs) {
      if (now != now_unavail.end() && now->second.count(signal)) continue;
      v1::Event ev = NewEvent(v1::EVENT_TYPE_TELEMETRY_SIGNAL_CHANGED, device);
      ev.set_severity(v1::SEVERITY_INFO);
      ev.set_cause("telemetry: " + device + " serves " + signal + " again");
      ev.set_action("decisions that need it are back on");
      events->push_back(std::move(ev));
    }
  }
  unavailable_signals_ = now_unavail;
  // LLDP: contradicted links (and, if configured, unverified ones) leave
  // placement; host links only when configured.
  std::map<std::string, std::string> excluded;
  const auto& links = topo_->topology().links();
  for (int i = 0; i < links.size(); ++i) {
    const size_t a = static_cast<size_t>(2 * i);
    if (a >= snapshot_->links.size()) break;
    const auto& d = snapshot_->links[a];
    auto is_nic = [&](const std::string& id) {
      const v1::Device* dev = topo_->FindDevice(id);
      return dev != nullptr && dev->role() == v1::DEVICE_ROLE_NIC;
    };
    const bool host_link = is_nic(links[i].a().device()) || is_nic(links[i].b().device());
    if (host_link && !options_.lldp_check_host_links) continue;
    if (d.lldp == loom::telemetry::LldpCheck::kContradicted) {
      excluded[links[i].id()] = d.lldp_detail;
    } else if (d.lldp == loom::telemetry::LldpCheck::kUnverified &&
               options_.lldp_exclude_unverified && !d.stale) {
      // Only links with live telemetry: before any data arrives (start-up)
      // nothing is unverified yet.
      excluded[links[i].id()] = "no LLDP data (lldp.exclude_unverified)";
    }
  }
  bool changed = false;
  for (const auto& [id, why] : excluded) {
    if (lldp_excluded_.count(id)) continue;
    changed = true;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_LLDP_CHECK_CHANGED, id);
    ev.set_severity(v1::SEVERITY_CRITICAL);
    ev.set_cause("LLDP: " + why);
    ev.set_action("took the link out of placement");
    events->push_back(std::move(ev));
  }
  for (const auto& [id, why] : lldp_excluded_) {
    if (excluded.count(id)) continue;
    changed = true;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_LLDP_CHECK_CHANGED, id);
    ev.set_severity(v1::SEVERITY_INFO);
    ev.set_cause("LLDP: the link agrees with the topology again");
    ev.set_action("returned the link to placement");
    events->push_back(std::move(ev));
  }
  lldp_excluded_ = std::move(excluded);
  return changed;
}

}  // namespace loom::controller
