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

#include <cstdint>
#include <string>
#include <unordered_map>
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
// A job's `traffic` matrix (stated by the scheduler), when present, replaces the
// pattern: its weights scaled so the busiest NIC runs at line rate.
std::vector<NicDemand> JobDemand(const loom::v1::Job& job,
                                 const loom::topology::TopologyIndex& topo, double scale = 1.0);

// Endpoints (GPU or NIC ids) resolved to NICs once: per NIC its id, host, line
// rate and rank in id order. Built for a whole topology (Placement keeps one, so
// a job's demand needs one hash lookup per endpoint), or for one job's endpoints.
class EndpointTable {
 public:
  // Every GPU and NIC of the topology: O(GPUs + NICs) lookups, O(NICs log NICs).
  explicit EndpointTable(const loom::topology::TopologyIndex& topo);
  // The endpoints of one job only.
  EndpointTable(const loom::topology::TopologyIndex& topo, const loom::v1::Job& job);

  // NIC index of an endpoint, -1 when it resolves to no NIC.
  int Find(const std::string& endpoint) const;
  int num_nics() const { return static_cast<int>(nic_id_.size()); }
  const std::string& nic_id(int n) const { return nic_id_[static_cast<size_t>(n)]; }
  // Interned host of a NIC (-1: unknown), its line rate, its rank by id.
  int host(int n) const { return host_[static_cast<size_t>(n)]; }
  double line_rate(int n) const { return rate_[static_cast<size_t>(n)]; }
  uint32_t rank(int n) const { return rank_[static_cast<size_t>(n)]; }

 private:
  void Add(const loom::topology::TopologyIndex& topo, const std::string& endpoint);
  void Finish();

  std::unordered_map<std::string, int> endpoint_, nic_index_, host_index_;
  std::vector<std::string> nic_id_;
  std::vector<int> host_;
  std::vector<double> rate_;
  std::vector<uint32_t> rank_;
};

// JobDemand with NICs as indexes: `nics` are the job's distinct NICs (indexes into
// the table) in endpoint order, `pairs` the same NIC-to-NIC rates as JobDemand (bit
// for bit) with src/dst indexing `nics`, ordered by (destination NIC id, source NIC
// id) — what per-destination placement units need, without string keys. O(N + P +
// M log M) for N endpoints, P pairs, M distinct NICs (counting sorts by NIC rank).
//
// Where the rates come from, in this order: `measured` (NIC-to-NIC rates the fabric
// reported, NIC ids; pairs outside the job are ignored), else the job's stated
// `traffic` matrix, else its collective pattern. A measured or stated matrix keeps
// its ratios and is scaled so the busiest NIC sends or receives at its line rate
// (x scale): placement plans for the job running NIC-bound, as the patterns do.
enum class DemandSource { kPattern, kStated, kMeasured };
struct IndexedDemand {
  struct Pair {
    uint32_t src = 0, dst = 0;
    double rate_bps = 0;
  };
  std::vector<int> nics;
  std::vector<Pair> pairs;
  DemandSource source = DemandSource::kPattern;
};
IndexedDemand JobDemandIndexed(const loom::v1::Job& job, const EndpointTable& table,
                               double scale = 1.0,
                               const std::vector<NicDemand>* measured = nullptr);

// Line rate of a NIC: its own line_rate_bps, else the capacity of its link.
double NicLineRate(const loom::topology::TopologyIndex& topo, const std::string& nic);

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_DEMAND_H_
