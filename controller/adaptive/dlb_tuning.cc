#include "controller/adaptive/dlb_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loom::adaptive {
namespace {

std::string Us(TimeNs ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f us", static_cast<double>(ns) / kNsPerUs);
  return buf;
}

std::string G(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

}  // namespace

std::string ValidateDlbTuningParams(const DlbTuningParams& p) {
  if (!(p.skew_factor >= 1)) return "skew_factor: must be >= 1";
  if (!(p.spacing_factor >= 1)) return "spacing_factor: must be >= 1";
  if (p.floor_ns <= 0) return "floor_ns: must be > 0";
  if (p.ceiling_ns < p.floor_ns) return "ceiling_ns: must be >= floor_ns";
  if (!(p.gap_fraction > 0 && p.gap_fraction <= 1)) return "gap_fraction: must be in (0, 1]";
  if (!(p.gap_quantile >= 0 && p.gap_quantile <= 1)) return "gap_quantile: must be in [0, 1]";
  if (p.default_ns <= 0) return "default_ns: must be > 0";
  if (p.granularity_ns <= 0) return "granularity_ns: must be > 0";
  return "";
}

TimeNs GapQuantile(std::vector<TimeNs> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  return samples[static_cast<size_t>(std::floor(pos))];
}

DlbDecision TuneDlb(const DlbLeafInput& leaf, const DlbTuningParams& params) {
  DlbDecision d;
  d.leaf = leaf.leaf;

  // Lower bound: reordering and burst splitting.
  const TimeNs by_skew = static_cast<TimeNs>(
      std::ceil(params.skew_factor * std::max<TimeNs>(0, leaf.path_delay_skew_ns)));
  TimeNs spacing = 0;
  int flowlet_jobs = 0;
  for (const DlbJobTraffic& j : leaf.jobs) {
    if (j.spray_eligible) {
      d.spray_jobs.push_back(j.job_id);
      continue;
    }
    ++flowlet_jobs;
    spacing = std::max(spacing, j.max_intra_burst_gap_ns);
  }
  const TimeNs by_spacing = static_cast<TimeNs>(std::ceil(params.spacing_factor * spacing));
  d.lower_bound_ns = std::max({by_skew, by_spacing, params.floor_ns});
  const std::string lower_why = "lower " + Us(d.lower_bound_ns) + " = max(" +
                                G(params.skew_factor) + " x skew " + Us(leaf.path_delay_skew_ns) +
                                ", " + G(params.spacing_factor) + " x burst spacing " +
                                Us(spacing) + ", floor " + Us(params.floor_ns) + ")";

  // Upper bound: the gaps of flowlet-switched jobs.
  for (const DlbJobTraffic& j : leaf.jobs) {
    if (j.spray_eligible || j.burst_gaps_ns.empty()) continue;
    const TimeNs g = GapQuantile(j.burst_gaps_ns, params.gap_quantile);
    const TimeNs u = static_cast<TimeNs>(std::floor(params.gap_fraction * static_cast<double>(g)));
    if (d.upper_bound_ns < 0 || u < d.upper_bound_ns) {
      d.upper_bound_ns = u;
      d.bounding_job = j.job_id;
    }
  }
  std::string spray_why;
  if (!d.spray_jobs.empty()) {
    spray_why = "; selective spraying for reorder-tolerant job(s)";
    for (const auto& j : d.spray_jobs) spray_why += " " + j;
  }

  // Every job reorder-tolerant: spray everything.
  if (!leaf.jobs.empty() && flowlet_jobs == 0) {
    d.profile.set_mode(loom::v1::DLB_MODE_PER_PACKET);
    d.profile.set_inactivity_interval_ns(
        static_cast<uint64_t>(std::max(params.default_ns, d.lower_bound_ns)));
    d.reason = "every job on " + leaf.leaf + " is reorder-tolerant (policy): per-packet spraying" +
               spray_why;
    return d;
  }

  TimeNs upper =
      std::min(params.ceiling_ns, d.upper_bound_ns < 0 ? params.ceiling_ns : d.upper_bound_ns);
  std::string upper_why;
  if (d.upper_bound_ns < 0) {
    upper_why = "no burst gaps observed, ceiling " + Us(params.ceiling_ns);
  } else {
    upper_why = "upper " + Us(upper) + " = " + G(params.gap_fraction) + " x gap of job " +
                d.bounding_job + " (quantile " + G(params.gap_quantile) + ")";
    if (upper < d.upper_bound_ns) upper_why += ", capped by the ceiling " + Us(params.ceiling_ns);
  }

  if (d.lower_bound_ns > upper) {
    d.profile.set_mode(loom::v1::DLB_MODE_STATIC);
    d.profile.set_inactivity_interval_ns(0);
    d.reason = "no valid flowlet timer on " + leaf.leaf + ": " + lower_why + " > " + upper_why +
               " (gaps too short to re-path without reordering): static hashing" + spray_why;
    return d;
  }

  TimeNs timer;
  std::string how;
  if (d.upper_bound_ns < 0) {
    timer = params.default_ns >= d.lower_bound_ns && params.default_ns <= upper ? params.default_ns
                                                                                : d.lower_bound_ns;
    how = timer == params.default_ns ? "platform default" : "lower bound";
  } else {
    const double mid =
        std::sqrt(static_cast<double>(d.lower_bound_ns) * static_cast<double>(upper));
    timer = static_cast<TimeNs>(std::llround(mid / params.granularity_ns)) * params.granularity_ns;
    how = "geometric mean of the bounds";
  }
  timer = std::clamp(timer, d.lower_bound_ns, upper);
  d.profile.set_mode(loom::v1::DLB_MODE_FLOWLET);
  d.profile.set_inactivity_interval_ns(static_cast<uint64_t>(timer));
  d.reason = "flowlet timer " + Us(timer) + " on " + leaf.leaf + " (" + how + "): " + lower_why +
             ", " + upper_why + spray_why;
  return d;
}

}  // namespace loom::adaptive
