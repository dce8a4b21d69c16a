// Collective workloads as sets of gated point-to-point transfers.
//
// A collective of n ranks becomes transfers (src rank -> dst rank, bytes). Data
// dependencies are expressed as gates: a gated transfer may have sent at most
//   base + min over its gates of (bytes delivered by that gate transfer)
// so a ring step forwards what it has received (fluid pipelining of the
// algorithm's chunks). Pure functions; thread-compatible.
#ifndef LOOM_SIM_FABRIC_WORKLOAD_H_
#define LOOM_SIM_FABRIC_WORKLOAD_H_

#include <cstdint>
#include <vector>

#include "sim-fabric/types.h"

namespace loom::sim {

struct TransferTemplate {
  int src = 0, dst = 0;  // rank indexes
  double bytes = 0;
  double base = 0;
  std::vector<int> gates;  // indexes of transfers in the same collective
};

// Ring all-reduce (reduce-scatter + all-gather, 2(n-1) steps of S/n per rank),
// binary-tree all-reduce (reduce up, broadcast down, S per edge each way),
// ring all-gather / reduce-scatter ((n-1) steps of S/n), all-to-all (S/n to every
// other rank), incast (ranks 1.. send S to rank 0), permutation (a seeded random
// cyclic permutation, S each), point-to-point (rank 2i sends S to rank 2i+1).
std::vector<TransferTemplate> BuildCollective(Collective c, int ranks, double message_bytes,
                                              uint64_t seed);

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_WORKLOAD_H_
