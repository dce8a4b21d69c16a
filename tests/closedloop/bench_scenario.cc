#include "tests/closedloop/bench_scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>

#include "controller/te/demand.h"

namespace loom::testing::bench {

namespace v1 = loom::v1;
using loom::sim::Collective;
using loom::sim::JobSpec;

std::string Gpu(int host, int g) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "host%03d-gpu%d", host, g);
  return buf;
}

// Jobs take `per_stripe` hosts of every stripe (a scheduler filling a fragmented cluster),
// ranks in GPU-major order over the job's hosts (host id order): ring neighbours are the
// same GPU index (same rail) on the next host, so a ring crosses stripes, hence leaves,
// hence spines, and changes rail once per GPU index.
Scenario MakeScenario(bool quick) {
  Scenario s;
  auto& r = s.rail;
  r.name = quick ? "rail-64" : "rail-256";
  r.hosts = quick ? 8 : 32;
  r.hosts_per_stripe = quick ? 4 : 8;
  r.spines = quick ? 4 : 8;  // = NICs per leaf: non-blocking, one 400G uplink per spine
  r.links_per_spine = 1;
  r.host.gpus_per_host = 8;
  r.host.nics_per_host = 8;
  r.host.nic_speed_bps = 400'000'000'000;
  r.uplink_speed_bps = 400'000'000'000;
  std::string err;
  if (!loom::topology::GenerateRail(r, &s.topology, &err)) {
    std::fprintf(stderr, "GenerateRail: %s\n", err.c_str());
    std::exit(1);
  }
  struct Def {
    const char* id;
    const char* tenant;
    Collective c;
    double bytes;
    int iterations;
    TimeNs gap;
  };
  std::vector<Def> defs;
  if (quick) {
    defs = {{"ring-a", "acme", Collective::kRingAllReduce, 32e6, 2, 200 * kNsPerUs},
            {"a2a-b", "beta", Collective::kAllToAll, 32e6, 2, 200 * kNsPerUs}};
  } else {
    // Ring messages of >= 2 MB per chunk (S / ranks) so rings are bandwidth-bound.
    defs = {{"ring-a", "acme", Collective::kRingAllReduce, 256e6, 3, 1 * kNsPerMs},
            {"ring-b", "beta", Collective::kRingAllReduce, 192e6, 3, 500 * kNsPerUs},
            {"a2a-c", "gamma", Collective::kAllToAll, 256e6, 4, 1 * kNsPerMs},
            {"ring-d", "delta", Collective::kRingAllReduce, 128e6, 4, 500 * kNsPerUs}};
  }
  const int stripes = r.hosts / r.hosts_per_stripe;
  const int per_stripe = r.hosts_per_stripe / static_cast<int>(defs.size());
  for (size_t j = 0; j < defs.size(); ++j) {
    std::vector<int> hosts;
    for (int st = 0; st < stripes; ++st) {
      for (int k = 0; k < per_stripe; ++k) {
        hosts.push_back(st * r.hosts_per_stripe + static_cast<int>(j) * per_stripe + k);
      }
    }
    JobSpec spec;
    spec.id = defs[j].id;
    spec.tenant = defs[j].tenant;
    spec.collective = defs[j].c;
    for (int g = 0; g < r.host.gpus_per_host; ++g) {
      for (int h : hosts) spec.ranks.push_back(Gpu(h, g));
    }
    spec.message_bytes = defs[j].bytes;
    spec.iterations = defs[j].iterations;
    spec.compute_gap_ns = defs[j].gap;
    spec.start_ns = 1 * kNsPerMs;
    s.jobs.push_back(spec);
  }
  return s;
}

// Ideal lower bound of a job: per iteration, the bytes the busiest NIC of the job must send
// (or receive) over the fabric (collective transfers between GPUs of different hosts;
// same-host pairs use NVLink), at NIC line rate; times the iterations, plus the compute gaps
// between them. In a non-blocking fabric the NIC is the bottleneck of every job.
double IdealMs(const JobSpec& spec, const loom::topology::TopologyIndex& topo, uint64_t seed,
               double* nic_bytes_per_iter) {
  auto transfers = loom::sim::BuildCollective(spec.collective, static_cast<int>(spec.ranks.size()),
                                              spec.message_bytes, seed);
  std::map<std::string, double> tx, rx;
  for (const auto& t : transfers) {
    const auto* a = topo.FindGpu(spec.ranks[static_cast<size_t>(t.src)]);
    const auto* b = topo.FindGpu(spec.ranks[static_cast<size_t>(t.dst)]);
    if (!a || !b || a->host() == b->host()) continue;
    tx[a->nic()] += t.bytes;
    rx[b->nic()] += t.bytes;
  }
  double worst = 0;
  std::string worst_nic;
  for (const auto* m : {&tx, &rx}) {
    for (const auto& [nic, bytes] : *m) {
      if (bytes > worst) {
        worst = bytes;
        worst_nic = nic;
      }
    }
  }
  *nic_bytes_per_iter = worst;
  double rate = loom::te::NicLineRate(topo, worst_nic);
  double per_iter_ns = rate > 0 ? worst * 8 / rate * 1e9 : 0;
  double ns = per_iter_ns * spec.iterations +
              static_cast<double>(spec.compute_gap_ns) * std::max(0, spec.iterations - 1);
  return ns / 1e6;
}

std::vector<Uplink> LeafUplinks(const v1::Topology& t) {
  std::set<std::string> leaves, spines;
  for (const auto& d : t.devices()) {
    if (d.role() == v1::DEVICE_ROLE_LEAF) leaves.insert(d.id());
    if (d.role() == v1::DEVICE_ROLE_SPINE) spines.insert(d.id());
  }
  std::vector<Uplink> out;
  for (const auto& l : t.links()) {
    if (leaves.count(l.a().device()) && spines.count(l.b().device())) {
      out.push_back({l.a().device(), l.a().interface(), l.b().device(),
                     static_cast<double>(l.capacity_bps())});
    }
  }
  return out;
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double idx = p * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(idx));
  size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

}  // namespace loom::testing::bench
