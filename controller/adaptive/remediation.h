// Remediation decisions: which links leave placement, which lose GLB weight,
// which NIC ports are reported or quarantined — each with cause -> action.
//
// What it computes, per link direction (first matching rule wins for the
// link's own fate; a NIC-facing PFC storm adds its NIC actions):
//   oper DOWN                         -> remove from placement
//   dampening suppressed (flapping)   -> remove from placement
//   errors_pps >= error_pps_threshold
//     or errors/tx_pps >= error_ratio_threshold (fresh telemetry only)
//                                     -> remove from placement
//   live capacity < nominal x (1 - capacity_loss_threshold) (an ON_CHANGE
//     value: acted on from the first notification, stale or not)
//                                     -> lower GLB weight (factor live/nominal;
//                                        remove when no capacity is left)
//   (stale telemetry: no further rule acts — never act on stale rates)
//   utilization >= hotspot_utilization on each of the last
//     hotspot_snapshots snapshots     -> lower GLB weight (hotspot_weight_factor)
//   PFC watchdog stormed or pause ratio >= pause_ratio_threshold:
//     NIC-facing (leaf -> NIC; the NIC sends the pauses)
//                                     -> report the NIC port, and quarantine it
//                                        only when allow_quarantine
//     fabric link                     -> lower GLB weight (hotspot_weight_factor)
// Output is ordered as the input links, actions of one link in rule order.
//
// Complexity O(links x K). Pure: no I/O, no clock, no threads. The caller
// turns actions into re-placement, GLB overrides, events and metrics.
#ifndef LOOM_CONTROLLER_ADAPTIVE_REMEDIATION_H_
#define LOOM_CONTROLLER_ADAPTIVE_REMEDIATION_H_

#include <string>
#include <vector>

#include "telemetry/link_state.h"

namespace loom::adaptive {

struct RemediationParams {
  double error_pps_threshold = 100;
  double error_ratio_threshold = 1e-5;
  double capacity_loss_threshold = 0.25;
  double hotspot_utilization = 0.9;
  int hotspot_snapshots = 3;
  double hotspot_weight_factor = 0.5;
  double pause_ratio_threshold = 0.2;
  bool allow_quarantine = false;  // Policy: may Loom shut a storming NIC port?
};

// One link direction as remediation sees it.
struct RemediationLink {
  std::string link_id;
  std::string tx_device;
  std::string rx_device;
  bool nic_facing = false;  // rx_device is a NIC (leaf -> NIC direction).
  telemetry::OperStatus oper = telemetry::OperStatus::kUnknown;
  bool stale = false;
  bool dampened = false;  // Flap dampening suppresses the link.
  double tx_pps = 0;
  double errors_pps = 0;
  double nominal_capacity_bps = 0;
  double live_capacity_bps = 0;             // 0 with nominal > 0: no capacity left.
  std::vector<double> utilization_history;  // Oldest first.
  bool pfc_stormed = false;
  double pfc_pause_ratio = 0;
};

enum class RemediationKind {
  kRemoveFromPlacement,
  kLowerGlbWeight,
  kReportNicPort,
  kQuarantineNicPort,
};

const char* RemediationKindName(RemediationKind k);

// Which rule fired.
enum class RemediationCause { kOperDown, kFlapping, kErrors, kCapacityLoss, kHotspot, kPfcStorm };

struct RemediationAction {
  RemediationKind kind = RemediationKind::kRemoveFromPlacement;
  RemediationCause rule = RemediationCause::kOperDown;
  std::string link_id;
  std::string target;          // The link, or the NIC for NIC actions.
  double weight_factor = 1.0;  // kLowerGlbWeight: multiply the link's GLB weight by this.
  std::string cause;
  std::string action;
  std::string Text() const { return cause + " -> " + action; }
};

std::vector<RemediationAction> DecideRemediation(const std::vector<RemediationLink>& links,
                                                 const RemediationParams& params);

// Fills a RemediationLink from telemetry (nominal and live capacity =
// state.capacity_bps unless `live_capacity_bps` >= 0 is given).
RemediationLink RemediationLinkFromState(const telemetry::LinkDirectionState& state, bool rx_is_nic,
                                         std::vector<double> utilization_history, bool dampened,
                                         double live_capacity_bps = -1);

}  // namespace loom::adaptive

#endif  // LOOM_CONTROLLER_ADAPTIVE_REMEDIATION_H_
