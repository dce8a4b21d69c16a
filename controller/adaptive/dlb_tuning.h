// DLB tuning: a leaf's DLB mode and flowlet inactivity timer from the traffic
// of the jobs on that leaf.
//
// What it computes. The flowlet timer must sit between two bounds:
//   lower = max(skew_factor x path_delay_skew,      (a shorter gap may let the
//               spacing_factor x max intra-burst     next packet overtake the
//               packet spacing, floor_ns)            previous one on a faster
//                                                    path, or split a burst)
//   upper = min over flowlet jobs of gap_fraction x quantile(gap_quantile) of
//           the job's observed inter-burst gaps, and ceiling_ns
//           (a longer timer never sees a gap: static hashing in disguise)
// path_delay_skew is the largest difference of path latencies between the
// leaf's ECMP members; it bounds how far a re-pathed packet can overtake.
// When lower <= upper the timer is the geometric mean sqrt(lower x upper)
// (the middle on a log scale: a factor of margin on both sides), rounded
// to granularity_ns and clamped into [lower, upper]; mode FLOWLET.
// When lower > upper no timer is safe and useful: mode STATIC.
// Jobs with no gap observations do not bound the timer; with none at all the
// platform default (256 us) is used if it is >= lower, else lower.
// Spraying: jobs that policy marks reorder-tolerant (spray_eligible) are
// listed in spray_jobs for selective spraying (SprayRule) and do not bound
// the timer (their traffic is sprayed, not flowlet-switched); the leaf mode
// is PER_PACKET only when every job on the leaf is spray-eligible. Every
// decision carries a reason with the numbers.
//
// Complexity: O(sum over jobs of g log g) for g gap samples per job.
// Assumptions: gaps and spacings in ns from the emulator or NIC/switch
// telemetry, measured over a representative window (a few iterations).
// Pure: no I/O, no clock, no threads.
#ifndef LOOM_CONTROLLER_ADAPTIVE_DLB_TUNING_H_
#define LOOM_CONTROLLER_ADAPTIVE_DLB_TUNING_H_

#include <string>
#include <vector>

#include "common/clock.h"
#include "loom/v1/device_state.pb.h"

namespace loom::adaptive {

struct DlbJobTraffic {
  std::string job_id;
  // Observed idle gaps between bursts (or the iteration's compute gap).
  std::vector<TimeNs> burst_gaps_ns;
  // Largest packet spacing inside a burst.
  TimeNs max_intra_burst_gap_ns = 0;
  // Policy marks the job's traffic reorder-tolerant.
  bool spray_eligible = false;
};

struct DlbLeafInput {
  std::string leaf;
  std::vector<DlbJobTraffic> jobs;
  TimeNs path_delay_skew_ns = 0;
};

struct DlbTuningParams {
  double skew_factor = 2.0;
  double spacing_factor = 2.0;
  TimeNs floor_ns = 2 * kNsPerUs;
  TimeNs ceiling_ns = 16 * kNsPerMs;  // Largest timer the hardware takes.
  double gap_fraction = 0.5;
  double gap_quantile = 0.1;  // 0 = the smallest gap.
  TimeNs default_ns = 256 * kNsPerUs;
  TimeNs granularity_ns = kNsPerUs;
};

// Returns "" when valid, else the offending field and why.
std::string ValidateDlbTuningParams(const DlbTuningParams& p);

struct DlbDecision {
  std::string leaf;
  loom::v1::DlbProfile profile;  // mode and inactivity_interval_ns (0 when STATIC).
  TimeNs lower_bound_ns = 0;
  TimeNs upper_bound_ns = -1;  // -1: nothing bounds it but the ceiling.
  std::string bounding_job;    // Job whose gaps set the upper bound.
  std::vector<std::string> spray_jobs;
  std::string reason;
};

DlbDecision TuneDlb(const DlbLeafInput& leaf, const DlbTuningParams& params);

// Nearest-rank quantile q in [0, 1] of `samples` (0 when empty).
TimeNs GapQuantile(std::vector<TimeNs> samples, double q);

}  // namespace loom::adaptive

#endif  // LOOM_CONTROLLER_ADAPTIVE_DLB_TUNING_H_
