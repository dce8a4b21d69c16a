// Placement and desired state at 100k-GPU scale (issue 16, "Scale").
//
// Builds a rail-optimized fabric (default 102,400 GPUs = 12,800 hosts x 8,
// stripes of 256 hosts, 256 spines: 400 leaves of 256 down + 256 up ports,
// spines of 400 ports; a 2-tier rail fabric of that size needs switches of
// 512 ports, which 102.4T parts have), fills it with a random job mix (ring
// all-reduce, all-to-all groups of up to 128 GPUs, permutations), places every
// job with loom::te::Placement (what the controller core calls), builds the
// desired state and prints peak memory, full-recompute and desired-state
// time, and colored routes per leaf against the route budget. Before that,
// the incremental placement latency at 4,096 GPUs with 128-GPU all-to-all
// groups (Remove + Upsert of a random job in a full fabric).
//
// A separate program rather than a mode of telb_bench: peak RSS is a
// process-wide figure, so the large fabric runs alone (the 4k section before
// it is two orders of magnitude smaller), and it runs under a memory limit
// (`prlimit --as=...`) without the emulator sections.
//
// Run: build/tests/bench/scale_bench [--gpus N] [--hosts-per-stripe N]
//      [--spines N] [--full-runs N] [--no-4k] [--no-large] [--materialize-all]
// Times are CPU time of the calling thread (latency on an otherwise idle
// core) and wall time.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "controller/te/placement.h"
#include "loom/v1/job.pb.h"
#include "tests/closedloop/bench_util.h"

namespace {

using loom::testing::bench::Percentile;
using loom::testing::bench::RandomJobs;

namespace v1 = loom::v1;

double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double WallMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "VmRSS" / "VmHWM" of /proc/self/status in MiB (-1 when unreadable).
double StatusMiB(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtod(line.c_str() + field.size() + 1, nullptr) / 1024.0;
    }
  }
  return -1;
}

void Memory(const char* after) {
  std::printf("  memory after %s: RSS %.0f MiB, peak (VmHWM) %.0f MiB\n", after, StatusMiB("VmRSS"),
              StatusMiB("VmHWM"));
  std::fflush(stdout);
}

const char* Kind(v1::CollectivePattern p) {
  return p == v1::COLLECTIVE_PATTERN_RING_ALLREDUCE ? "ring"
         : p == v1::COLLECTIVE_PATTERN_ALL_TO_ALL   ? "all-to-all"
                                                    : "permutation";
}

std::string Mix(const std::vector<v1::Job>& jobs) {
  std::map<std::string, int> kinds;
  int a2a128 = 0;
  for (const auto& j : jobs) {
    kinds[Kind(j.collective())]++;
    a2a128 += j.collective() == v1::COLLECTIVE_PATTERN_ALL_TO_ALL && j.endpoints_size() == 128;
  }
  return std::to_string(jobs.size()) + " jobs: " + std::to_string(kinds["ring"]) + " ring, " +
         std::to_string(kinds["all-to-all"]) + " all-to-all (" + std::to_string(a2a128) +
         " of 128 GPUs), " + std::to_string(kinds["permutation"]) + " permutation";
}

void PrintRoutes(const loom::te::Placement& p) {
  auto st = p.Routes();
  std::printf(
      "  colored routes: %zu installed, per leaf max %zu / mean %.1f (%zu leaves; route budget "
      "%u per leaf: max is %.1f%% of it), %zu left out for budgets on %zu switch(es); compact "
      "table %.1f MiB\n",
      st.routes, st.max_per_leaf, st.mean_per_leaf, st.leaves, st.min_budget,
      st.min_budget ? 100.0 * static_cast<double>(st.max_per_leaf) / st.min_budget : 0.0,
      st.dropped, st.devices_over_budget, static_cast<double>(st.table_bytes) / (1 << 20));
}

// Incremental placement at 4,096 GPUs with all-to-all groups of up to 128 GPUs.
void RunIncremental4k() {
  loom::topology::RailParams r;
  r.hosts = 512;
  r.hosts_per_stripe = 32;
  r.spines = 32;
  r.links_per_spine = 1;
  v1::Topology topo;
  std::string err;
  if (!loom::topology::GenerateRail(r, &topo, &err)) {
    std::fprintf(stderr, "topology: %s\n", err.c_str());
    std::exit(1);
  }
  auto index = std::make_shared<const loom::topology::TopologyIndex>(topo);
  loom::te::Placement placement(index, loom::te::PlacementParams{});
  std::mt19937_64 rng(42);
  auto jobs = RandomJobs(rng, r.hosts, 8, {1, 2, 4, 8, 16, 32, 64}, 16, 1.0, 5);
  std::printf(
      "== 4,096 GPUs (512 hosts x 8, 128 leaves, 32 spines, 400G), all-to-all groups up to 128 "
      "GPUs; %s\n",
      Mix(jobs).c_str());
  std::vector<double> arrival_ms;
  for (const auto& j : jobs) {
    double t0 = CpuMs();
    placement.Upsert(j);
    arrival_ms.push_back(CpuMs() - t0);
  }
  double t0 = CpuMs();
  placement.Recompute(loom::te::PlacementMode::kFull);
  double full_ms = CpuMs() - t0;
  std::vector<double> churn_ms;
  std::map<std::string, std::vector<double>> by_kind;
  for (int i = 0; i < 300; ++i) {
    const v1::Job& j = jobs[std::uniform_int_distribution<size_t>(0, jobs.size() - 1)(rng)];
    placement.Remove(j.job_id());
    double t1 = CpuMs();
    placement.Upsert(j);
    churn_ms.push_back(CpuMs() - t1);
    by_kind[std::string(Kind(j.collective())) + " " + std::to_string(j.endpoints_size())].push_back(
        churn_ms.back());
  }
  std::printf("  arrivals p50 %.3f ms p99 %.3f ms; full recompute %.1f ms (max utilization %.3f)\n",
              Percentile(arrival_ms, 0.5), Percentile(arrival_ms, 0.99), full_ms,
              placement.max_utilization());
  std::printf("  Upsert by job shape (rounds, p50, max):");
  for (const auto& [k, v] : by_kind) {
    std::printf(" %s: %zu, %.2f, %.2f ms;", k.c_str(), v.size(), Percentile(v, 0.5),
                Percentile(v, 1));
  }
  std::printf("\n");
  std::printf(
      "  incremental placement in a full fabric (Remove + Upsert of a random job, 300 rounds): "
      "p50 %.3f ms  p99 %.3f ms  max %.3f ms (goal p99 <= 2 ms: %s)\n",
      Percentile(churn_ms, 0.5), Percentile(churn_ms, 0.99), Percentile(churn_ms, 1),
      Percentile(churn_ms, 0.99) <= 2 ? "met" : "NOT met");
  uint64_t digest = 14695981039346656037ull;
  for (const auto& j : jobs) {
    for (unsigned char c : placement.AssignmentOf(j.job_id()).SerializeAsString()) {
      digest = (digest ^ c) * 1099511628211ull;
    }
  }
  std::printf("  assignment digest (after the churn): %016llx\n",
              static_cast<unsigned long long>(digest));
  t0 = CpuMs();
  auto desired = placement.DesiredStates();
  double states_ms = CpuMs() - t0;
  size_t routes = 0;
  for (const auto& [id, s] : desired) routes += static_cast<size_t>(s.routes_size());
  std::printf("  desired states of every switch: %zu colored routes, %.1f ms\n", routes, states_ms);
  PrintRoutes(placement);
}

struct LargeArgs {
  int gpus = 102400;
  int hosts_per_stripe = 256;
  int spines = 256;
  int full_runs = 3;
  bool materialize_all = false;
};

void RunLarge(const LargeArgs& a) {
  loom::topology::RailParams r;
  r.hosts = a.gpus / 8;
  r.hosts_per_stripe = a.hosts_per_stripe;
  r.spines = a.spines;
  r.links_per_spine = 1;
  double w0 = WallMs(), t0 = CpuMs();
  v1::Topology topo;
  std::string err;
  if (!loom::topology::GenerateRail(r, &topo, &err)) {
    std::fprintf(stderr, "topology: %s\n", err.c_str());
    std::exit(1);
  }
  auto index = std::make_shared<const loom::topology::TopologyIndex>(topo);
  loom::te::Placement placement(index, loom::te::PlacementParams{});
  std::printf(
      "== %d GPUs (%d hosts x 8, stripes of %d hosts, %d leaves, %d spines, one 400G link per "
      "leaf and spine)\n",
      r.hosts * 8, r.hosts, r.hosts_per_stripe, placement.graph().num_leaves(),
      placement.graph().num_tops());
  std::printf("  topology and placement state: %.0f ms CPU, %.0f ms wall\n", CpuMs() - t0,
              WallMs() - w0);
  Memory("topology");
  std::mt19937_64 rng(42);
  auto jobs = RandomJobs(rng, r.hosts, 8, {1, 2, 4, 8, 16, 32, 64, 128, 256}, 16, 1.0, 5);
  std::printf("  job mix (8-2048 GPUs, every host): %s\n", Mix(jobs).c_str());
  std::vector<double> arrival_ms;
  w0 = WallMs();
  for (const auto& j : jobs) {
    double t1 = CpuMs();
    placement.Upsert(j);
    arrival_ms.push_back(CpuMs() - t1);
  }
  std::printf(
      "  every job placed incrementally (%zu Upserts): total %.0f ms CPU (%.0f ms wall), p50 %.2f "
      "ms p99 %.2f ms; max utilization %.3f\n",
      jobs.size(), std::accumulate(arrival_ms.begin(), arrival_ms.end(), 0.0), WallMs() - w0,
      Percentile(arrival_ms, 0.5), Percentile(arrival_ms, 0.99), placement.max_utilization());
  Memory("placing");
  std::vector<double> full_ms, full_wall;
  for (int i = 0; i < a.full_runs; ++i) {
    w0 = WallMs();
    double t1 = CpuMs();
    placement.Recompute(loom::te::PlacementMode::kFull);
    full_ms.push_back(CpuMs() - t1);
    full_wall.push_back(WallMs() - w0);
  }
  std::printf(
      "  full recompute (Recompute(kFull)), %d runs: first %.0f ms, p50 %.0f ms, max %.0f ms CPU "
      "(wall p50 %.0f ms) (goal <= 2 s: %s); max utilization %.3f\n",
      a.full_runs, full_ms[0], Percentile(full_ms, 0.5), Percentile(full_ms, 1),
      Percentile(full_wall, 0.5), Percentile(full_ms, 0.5) <= 2000 ? "met" : "NOT met",
      placement.max_utilization());
  Memory("full recompute");
  uint64_t digest = 14695981039346656037ull;
  for (const auto& j : jobs) {
    for (unsigned char c : placement.AssignmentOf(j.job_id()).SerializeAsString()) {
      digest = (digest ^ c) * 1099511628211ull;
    }
  }
  std::printf("  assignment digest: %016llx\n", static_cast<unsigned long long>(digest));
  // Desired state: the compact route table, then every switch's protobuf one at a time
  // (what a consumer that asks per device holds).
  w0 = WallMs();
  double t1 = CpuMs();
  PrintRoutes(placement);
  const double table_ms = CpuMs() - t1, table_wall = WallMs() - w0;
  w0 = WallMs();
  t1 = CpuMs();
  size_t bytes = 0, max_bytes = 0, routes = 0;
  for (const auto& id : placement.DesiredDevices()) {
    v1::DeviceState s = placement.DesiredStateOf(id);
    routes += static_cast<size_t>(s.routes_size());
    size_t b = s.SpaceUsedLong();
    bytes += b;
    max_bytes = std::max(max_bytes, b);
  }
  const double each_ms = CpuMs() - t1, each_wall = WallMs() - w0;
  std::printf(
      "  desired state: compact route table %.0f ms CPU (%.0f wall); every switch's DeviceState "
      "built one at a time %.0f ms CPU (%.0f wall): %zu routes, %.0f MiB in all, largest %.2f "
      "MiB\n",
      table_ms, table_wall, each_ms, each_wall, routes, static_cast<double>(bytes) / (1 << 20),
      static_cast<double>(max_bytes) / (1 << 20));
  std::printf("  full recompute + desired state (table): %.0f ms CPU (goal <= 2 s: %s)\n",
              Percentile(full_ms, 0.5) + table_ms,
              Percentile(full_ms, 0.5) + table_ms <= 2000 ? "met" : "NOT met");
  Memory("desired state");
  if (a.materialize_all) {
    w0 = WallMs();
    t1 = CpuMs();
    auto all = placement.DesiredStates();
    std::printf("  DesiredStates() map of every switch (%zu): %.0f ms CPU (%.0f wall)\n",
                all.size(), CpuMs() - t1, WallMs() - w0);
    Memory("DesiredStates() map");
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("  peak RSS (getrusage ru_maxrss): %.0f MiB (goal <= 8 GiB: %s)\n",
              static_cast<double>(ru.ru_maxrss) / 1024,
              ru.ru_maxrss <= 8L * 1024 * 1024 ? "met" : "NOT met");
}

}  // namespace

int main(int argc, char** argv) {
  LargeArgs large;
  bool run_4k = true, run_large = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto num = [&]() {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--gpus") {
      large.gpus = num();
    } else if (a == "--hosts-per-stripe") {
      large.hosts_per_stripe = num();
    } else if (a == "--spines") {
      large.spines = num();
    } else if (a == "--full-runs") {
      large.full_runs = std::max(1, num());
    } else if (a == "--materialize-all") {
      large.materialize_all = true;
    } else if (a == "--no-4k") {
      run_4k = false;
    } else if (a == "--no-large") {
      run_large = false;
    } else {
      std::fprintf(stderr,
                   "usage: scale_bench [--gpus N] [--hosts-per-stripe N] [--spines N] "
                   "[--full-runs N] [--materialize-all] [--no-4k] [--no-large]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (run_4k) RunIncremental4k();
  if (run_large) RunLarge(large);
  return 0;
}
