// sim-fabric benchmark (a program that prints figures; not a test).
//
// For each size: a rail-optimized 2-tier non-blocking fabric (hosts x 8 GPUs,
// one 400G NIC per GPU, 32 hosts per stripe, 8 spines x 4 links per leaf), all
// GPUs in one ring all-reduce (rail-major rank order, 1 GiB buffers, repeated),
// DCQCN on (paper preset). Prints the step and mode used, simulated/wall time
// ratio, flow-hop updates per second (executed, and stepping-equivalent: executed
// plus those a fast-forward jump skipped) and peak RSS (VmHWM). Each size runs in
// its own child process so its RSS is its own.
//
//   sim_fabric_bench [--gpus 256,1024,4096] [--duration-us 100000] [--step-ns 1000]
//                    [--mode hybrid|step] [--max-jump-us 10000] [--qps 1] [--digest]
//                    [--collective ring-allreduce]
// --mode hybrid (default) fast-forwards quiescent stretches (FabricOptions::fast_forward);
// step runs every step. --digest prints a hash of every QP's and interface's counters
// after the run (equal digests = byte-identical results; used to check optimizations).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/topology/topology_generate.h"
#include "common/flags.h"
#include "sim-fabric/fabric.h"

namespace {

long PeakRssKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// A digest of every QP's and interface's state (bit patterns): equal digests mean
// byte-identical runs (used to check that an optimization changed no result).
uint64_t Digest(const loom::sim::Fabric& fab) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ULL + (h >> 29); };
  auto mixd = [&mix](double d) {
    uint64_t u;
    std::memcpy(&u, &d, sizeof(u));
    mix(u);
  };
  for (const auto& q : fab.GetQps()) {
    mixd(q.rate_bps);
    mixd(q.target_bps);
    mixd(q.alpha);
    mixd(q.sent_bytes);
    mixd(q.delivered_bytes);
    mix(q.cnps);
  }
  for (const auto& d : fab.Devices()) {
    for (const auto& i : fab.Interfaces(d)) {
      loom::sim::InterfaceCounters c;
      (void)fab.GetInterfaceCounters(d, i, &c);
      mix(c.out_octets);
      mix(c.in_octets);
      mix(c.in_discards);
      for (int p = 0; p < loom::sim::kPriorities; ++p) {
        loom::sim::QueueCounters qc;
        (void)fab.GetQueueCounters(d, i, p, &qc);
        mix(qc.transmit_octets);
        mix(qc.ecn_marked_octets);
        mix(qc.watermark_bytes);
        mix(qc.dropped_octets);
        mix(qc.current_depth_bytes);
      }
    }
  }
  return h;
}

int RunOne(int gpus, loom::TimeNs duration, loom::TimeNs step, int qps, bool digest,
           loom::sim::Collective coll, bool hybrid, loom::TimeNs max_jump) {
  using namespace loom::sim;
  loom::topology::RailParams rp;
  rp.hosts = gpus / 8;
  rp.hosts_per_stripe = 32;
  rp.spines = 8;
  rp.links_per_spine = 4;
  loom::v1::Topology topo;
  std::string err;
  if (!loom::topology::GenerateRail(rp, &topo, &err)) {
    std::fprintf(stderr, "topology: %s\n", err.c_str());
    return 1;
  }
  FabricOptions o;
  o.step_ns = step;
  o.seed = 1;
  o.fast_forward = hybrid;
  o.max_jump_ns = max_jump;
  auto fab = Fabric::Create(topo, o, &err);
  if (!fab) {
    std::fprintf(stderr, "fabric: %s\n", err.c_str());
    return 1;
  }
  JobSpec j;
  j.id = "ring";
  j.collective = coll;
  for (int g = 0; g < 8; ++g) {
    for (int h = 0; h < rp.hosts; ++h) {
      char id[48];
      std::snprintf(id, sizeof(id), "host%03d-gpu%d", h, g);
      j.ranks.push_back(id);
    }
  }
  j.message_bytes = 1024.0 * 1024 * 1024;
  j.iterations = 0;
  j.qps_per_connection = qps;
  if (fab->AddJob(j, &err) < 0) {
    std::fprintf(stderr, "job: %s\n", err.c_str());
    return 1;
  }
  const auto w0 = std::chrono::steady_clock::now();
  fab->RunUntil(duration);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const double sim = static_cast<double>(fab->now()) / 1e9;
  // Delivered volume as a sanity figure: aggregate goodput of the ring.
  double delivered = 0;
  for (const auto& q : fab->GetQps()) delivered += q.delivered_bytes;
  const FastForwardStats& ff = fab->fast_forward_stats();
  const double executed = static_cast<double>(fab->flow_hop_updates());
  const double equivalent = executed + static_cast<double>(ff.skipped_flow_hop_updates);
  std::printf(
      "%5d GPUs %5zu links %6d QPs step %5lld ns mode %-6s: sim %.3f s in %.3f s wall -> %7.3fx "
      "real time, %7.1f M flow-hop updates/s executed, %8.1f M/s stepping-equivalent, ring "
      "goodput %.1f Tb/s, peak RSS %.1f MiB\n",
      gpus, static_cast<size_t>(topo.links_size()), fab->qp_count(), static_cast<long long>(step),
      hybrid ? "hybrid" : "step", sim, wall, sim / wall, executed / wall / 1e6,
      equivalent / wall / 1e6, delivered * 8 / sim / 1e12, PeakRssKb() / 1024.0);
  if (hybrid) {
    const double steps = static_cast<double>(fab->now()) / static_cast<double>(step);
    std::printf(
        "      fast-forward: max jump %lld us, %llu busy + %llu idle jumps, %.1f%% of %.0f steps "
        "skipped, %llu quiescence checks\n",
        static_cast<long long>(max_jump / 1000), static_cast<unsigned long long>(ff.jumps),
        static_cast<unsigned long long>(ff.idle_jumps),
        100.0 * static_cast<double>(ff.skipped_steps) / steps, steps,
        static_cast<unsigned long long>(ff.checks));
  }
  if (digest) std::printf("digest %016llx\n", static_cast<unsigned long long>(Digest(*fab)));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  loom::Flags flags;
  std::string err;
  if (!flags.Parse(argc, argv, 1,
                   {"gpus", "duration-us", "step-ns", "qps", "collective", "mode", "max-jump-us"},
                   {"help", "digest"}, &err) ||
      flags.Has("help")) {
    std::fprintf(stderr,
                 "usage: sim_fabric_bench [--gpus 256,1024,4096] [--duration-us 100000] "
                 "[--step-ns 1000] [--mode hybrid|step] [--max-jump-us 10000] [--qps 1] "
                 "[--digest] [--collective ring-allreduce]\n%s\n",
                 err.c_str());
    return flags.Has("help") ? 0 : 2;
  }
  int64_t dur_us = 0, step = 0, qps = 0, max_jump_us = 0;
  if (!flags.GetInt("duration-us", 100000, &dur_us, &err) ||
      !flags.GetInt("step-ns", 1000, &step, &err) || !flags.GetInt("qps", 1, &qps, &err) ||
      !flags.GetInt("max-jump-us", 10000, &max_jump_us, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  const std::string mode = flags.Get("mode", "hybrid");
  if (mode != "hybrid" && mode != "step") {
    std::fprintf(stderr, "--mode must be hybrid or step\n");
    return 2;
  }
  loom::sim::Collective coll = loom::sim::Collective::kRingAllReduce;
  if (!loom::sim::ParseCollective(flags.Get("collective", "ring-allreduce"), &coll)) {
    std::fprintf(stderr, "unknown --collective\n");
    return 2;
  }
  std::vector<int> sizes;
  std::stringstream ss(flags.Get("gpus", "256,1024,4096"));
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoi(item));
  int rc = 0;
  for (int g : sizes) {
    const pid_t pid = fork();
    if (pid == 0) {
      _exit(RunOne(g, dur_us * loom::kNsPerUs, step, static_cast<int>(qps), flags.Has("digest"),
                   coll, mode == "hybrid", max_jump_us * loom::kNsPerUs));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
