#include "sim-fabric/inprocess_driver.h"

#include <set>

namespace loom::sim {

namespace v1 = loom::v1;
using loom::southbound::ApplyResult;

InProcessDriver::InProcessDriver(Fabric* fabric, const v1::Topology& topo, Runner run)
    : fabric_(fabric), run_(std::move(run)) {
  if (!run_) run_ = [](std::function<void()> f) { f(); };
  std::map<std::string, v1::DeviceRole> role;
  for (const auto& d : topo.devices()) {
    role[d.id()] = d.role();
    if (d.role() == v1::DEVICE_ROLE_LEAF || d.role() == v1::DEVICE_ROLE_SPINE ||
        d.role() == v1::DEVICE_ROLE_SUPER_SPINE) {
      switches_.insert(d.id());
    }
  }
  for (const auto& l : topo.links()) {
    link_of_[{l.a().device(), l.a().interface()}] = l.id();
    link_of_[{l.b().device(), l.b().interface()}] = l.id();
    towards_[{l.a().device(), l.b().device()}].push_back(l.a().interface());
    towards_[{l.b().device(), l.a().device()}].push_back(l.b().interface());
    if (role[l.a().device()] == v1::DEVICE_ROLE_NIC) nic_leaf_[l.a().device()] = l.b().device();
    if (role[l.b().device()] == v1::DEVICE_ROLE_NIC) nic_leaf_[l.b().device()] = l.a().device();
  }
}

bool InProcessDriver::Handles(const std::string& device) const {
  return switches_.count(device) > 0;
}

std::vector<std::string> InProcessDriver::InterfacesTowards(const std::string& device,
                                                            const std::string& neighbor) const {
  auto it = towards_.find({device, neighbor});
  return it == towards_.end() ? std::vector<std::string>{} : it->second;
}

ApplyResult InProcessDriver::ApplyNow(const v1::DeviceState& desired) {
  ApplyResult r;
  r.applied = desired;
  const std::string& dev = desired.device();
  auto fail = [&](const char* part, const Status& s) { r.failures.push_back({part, s}); };
  if (!Handles(dev)) {
    fail("device",
         Status(StatusCode::kNotFound, "\"" + dev + "\" is not a switch of the emulator"));
    r.applied.Clear();
    return r;
  }
  v1::DeviceState before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    before = applied_[dev];
  }
  // Colors: remove those that disappeared, (re)define the rest.
  {
    std::set<uint32_t> now;
    Status first;
    for (const auto& c : desired.colors()) {
      now.insert(c.color());
      ColorConfig cfg;
      for (const auto& hop : c.next_hops()) {
        for (const auto& ifc : InterfacesTowards(dev, hop)) cfg.interfaces.push_back(ifc);
      }
      Status s = cfg.interfaces.empty()
                     ? Status(StatusCode::kInvalidArgument,
                              "color " + std::to_string(c.color()) + ": no link to its next hops")
                     : fabric_->SetColor(dev, c.color(), cfg);
      if (!s.ok() && first.ok()) first = s;
    }
    for (const auto& c : before.colors()) {
      if (!now.count(c.color())) fabric_->RemoveColor(dev, c.color());
    }
    if (!first.ok()) fail("colors", first);
  }
  // Routes: replace the whole table.
  {
    fabric_->ClearRoutes(dev);
    Status first;
    for (const auto& rt : desired.routes()) {
      Status s =
          fabric_->SetRoute(dev, rt.destination(), rt.color(), rt.backup_color(),
                            static_cast<int>(rt.traffic_class()), rt.qp_mask(), rt.qp_value());
      if (!s.ok() && first.ok()) first = s;
    }
    if (!first.ok()) fail("routes", first);
  }
  // Weights per destination leaf.
  {
    std::set<std::string> now;
    Status first;
    for (const auto& w : desired.weights()) {
      std::string dest =
          nic_leaf_.count(w.destination()) ? nic_leaf_[w.destination()] : w.destination();
      now.insert(dest);
      std::map<std::string, double> by_iface;
      for (const auto& [hop, weight] : w.weights()) {
        auto ifcs = InterfacesTowards(dev, hop);
        for (const auto& ifc : ifcs) by_iface[ifc] = static_cast<double>(weight) / ifcs.size();
      }
      Status s = fabric_->SetEcmpWeights(dev, dest, by_iface);
      if (!s.ok() && first.ok()) first = s;
    }
    for (const auto& w : before.weights()) {
      std::string dest =
          nic_leaf_.count(w.destination()) ? nic_leaf_[w.destination()] : w.destination();
      if (!now.count(dest)) fabric_->SetEcmpWeights(dev, dest, {});
    }
    if (!first.ok()) fail("weights", first);
  }
  // DLB mode and profile.
  if (desired.dlb().mode() != v1::DLB_MODE_UNSPECIFIED) {
    ForwardingMode mode = ForwardingMode::kStaticHash;
    switch (desired.dlb().mode()) {
      case v1::DLB_MODE_FLOWLET:
        mode = ForwardingMode::kDlbFlowlet;
        break;
      case v1::DLB_MODE_PER_PACKET:
        mode = ForwardingMode::kDlbPerPacket;
        break;
      default:
        mode = ForwardingMode::kStaticHash;
    }
    Status s = fabric_->SetForwardingMode(dev, mode);
    if (s.ok() && desired.dlb().inactivity_interval_ns() > 0) {
      DlbProfile p;
      if (const SwitchConfig* cfg = fabric_->GetSwitchConfig(dev)) p = cfg->dlb;
      p.inactivity_ns = static_cast<TimeNs>(desired.dlb().inactivity_interval_ns());
      if (desired.dlb().load_weight_percent() > 0) {
        p.load_weight = desired.dlb().load_weight_percent() / 100.0;
      }
      s = fabric_->SetDlbProfile(dev, p);
    }
    if (!s.ok()) fail("dlb", s);
  }
  // ALB tables.
  {
    Status first;
    for (const auto& t : desired.alb_tables()) {
      std::string dest = nic_leaf_.count(t.group()) ? nic_leaf_[t.group()] : t.group();
      std::vector<std::string> buckets;
      for (const auto& hop : t.buckets()) {
        auto ifcs = InterfacesTowards(dev, hop);
        buckets.push_back(ifcs.empty() ? hop : ifcs[buckets.size() % ifcs.size()]);
      }
      Status s = fabric_->SetAlbTable(dev, dest, buckets);
      if (!s.ok() && first.ok()) first = s;
    }
    if (!first.ok()) fail("alb_tables", first);
  }
  // Selective spraying by traffic class.
  {
    uint8_t mask = 0;
    for (const auto& sr : desired.spray_rules()) {
      if (sr.traffic_class() < 8) mask |= static_cast<uint8_t>(1u << sr.traffic_class());
    }
    Status s = fabric_->SetSprayPriorities(dev, mask);
    if (!s.ok()) fail("spray_rules", s);
  }
  // ECN/PFC thresholds (switch-wide in the emulator).
  {
    Status first;
    for (const auto& th : desired.thresholds()) {
      EcnConfig ecn;
      ecn.kmin_bytes = static_cast<double>(th.ecn_kmin_bytes());
      ecn.kmax_bytes = static_cast<double>(th.ecn_kmax_bytes());
      ecn.pmax = th.ecn_pmax_percent() / 100.0;
      Status s = fabric_->SetEcn(dev, static_cast<int>(th.priority()), ecn);
      if (s.ok() && th.pfc_xoff_bytes() > 0) {
        PfcConfig pfc;
        if (const SwitchConfig* cfg = fabric_->GetSwitchConfig(dev)) pfc = cfg->pfc;
        pfc.xoff_bytes = static_cast<double>(th.pfc_xoff_bytes());
        pfc.xon_bytes = static_cast<double>(th.pfc_xon_bytes());
        s = fabric_->SetPfc(dev, pfc);
      }
      if (!s.ok() && first.ok()) first = s;
    }
    if (!first.ok()) fail("thresholds", first);
  }
  // Quarantine: interfaces Loom shuts (the emulator takes their link down).
  {
    std::set<std::string> now(desired.disabled_interfaces().begin(),
                              desired.disabled_interfaces().end());
    Status first;
    for (const auto& ifc : now) {
      auto it = link_of_.find({dev, ifc});
      Status s = it == link_of_.end()
                     ? Status(StatusCode::kNotFound,
                              "disabled_interfaces: \"" + ifc + "\" is not an interface of " + dev)
                     : fabric_->SetLinkUp(it->second, false);
      if (!s.ok() && first.ok()) first = s;
    }
    for (const auto& ifc : before.disabled_interfaces()) {
      auto it = link_of_.find({dev, ifc});
      if (!now.count(ifc) && it != link_of_.end()) (void)fabric_->SetLinkUp(it->second, true);
    }
    if (!first.ok()) fail("disabled_interfaces", first);
  }
  // PFC watchdog: present = enabled with these settings; when Loom stops
  // managing it (absent after present) the switch gets back what it ran
  // before Loom's first watchdog.
  if (desired.has_pfc_watchdog()) {
    const v1::PfcWatchdog& w = desired.pfc_watchdog();
    Status s;
    if (w.detection_time_ms() == 0 || w.restoration_time_ms() == 0) {
      s = Status(StatusCode::kInvalidArgument,
                 "pfc_watchdog: detection and restoration time must be > 0");
    } else {
      WatchdogConfig cfg;
      if (const SwitchConfig* sc = fabric_->GetSwitchConfig(dev)) {
        std::lock_guard<std::mutex> lock(mu_);
        boot_watchdog_.emplace(dev, sc->watchdog);
        cfg = sc->watchdog;
      }
      cfg.enabled = true;
      if (w.poll_interval_ms() > 0) cfg.poll_ns = w.poll_interval_ms() * kNsPerMs;
      cfg.detection_ns = static_cast<TimeNs>(w.detection_time_ms()) * kNsPerMs;
      cfg.restoration_ns = static_cast<TimeNs>(w.restoration_time_ms()) * kNsPerMs;
      cfg.action = w.action() == v1::PFC_WATCHDOG_ACTION_FORWARD ? WatchdogAction::kForward
                   : w.action() == v1::PFC_WATCHDOG_ACTION_ALERT ? WatchdogAction::kAlert
                                                                 : WatchdogAction::kDrop;
      s = fabric_->SetWatchdog(dev, cfg);
    }
    if (!s.ok()) fail("pfc_watchdog", s);
  } else if (before.has_pfc_watchdog()) {
    WatchdogConfig boot;
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = boot_watchdog_.find(dev);
      if (it != boot_watchdog_.end()) {
        boot = it->second;
        known = true;
      }
    }
    if (known) (void)fabric_->SetWatchdog(dev, boot);
  }
  // What is applied: the desired state without the failed parts (their
  // previous content stays).
  for (const auto& f : r.failures) {
    if (f.part == "colors") *r.applied.mutable_colors() = before.colors();
    if (f.part == "routes") *r.applied.mutable_routes() = before.routes();
    if (f.part == "weights") *r.applied.mutable_weights() = before.weights();
    if (f.part == "dlb") *r.applied.mutable_dlb() = before.dlb();
    if (f.part == "alb_tables") *r.applied.mutable_alb_tables() = before.alb_tables();
    if (f.part == "spray_rules") *r.applied.mutable_spray_rules() = before.spray_rules();
    if (f.part == "thresholds") *r.applied.mutable_thresholds() = before.thresholds();
    if (f.part == "pfc_watchdog") {
      if (before.has_pfc_watchdog()) {
        *r.applied.mutable_pfc_watchdog() = before.pfc_watchdog();
      } else {
        r.applied.clear_pfc_watchdog();
      }
    }
    if (f.part == "disabled_interfaces") {
      *r.applied.mutable_disabled_interfaces() = before.disabled_interfaces();
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  applied_[dev] = r.applied;
  return r;
}

void InProcessDriver::Apply(const v1::DeviceState& desired, std::function<void(ApplyResult)> done) {
  run_([this, desired, done = std::move(done)]() { done(ApplyNow(desired)); });
}

void InProcessDriver::Read(const std::string& device,
                           std::function<void(Status, v1::DeviceState)> done) {
  if (!Handles(device)) {
    done(Status(StatusCode::kNotFound, "\"" + device + "\" is not a switch of the emulator"), {});
    return;
  }
  v1::DeviceState s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = applied_[device];
  }
  done(Status::Ok(), s);
}

}  // namespace loom::sim
