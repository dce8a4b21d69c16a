// The reference scenario of the TELB and adaptive benchmarks: a rail-optimized
// 2-tier fabric with concurrent jobs of several tenants, and each job's ideal
// lower bound. Shared by tests/closedloop/telb_bench.cc and adaptive_bench.cc.
#ifndef LOOM_TESTS_CLOSEDLOOP_BENCH_SCENARIO_H_
#define LOOM_TESTS_CLOSEDLOOP_BENCH_SCENARIO_H_

#include <string>
#include <vector>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "sim-fabric/workload.h"

namespace loom::testing::bench {

struct Scenario {
  loom::topology::RailParams rail;
  loom::v1::Topology topology;
  std::vector<loom::sim::JobSpec> jobs;
  int qp_entropy_qps = 4;  // QPs per connection in the "ECMP+QP entropy" mode
};

// GPU id "hostHHH-gpuG" of the generated topologies.
std::string Gpu(int host, int g);

// 256 GPUs (rail-256, 4 tenants' jobs), or 64 GPUs when `quick`.
Scenario MakeScenario(bool quick);

// Ideal lower bound of a job in ms: per iteration, the bytes its busiest NIC
// sends or receives over the fabric at NIC line rate, times the iterations,
// plus the compute gaps. `nic_bytes_per_iter` receives the busiest NIC's bytes.
double IdealMs(const loom::sim::JobSpec& spec, const loom::topology::TopologyIndex& topo,
               uint64_t seed, double* nic_bytes_per_iter);

struct Uplink {
  std::string leaf, iface, spine;
  double capacity_bps = 0;
};
// Every leaf -> spine link, in topology order.
std::vector<Uplink> LeafUplinks(const loom::v1::Topology& t);

double Mean(const std::vector<double>& v);
double Percentile(std::vector<double> v, double p);

}  // namespace loom::testing::bench

#endif  // LOOM_TESTS_CLOSEDLOOP_BENCH_SCENARIO_H_
