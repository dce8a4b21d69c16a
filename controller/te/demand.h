// Demand model: what a job's collective sends where, as NIC-to-NIC rates.
//
// From a job's endpoints (resolved to NICs), its collective pattern and the
// NICs' line rates, builds the steady-state rates each NIC sends to each
// other NIC while the collective runs (bits/s). Endpoints on the same host
// talk over NVLink/PCIe and put nothing on the fabric; endpoints sharing a
// NIC are merged. Measured telemetry refines the model through `scale`
// (measured / modelled rate of the job). Pure; O(N^2) for all-to-all, O(N)
// for ring-like patterns, N = endpoints.
#ifndef LOOM_CONTROLLER_TE_DEMAND_H_
#define LOOM_CONTROLLER_TE_DEMAND_H_

#include <string>
#include <vector>

#include "api/topology/topology_index.h"
#include "loom/v1/job.pb.h"

namespace loom::te {

struct NicDemand {
  std::string src_nic;
  std::string dst_nic;
  double rate_bps = 0;
};

// Patterns:
//   ring all-reduce / all-gather / reduce-scatter: endpoint i sends to i+1
//     (in the job's endpoint order) at line rate;
//   tree all-reduce: a binary tree over the endpoint order, each edge both
//     ways at half line rate (two trees share the NIC, as NCCL's double tree);
//   all-to-all and unspecified: each sends line_rate/(N-1) to every other;
//   incast: every endpoint sends line_rate/(N-1) to endpoints[0];
//   permutation: i sends to (i + N/2) mod N at line rate;
//   point-to-point: endpoint 2i sends to 2i+1 at line rate (pairs).
std::vector<NicDemand> JobDemand(const loom::v1::Job& job,
                                 const loom::topology::TopologyIndex& topo, double scale = 1.0);

// Line rate of a NIC: its own line_rate_bps, else the capacity of its link.
double NicLineRate(const loom::topology::TopologyIndex& topo, const std::string& nic);

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_DEMAND_H_
