#include "controller/adaptive/remediation.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace loom::adaptive {
namespace {

std::string Num(const char* fmt, double x) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), fmt, x);
  return buf;
}

}  // namespace

const char* RemediationKindName(RemediationKind k) {
  switch (k) {
    case RemediationKind::kRemoveFromPlacement:
      return "remove_from_placement";
    case RemediationKind::kLowerGlbWeight:
      return "lower_glb_weight";
    case RemediationKind::kReportNicPort:
      return "report_nic_port";
    case RemediationKind::kQuarantineNicPort:
      return "quarantine_nic_port";
  }
  return "unknown";
}

std::vector<RemediationAction> DecideRemediation(const std::vector<RemediationLink>& links,
                                                 const RemediationParams& params) {
  std::vector<RemediationAction> out;
  for (const RemediationLink& l : links) {
    const std::string dir = l.link_id + " (" + l.tx_device + " -> " + l.rx_device + ")";
    RemediationCause why = RemediationCause::kOperDown;
    auto add = [&](RemediationKind kind, const std::string& target, double factor,
                   const std::string& cause, const std::string& action) {
      out.push_back({kind, why, l.link_id, target, factor, cause, action});
    };
    auto remove = [&](const std::string& cause) {
      add(RemediationKind::kRemoveFromPlacement, l.link_id, 0.0, cause,
          "take " + l.link_id +
              " out of placement; affected traffic moves to backup or is "
              "re-placed");
    };
    if (l.oper == telemetry::OperStatus::kDown) {
      why = RemediationCause::kOperDown;
      remove("link " + dir + " oper down");
      continue;
    }
    if (l.dampened) {
      why = RemediationCause::kFlapping;
      remove("link " + dir + " flapping (suppressed by dampening)");
      continue;
    }
    const double ratio = l.tx_pps > 0 ? l.errors_pps / l.tx_pps : 0;
    if (!l.stale && l.errors_pps > 0 &&
        (l.errors_pps >= params.error_pps_threshold ||
         (l.tx_pps > 0 && ratio >= params.error_ratio_threshold))) {
      why = RemediationCause::kErrors;
      remove("link " + dir + " degraded: " + Num("%.0f", l.errors_pps) + " errors/s (ratio " +
             Num("%.2g", ratio) + ")");
      continue;
    }
    bool lowered = false;
    if (l.nominal_capacity_bps > 0 &&
        l.live_capacity_bps < l.nominal_capacity_bps * (1 - params.capacity_loss_threshold)) {
      const double factor = l.live_capacity_bps / l.nominal_capacity_bps;
      why = RemediationCause::kCapacityLoss;
      const std::string cause = "link " + dir +
                                " lost capacity: " + Num("%.0fG", l.live_capacity_bps / 1e9) +
                                " of " + Num("%.0fG", l.nominal_capacity_bps / 1e9);
      if (factor <= 0) {
        remove(cause);
        continue;
      }
      add(RemediationKind::kLowerGlbWeight, l.link_id, factor, cause,
          "lower the GLB weight of " + l.link_id + " to " + Num("%.0f%%", factor * 100) +
              " of its capacity share");
      lowered = true;
    }
    // Rates need fresh samples; the live capacity is an ON_CHANGE value, valid
    // from the first notification on (a link that comes up degraded is seen
    // before its first counter rate).
    if (l.stale) continue;
    const size_t k = static_cast<size_t>(std::max(1, params.hotspot_snapshots));
    if (!lowered && l.utilization_history.size() >= k) {
      bool hot = true;
      for (size_t i = l.utilization_history.size() - k; i < l.utilization_history.size(); ++i) {
        if (!(l.utilization_history[i] >= params.hotspot_utilization)) hot = false;
      }
      if (hot) {
        why = RemediationCause::kHotspot;
        add(RemediationKind::kLowerGlbWeight, l.link_id, params.hotspot_weight_factor,
            "link " + dir + " sustained congestion hotspot: utilization >= " +
                Num("%.0f%%", params.hotspot_utilization * 100) + " for " + std::to_string(k) +
                " snapshots",
            "lower the GLB weight of " + l.link_id + " by factor " +
                Num("%.2f", params.hotspot_weight_factor));
        lowered = true;
      }
    }
    const bool storm = l.pfc_stormed || l.pfc_pause_ratio >= params.pause_ratio_threshold;
    if (!storm) continue;
    why = RemediationCause::kPfcStorm;
    const std::string storm_cause =
        std::string(l.pfc_stormed ? "PFC watchdog stormed" : "PFC pause storm") + " on " + dir +
        " (pause ratio " + Num("%.2f", l.pfc_pause_ratio) + ")";
    if (l.nic_facing) {
      add(RemediationKind::kReportNicPort, l.rx_device, 1.0, storm_cause,
          "report NIC port " + l.rx_device + " as the pause source");
      if (params.allow_quarantine) {
        add(RemediationKind::kQuarantineNicPort, l.rx_device, 1.0, storm_cause,
            "quarantine NIC port " + l.rx_device + " (policy allows)");
      }
    } else if (!lowered) {
      add(RemediationKind::kLowerGlbWeight, l.link_id, params.hotspot_weight_factor, storm_cause,
          "lower the GLB weight of " + l.link_id + " by factor " +
              Num("%.2f", params.hotspot_weight_factor));
    }
  }
  return out;
}

RemediationLink RemediationLinkFromState(const telemetry::LinkDirectionState& s, bool rx_is_nic,
                                         std::vector<double> utilization_history, bool dampened,
                                         double live_capacity_bps) {
  RemediationLink l;
  if (s.link_id) l.link_id = *s.link_id;
  if (s.tx_device) l.tx_device = *s.tx_device;
  if (s.rx_device) l.rx_device = *s.rx_device;
  l.nic_facing = rx_is_nic;
  l.oper = s.oper;
  l.stale = s.stale;
  l.dampened = dampened;
  l.tx_pps = s.tx_pps;
  l.errors_pps = s.errors_pps;
  l.nominal_capacity_bps = static_cast<double>(s.capacity_bps);
  l.live_capacity_bps = live_capacity_bps >= 0 ? live_capacity_bps : l.nominal_capacity_bps;
  l.utilization_history = std::move(utilization_history);
  l.pfc_stormed = s.pfc_stormed;
  l.pfc_pause_ratio = s.pfc_pause_ratio;
  return l;
}

}  // namespace loom::adaptive
