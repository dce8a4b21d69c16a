// Metrics for SREs: the series the alert rules in deploy/prometheus/ fire on and
// the dashboards in deploy/grafana/ draw (docs/metrics.md lists every family,
// its labels and what it costs in series).
//
// SreMetrics owns the families; the controller fills an SreView on its strand
// (Controller::ExportSreMetrics, at most once a second) and hands it to
// Update(), which sets the gauges, advances the counters by what changed and
// removes series whose subject is gone (a link back in placement, a storm
// that stopped), so a family's size follows the fabric's problems, not its
// history. Per-link rate families keep only the top_k directions by value;
// what they leave out is counted in loom_metric_series_dropped{family}.
//
// Threads: Update() on one thread at a time (the strand); prometheus-cpp's
// metrics are scraped concurrently and are thread-safe.
#ifndef LOOM_CONTROLLER_CORE_SRE_METRICS_H_
#define LOOM_CONTROLLER_CORE_SRE_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::controller {

struct SreView {
  // "active", "shadow" (the reconciler computes but gives nothing), or
  // "approve" (change safety holds changes for approval).
  std::string mode = "active";
  struct Device {
    std::string device;
    bool in_sync = false;
    bool failing = false;         // The last apply failed.
    uint64_t apply_failures = 0;  // Cumulative.
  };
  std::vector<Device> devices;  // Devices a driver programs.
  double now_seconds = 0;       // The controller's clock (out-of-sync durations).
  struct LinkOut {
    std::string link;
    std::string cause;  // oper_down, flapping, errors, capacity_loss, drained, other
  };
  std::vector<LinkOut> links_out;  // Links out of placement.
  struct Drain {
    std::string link;
    double seconds = 0;
  };
  std::vector<Drain> drains;
  struct Storm {
    std::string port;  // The NIC port sending the pauses (the origin).
    bool quarantined = false;
  };
  std::vector<Storm> storms;
  // Per link direction rates (switch-to-switch and NIC links).
  struct Rate {
    std::string link;
    std::string direction;  // "up" (a -> b) / "down" (b -> a)
    bool fabric = false;    // Both ends switches.
    double ecn_marked_pps = 0;
    double cnp_pps = 0;
    double pfc_pause_ratio = 0;
  };
  std::vector<Rate> rates;  // Fresh directions only.
  // Jobs whose loom_job_fabric_slowdown is exported: the top-K by slowdown
  // and the opted-in ones (the caller chooses); `jobs_total` = all jobs.
  struct Job {
    std::string job_id;
    std::string tenant;
    double slowdown = 1;
  };
  std::vector<Job> jobs;
  uint64_t jobs_left_out = 0;
  // Series left out of loom_link_utilization (its cap).
  uint64_t link_utilization_dropped = 0;
};

class SreMetrics {
 public:
  // `top_k`: directions kept per rate family (by value, non-zero only).
  SreMetrics(prometheus::Registry& registry, size_t top_k);
  void Update(const SreView& view);

  // A switch-to-switch direction paused at least this share of the time
  // counts in loom_pfc_paused_fabric_directions (pauses that spread past the
  // edge).
  static constexpr double kPausedRatio = 0.05;

 private:
  using Labels = std::map<std::string, std::string>;
  // Sets `family`'s series to exactly `values`, removing the others.
  static void SetExactly(prometheus::Family<prometheus::Gauge>& family,
                         std::map<Labels, prometheus::Gauge*>& live,
                         const std::map<Labels, double>& values);
  void TopK(prometheus::Family<prometheus::Gauge>& family,
            std::map<Labels, prometheus::Gauge*>& live, const std::string& name,
            const std::vector<SreView::Rate>& rates, double SreView::Rate::*field);

  const size_t top_k_;
  prometheus::Family<prometheus::Gauge>& mode_;
  prometheus::Family<prometheus::Gauge>& devices_by_state_;
  prometheus::Family<prometheus::Gauge>& device_in_sync_;
  prometheus::Family<prometheus::Gauge>& device_out_of_sync_seconds_;
  prometheus::Family<prometheus::Counter>& device_apply_failures_;
  prometheus::Family<prometheus::Gauge>& link_out_;
  prometheus::Family<prometheus::Gauge>& drained_seconds_;
  prometheus::Family<prometheus::Gauge>& storm_origin_;
  prometheus::Gauge& paused_fabric_;
  prometheus::Gauge& fabric_ecn_;
  prometheus::Gauge& fabric_cnp_;
  prometheus::Family<prometheus::Gauge>& link_ecn_;
  prometheus::Family<prometheus::Gauge>& link_cnp_;
  prometheus::Family<prometheus::Gauge>& link_pause_;
  prometheus::Family<prometheus::Gauge>& dropped_;
  prometheus::Family<prometheus::Gauge>& job_slowdown_;

  std::map<Labels, prometheus::Gauge*> mode_live_, in_sync_live_, oos_live_, link_out_live_,
      drained_live_, storm_live_, ecn_live_, cnp_live_, pause_live_, job_live_;
  std::map<std::string, uint64_t> failures_seen_;
  std::map<std::string, double> out_of_sync_since_;
  bool utilization_cap_logged_ = false;  // Logged once per episode.
};

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_CORE_SRE_METRICS_H_
