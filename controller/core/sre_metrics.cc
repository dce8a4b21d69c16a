#include "controller/core/sre_metrics.h"

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace loom::controller {

namespace {

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& r, const char* name,
                                                   const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

SreMetrics::SreMetrics(prometheus::Registry& registry, size_t top_k)
    : top_k_(top_k),
      mode_(GaugeFamily(registry, "loom_reconciler_mode",
                        "1 for the mode the reconciler runs in: active (programs devices), "
                        "shadow (computes, programs nothing) or approve (changes wait for "
                        "approval)")),
      devices_by_state_(GaugeFamily(registry, "loom_devices_sync",
                                    "Programmed devices by sync state (in_sync, out_of_sync, "
                                    "failing: the last apply failed)")),
      device_in_sync_(GaugeFamily(registry, "loom_device_in_sync",
                                  "1 when the device runs what Loom wants it to (applied == "
                                  "desired), else 0; one series per programmed device")),
      device_out_of_sync_seconds_(GaugeFamily(
          registry, "loom_device_out_of_sync_seconds",
          "How long the device has been out of sync (only devices out of sync have a series)")),
      device_apply_failures_(prometheus::BuildCounter()
                                 .Name("loom_device_apply_failures_total")
                                 .Help("Failed applies of the desired state, per device")
                                 .Register(registry)),
      link_out_(GaugeFamily(registry, "loom_link_out_of_placement",
                            "1 for each link Loom keeps out of placement, by cause (oper_down, "
                            "flapping, errors, capacity_loss, drained, other)")),
      drained_seconds_(GaugeFamily(registry, "loom_link_drained_seconds",
                                   "How long each drained link has been drained")),
      storm_origin_(GaugeFamily(registry, "loom_pfc_storm_origin",
                                "1 for each NIC port Loom found sending a PFC storm (the "
                                "origin, not the ports the pauses spread to); quarantined=true "
                                "when its leaf port was shut")),
      paused_fabric_(GaugeFamily(registry, "loom_pfc_paused_fabric_directions",
                                 "Switch-to-switch link directions paused at least 5 % of the "
                                 "time: PFC pauses that spread past the edge")
                         .Add({})),
      fabric_ecn_(GaugeFamily(registry, "loom_fabric_ecn_marked_pps",
                              "ECN-marked packets per second, summed over every fresh link "
                              "direction")
                      .Add({})),
      fabric_cnp_(GaugeFamily(registry, "loom_fabric_cnp_pps",
                              "RoCE CNPs per second, summed over every fresh NIC link direction")
                      .Add({})),
      link_ecn_(GaugeFamily(registry, "loom_link_ecn_marked_pps",
                            "ECN-marked packets per second of a link direction (the top "
                            "directions only; see loom_metric_series_dropped)")),
      link_cnp_(GaugeFamily(registry, "loom_link_cnp_pps",
                            "RoCE CNPs per second on a NIC link direction (the top directions "
                            "only)")),
      link_pause_(GaugeFamily(registry, "loom_link_pfc_pause_ratio",
                              "Share of time (0..1) a link direction was paused by PFC (the top "
                              "directions only)")),
      dropped_(GaugeFamily(registry, "loom_metric_series_dropped",
                           "Series a capped family left out at the last update (family label)")),
      job_slowdown_(GaugeFamily(
          registry, "loom_job_fabric_slowdown",
          "Estimated slowdown of a job by the fabric (>= 1; 1 = not slowed): predicted demand "
          "over capacity on its worst link, over (1 - its paths' largest PFC pause share). "
          "Only the top jobs by slowdown and jobs labelled loom.io/metrics=true; the full "
          "answer is GetJobHealth / loomctl jobs why")) {}

void SreMetrics::SetExactly(prometheus::Family<prometheus::Gauge>& family,
                            std::map<Labels, prometheus::Gauge*>& live,
                            const std::map<Labels, double>& values) {
  for (auto it = live.begin(); it != live.end();) {
    if (values.count(it->first)) {
      ++it;
      continue;
    }
    family.Remove(it->second);
    it = live.erase(it);
  }
  for (const auto& [labels, v] : values) {
    auto it = live.find(labels);
    if (it == live.end()) it = live.emplace(labels, &family.Add(labels)).first;
    it->second->Set(v);
  }
}

void SreMetrics::TopK(prometheus::Family<prometheus::Gauge>& family,
                      std::map<Labels, prometheus::Gauge*>& live, const std::string& name,
                      const std::vector<SreView::Rate>& rates, double SreView::Rate::*field) {
  std::vector<const SreView::Rate*> nonzero;
  for (const auto& r : rates) {
    if (r.*field > 0) nonzero.push_back(&r);
  }
  const size_t keep = std::min(nonzero.size(), top_k_);
  std::partial_sort(nonzero.begin(), nonzero.begin() + static_cast<std::ptrdiff_t>(keep),
                    nonzero.end(), [&](const SreView::Rate* a, const SreView::Rate* b) {
                      if (a->*field != b->*field) return a->*field > b->*field;
                      return std::tie(a->link, a->direction) < std::tie(b->link, b->direction);
                    });
  std::map<Labels, double> values;
  for (size_t i = 0; i < keep; ++i) {
    values[{{"link", nonzero[i]->link}, {"direction", nonzero[i]->direction}}] = nonzero[i]->*field;
  }
  SetExactly(family, live, values);
  dropped_.Add({{"family", name}}).Set(static_cast<double>(nonzero.size() - keep));
}

void SreMetrics::Update(const SreView& v) {
  std::map<Labels, double> modes;
  for (const char* m : {"active", "shadow", "approve"}) modes[{{"mode", m}}] = v.mode == m;
  SetExactly(mode_, mode_live_, modes);

  std::map<Labels, double> in_sync, oos;
  std::map<std::string, double> since;
  double n_in = 0, n_out = 0, n_failing = 0;
  for (const auto& d : v.devices) {
    in_sync[{{"device", d.device}}] = d.in_sync ? 1 : 0;
    if (!d.in_sync) {
      auto it = out_of_sync_since_.find(d.device);
      const double from = it == out_of_sync_since_.end() ? v.now_seconds : it->second;
      since[d.device] = from;
      oos[{{"device", d.device}}] = std::max(0.0, v.now_seconds - from);
    }
    n_in += d.in_sync;
    n_out += !d.in_sync;
    n_failing += d.failing;
    // Every programmed device has the series from 0, so increase() sees the
    // first failure.
    auto& failures = device_apply_failures_.Add({{"device", d.device}});
    uint64_t& seen = failures_seen_[d.device];
    if (d.apply_failures > seen) failures.Increment(static_cast<double>(d.apply_failures - seen));
    seen = std::max(seen, d.apply_failures);
  }
  out_of_sync_since_ = std::move(since);
  SetExactly(device_in_sync_, in_sync_live_, in_sync);
  SetExactly(device_out_of_sync_seconds_, oos_live_, oos);
  devices_by_state_.Add({{"state", "in_sync"}}).Set(n_in);
  devices_by_state_.Add({{"state", "out_of_sync"}}).Set(n_out);
  devices_by_state_.Add({{"state", "failing"}}).Set(n_failing);

  std::map<Labels, double> out, drained, storms;
  for (const auto& l : v.links_out) out[{{"link", l.link}, {"cause", l.cause}}] = 1;
  for (const auto& d : v.drains) drained[{{"link", d.link}}] = d.seconds;
  for (const auto& s : v.storms) {
    storms[{{"port", s.port}, {"quarantined", s.quarantined ? "true" : "false"}}] = 1;
  }
  SetExactly(link_out_, link_out_live_, out);
  SetExactly(drained_seconds_, drained_live_, drained);
  SetExactly(storm_origin_, storm_live_, storms);

  double paused = 0, ecn = 0, cnp = 0;
  for (const auto& r : v.rates) {
    paused += r.fabric && r.pfc_pause_ratio >= kPausedRatio;
    ecn += r.ecn_marked_pps;
    cnp += r.cnp_pps;
  }
  paused_fabric_.Set(paused);
  fabric_ecn_.Set(ecn);
  fabric_cnp_.Set(cnp);
  TopK(link_ecn_, ecn_live_, "loom_link_ecn_marked_pps", v.rates, &SreView::Rate::ecn_marked_pps);
  TopK(link_cnp_, cnp_live_, "loom_link_cnp_pps", v.rates, &SreView::Rate::cnp_pps);
  TopK(link_pause_, pause_live_, "loom_link_pfc_pause_ratio", v.rates,
       &SreView::Rate::pfc_pause_ratio);
  dropped_.Add({{"family", "loom_link_utilization"}})
      .Set(static_cast<double>(v.link_utilization_dropped));
  std::map<Labels, double> jobs;
  for (const auto& j : v.jobs) jobs[{{"job_id", j.job_id}, {"tenant", j.tenant}}] = j.slowdown;
  SetExactly(job_slowdown_, job_live_, jobs);
  dropped_.Add({{"family", "loom_job_fabric_slowdown"}}).Set(static_cast<double>(v.jobs_left_out));
  if (v.link_utilization_dropped > 0 && !utilization_cap_logged_) {
    LOG_WARN("loom_link_utilization is capped: some link directions have no series")
        .With("left_out", v.link_utilization_dropped)
        .With("see", "loom_metric_series_dropped{family=\"loom_link_utilization\"}");
  }
  utilization_cap_logged_ = v.link_utilization_dropped > 0;
}

}  // namespace loom::controller
