// TrafficMeter: each job's NIC-to-NIC traffic matrix as the fabric measures it.
//
// Role: the demand model's correction. Placement plans with a prior (the job's
// stated traffic matrix, else its collective pattern, demand.h); the NICs report
// what they send to each destination NIC (the telemetry catalogue's
// loom:/nic/.../roce/peers/peer[nic]/state/tx-octets, the per-destination sum of
// the NIC's per-QP counters). TrafficMeter attributes those rates to jobs,
// accumulates them over the snapshots in which the job is sending, and says when
// the measured matrix disagrees with the one the job is placed with.
//
// Attribution: a (NIC, destination NIC) rate belongs to the one job that has both
// NICs; pairs two jobs share, or no job has, are ignored.
// Rates say how much the network gave a flow, not how much the job wanted (two
// flows on one link get half each), so what is compared is where each source NIC's
// bytes go: its row of the matrix scaled to sum 1.
// Decision rule (hysteresis): a job is judged once it has `min_samples` snapshots
// with traffic since its last verdict (or registration) and at least
// `min_coverage` of the sources of its in-use matrix were seen sending; it is re-placed when the
// total-variation distance between the measured and in-use rows of the sources
// that sent (each row weighing the same: the share of the job's bytes that would
// have to move to other NIC pairs) is at least `min_distance`. The new matrix is
// the measured rows, plus the in-use rows of sources not seen sending. After a verdict, or a
// judgement that found them close, the job's accumulator restarts: one verdict needs fresh
// evidence, and a matrix that matches what is in use never moves anything.
//
// Pure, single-threaded (the controller strand). O(rates + jobs' NICs) per
// Observe, O(pairs) per Judge.
#ifndef LOOM_CONTROLLER_TE_TRAFFIC_METER_H_
#define LOOM_CONTROLLER_TE_TRAFFIC_METER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "controller/te/demand.h"

namespace loom::te {

struct TrafficMeterOptions {
  // Snapshots with traffic a job needs before it is judged.
  int min_samples = 2;
  // Total-variation distance (0..1) at which the measured matrix replaces the one in use.
  double min_distance = 0.3;
  // Share of the in-use matrix's sources that must have been seen sending before a
  // judgement (waived after 4 x min_samples samples).
  double min_coverage = 0.9;
};

struct TrafficVerdict {
  std::string job_id;
  // The new matrix, by (src, dst) NIC id: each source's shares per destination
  // (rows sum to 1; demand.h scales them to line rate).
  std::vector<NicDemand> measured;
  double distance = 0;  // total variation vs the matrix in use
  int samples = 0;
  // One line for the event: how far apart and where the bytes really go.
  std::string why;
};

class TrafficMeter {
 public:
  explicit TrafficMeter(TrafficMeterOptions options = {}) : options_(options) {}

  // One snapshot: `rates` are (NIC, destination NIC, b/s) of fresh counters,
  // `job_nics` every job's NIC ids.
  void Observe(const std::vector<NicDemand>& rates,
               const std::map<std::string, std::vector<std::string>>& job_nics);
  // Judges the jobs with enough samples against the matrix each is placed with
  // (`in_use`, NIC-to-NIC rates at any scale). Returns the ones to re-place;
  // `confirmed` (optional) receives the jobs judged close to it.
  std::vector<TrafficVerdict> Judge(
      const std::function<std::vector<NicDemand>(const std::string&)>& in_use,
      std::vector<std::string>* confirmed = nullptr);
  // The job was released or changed: drop what was measured.
  void Forget(const std::string& job_id) { jobs_.erase(job_id); }
  int samples(const std::string& job_id) const;

 private:
  struct Acc {
    std::map<std::pair<std::string, std::string>, double> sum;  // b/s summed over samples
    int samples = 0;
  };
  TrafficMeterOptions options_;
  std::map<std::string, Acc> jobs_;
};

// Total-variation distance between two matrices' shapes (each normalized to sum 1);
// 1 when exactly one of them is empty or zero, 0 when both are.
double TrafficDistance(const std::vector<NicDemand>& a, const std::vector<NicDemand>& b);

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_TRAFFIC_METER_H_
