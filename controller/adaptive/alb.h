// ALB: adaptive load balancing of one ECMP group's hash-bucket table.
//
// What it computes. Called once per scan for one ECMP group (device,
// destination) with the current bucket table (bucket -> member next hop)
// and each bucket's measured rate; returns the new table, the bucket moves
// with reasons, and the group's small state for the next scan.
//
// The imbalance formula (Nokia's published ALB tolerance, Juniper PTX ALB
// behaves alike):
//
//   imbalance = (rate of busiest member - rate of least busy member)
//               / rate of busiest member                    (0 .. 1)
//
// where a member's rate is the sum of its buckets' rates. Members of unequal
// capacity are compared by utilization (rate / capacity), which is the same
// ratio when capacities are equal. Trigger: imbalance > tolerance on
// `trigger_scans` (2) consecutive scans AND the busiest member's utilization
// >= utilization_floor (30 %). A stale scan, a skipped scan number or one
// scan under the threshold restarts the count.
//
// Rebalancing step (bin packing, greedy). Up to max_moves_per_round times:
// take the busiest member; consider moving each of its movable buckets
// (rate > idle_bucket_bps, not frozen) to every other live member. If some
// move alone brings the group within the target, take the one with the
// fewest bytes that does; otherwise the one that minimizes the resulting
// spread (max - min utilization over all members), fewest bytes on ties.
// When no single move lowers the spread (every bucket of the busiest member
// would overshoot), consider swapping one of its buckets with a lighter
// bucket of another member (counts as two moves), chosen the same way. A
// move or swap must make progress: strictly lower the spread, or keep it
// and strictly lower the sum of squared member utilizations (two members
// tied as busiest: moving from one keeps the spread but evens the load).
// Each move assumes the bucket keeps its rate on its new member.
// Hysteresis: once triggered the group keeps rebalancing scan after scan
// until imbalance <= tolerance - stop_margin (or the floor no longer holds,
// or no move helps); a moved bucket is frozen for freeze_scans scans. Under
// steady load every move strictly lowers (spread, sum of squares), so the process ends
// and never oscillates; idle buckets never fix a rate imbalance, so they are
// not moved by rebalancing.
// Resilient hashing (structural changes, applied at once, not bounded, not
// gated by the trigger, and they end the scan): buckets of a member that is
// down or gone move to the live members — only those buckets, each to the
// live member with the fewest buckets relative to its capacity share; a live
// member with no bucket (added) takes about B x its capacity share, idle
// buckets first, from the members holding the most buckets over their share.
//
// Scan interval: the caller scans every scan_interval_ns (>= 1 s, validated)
// and numbers its scans; `freeze_scans` and the trigger count are in scans.
//
// Complexity: O(B + M) per scan plus O(K x B_m x M) for K moves (B buckets,
// M members, B_m buckets on the busiest member). Pure: no I/O, no clock, no
// threads; deterministic.
#ifndef LOOM_CONTROLLER_ADAPTIVE_ALB_H_
#define LOOM_CONTROLLER_ADAPTIVE_ALB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "telemetry/link_state.h"

namespace loom::adaptive {

struct AlbParams {
  double tolerance = 0.20;          // Fraction, e.g. 0.20 = 20 %.
  int trigger_scans = 2;            // Consecutive scans over tolerance.
  double utilization_floor = 0.30;  // Busiest member utilization needed to act.
  int max_moves_per_round = 4;
  int freeze_scans = 5;
  double stop_margin = 0.05;  // Stop at imbalance <= tolerance - stop_margin.
  double idle_bucket_bps = 1e6;
  TimeNs scan_interval_ns = 30 * kNsPerSec;  // Informational; >= 1 s.
};

// Returns "" when valid, else the offending field and why.
std::string ValidateAlbParams(const AlbParams& p);

struct AlbMember {
  std::string next_hop;
  double capacity_bps = 0;  // Must be > 0 for a live member.
  bool up = true;
};

struct AlbInput {
  std::string group;
  int64_t scan = 0;                  // Consecutive scans differ by 1.
  std::vector<std::string> buckets;  // bucket -> member next hop.
  std::vector<double> bucket_bps;    // Same size as buckets.
  std::vector<bool> bucket_stale;    // Empty = all fresh.
  std::vector<AlbMember> members;
};

// Carried by the caller from one scan to the next (one per group).
struct AlbGroupState {
  int64_t last_scan = -1;
  int over_scans = 0;
  bool rebalancing = false;
  std::vector<int64_t> frozen_until;  // Per bucket: first scan it may move again.
  int64_t moves_total = 0;
};

struct AlbMove {
  uint32_t bucket = 0;
  std::string from;
  std::string to;
  double bps = 0;
  std::string reason;
};

struct AlbResult {
  std::vector<std::string> buckets;  // The new table.
  std::vector<AlbMove> moves;
  double imbalance = 0;            // This scan, by the formula.
  double projected_imbalance = 0;  // After the moves, rates unchanged.
  double busiest_utilization = 0;
  std::string busiest;
  std::string least_busy;
  bool triggered = false;  // Rebalancing was active this scan.
  std::string reason;      // What this scan decided and why.
  AlbGroupState state;     // Pass to the next scan.
};

AlbResult AlbScan(const AlbInput& input, const AlbGroupState& previous, const AlbParams& params);

// The formula above over member loads (all >= 0); 0 when the busiest is 0.
double AlbImbalance(const std::vector<double>& member_loads);

// Per-bucket rates of (device, group) from telemetry, in bucket order;
// buckets with no telemetry row are stale with rate 0. O(rows).
void AlbRatesFromTelemetry(const std::vector<telemetry::AlbBucketState>& rows,
                           const std::string& device, const std::string& group, size_t bucket_count,
                           std::vector<double>* bucket_bps, std::vector<bool>* bucket_stale);

}  // namespace loom::adaptive

#endif  // LOOM_CONTROLLER_ADAPTIVE_ALB_H_
