// Protection capacity: backup paths with room for the traffic a failed link sheds.
//
// Model. A unit's colored routes carry a backup top (BGP-DPF backup color): when a
// leaf loses its link to the unit's primary top t (or t loses its link to the
// destination's leaf), the switch moves the unit's traffic from that leaf (from every
// leaf, for the downlink) to the backup top at once, long before the controller can
// re-place anything. If the backup path is full, the shed traffic collides there, ECN
// marks it and DCQCN cuts every flow on the link; at 400G a cut flow needs hundreds of
// milliseconds to regain its rate, so a failover collision of a millisecond can cost a
// job far more. Protection chooses, for every single-link failure of a 2-tier fabric,
// backups whose edges can take what the failure sheds onto them:
//   deficit = sum over failures f, over edges e a failover of f loads, of
//             max(0, load(e) + shed_f(e) - capacity(e))
// (load = the normal placement's, shed_f = what f's displaced (unit, source leaf) pairs
// add on their backups' edges: the source's uplink to the backup top and the backup
// top's downlink to the destination's leaf). Contributions below 5 % of the link they
// would fail over from are left out: they fit in any headroom, and leaving them out
// keeps the model as large as the elephants, not as the pairs. Units with none are not
// covered (backup -1: the caller picks those).
//
// Algorithm. (1) Backups, greedily in decreasing unit demand: each unit takes the
// allowed live top (not its primary) that adds the least deficit over the unit's own
// failures (its sources' uplinks and its destination's downlink to the primary), ties
// by the worst post-failure utilization it creates, then by the least loaded downlink;
// tops are scanned in a per-unit rotation and the first that adds no overload and stays
// within the ceiling ends the scan.
// (2) Room: while the deficit is positive, the edge with the largest post-failure
// overload names the units that load it in normal operation (the 16 that load it
// most); each movable one is tried on every other top where no edge of its path goes
// above the lower of `ceiling` and the normal maximum utilization (or above the busiest
// edge of the path it leaves, when that is higher): the fabric maximum never rises. The
// move that lowers the deficit most (the other backups kept) is made, backups are
// recomputed, and the loop goes on until nothing lowers it, or `max_trials`, or
// `max_trial_work` pair evaluations.
//
// Complexity: (1) is O(P * K) for P (unit, source leaf) pairs and K tops; (2) is
// O(trials * P log P). (2) is skipped above `max_pairs` pairs and (1) above
// `max_backup_work` = P * K; callers then keep their own backups.
// Assumptions: 2-tier fabric (leaf -> top -> leaf paths); one link fails at a time;
// the normal load on the failed primary's other edge is left in place (conservative).
// Pure: no I/O, no clock, no threads; deterministic.
#ifndef LOOM_CONTROLLER_TE_PROTECTION_H_
#define LOOM_CONTROLLER_TE_PROTECTION_H_

#include <cstddef>
#include <vector>

#include "controller/te/path_engine.h"

namespace loom::te {

struct ProtectionParams {
  // Normal-operation utilization a protection move may raise an edge to, when the
  // normal maximum is higher (else the normal maximum; the busiest edge of the moved
  // unit's current path, when that is higher still): protection never raises the
  // placement's objective, the fabric maximum utilization.
  double ceiling = 0.9;
  int max_trials = 4000;
  double max_trial_work = 5e6;  // trials x pairs (a trial sorts ~4 entries per pair)
  // Room-making moves at all (a full recompute; an incremental placement only picks
  // backups).
  bool allow_moves = true;
  size_t max_pairs = 40000;
  double max_backup_work = 2e7;
};

struct ProtectionResult {
  bool computed = false;         // false: skipped (3-tier, too large, or nothing placed)
  std::vector<int> backup;       // per unit (-1: none, or not covered)
  std::vector<int> top;          // per unit, after room-making moves
  std::vector<char> moved;       // per unit: moved to make room for a failover
  double deficit_before = 0;     // summed post-failure overload, bits/s, before moves
  double deficit_after = 0;      // ... after
  double worst_utilization = 0;  // worst post-failure utilization over single-link failures
  int moves = 0, trials = 0;
};

// `top` = the normal placement (per unit, -1: none); `load` = its per-edge load
// (including traffic of units not passed); `movable` = units the caller lets move.
ProtectionResult Protect(const FabricGraph& g, const std::vector<Unit>& units,
                         const std::vector<int>& top, const std::vector<double>& load,
                         const std::vector<bool>& movable, const ProtectionParams& params);

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_PROTECTION_H_
