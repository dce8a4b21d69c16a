// The scenarios of the TELB and adaptive benchmarks: the reference (a
// rail-optimized 2-tier fabric with concurrent jobs of several tenants) and
// the adaptive benchmark's other job mixes and fabrics (permutation traffic,
// mixture-of-experts all-to-all on a 3-tier Clos, an oversubscribed rail
// fabric), and each job's ideal lower bound. Shared by
// tests/closedloop/telb_bench.cc and adaptive_bench.cc.
#ifndef LOOM_TESTS_CLOSEDLOOP_BENCH_SCENARIO_H_
#define LOOM_TESTS_CLOSEDLOOP_BENCH_SCENARIO_H_

#include <string>
#include <vector>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "sim-fabric/workload.h"
#include "tests/closedloop/bench_util.h"

namespace loom::testing::bench {

struct Scenario {
  std::string name;    // the topology's name ("rail-256", "clos3-256", ...)
  std::string fabric;  // one line: the fabric's shape
  std::string mix;     // one line: the job mix and how ranks sit on hosts
  int gpus = 0;
  loom::topology::RailParams rail;  // rail-optimized scenarios (telb_bench prints it)
  loom::v1::Topology topology;
  std::vector<loom::sim::JobSpec> jobs;
  int qp_entropy_qps = 4;  // QPs per connection in the "ECMP+QP entropy" mode
};

// 256 GPUs (rail-256, 4 tenants' jobs), or 64 GPUs when `quick`.
Scenario MakeScenario(bool quick);

// Permutation traffic: 4 jobs of 64 GPUs on rail-256 (2 jobs of 32 on rail-64
// when `quick`), hosts spread over every stripe as in the reference, ranks
// host-major (rank = host index x 8 + GPU, as torchrun numbers them). The
// emulator sends a seeded random cyclic permutation; Loom's demand model
// assumes i -> i + N/2 (a different pairing, on purpose: issue 16).
Scenario MakePermutationScenario(bool quick);

// Mixture-of-experts: 3 all-to-all jobs of 64 GPUs and 2 rings of 32 on a
// 3-tier Clos (8 pods x 4 leaves, 8 spines per pod, 32 super-spines in 8
// planes, one 8-GPU host per leaf, 400G everywhere, non-blocking; 256 GPUs).
// Every job spans pods. `quick`: 2 pods x 2 leaves, 32 GPUs, 2 jobs.
Scenario MakeMoe3TierScenario(bool quick);

// A small mix on a 2:1 oversubscribed rail fabric: 16 hosts in 2 stripes of
// 8, 4 spines (8 x 400G down, 4 x 400G up per leaf; 128 GPUs), an all-to-all
// of 96 GPUs (6 hosts of each stripe: its leaf uplinks, not its NICs, bound
// it) and a ring of 32. `quick`: 8 hosts, 2 spines, 64 GPUs.
Scenario MakeOversubScenario(bool quick);

// The seed the emulator gives the collective of its `job_index`-th job
// (sim-fabric/fabric.cc AddJob), for the fabric seed `fabric_seed`: what
// BuildCollective needs to reproduce a permutation's pairing.
uint64_t EmulatorJobSeed(uint64_t fabric_seed, int job_index);

// Lower bound of a job's JCT, run alone on the fabric: per iteration the
// longest of (a) the bytes its busiest NIC sends or receives over the fabric
// at NIC line rate, (b) the bytes that must leave (or enter) one leaf over its
// uplinks at their total capacity, (c) the bytes that must leave (or enter)
// one pod over its spine -> super-spine links; times the iterations, plus the
// compute gaps. (b) and (c) bind only where the fabric is oversubscribed for
// the job; jobs sharing uplinks can make the real bound higher.
struct IdealBound {
  double ms = 0;
  double nic_ms = 0, leaf_ms = 0, pod_ms = 0;  // each bound alone
  const char* binding = "NIC";                 // "NIC", "leaf uplinks" or "pod uplinks"
  double nic_bytes_per_iter = 0;
};
IdealBound JobIdeal(const loom::sim::JobSpec& spec, const loom::topology::TopologyIndex& topo,
                    uint64_t collective_seed);

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

}  // namespace loom::testing::bench

#endif  // LOOM_TESTS_CLOSEDLOOP_BENCH_SCENARIO_H_
