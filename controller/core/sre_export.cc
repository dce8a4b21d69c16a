// Controller::ExportSreMetrics: fills an SreView from the controller's state
// (on the strand) for SreMetrics (sre_metrics.h).
#include <algorithm>
#include <chrono>

#include "controller/core/controller.h"
#include "controller/core/sre_metrics.h"

namespace loom::controller {

namespace v1 = loom::v1;

void Controller::ExportSreMetrics(bool force) {
  const auto wall = std::chrono::steady_clock::now();
  if (!force && wall < next_sre_export_) return;
  next_sre_export_ = wall + std::chrono::seconds(1);
  SreView v;
  v.mode = options_.reconciler.shadow          ? "shadow"
           : options_.change_mode == "approve" ? "approve"
                                               : "active";
  v.now_seconds = static_cast<double>(clock_.Now()) / kNsPerSec;
  for (const auto& d : reconciler_.Status()) {
    if (d.driver.empty()) continue;  // Nothing programs it.
    v.devices.push_back({d.device, d.in_sync, d.consecutive_failures > 0, d.failures});
  }
  for (const auto& [id, st] : oper_) {
    if (st == v1::LINK_OPER_STATE_DOWN) v.links_out.push_back({id, "oper_down"});
  }
  for (const auto& id : adaptive_.removed_links()) {
    const std::string rule = adaptive_.RemovalRule(id);
    v.links_out.push_back({id, rule.empty() ? "other" : rule});
  }
  for (const auto& [id, why] : lldp_excluded_) v.links_out.push_back({id, "lldp_mismatch"});
  for (const auto& [id, d] : drains_) {
    v.links_out.push_back({id, "drained"});
    v.drains.push_back(
        {id, std::max<double>(0, static_cast<double>(clock_.Now() - d.time_ns) / kNsPerSec)});
  }
  for (const auto& nic : adaptive_.reported_nics()) {
    v.storms.push_back({nic, adaptive_.quarantined_nics().count(nic) > 0});
  }
  for (const auto& nic : adaptive_.quarantined_nics()) {
    if (!adaptive_.reported_nics().count(nic)) v.storms.push_back({nic, true});
  }
  if (snapshot_) {
    const auto& links = topo_->topology().links();
    uint64_t fabric_dirs = 0;
    for (int i = 0; i < links.size(); ++i) {
      const auto* a = topo_->FindDevice(links[i].a().device());
      const auto* b = topo_->FindDevice(links[i].b().device());
      const bool fabric =
          a && b && a->role() != v1::DEVICE_ROLE_NIC && b->role() != v1::DEVICE_ROLE_NIC;
      for (int dir = 0; dir < 2; ++dir) {
        const size_t k = static_cast<size_t>(2 * i + dir);
        if (k >= snapshot_->links.size()) continue;
        fabric_dirs += fabric;
        const auto& d = snapshot_->links[k];
        if (d.stale) continue;
        if (d.ecn_marked_pps <= 0 && d.cnp_pps <= 0 && d.pfc_pause_ratio <= 0) continue;
        v.rates.push_back({links[i].id(), dir == 0 ? "up" : "down", fabric, d.ecn_marked_pps,
                           d.cnp_pps, d.pfc_pause_ratio});
      }
    }
    v.link_utilization_dropped =
        fabric_dirs > max_link_series_ ? fabric_dirs - max_link_series_ : 0;
  }
  // Per-job slowdown: the job's largest pause share is taken over the devices
  // on its paths (its leaves and route spines) — O(routes) per job.
  std::map<std::string, double> device_pause;
  if (snapshot_) {
    for (const auto& d : snapshot_->links) {
      if (d.stale || d.pfc_pause_ratio <= 0 || d.tx_device == nullptr) continue;
      for (const std::string* dev : {d.tx_device, d.rx_device}) {
        if (dev == nullptr) continue;
        double& p = device_pause[*dev];
        p = std::max(p, d.pfc_pause_ratio);
      }
    }
  }
  std::vector<SreView::Job> all;
  all.reserve(jobs_.size());
  std::vector<SreView::Job> opted;
  for (const auto& [id, job] : jobs_) {
    const auto& a = job.status().assignment();
    double pause = 0;
    if (!device_pause.empty()) {
      auto at = [&](const std::string& dev) {
        auto it = device_pause.find(dev);
        if (it != device_pause.end()) pause = std::max(pause, it->second);
      };
      for (const auto& e : job.endpoints()) at(topo_->NicLeaf(topo_->EndpointNic(e)));
      for (const auto& r : a.routes()) at(r.via());
    }
    SreView::Job row{id, job.tenant(), JobFabricSlowdown(a.predicted_max_utilization(), pause)};
    auto label = job.labels().find("loom.io/metrics");
    if (label != job.labels().end() && label->second == "true") {
      opted.push_back(std::move(row));
    } else {
      all.push_back(std::move(row));
    }
  }
  const size_t keep = std::min(all.size(), options_.job_series_top_k);
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    [](const SreView::Job& x, const SreView::Job& y) {
                      if (x.slowdown != y.slowdown) return x.slowdown > y.slowdown;
                      return x.job_id < y.job_id;
                    });
  v.jobs.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep));
  v.jobs_left_out = all.size() - keep;
  for (auto& j : opted) v.jobs.push_back(std::move(j));
  sre_metrics_->Update(v);
}

}  // namespace loom::controller
