#include "tests/closedloop/bench_scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>

#include "controller/te/demand.h"
#include "sim-fabric/rng.h"

namespace loom::testing::bench {

namespace v1 = loom::v1;
using loom::sim::Collective;
using loom::sim::JobSpec;

namespace {

struct Def {
  const char* id;
  const char* tenant;
  Collective c;
  double bytes;
  int iterations;
  TimeNs gap;
};

// GPU-major: every job host's GPU 0, then every GPU 1, ... (ring neighbours are the same
// GPU index, hence the same rail, on the next host).
std::vector<std::string> RanksGpuMajor(const std::vector<int>& hosts, int gpus_per_host) {
  std::vector<std::string> out;
  for (int g = 0; g < gpus_per_host; ++g) {
    for (int h : hosts) out.push_back(Gpu(h, g));
  }
  return out;
}

// Host-major: the first host's GPUs 0..7, then the next host's (torchrun's numbering).
std::vector<std::string> RanksHostMajor(const std::vector<int>& hosts, int gpus_per_host) {
  std::vector<std::string> out;
  for (int h : hosts) {
    for (int g = 0; g < gpus_per_host; ++g) out.push_back(Gpu(h, g));
  }
  return out;
}

JobSpec MakeJob(const Def& d, std::vector<std::string> ranks) {
  JobSpec spec;
  spec.id = d.id;
  spec.tenant = d.tenant;
  spec.collective = d.c;
  spec.ranks = std::move(ranks);
  spec.message_bytes = d.bytes;
  spec.iterations = d.iterations;
  spec.compute_gap_ns = d.gap;
  spec.start_ns = 1 * kNsPerMs;
  return spec;
}

// Hosts of each job on a rail fabric: job j takes `per_stripe[j]` hosts of every stripe,
// consecutive within the stripe (a scheduler filling a fragmented cluster).
std::vector<std::vector<int>> SpreadOverStripes(const loom::topology::RailParams& r,
                                                const std::vector<int>& per_stripe) {
  const int stripes = r.hosts / r.hosts_per_stripe;
  std::vector<std::vector<int>> out(per_stripe.size());
  for (int st = 0; st < stripes; ++st) {
    int next = st * r.hosts_per_stripe;
    for (size_t j = 0; j < per_stripe.size(); ++j) {
      for (int k = 0; k < per_stripe[j]; ++k) out[j].push_back(next++);
    }
  }
  return out;
}

void GenerateRailOrDie(Scenario* s) {
  std::string err;
  if (!loom::topology::GenerateRail(s->rail, &s->topology, &err)) {
    std::fprintf(stderr, "GenerateRail: %s\n", err.c_str());
    std::exit(1);
  }
  s->name = s->rail.name;
  s->gpus = s->rail.hosts * s->rail.host.gpus_per_host;
  const auto& r = s->rail;
  const int stripes = r.hosts / r.hosts_per_stripe;
  const int up = r.spines * r.links_per_spine;
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "%s: %d hosts x %d GPUs, one %.0fG NIC per GPU; %d stripes of %d hosts -> %d "
                "rail leaves; %d spines; per leaf %d x %.0fG down, %d x %.0fG up (%s)",
                r.name.c_str(), r.hosts, r.host.gpus_per_host,
                static_cast<double>(r.host.nic_speed_bps) / 1e9, stripes, r.hosts_per_stripe,
                stripes * r.host.nics_per_host, r.spines, r.hosts_per_stripe,
                static_cast<double>(r.host.nic_speed_bps) / 1e9, up,
                static_cast<double>(r.uplink_speed_bps) / 1e9,
                up * r.uplink_speed_bps >= r.hosts_per_stripe * r.host.nic_speed_bps
                    ? "non-blocking"
                    : "oversubscribed");
  s->fabric = buf;
}

std::string Describe(const std::vector<JobSpec>& jobs, const std::string& placement) {
  std::string out;
  for (const auto& j : jobs) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s%s %s x%zu %.0f MB/rank %d it", out.empty() ? "" : "; ",
                  j.id.c_str(), loom::sim::CollectiveName(j.collective), j.ranks.size(),
                  j.message_bytes / 1e6, j.iterations);
    out += buf;
  }
  return out + " (" + placement + ")";
}

}  // namespace

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
  GenerateRailOrDie(&s);
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
  const int per_stripe = r.hosts_per_stripe / static_cast<int>(defs.size());
  const auto hosts = SpreadOverStripes(r, std::vector<int>(defs.size(), per_stripe));
  for (size_t j = 0; j < defs.size(); ++j) {
    s.jobs.push_back(MakeJob(defs[j], RanksGpuMajor(hosts[j], r.host.gpus_per_host)));
  }
  s.mix = Describe(s.jobs, "hosts spread over every stripe, ranks GPU-major");
  return s;
}

Scenario MakePermutationScenario(bool quick) {
  Scenario s = MakeScenario(quick);  // the reference fabric
  s.jobs.clear();
  std::vector<Def> defs;
  if (quick) {
    defs = {{"perm-a", "acme", Collective::kPermutation, 32e6, 2, 200 * kNsPerUs},
            {"perm-b", "beta", Collective::kPermutation, 32e6, 2, 200 * kNsPerUs}};
  } else {
    defs = {{"perm-a", "acme", Collective::kPermutation, 128e6, 4, 500 * kNsPerUs},
            {"perm-b", "beta", Collective::kPermutation, 128e6, 4, 500 * kNsPerUs},
            {"perm-c", "gamma", Collective::kPermutation, 128e6, 4, 500 * kNsPerUs},
            {"perm-d", "delta", Collective::kPermutation, 128e6, 4, 500 * kNsPerUs}};
  }
  const auto& r = s.rail;
  const int per_stripe = r.hosts_per_stripe / static_cast<int>(defs.size());
  const auto hosts = SpreadOverStripes(r, std::vector<int>(defs.size(), per_stripe));
  for (size_t j = 0; j < defs.size(); ++j) {
    s.jobs.push_back(MakeJob(defs[j], RanksHostMajor(hosts[j], r.host.gpus_per_host)));
  }
  s.mix = Describe(s.jobs,
                   "hosts spread over every stripe, ranks host-major; the emulator sends a seeded "
                   "random cyclic permutation, Loom's model assumes i -> i+N/2");
  return s;
}

Scenario MakeMoe3TierScenario(bool quick) {
  Scenario s;
  loom::topology::Clos3Params p;
  p.name = quick ? "clos3-32" : "clos3-256";
  p.pods = quick ? 2 : 8;
  p.leaves_per_pod = quick ? 2 : 4;
  p.spines_per_pod = 8;              // = NICs per leaf: non-blocking
  p.super_spines = quick ? 16 : 32;  // planes of leaves_per_pod: non-blocking
  p.hosts_per_leaf = 1;
  p.host.gpus_per_host = 8;
  p.host.nics_per_host = 8;
  p.host.nic_speed_bps = 400'000'000'000;
  p.uplink_speed_bps = 400'000'000'000;
  std::string err;
  if (!loom::topology::GenerateClos3(p, &s.topology, &err)) {
    std::fprintf(stderr, "GenerateClos3: %s\n", err.c_str());
    std::exit(1);
  }
  s.name = p.name;
  const int hosts = p.pods * p.leaves_per_pod * p.hosts_per_leaf;
  s.gpus = hosts * p.host.gpus_per_host;
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "%s: 3-tier Clos, %d pods x %d leaves, one host of 8 GPUs / 8 x 400G NICs per "
                "leaf; %d spines per pod (8 x 400G up per leaf); %d super-spines in %d planes "
                "(%d x 400G up per spine); non-blocking",
                p.name.c_str(), p.pods, p.leaves_per_pod, p.spines_per_pod, p.super_spines,
                p.spines_per_pod, p.super_spines / p.spines_per_pod);
  s.fabric = buf;
  // Host of (pod, leaf): hosts are numbered pod by pod, leaf by leaf.
  auto host = [&](int pod, int leaf) { return pod * p.leaves_per_pod + leaf; };
  std::vector<Def> defs;
  std::vector<std::vector<int>> job_hosts;
  if (quick) {
    defs = {{"moe-a", "acme", Collective::kAllToAll, 16e6, 2, 200 * kNsPerUs},
            {"ring-b", "beta", Collective::kRingAllReduce, 32e6, 2, 200 * kNsPerUs}};
    job_hosts = {{host(0, 0), host(1, 0)}, {host(0, 1), host(1, 1)}};
  } else {
    // Expert-parallel all-to-alls (1 MB per rank pair) take leaf 0-2 of every pod; two
    // data-parallel rings take leaf 3 of pods 0-3 and 4-7.
    defs = {{"moe-a", "acme", Collective::kAllToAll, 64e6, 6, 500 * kNsPerUs},
            {"moe-b", "beta", Collective::kAllToAll, 64e6, 6, 500 * kNsPerUs},
            {"moe-c", "gamma", Collective::kAllToAll, 64e6, 6, 500 * kNsPerUs},
            {"ring-d", "delta", Collective::kRingAllReduce, 128e6, 3, 1 * kNsPerMs},
            {"ring-e", "epsilon", Collective::kRingAllReduce, 128e6, 3, 1 * kNsPerMs}};
    job_hosts.resize(defs.size());
    for (int pod = 0; pod < p.pods; ++pod) {
      for (int l = 0; l < 3; ++l) job_hosts[static_cast<size_t>(l)].push_back(host(pod, l));
      job_hosts[pod < 4 ? 3 : 4].push_back(host(pod, 3));
    }
  }
  for (size_t j = 0; j < defs.size(); ++j) {
    s.jobs.push_back(MakeJob(defs[j], RanksGpuMajor(job_hosts[j], p.host.gpus_per_host)));
  }
  s.mix = Describe(s.jobs, "every job spans pods, ranks GPU-major");
  return s;
}

Scenario MakeOversubScenario(bool quick) {
  Scenario s;
  auto& r = s.rail;
  r.name = quick ? "rail-64-2to1" : "rail-128-2to1";
  r.hosts = quick ? 8 : 16;
  r.hosts_per_stripe = quick ? 4 : 8;
  r.spines = quick ? 2 : 4;  // half the NICs per leaf: 2:1
  r.links_per_spine = 1;
  r.host.gpus_per_host = 8;
  r.host.nics_per_host = 8;
  r.host.nic_speed_bps = 400'000'000'000;
  r.uplink_speed_bps = 400'000'000'000;
  GenerateRailOrDie(&s);
  // The all-to-all takes 6 of every stripe's 8 hosts: alone, it sends ~5.2 NICs' worth of
  // bytes out of each leaf's 4 uplinks, so the leaf uplinks, not the NICs, bound it.
  std::vector<Def> defs;
  std::vector<int> per_stripe;
  if (quick) {
    defs = {{"a2a-a", "acme", Collective::kAllToAll, 32e6, 2, 200 * kNsPerUs},
            {"ring-b", "beta", Collective::kRingAllReduce, 32e6, 2, 200 * kNsPerUs}};
    per_stripe = {3, 1};
  } else {
    defs = {{"a2a-a", "acme", Collective::kAllToAll, 64e6, 4, 500 * kNsPerUs},
            {"ring-b", "beta", Collective::kRingAllReduce, 128e6, 3, 1 * kNsPerMs}};
    per_stripe = {6, 2};
  }
  const auto hosts = SpreadOverStripes(r, per_stripe);
  for (size_t j = 0; j < defs.size(); ++j) {
    s.jobs.push_back(MakeJob(defs[j], RanksGpuMajor(hosts[j], r.host.gpus_per_host)));
  }
  s.mix = Describe(s.jobs, "hosts spread over every stripe, ranks GPU-major");
  return s;
}

uint64_t EmulatorJobSeed(uint64_t fabric_seed, int job_index) {
  return loom::sim::SplitMix64(fabric_seed ^ static_cast<uint64_t>(job_index + 1));
}

IdealBound JobIdeal(const JobSpec& spec, const loom::topology::TopologyIndex& topo,
                    uint64_t collective_seed) {
  IdealBound b;
  b.nic_ms = IdealMs(spec, topo, collective_seed, &b.nic_bytes_per_iter);
  // Uplink capacity of every leaf (to spines) and pod (spines to super-spines).
  std::map<std::string, double> leaf_cap, pod_cap;
  for (const auto& l : topo.topology().links()) {
    const auto* a = topo.FindDevice(l.a().device());
    const auto* z = topo.FindDevice(l.b().device());
    if (!a || !z) continue;
    int ta = loom::topology::SwitchTier(a->role()), tz = loom::topology::SwitchTier(z->role());
    if (ta > tz) {
      std::swap(a, z);
      std::swap(ta, tz);
    }
    const double cap = static_cast<double>(l.capacity_bps());
    if (ta == 1 && tz == 2) leaf_cap[a->id()] += cap;
    if (ta == 2 && tz == 3) pod_cap[a->pod()] += cap;
  }
  auto transfers = loom::sim::BuildCollective(spec.collective, static_cast<int>(spec.ranks.size()),
                                              spec.message_bytes, collective_seed);
  std::map<std::string, double> leaf_up, leaf_down, pod_up, pod_down;
  for (const auto& t : transfers) {
    const auto* a = topo.FindGpu(spec.ranks[static_cast<size_t>(t.src)]);
    const auto* z = topo.FindGpu(spec.ranks[static_cast<size_t>(t.dst)]);
    if (!a || !z || a->host() == z->host()) continue;
    const std::string la = topo.NicLeaf(a->nic()), lz = topo.NicLeaf(z->nic());
    if (la == lz) continue;
    leaf_up[la] += t.bytes;
    leaf_down[lz] += t.bytes;
    const auto* da = topo.FindDevice(la);
    const auto* dz = topo.FindDevice(lz);
    if (da && dz && !da->pod().empty() && da->pod() != dz->pod()) {
      pod_up[da->pod()] += t.bytes;
      pod_down[dz->pod()] += t.bytes;
    }
  }
  auto worst_ns = [](const std::map<std::string, double>& bytes,
                     const std::map<std::string, double>& cap) {
    double ns = 0;
    for (const auto& [k, v] : bytes) {
      auto it = cap.find(k);
      if (it != cap.end() && it->second > 0) ns = std::max(ns, v * 8 / it->second * 1e9);
    }
    return ns;
  };
  const double leaf_iter_ns = std::max(worst_ns(leaf_up, leaf_cap), worst_ns(leaf_down, leaf_cap));
  const double pod_iter_ns = std::max(worst_ns(pod_up, pod_cap), worst_ns(pod_down, pod_cap));
  const double gaps_ns =
      static_cast<double>(spec.compute_gap_ns) * std::max(0, spec.iterations - 1);
  b.leaf_ms = leaf_iter_ns > 0 ? (leaf_iter_ns * spec.iterations + gaps_ns) / 1e6 : 0;
  b.pod_ms = pod_iter_ns > 0 ? (pod_iter_ns * spec.iterations + gaps_ns) / 1e6 : 0;
  b.ms = b.nic_ms;
  if (b.leaf_ms > b.ms) {
    b.ms = b.leaf_ms;
    b.binding = "leaf uplinks";
  }
  if (b.pod_ms > b.ms) {
    b.ms = b.pod_ms;
    b.binding = "pod uplinks";
  }
  return b;
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

}  // namespace loom::testing::bench
